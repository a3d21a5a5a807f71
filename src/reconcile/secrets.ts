/**
 * Secret values, handled without being kept or shown: a hash that tells whether the applied
 * values changed without ever storing a value, and redaction of values from text the operator
 * shows. Pure (hashing is computation, not I/O). Deciding what to send is `plan-secrets.ts`'s.
 */
import { createHash } from "node:crypto";
import type { SecretValue } from "../crd/mapping.ts";

/**
 * sha256 (lowercase hex) of the secrets' names and values, independent of list order. Stored in
 * `status.appliedSecretsHash` after a successful apply; equal hashes mean equal name/value sets.
 * The encoding is unambiguous (JSON of sorted pairs), so no two different sets share an input.
 */
export function hashSecrets(secrets: readonly SecretValue[]): string {
  const pairs = secrets
    .map((s): [string, string] => [s.name, s.value])
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return createHash("sha256").update(JSON.stringify(pairs)).digest("hex");
}

/** What replaces a secret value in redacted text. */
export const REDACTED = "***";

/**
 * `text` with every occurrence of each non-empty value in `values` replaced by {@link REDACTED}.
 * Occurrences are found in the original text (overlapping ones merge into one replacement), so
 * the marker itself is never searched again. Used on text the operator did not compose itself
 * (service error details) before it reaches a status, an event or a log.
 */
export function redactSecrets(text: string, values: Iterable<string>): string {
  const covered = new Uint8Array(text.length);
  for (const value of new Set(values)) {
    if (value.length === 0) continue;
    for (let at = text.indexOf(value); at !== -1; at = text.indexOf(value, at + 1)) {
      covered.fill(1, at, at + value.length);
    }
  }
  let out = "";
  for (let i = 0; i < text.length; i++) {
    if (covered[i] === 0) out += text[i];
    else if (i === 0 || covered[i - 1] === 0) out += REDACTED;
  }
  return out;
}
