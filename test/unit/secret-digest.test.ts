// The secrets' digests shown in status: keyed with the install key (HMAC-SHA256, prefixed), a
// digest recorded before the key still matching its values, and the planner deciding with them.
import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { lastAppliedFor } from "../../src/reconcile/plan.ts";
import { planSecrets } from "../../src/reconcile/plan-secrets.ts";
import {
  hashSecrets,
  isKeyedDigest,
  KEYED_PREFIX,
  keyedSecretDigest,
  UNKEYED_SECRET_DIGEST,
} from "../../src/reconcile/secret-hash.ts";

const KEY = Buffer.from("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", "hex");
const OTHER_KEY = Buffer.from("ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100", "hex");
const TOKEN = [{ name: "TOKEN", value: "hunter2" }];
const ROTATED = [{ name: "TOKEN", value: "hunter3" }];

describe("the keyed secrets digest", () => {
  const digest = keyedSecretDigest(KEY);

  it("is HMAC-SHA256 of the sorted name/value pairs under the key, prefixed hmac-sha256:", () => {
    const made = digest.digest(TOKEN);
    expect(made).toBe(
      `${KEYED_PREFIX}${createHmac("sha256", KEY).update('[["TOKEN","hunter2"]]').digest("hex")}`,
    );
    expect(made).toMatch(/^hmac-sha256:[0-9a-f]{64}$/);
    expect(isKeyedDigest(made)).toBe(true);
    // Not the plain sha256 a guesser could compute offline.
    expect(made.slice(KEYED_PREFIX.length)).not.toBe(hashSecrets(TOKEN));
    const two = [
      { name: "B", value: "2" },
      { name: "A", value: "1" },
    ];
    expect(digest.digest(two)).toBe(digest.digest([...two].reverse()));
  });

  it("differs with another key, and with other values", () => {
    expect(keyedSecretDigest(OTHER_KEY).digest(TOKEN)).not.toBe(digest.digest(TOKEN));
    expect(digest.digest(ROTATED)).not.toBe(digest.digest(TOKEN));
    expect(keyedSecretDigest(Buffer.from(KEY)).digest(TOKEN)).toBe(digest.digest(TOKEN));
  });

  it("matches its own digests and the plain ones recorded before the key, for the values they were made of only", () => {
    expect(digest.matches(digest.digest(TOKEN), TOKEN)).toBe(true);
    expect(digest.matches(hashSecrets(TOKEN), TOKEN)).toBe(true);
    expect(digest.matches(hashSecrets(TOKEN), ROTATED)).toBe(false);
    expect(digest.matches(digest.digest(TOKEN), ROTATED)).toBe(false);
    expect(digest.matches(keyedSecretDigest(OTHER_KEY).digest(TOKEN), TOKEN)).toBe(false);
    expect(digest.matches(undefined, TOKEN)).toBe(false);
  });

  it("gives no secrets at all the one plain digest every reader agrees on", () => {
    expect(digest.digest([])).toBe(hashSecrets([]));
    expect(UNKEYED_SECRET_DIGEST.digest([])).toBe(hashSecrets([]));
  });

  it("refuses a key too short to key anything", () => {
    expect(() => keyedSecretDigest(Buffer.alloc(4))).toThrow(/at least 16 bytes/);
  });

  it("without the key (plan without the right to read it), matches plain digests only", () => {
    expect(UNKEYED_SECRET_DIGEST.matches(hashSecrets(TOKEN), TOKEN)).toBe(true);
    expect(UNKEYED_SECRET_DIGEST.matches(digest.digest(TOKEN), TOKEN)).toBe(false);
    expect(UNKEYED_SECRET_DIGEST.keyed).toBe(false);
  });
});

describe("the planner with keyed digests", () => {
  const digest = keyedSecretDigest(KEY);
  const masked = [{ name: "TOKEN", value: "****" }];

  it("takes an old plain digest of the same values as in sync, and gives the keyed one to record", () => {
    const decision = planSecrets(TOKEN, masked, hashSecrets(TOKEN), digest);
    expect(decision.send).toBeUndefined();
    expect(decision.hash).toBe(digest.digest(TOKEN));
  });

  it("sends values that differ from an old plain digest, and records the keyed digest of what it sent", () => {
    const decision = planSecrets(ROTATED, masked, hashSecrets(TOKEN), digest);
    expect(decision.send).toEqual(ROTATED);
    expect(decision.lines).toEqual(["secrets: rotated TOKEN"]);
    expect(decision.hash).toBe(digest.digest(ROTATED));
  });

  it("is in sync with its own keyed digest, and not with another install's", () => {
    expect(planSecrets(TOKEN, masked, digest.digest(TOKEN), digest).send).toBeUndefined();
    expect(planSecrets(TOKEN, masked, keyedSecretDigest(OTHER_KEY).digest(TOKEN), digest).send).toEqual(
      TOKEN,
    );
  });

  it("keys what ObserveOnly takes as applied", () => {
    const last = lastAppliedFor({ managementPolicy: "ObserveOnly" }, { secrets: TOKEN }, undefined, digest);
    expect(last.secretsHash).toBe(digest.digest(TOKEN));
  });
});
