// The install key as the operator waits for it: read before any digest is made, tried again
// after a failure that says nothing about it, and the operator stopped, naming the fix, by one
// that does (an unusable Secret, no right to it). The real API server's answers, and two starts
// racing to create it, are test/integration/install-key.test.ts's.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { InstallKeyError } from "../../src/kube/install-key.ts";
import { keyedSecretDigest } from "../../src/reconcile/secret-hash.ts";
import { InstallKey, type KeySource } from "../../src/wiring/install-key.ts";
import { ManualClock } from "../support/manual-clock.ts";

const logger = pino({ level: "silent" });
const KEY = Buffer.alloc(32, 3);
const SECRETS = [{ name: "TOKEN", value: "hunter2" }];

describe("the install key's runnable", () => {
  it("makes no digest before the key is read, then keys every digest with it", async () => {
    const key = new InstallKey("dms-system", async () => KEY, new ManualClock(), logger);
    expect(() => key.digest.digest(SECRETS)).toThrow(/before the install key was read/);
    const stop = new AbortController();
    const running = key.start(stop.signal);
    expect(await key.ready(stop.signal)).toBe(KEY);
    expect(key.digest.digest(SECRETS)).toBe(keyedSecretDigest(KEY).digest(SECRETS));
    // The resync's `synced` waits for it as for the caches.
    await key.after(async () => "synced")();
    stop.abort();
    await running;
  });

  it("tries again every 2 s after a failure that says nothing about the key, and reads the namespace given", async () => {
    const asked: string[] = [];
    let failures = 2;
    const source: KeySource = async (namespace) => {
      asked.push(namespace);
      if (failures-- > 0) throw new Error("connect ECONNREFUSED 127.0.0.1:6443");
      return KEY;
    };
    const clock = new ManualClock({ sleepsInstantly: true });
    const key = new InstallKey("ops", source, clock, logger);
    const stop = new AbortController();
    const running = key.start(stop.signal);
    await key.ready(stop.signal);
    expect(asked).toEqual(["ops", "ops", "ops"]);
    expect(clock.sleeps).toEqual([2_000, 2_000]);
    stop.abort();
    await running;
  });

  it("fails, and with it whoever waits, on an unusable key or no right to it", async () => {
    const refusal = new InstallKeyError(
      "the operator may not create the Secret dms-system/dms-operator-install-key",
    );
    const key = new InstallKey("dms-system", () => Promise.reject(refusal), new ManualClock(), logger);
    const stop = new AbortController();
    const waiting = key.ready(stop.signal);
    await expect(key.start(stop.signal)).rejects.toBe(refusal);
    await expect(waiting).rejects.toBe(refusal);
  });

  it("lets a waiter go when its own signal aborts, and stops trying when the operator stops", async () => {
    const key = new InstallKey("dms-system", () => new Promise(() => {}), new ManualClock(), logger);
    const waiter = new AbortController();
    const waiting = key.ready(waiter.signal);
    waiter.abort(new Error("term over"));
    await expect(waiting).rejects.toThrow("term over");
    const failing = new InstallKey(
      "dms-system",
      () => Promise.reject(new Error("503")),
      new ManualClock(),
      logger,
    );
    const stop = new AbortController();
    const running = failing.start(stop.signal);
    await Promise.resolve();
    stop.abort();
    await running;
  });
});
