/**
 * Secret handling for the planner and status: a hash that tells whether the applied values
 * changed without ever storing a value, and redaction of values from text the operator shows.
 * Pure (hashing is computation, not I/O).
 */
import { createHash } from "node:crypto";
import type { Secret } from "../api/wire.ts";
import type { PlanProblem } from "./plan.ts";

/** A secret with its value, as sent to the service. */
export interface SecretValue {
  name: string;
  value: string;
}

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

/** The planner's decision about `secrets`. */
export interface SecretsDecision {
  /** The list to send, when the service must be told. */
  send?: SecretValue[];
  /** Summary lines naming secrets, never their values. */
  lines: string[];
  /** What cannot be done (an empty list cannot clear the service's secrets). */
  problem?: PlanProblem;
  /** Hash of the desired secrets, once they are (or will be, after `send`) what the service has. */
  hash?: string;
}

/**
 * Decides whether `desired` secrets (undefined: not managed) must be sent, given the `remote`
 * ones (values, masked values or none) and the hash last applied. In sync when the names are
 * the same and either the hash of the desired values is the one last applied, or the service
 * shows exactly the desired values. Never sends when in sync.
 */
export function planSecrets(
  desired: readonly SecretValue[] | undefined,
  remote: readonly Secret[],
  lastHash: string | undefined,
): SecretsDecision {
  if (!desired) return { lines: [] };
  const remoteNames = [...new Set(remote.map((s) => s.name))].sort();
  if (desired.length === 0) {
    if (remoteNames.length === 0) return { lines: [], hash: hashSecrets([]) };
    return {
      lines: [],
      problem: {
        reason: "CannotClearSecrets",
        field: "spec.secrets",
        message: `spec.secrets is empty but the service's deployment has secrets ${remoteNames.join(", ")}: the service cannot clear secrets with an empty list; list the secrets to keep, remove spec.secrets to stop managing them, or remove them on the service`,
      },
    };
  }
  const hash = hashSecrets(desired);
  const remoteValue = new Map(remote.map((s) => [s.name, s.value]));
  const desiredNames = desired.map((s) => s.name).sort();
  const namesMatch =
    desiredNames.length === remoteNames.length && desiredNames.every((n, i) => n === remoteNames[i]);
  const valuesShown = desired.every((s) => remoteValue.get(s.name) === s.value);
  if (namesMatch && (hash === lastHash || valuesShown)) return { lines: [], hash };

  const added = desiredNames.filter((n) => !remoteValue.has(n));
  const removed = remoteNames.filter((n) => !desiredNames.includes(n));
  // Whether a kept secret's value changed is known from the values when the service shows them,
  // otherwise only from the hash: then every kept secret counts as rotated.
  const rotated =
    hash === lastHash
      ? []
      : desired
          .filter((s) => remoteValue.has(s.name) && remoteValue.get(s.name) !== s.value)
          .map((s) => s.name)
          .sort();
  const lines: string[] = [];
  if (added.length > 0) lines.push(`secrets: added ${added.join(", ")}`);
  if (removed.length > 0) lines.push(`secrets: removed ${removed.join(", ")}`);
  if (rotated.length > 0) lines.push(`secrets: rotated ${rotated.join(", ")}`);
  if (lines.length === 0) lines.push(`secrets: set ${desiredNames.join(", ")}`);
  return { send: desired.map((s) => ({ name: s.name, value: s.value })), lines, hash };
}
