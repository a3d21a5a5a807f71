/**
 * The hash that tells whether a resource's applied secret values changed without ever storing
 * a value. Pure (hashing is computation, not I/O). Deciding what to send is `plan-secrets.ts`'s;
 * keeping values out of what is shown is `api/redact.ts`'s.
 */
import { createHash } from "node:crypto";
import type { SecretValue } from "../../crd/mapping.ts";

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
