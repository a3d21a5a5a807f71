/**
 * The base64 reading of a text, standard and URL-safe, padded or not, each run read from each of
 * its first four characters: each line's runs on their own, and base64 wrapped over lines behind a
 * prefix on each line (a time, `#8 0.23`, `[12:00:01]`, `stage-1 |`) read as one run, the
 * prefixes left out.
 */
import type { RedactionBudget } from "./budget.ts";
import { ByteReading, type DecodedView, MIN_DECODED_BYTES, positionsFor } from "./byte-views.ts";
import { isLineSpace } from "./views.ts";

/** Values of base64 characters, standard and URL-safe alike; -1 for any other. */
const BASE64 = new Int8Array(128).fill(-1);
for (const [i, c] of [..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"].entries())
  BASE64[c.charCodeAt(0)] = i;
BASE64["+".charCodeAt(0)] = 62;
BASE64["-".charCodeAt(0)] = 62;
BASE64["/".charCodeAt(0)] = 63;
BASE64["_".charCodeAt(0)] = 63;

const base64Value = (code: number): number => (code < 128 ? (BASE64[code] ?? -1) : -1);

const isBase64 = (code: number): boolean => base64Value(code) >= 0;

/**
 * The base64 reading of `text` (see `decodedViews`, coverage.ts): each line's runs of at least
 * `minChars` on their own, and each chain of lines joined: a line's last run (what follows its
 * prefix, in base64 wrapped over prefixed lines) followed by the next line's last run, as long as
 * the line does not end in padding. A chain of one line is the line's run already read.
 */
export function* base64Views(
  text: string,
  minChars: number,
  budget: RedactionBudget,
): Generator<DecodedView> {
  // The positions of the characters of each run to read, one run after the other, and where each
  // run starts among them.
  const positions = positionsFor(2 * text.length);
  const runs: number[] = [];
  let count = 0;
  let start = -1;
  for (let i = 0; i <= text.length; i++) {
    if (i < text.length && isBase64(text.charCodeAt(i))) {
      if (start < 0) start = count;
      positions[count++] = i;
    } else if (start >= 0) {
      if (count - start >= minChars) runs.push(start);
      else count = start;
      start = -1;
    }
  }
  budget.step(text.length);
  let chain = -1;
  let lines = 0;
  const endChain = () => {
    if (chain >= 0 && lines >= 2 && count - chain >= minChars) runs.push(chain);
    else if (chain >= 0) count = chain;
    chain = -1;
    lines = 0;
  };
  for (let lineStart = 0; lineStart <= text.length; ) {
    const found = text.indexOf("\n", lineStart);
    const lineEnd = found === -1 ? text.length : found;
    let end = lineEnd;
    while (end > lineStart && isLineSpace(text.charCodeAt(end - 1))) end--;
    const padded = end > lineStart && text.charCodeAt(end - 1) === 61;
    while (end > lineStart && text.charCodeAt(end - 1) === 61) end--;
    let first = end;
    while (first > lineStart && isBase64(text.charCodeAt(first - 1))) first--;
    budget.step(1 + ((lineEnd - first) >> 4));
    if (first === end) endChain();
    else {
      if (chain < 0) chain = count;
      for (let i = first; i < end; i++) positions[count++] = i;
      lines++;
      if (padded) endChain();
    }
    lineStart = lineEnd + 1;
  }
  endChain();
  if (runs.length === 0) return;
  runs.push(count);
  // The four passes in one reading, one after the other: one text to search, not four.
  const reading = new ByteReading(4 * (Math.ceil((count * 3) / 4) + runs.length));
  for (let offset = 0; offset < 4; offset++) {
    for (let r = 0; r + 1 < runs.length; r++) {
      const first = (runs[r] ?? 0) + offset;
      const last = runs[r + 1] ?? 0;
      for (let c = first; c + 1 < last; c += 4) {
        budget.step();
        const chars = Math.min(4, last - c);
        let bits = 0;
        for (let k = 0; k < 4; k++)
          bits = (bits << 6) | (k < chars ? base64Value(text.charCodeAt(positions[c + k] ?? 0)) : 0);
        for (let k = 0; k < chars - 1; k++)
          reading.push((bits >> (16 - 8 * k)) & 0xff, positions[c + k] ?? 0, (positions[c + k + 1] ?? 0) + 1);
      }
    }
  }
  if (reading.n >= MIN_DECODED_BYTES) yield { view: reading.view(), minLength: MIN_DECODED_BYTES };
}
