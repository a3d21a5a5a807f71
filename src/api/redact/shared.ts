/**
 * The pieces of a reading that share at least {@link MIN_SHARED_BYTES} consecutive characters
 * with a value: the half of a value a line shows when the value straddles two lines, or two
 * entries. Found by samples: of a reading shorter than the values, with one rolling hash over each
 * value, or of the values (built once per list), with one rolling hash over the reading.
 */
import type { RedactionBudget } from "./budget.ts";
import { type SecretForms, samplesOf, sharedValues } from "./forms.ts";
import { MIN_SHARED_BYTES, rollHash, SAMPLE, SAMPLE_STEP, type SampleIndex, sampleHash } from "./samples.ts";
import { coverSpan, type TextView } from "./views.ts";

/**
 * Marks in `covered` every run of at least {@link MIN_SHARED_BYTES} characters of `view` that
 * some value of `kind` holds too. A view shorter than the values (a condition message, values of
 * up to 1 MiB) has its own samples taken and the values read past them
 * ({@link coverSharedByView}): nothing is built or kept for the values. A longer one is read past
 * the values' samples, built once per value list ({@link coverSharedByValues}).
 */
export function coverShared(
  view: TextView,
  forms: SecretForms,
  kind: "text" | "bytes",
  covered: Uint8Array,
  budget: RedactionBudget,
  breaks: Int32Array | undefined,
): void {
  if (view.text.length < MIN_SHARED_BYTES) return;
  const known = forms.samples[kind];
  if (known !== undefined) {
    coverSharedByValues(view, known, covered, budget, breaks);
    return;
  }
  const { values, chars } = sharedValues(forms, kind);
  if (chars > view.text.length) coverSharedByView(view, values, covered, budget, breaks);
  else if (chars > 0) coverSharedByValues(view, samplesOf(forms, kind, budget), covered, budget, breaks);
}

/**
 * {@link coverShared} by the view's samples ({@link SAMPLE} characters every {@link SAMPLE_STEP}
 * from its start: a table of open addressing by hash, each hash once with the list of its places,
 * so that a view repeating itself costs no longer probes) and one rolling hash over each value: a
 * shared run of {@link MIN_SHARED_BYTES} holds one of the view's samples. A place whose run is
 * covered already (with the few characters before it a run may start with) is not grown again:
 * each run is read about once.
 */
function coverSharedByView(
  view: TextView,
  values: readonly string[],
  covered: Uint8Array,
  budget: RedactionBudget,
  breaks: Int32Array | undefined,
): void {
  const text = view.text;
  const samples = Math.floor((text.length - SAMPLE) / SAMPLE_STEP) + 1;
  let bits = 4;
  while (1 << bits < 2 * samples) bits++;
  const mask = (1 << bits) - 1;
  const slotOf = (h: number) => Math.imul(h ^ (h >>> 15), 0x2c1b3c6d) >>> (32 - bits);
  const hashes = new Int32Array(1 << bits);
  /** 1 + the first sample of the slot's hash (samples counted from the view's start); 0: empty. */
  const first = new Int32Array(1 << bits);
  const last = new Int32Array(1 << bits);
  /** For each sample, the next one of the same hash (-1: none). */
  const next = new Int32Array(samples).fill(-1);
  for (let k = 0; k < samples; k++) {
    const h = sampleHash(text, k * SAMPLE_STEP);
    let slot = slotOf(h);
    while (first[slot] !== 0 && hashes[slot] !== h) slot = (slot + 1) & mask;
    if (first[slot] === 0) {
      hashes[slot] = h;
      first[slot] = 1 + k;
    } else next[(last[slot] ?? 1) - 1] = k;
    last[slot] = 1 + k;
  }
  budget.step(1 + (text.length >> 2));
  // The view's characters covered here, to grow each run once.
  const done = new Uint8Array(text.length);
  for (const value of values) {
    budget.step(1 + (value.length >> 4));
    let h = sampleHash(value, 0);
    for (let offset = 0; ; offset++) {
      if ((offset & 63) === 0) budget.step(64);
      let slot = slotOf(h);
      while (first[slot] !== 0 && hashes[slot] !== h) slot = (slot + 1) & mask;
      for (let k = (first[slot] ?? 0) - 1; k !== -1; k = next[k] ?? -1) {
        budget.step();
        const at = k * SAMPLE_STEP;
        if (allDone(done, at - SAMPLE_STEP, at + MIN_SHARED_BYTES)) continue;
        const run = sharedRun(text, at, value, offset, budget);
        if (run === undefined) continue;
        done.fill(1, run.from, run.to);
        coverSpan(view, run.from, run.to - run.from, covered, breaks);
      }
      if (offset + SAMPLE >= value.length) break;
      h = rollHash(h, value.charCodeAt(offset), value.charCodeAt(offset + SAMPLE));
    }
  }
}

/** Whether `done` marks every character from `from` to `to` (within its bounds). */
function allDone(done: Uint8Array, from: number, to: number): boolean {
  for (let k = Math.max(0, from); k < Math.min(done.length, to); k++) if (done[k] === 0) return false;
  return true;
}

/**
 * The run `text` and `value` share around `text[at]` = `value[offset]` (a sample's place in each),
 * when it is {@link MIN_SHARED_BYTES} characters or more: from at most {@link SAMPLE_STEP}
 * characters before (a run starts that close to its first sample) to as far as both go on.
 */
function sharedRun(
  text: string,
  at: number,
  value: string,
  offset: number,
  budget: RedactionBudget,
): { from: number; to: number } | undefined {
  let after = 0;
  while (
    at + after < text.length &&
    offset + after < value.length &&
    text.charCodeAt(at + after) === value.charCodeAt(offset + after)
  )
    after++;
  if (after < SAMPLE) return undefined;
  let before = 0;
  while (
    before < SAMPLE_STEP &&
    before < at &&
    before < offset &&
    text.charCodeAt(at - before - 1) === value.charCodeAt(offset - before - 1)
  )
    before++;
  budget.step(1 + (after >> 4));
  return before + after < MIN_SHARED_BYTES ? undefined : { from: at - before, to: at + after };
}

/**
 * {@link coverShared} by the values' samples: one rolling hash over the view, looked up in them,
 * and each sample found grown to the run both share. Past a run found, the search goes on a few
 * characters before its end (another run may start inside it): linear in the view.
 */
function coverSharedByValues(
  view: TextView,
  index: SampleIndex,
  covered: Uint8Array,
  budget: RedactionBudget,
  breaks: Int32Array | undefined,
): void {
  const text = view.text;
  if (index.size === 0 || text.length < MIN_SHARED_BYTES) return;
  // In the text itself, a run already covered (a value found whole, repeated) is skipped to a few
  // characters before the next character not covered: a shared run that reaches past it has a
  // sample there (see SAMPLE_STEP), and one that does not adds nothing.
  const direct = view.start === undefined;
  let resume = 0;
  let h = sampleHash(text, 0);
  for (let at = 0; ; at++) {
    if ((at & 63) === 0) budget.step(64);
    if (direct && covered[at] === 1) {
      const uncovered = covered.indexOf(0, at);
      if (uncovered === -1) return;
      const next = uncovered - (MIN_SHARED_BYTES - 1);
      if (next > at + 1 && next + SAMPLE <= text.length) {
        budget.step((next - at) >> 6);
        at = next;
        h = sampleHash(text, at);
      }
    }
    for (let slot = index.slotOf(h); at >= resume && !index.empty(slot); slot = index.next(slot)) {
      if (index.hashAt(slot) !== h) continue;
      const { value, offset } = index.placeAt(slot);
      const run = sharedRun(text, at, value, offset, budget);
      if (run === undefined) continue;
      coverSpan(view, run.from, run.to - run.from, covered, breaks);
      resume = Math.max(resume, run.to - (MIN_SHARED_BYTES - 1));
    }
    if (at + SAMPLE >= text.length) return;
    h = rollHash(h, text.charCodeAt(at), text.charCodeAt(at + SAMPLE));
  }
}
