/**
 * The hold of a change that would make a new revision while rollout windows forbid it. Pure:
 * the controller and `dms-operator plan` ask the same questions of it.
 *
 * A new revision cancels the runs in progress; a change that needs none does not. So a PATCH is
 * split by the planner's groups: `source_revision_config` (with `revision_source`, which only
 * means something with it) and `secrets` make a revision and are held; `source_config` (the
 * resource spec, replicas and sizes included) and `secret_references` make none and go at once.
 * A create is never held: nothing runs yet, so nothing can be cancelled.
 */

import { formatTime } from "../crd/conventions.ts";
import { InvalidSpecError } from "../crd/errors.ts";
import { ANNOTATION_ROLLOUT_NOW } from "../crd/schema.ts";
import { describeDuration } from "../duration.ts";
import { workMs } from "../runtime/clock.ts";
import type { ChangeGroup, FieldChange, PatchPlan } from "./plan.ts";
import { BoundedMemo } from "./rollout/bounded-memo.ts";
import {
  type Counter,
  MAX_OPENING_STEPS,
  nextOpening,
  OPENING_BUDGET_MS,
  OPENING_HORIZON_MS,
  type Opening,
} from "./rollout/next-opening.ts";
import {
  checkWindows,
  compileWindows,
  type RolloutWindow,
  type RolloutWindowSpec,
} from "./rollout/rollout-windows.ts";
import { localTime } from "./rollout/zones.ts";

/**
 * A connection's `spec.rolloutWindows`: the default of the resources that set none, or, when
 * `binding` (`spec.rolloutWindowsPolicy: Binding`), windows that hold every resource using it.
 */
export interface InheritedWindows {
  windows: readonly RolloutWindowSpec[];
  /** The connection, as messages name it: `ServiceConnection team-a/prod`. */
  from: string;
  /** Set under `Binding`: who may lift them (`cluster admins`), as messages say it. */
  binding?: { liftedBy: string };
}

/** The windows that rule a resource (checked), and how messages name where they come from. */
export interface WindowsInEffect {
  windows: readonly RolloutWindowSpec[];
  /**
   * `spec.rolloutWindows`, or `spec.rolloutWindows of ServiceConnection team-a/prod`; with
   * {@link binding}, the binding windows' source, after the resource's own when it has some.
   */
  source: string;
  /**
   * A connection's binding windows, which rule besides {@link windows} (a change goes out when
   * both allow it) and which `dms.dev/rollout-now` does not lift.
   */
  binding?: BindingWindows;
}

/** A connection's windows under `spec.rolloutWindowsPolicy: Binding` (see {@link WindowsInEffect}). */
export interface BindingWindows {
  windows: readonly RolloutWindowSpec[];
  /** `spec.rolloutWindows of ClusterServiceConnection freeze, binding: spec.rolloutWindowsPolicy Binding`. */
  source: string;
  /** The connection, as messages name it. */
  from: string;
  /** Who may lift them, as messages say it. */
  liftedBy: string;
}

/**
 * The windows of a resource: its own `spec.rolloutWindows` when it sets the field (an empty list
 * included: no windows, roll out any time), else its connection's, else none; and, when the
 * connection's are binding, those besides its own, whatever it sets. Throws an
 * {@link InvalidSpecError} naming the item and the fix when a window cannot be read, or (when
 * `now` is given) when its schedule starts no window within the next years (see `checkWindows`):
 * a connection's window is refused in each resource that uses it, naming the connection.
 */
export function windowsInEffect(
  own: readonly RolloutWindowSpec[] | undefined,
  inherited: InheritedWindows | undefined,
  now: number | undefined,
): WindowsInEffect {
  if (inherited?.binding && inherited.windows.length > 0) {
    const { from } = inherited;
    const { liftedBy } = inherited.binding;
    checkInherited(inherited, now, ", whose windows are binding (this resource's own cannot replace them)");
    checkWindows(own ?? [], "spec.rolloutWindows", now);
    const source = `spec.rolloutWindows of ${from}, binding: spec.rolloutWindowsPolicy Binding`;
    const binding = { windows: inherited.windows, source, from, liftedBy };
    // Named as a held change's message names the windows that hold it: both lists, or the binding.
    const both = own !== undefined && own.length > 0 ? `spec.rolloutWindows, and ${source}` : source;
    return { windows: own ?? [], source: both, binding };
  }
  if (own !== undefined) {
    checkWindows(own, "spec.rolloutWindows", now);
    return { windows: own, source: "spec.rolloutWindows" };
  }
  if (!inherited) return { windows: [], source: "spec.rolloutWindows" };
  checkInherited(
    inherited,
    now,
    ", or give this resource spec.rolloutWindows of its own (it replaces the connection's)",
  );
  return { windows: inherited.windows, source: `spec.rolloutWindows of ${inherited.from}` };
}

/** Checks a connection's windows, naming the connection and, after the fix, `otherwise`. */
function checkInherited(inherited: InheritedWindows, now: number | undefined, otherwise: string): void {
  try {
    checkWindows(inherited.windows, "spec.rolloutWindows", now);
  } catch (error) {
    if (!(error instanceof InvalidSpecError)) throw error;
    throw new InvalidSpecError(
      `${inherited.from} ${error.field}`,
      `${error.message.slice(error.field.length + 2)}; fix the connection${otherwise}`,
      { cause: error },
    );
  }
}

/** Change groups whose PATCH makes the service build a new revision. */
export const REVISION_GROUPS: readonly ChangeGroup[] = ["source_revision_config", "secrets"];

/**
 * `plan` in two: `now`, what makes no revision (undefined when nothing), and `held`, what does
 * (undefined when nothing). `now` records the secrets hash only when no secrets are held: the
 * values held are not applied yet.
 */
export function splitPatch(plan: PatchPlan): { now?: PatchPlan; held?: PatchPlan } {
  const revision = (c: FieldChange) => REVISION_GROUPS.includes(c.group);
  const heldChanges = plan.changes.filter(revision);
  if (heldChanges.length === 0) return { now: plan };
  const nowChanges = plan.changes.filter((c) => !revision(c));
  const { source_config, secret_references, display_name, ...heldBody } = plan.body;
  const held: PatchPlan = {
    ...plan,
    body: heldBody,
    changes: heldChanges,
    summary: heldChanges.map((c) => c.line),
  };
  if (nowChanges.length === 0) return { held };
  const { secretsHash, ...rest } = plan;
  const now: PatchPlan = {
    ...rest,
    body: {
      ...(source_config ? { source_config } : {}),
      ...(secret_references ? { secret_references } : {}),
      ...(display_name ? { display_name } : {}),
    },
    newRevision: false,
    changes: nowChanges,
    summary: nowChanges.map((c) => c.line),
    ...(plan.body.secrets === undefined && secretsHash !== undefined ? { secretsHash } : {}),
  };
  return { now, held };
}

/**
 * Whether a change that makes a revision may go out now:
 * - `open`: the windows allow it now, or `dms.dev/rollout-now` carries a value not acted on yet
 *   (`viaRolloutNow`) and no binding window of the connection holds it;
 * - `held`: not until the next opening; `message` says when and how to release it, `when` only
 *   when, `wakeAt` is when to look again (the opening, or how far the search got), `until` and
 *   `local` the opening as RFC 3339 and as local time in the window's zone, when one was found.
 */
export type RolloutGate =
  | { kind: "open"; viaRolloutNow: boolean }
  | { kind: "held"; message: string; when: string; wakeAt: number; until?: string; local?: string };

/** What {@link gateRollout} decides on. */
export interface GateInput {
  windows: WindowsInEffect;
  /** The instant (ms since the epoch). */
  now: number;
  /** The value of `dms.dev/rollout-now`, if set. */
  rolloutNow?: string | undefined;
  /** `status.lastHandledRolloutNow`: the value already acted on. */
  handledRolloutNow?: string | undefined;
  /** The changes held, as the planner names them (for the message). */
  held: readonly FieldChange[];
  /**
   * The counter the search's time budget is read on. Default `workMs`: the thread's CPU
   * time, so that a machine busy elsewhere does not hold a change a search of real windows would
   * have found open.
   */
  counter?: Counter;
}

/**
 * Decides whether the revision part of a change goes out now (see {@link RolloutGate}). A search
 * for the next opening that ran out of its time budget ({@link OPENING_BUDGET_MS}) holds the
 * change and looks again later, with a backoff ({@link slowSearchRetryMs}): how long a search
 * takes depends on the machine's load as much as on the windows, so it is no verdict on the spec
 * (windows that never open are refused before, by `windowsInEffect`). The search's other
 * answers are remembered (see {@link searchOpening}).
 */
export function gateRollout(input: GateInput): RolloutGate {
  const { binding } = input.windows;
  const asked = input.rolloutNow !== undefined && input.rolloutNow !== input.handledRolloutNow;
  if (asked && !binding) return { kind: "open", viaRolloutNow: true };
  // dms.dev/rollout-now lifts the resource's own windows, never a connection's binding ones.
  const own = asked ? [] : input.windows.windows;
  const lists = [own, binding?.windows ?? []];
  if (lists.every((list) => list.length === 0)) return { kind: "open", viaRolloutNow: asked };
  const opening = searchOpening(lists, input.now, input.counter);
  if (opening.kind === "now") return { kind: "open", viaRolloutNow: asked };
  const fields = [...new Set(input.held.map((c) => c.field))].join(", ");
  const what = `the change that makes a new revision (${fields}) is held: outside the rollout windows (${heldBy(input.windows, own.length > 0)})`;
  const release = releaseOf(input, asked, own.length > 0);
  if (opening.kind === "none" && opening.exhausted === "time") {
    const retryMs = opening.retryMs ?? SLOW_SEARCH_RETRY_MS;
    const when = `finding when they next allow a rollout took more than ${OPENING_BUDGET_MS} ms, the most the operator spends on it at once (nothing opens before ${formatTime(new Date(opening.searchedUntil))}); it looks again in ${retryMs / 1000}s (fewer windows, or schedules that start less often, make the search shorter)`;
    return { kind: "held", message: `${what}, and ${when}; ${release}`, when, wakeAt: input.now + retryMs };
  }
  if (opening.kind === "none") {
    const when = noOpening(opening);
    return { kind: "held", message: `${what}, and ${when}; ${release}`, when, wakeAt: opening.searchedUntil };
  }
  const until = formatTime(new Date(opening.at));
  const local = localTime(opening.at, opening.window.timeZone);
  const when = `it goes out at ${until} (${local}), when ${describeWindow(opening, binding)}`;
  return { kind: "held", message: `${what}; ${when}; or ${release}`, when, wakeAt: opening.at, until, local };
}

/** Which windows hold a change, as a message names them (`own`: the resource's own took part). */
function heldBy(windows: WindowsInEffect, own: boolean): string {
  return windows.binding && !own ? windows.binding.source : windows.source;
}

/**
 * How a held change may be let out now: `dms.dev/rollout-now`, unless the connection's binding
 * windows hold it too; then who may lift those, and how. `own`: the resource's own windows took
 * part in the search (else the binding ones alone held it).
 */
function releaseOf(input: GateInput, asked: boolean, own: boolean): string {
  const viaAnnotation = `set the annotation ${ANNOTATION_ROLLOUT_NOW} to a new value to roll it out now`;
  const { binding } = input.windows;
  if (!binding) return viaAnnotation;
  // Held by the resource's own windows only: the annotation lifts them.
  if (!asked && own && searchOpening([binding.windows], input.now, input.counter).kind === "now")
    return `${viaAnnotation} (the binding windows of ${binding.from} allow it now)`;
  const lift = `the windows of ${binding.from} are binding: only an edit of ${binding.from} lifts them (its spec.rolloutWindows, or spec.rolloutWindowsPolicy: Advisory), which ${binding.liftedBy} may make`;
  return asked
    ? `${ANNOTATION_ROLLOUT_NOW} lifts this resource's own windows only: ${lift}`
    : `${ANNOTATION_ROLLOUT_NOW} does not let it out: ${lift}`;
}

/**
 * What of a PATCH goes out now, and what waits for a rollout window:
 * - `send`: the PATCH to send now: all of `plan` when nothing in it makes a revision or the gate
 *   is open; else only what makes no revision (absent when that is nothing);
 * - `held`: present when the revision part waits: `message` says when and how to release it,
 *   `wakeAt` is when to look again. The secrets held (if any) are not applied yet.
 * `viaRolloutNow`: the gate opened for `dms.dev/rollout-now` (see {@link gateRollout}).
 */
export interface GatedPatch {
  send?: PatchPlan;
  held?: { message: string; wakeAt: number };
  viaRolloutNow?: boolean;
}

/** Splits `plan` by the rollout gate (see {@link GatedPatch}); throws as {@link gateRollout} does. */
export function gatePatch(plan: PatchPlan, input: Omit<GateInput, "held">): GatedPatch {
  const { now, held } = splitPatch(plan);
  if (!held) return { send: plan };
  const gate = gateRollout({ ...input, held: held.changes });
  if (gate.kind === "open") return { send: plan, viaRolloutNow: gate.viaRolloutNow };
  return { ...(now ? { send: now } : {}), held: { message: gate.message, wakeAt: gate.wakeAt } };
}

function noOpening(opening: Opening & { kind: "none" }): string {
  return opening.exhausted
    ? `no opening was found within ${MAX_OPENING_STEPS} steps of the schedules (they change too often to look further)`
    : `no window opens within ${OPENING_HORIZON_MS / 86_400_000} days`;
}

/** An {@link Opening} without the parsed schedule (80 KB each): what {@link OPENINGS} keeps. */
type KeptOpening =
  | { kind: "now" }
  | { kind: "at"; at: number; window: Omit<RolloutWindow, "cron"> }
  | (Opening & { kind: "none"; retryMs?: number });

/** A search's answer, the instant it was asked at, and until when it holds. */
interface KeptAnswer {
  from: number;
  until: number;
  opening: KeptOpening;
}

/**
 * Answers of {@link nextOpening} by the windows' text. An answer found at `from` holds at any
 * instant before its opening (or before where its search stopped): every instant it passed over
 * is closed, so a search from a later one finds the same. Except the answer that nothing opens
 * within the horizon, which a later search may not give (it looks further): kept for
 * {@link HORIZON_ANSWER_MS} only, so that "within 366 days" stays true to the minute. And never
 * a search cut for time: a pause of the process or a busy machine cuts it, not the windows.
 * Every reconcile of a held resource until its window opens, and the resources that share its
 * windows, search once; the entries are bounded whatever the tenants write (5 KB at most each).
 */
const OPENINGS = new BoundedMemo<string, KeptAnswer>(256);
const HORIZON_ANSWER_MS = 60_000;

/**
 * How long a change waits after a search cut for time, the first time: it doubles at each cut
 * in a row of the same windows, up to {@link SLOW_SEARCH_MAX_RETRY_MS}, and starts again at the
 * first search that ends otherwise. A search costs its budget at most, so windows that always
 * take longer cost the event loop 40 ms per resource every ten minutes at most.
 */
export const SLOW_SEARCH_RETRY_MS = 10_000;
export const SLOW_SEARCH_MAX_RETRY_MS = 600_000;
/** Searches cut for time in a row, by the windows' text (bounded as {@link OPENINGS}). */
const SLOW_SEARCHES = new BoundedMemo<string, number>(256);

/** The wait after the `n`th search in a row cut for time (1-based). */
export function slowSearchRetryMs(n: number): number {
  return Math.min(SLOW_SEARCH_RETRY_MS * 2 ** Math.min(n - 1, 16), SLOW_SEARCH_MAX_RETRY_MS);
}

/**
 * The next opening at `now` of the windows of `lists` (a rollout needs each list to allow it),
 * searched (within its step and time budgets) or taken from {@link OPENINGS}. Keyed by the
 * windows' text and list, which is all the answer depends on besides
 * the instant: the same windows of another resource, or of a later generation, reuse it. A
 * search cut for time is not kept: its answer carries the wait before the next (`retryMs`).
 */
function searchOpening(
  lists: readonly (readonly RolloutWindowSpec[])[],
  now: number,
  counter?: Counter,
): KeptOpening {
  // A list without windows allows every instant: it takes no part.
  const ruling = lists.map((windows, list) => ({ windows, list })).filter((l) => l.windows.length > 0);
  const key = JSON.stringify(
    ruling.map(({ windows, list }) => [
      list,
      windows.map((w) => [w.kind, w.schedule, w.duration, w.timeZone ?? null]),
    ]),
  );
  const kept = OPENINGS.get(key);
  if (kept && kept.from <= now && now < kept.until) return kept.opening;
  const compiled = ruling.flatMap(({ windows, list }) =>
    compileWindows(windows, "spec.rolloutWindows", list),
  );
  const found = nextOpening(compiled, now, { counter: counter ?? workMs });
  if (found.kind === "none" && found.exhausted === "time") {
    const cuts = (SLOW_SEARCHES.get(key) ?? 0) + 1;
    SLOW_SEARCHES.set(key, cuts);
    return { ...found, retryMs: slowSearchRetryMs(cuts) };
  }
  SLOW_SEARCHES.delete(key);
  if (found.kind === "now") return found;
  const opening: KeptOpening =
    found.kind === "at" ? { kind: "at", at: found.at, window: withoutCron(found.window) } : found;
  const until =
    opening.kind === "at"
      ? opening.at
      : opening.exhausted
        ? opening.searchedUntil
        : Math.min(opening.searchedUntil, now + HORIZON_ANSWER_MS);
  OPENINGS.set(key, { from: now, until, opening });
  return opening;
}

function withoutCron({ cron: _parsed, ...window }: RolloutWindow): Omit<RolloutWindow, "cron"> {
  return window;
}

/** The window whose start or end lets a change out; one of `binding`'s (list 1) names it. */
function describeWindow(opening: KeptOpening & { kind: "at" }, binding: BindingWindows | undefined): string {
  const w = opening.window;
  const verb = w.kind === "allow" ? "opens" : "ends";
  const of = binding && w.list === 1 ? ` of ${binding.from}` : "";
  return `${w.kind} window [${w.index}]${of} (${w.schedule} for ${describeDuration(w.durationMs)}, ${w.timeZone}) ${verb}`;
}
