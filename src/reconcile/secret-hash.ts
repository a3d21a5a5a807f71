/**
 * The digest that tells whether a resource's applied secret values changed without ever storing
 * a value. Pure (hashing is computation, not I/O). Deciding what to send is `plan-secrets.ts`'s;
 * keeping values out of what is shown is `api/redact.ts`'s.
 *
 * The digests are shown to whoever may `get` the resource (`status.appliedSecretsHash`,
 * `status.revisionHistory[].secretsHash`): a plain sha256 of a low-entropy value can be guessed
 * offline, so they are HMAC-SHA256 keyed with the install's own key (a Secret of the operator's
 * namespace, `wiring/install-key.ts`), written `hmac-sha256:<hex>`. A digest recorded before
 * the key (plain lowercase hex, no prefix) still matches the values it was made of, until the next
 * status write records the keyed one.
 */
import { createHash, createHmac, createSecretKey } from "node:crypto";
import type { SecretValue } from "../crd/mapping.ts";

/** The prefix of a keyed digest. */
export const KEYED_PREFIX = "hmac-sha256:";

/** How the secrets' digests are made and compared; the reconciler's deps carry one. */
export interface SecretDigest {
  /** The digest to record for `secrets`. */
  digest(secrets: readonly SecretValue[]): string;
  /**
   * Whether `recorded` (a digest this or an earlier version of the operator recorded) is the
   * digest of `secrets`: a keyed digest compared as this key makes it, a plain one as sha256.
   */
  matches(recorded: string | undefined, secrets: readonly SecretValue[]): boolean;
  /** False when this digest cannot tell a keyed digest's values (`plan` without the key). */
  readonly keyed: boolean;
}

/** The digests' input: the JSON of the sorted name/value pairs, unambiguous and order-free. */
function canonical(secrets: readonly SecretValue[]): string {
  const pairs = secrets
    .map((s): [string, string] => [s.name, s.value])
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify(pairs);
}

/**
 * sha256 (lowercase hex) of the secrets' names and values, independent of list order: the digest
 * recorded before the install key (and still the digest of no secrets at all, which hides nothing).
 */
export function hashSecrets(secrets: readonly SecretValue[]): string {
  return createHash("sha256").update(canonical(secrets)).digest("hex");
}

/** True when `recorded` was made with a key (it carries {@link KEYED_PREFIX}). */
export function isKeyedDigest(recorded: string | undefined): boolean {
  return recorded?.startsWith(KEYED_PREFIX) ?? false;
}

/**
 * The digests keyed with `key` (the install key's bytes): `hmac-sha256:<hex>` of the secrets,
 * except for no secrets at all, whose digest is the plain {@link hashSecrets}`([])` (an empty set
 * hides nothing, and every code path that vouches for "no secrets" agrees on it without a key).
 */
export function keyedSecretDigest(key: Uint8Array): SecretDigest {
  if (key.length < 16) throw new Error(`the install key must have at least 16 bytes (it has ${key.length})`);
  // A KeyObject made once: an HMAC keyed with it costs half of one keyed with raw bytes.
  const held = createSecretKey(Buffer.from(key));
  const digest = (secrets: readonly SecretValue[]) =>
    secrets.length === 0
      ? hashSecrets([])
      : `${KEYED_PREFIX}${createHmac("sha256", held).update(canonical(secrets)).digest("hex")}`;
  return {
    keyed: true,
    digest,
    matches: (recorded, secrets) =>
      recorded !== undefined &&
      (isKeyedDigest(recorded) ? recorded === digest(secrets) : recorded === hashSecrets(secrets)),
  };
}

/**
 * The digests of a reader without the key (`plan` that may not read it): plain sha256, which
 * matches only digests recorded before the key. A keyed digest never matches here: its caller
 * says the secrets' equality is unknown instead (see {@link isKeyedDigest}).
 */
export const UNKEYED_SECRET_DIGEST: SecretDigest = {
  keyed: false,
  digest: hashSecrets,
  matches: (recorded, secrets) =>
    recorded !== undefined && !isKeyedDigest(recorded) && recorded === hashSecrets(secrets),
};
