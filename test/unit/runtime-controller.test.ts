import { getEventListeners } from "node:events";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Controller, type ControllerOptions, type ReconcileResult } from "../../src/runtime/controller.ts";
import { SPREAD_MOMENTS } from "../../src/runtime/queue-schedules.ts";
import { ReconcileTimeoutError, TerminalError } from "../../src/runtime/reconcile-errors.ts";
import { LogCapture } from "../support/logs.ts";
import { countingClock } from "../support/manual-clock.ts";

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

type Reconcile = (key: string, signal: AbortSignal) => Promise<ReconcileResult>;

/** Starts a controller; `calls` records (key, time) of every reconcile. */
function startController(reconcile: Reconcile, options: Partial<ControllerOptions> = {}) {
  const calls: Array<{ key: string; at: number }> = [];
  const controller = new Controller({
    name: "test",
    backoff: { jitter: 0 },
    random: () => 0.5,
    ...options,
    reconcile: (key, signal) => {
      calls.push({ key, at: Date.now() });
      return reconcile(key, signal);
    },
  });
  const stop = new AbortController();
  const halt = new AbortController();
  const running = controller.start(stop.signal, halt.signal);
  return {
    controller,
    calls,
    stop,
    halt,
    running,
    times: (key: string) => calls.filter((c) => c.key === key).map((c) => c.at),
  };
}

const ok = async (): Promise<ReconcileResult> => ({ kind: "done" });
const deferred = () => {
  let resolve: () => void = () => {};
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
};

describe("Controller", () => {
  it("never reconciles one key twice at once, and reconciles it again after a change during the run", async () => {
    const inFlight = new Map<string, number>();
    let maxPerKey = 0;
    let maxTotal = 0;
    const { controller, times } = startController(
      async (key) => {
        inFlight.set(key, (inFlight.get(key) ?? 0) + 1);
        maxPerKey = Math.max(maxPerKey, ...inFlight.values());
        maxTotal = Math.max(
          maxTotal,
          [...inFlight.values()].reduce((a, b) => a + b, 0),
        );
        await new Promise((r) => setTimeout(r, 1_000));
        inFlight.set(key, (inFlight.get(key) ?? 0) - 1);
        return { kind: "done" };
      },
      { concurrency: 3 },
    );
    for (const key of ["ns/a", "ns/b", "ns/c", "ns/d"]) controller.enqueue(key);
    await vi.advanceTimersByTimeAsync(100);
    controller.enqueue("ns/a");
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(10_000);
    expect(maxPerKey).toBe(1);
    expect(maxTotal).toBe(3);
    expect(times("ns/a")).toEqual([0, 1_000]);
    expect(times("ns/d")).toEqual([1_000]);
  });

  it("retries a failing key with exponential backoff and stops once it succeeds", async () => {
    let failures = 3;
    const { controller, times } = startController(async () => {
      if (failures-- > 0) throw new Error("service unavailable");
      return { kind: "done" };
    });
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(60_000);
    expect(times("ns/a")).toEqual([0, 1_000, 3_000, 7_000]);
  });

  it("does not retry a terminal error: the key waits for the next change", async () => {
    const { controller, times } = startController(async () => {
      throw new TerminalError("spec rejected by the service");
    });
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(times("ns/a")).toEqual([0]);
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(0);
    expect(times("ns/a")).toEqual([0, 3_600_000]);
  });

  it("logs a terminal error its reconciler said already no more, and counts it all the same", async () => {
    const logs = new LogCapture();
    const errored: boolean[] = [];
    const { controller, times } = startController(
      async () => {
        throw new TerminalError("the connection's listing failed", true);
      },
      { logger: logs.logger, metrics: { errored: (terminal) => errored.push(terminal) } },
    );
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(times("ns/a")).toEqual([0]);
    expect(errored).toEqual([true]);
    expect(logs.find("reconcile failed")).toEqual([]);
  });

  it("waits at least an error's retryAfterMs (HTTP 429)", async () => {
    let first = true;
    const { controller, times } = startController(async () => {
      if (first) {
        first = false;
        throw Object.assign(new Error("too many requests"), { retryAfterMs: 30_000 });
      }
      return { kind: "done" };
    });
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(60_000);
    expect(times("ns/a")).toEqual([0, 30_000]);
  });

  it("survives a reconciler that throws synchronously", async () => {
    let calls = 0;
    const { controller, times } = startController((() => {
      calls++;
      if (calls === 1) throw new Error("boom");
      return Promise.resolve({ kind: "done" });
    }) as Reconcile);
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(5_000);
    expect(times("ns/a")).toEqual([0, 1_000]);
  });

  it("schedules nothing of its own after a success: the periodic pass is the resync's", async () => {
    const { controller, times } = startController(ok);
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(24 * 3_600_000);
    expect(times("ns/a")).toEqual([0]);
  });

  it("reconciles a key again after the interval its result asks for, ± jitter, and again after that", async () => {
    const randoms = [0, 0.9999];
    let i = 0;
    const { controller, times } = startController(
      async (key) => (key === "ns/b" ? { kind: "done", intervalMs: 60_000 } : { kind: "done" }),
      { intervalJitter: 0.1, random: () => randoms[i++ % randoms.length] ?? 0.5 },
    );
    controller.enqueue("ns/a");
    controller.enqueue("ns/b");
    await vi.advanceTimersByTimeAsync(60_000 * 0.9 + 66_000);
    expect(times("ns/a")).toEqual([0]);
    const b = times("ns/b");
    // random 0 → 54 s; then random 0.9999 → ~66 s later.
    expect(b[0]).toBe(0);
    expect(b[1]).toBe(54_000);
    expect(b[2]).toBeGreaterThanOrEqual(54_000 + 65_990);
    expect(b[2]).toBeLessThanOrEqual(54_000 + 66_000);
  });

  it("reconciles a key whose interval is longer than a timer holds once, not again at once", async () => {
    // A tenant's `dms.dev/reconcile-interval: 1000h` asks 3.6e9 ms; a timer of more than 2^31 − 1 ms
    // would fire after 1 ms, reconciling the key in a loop on the event loop every namespace shares.
    const { controller, times } = startController(async () => ({ kind: "done", intervalMs: 3_600_000_000 }));
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(600_000);
    expect(times("ns/a")).toEqual([0]);
  });

  it("requeues after the asked delay, then waits for the next change", async () => {
    let n = 0;
    const { controller, times } = startController(async () =>
      n++ === 0 ? { kind: "requeueAfter", ms: 5_000 } : { kind: "done" },
    );
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(700_000);
    expect(times("ns/a")).toEqual([0, 5_000]);
  });

  it("takes a requeue coming due before a backlog of fresh keys, and keeps the backlog moving", async () => {
    const { controller, times } = startController(async (key) => {
      await new Promise((r) => setTimeout(r, 100));
      return key === "ns/in-progress" && Date.now() < 500
        ? { kind: "requeueAfter", ms: 200 }
        : { kind: "done" };
    });
    controller.enqueue("ns/in-progress");
    for (let i = 0; i < 20; i++) controller.enqueue(`ns/backlog-${i}`);
    await vi.advanceTimersByTimeAsync(5_000);
    // One worker, 100 ms a reconcile: in first-in-first-out order the requeue would wait the
    // whole backlog (2.1 s); it is taken as soon as it comes due, every other turn.
    expect(times("ns/in-progress")).toEqual([0, 300, 600]);
    expect(times("ns/backlog-19")).toEqual([2_200]);
  });

  it("spreads a pass of 10,000 keys with a timer per moment, not one per key, and reconciles each once", async () => {
    const { clock: counting, timers } = countingClock();
    const { controller, calls } = startController(ok, {
      clock: counting,
      concurrency: 4,
      random: Math.random,
    });
    const keys = Array.from({ length: 10_000 }, (_, i) => `ns/k${i}`);
    const before = timers();
    const pass = controller.pass(keys, 6_000);
    expect(timers() - before).toBeLessThanOrEqual(SPREAD_MOMENTS);
    await vi.advanceTimersByTimeAsync(6_000);
    await pass;
    expect(calls).toHaveLength(10_000);
    expect(new Set(calls.map((c) => c.key)).size).toBe(10_000);
    // Spread, not at once: keys came over the whole spread.
    expect(Math.max(...calls.map((c) => c.at))).toBeGreaterThan(5_000);
    // 10,000 reconciles on fake timers take ~1 s of CPU alone, 5 s and more beside a busy machine.
  }, 30_000);

  it("schedules nothing for an object that is gone", async () => {
    const { controller, times } = startController(async () => ({ kind: "gone" }));
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(100_000);
    expect(times("ns/a")).toEqual([0]);
  });

  it("aborts a reconcile that exceeds the timeout and retries it", async () => {
    const reasons: unknown[] = [];
    const { controller, times } = startController(
      (_key, signal) =>
        new Promise((_resolve, reject) => {
          signal.addEventListener("abort", () => {
            reasons.push(signal.reason);
            reject(signal.reason);
          });
        }),
      { reconcileTimeoutMs: 10_000 },
    );
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(11_500);
    expect(reasons[0]).toBeInstanceOf(ReconcileTimeoutError);
    expect(times("ns/a")).toEqual([0, 11_000]);
  });

  it("on stop takes no new keys but lets the reconcile in flight finish", async () => {
    const gate = deferred();
    let finished = false;
    const { controller, stop, running, times } = startController(async (key) => {
      if (key === "ns/a") {
        await gate.promise;
        finished = true;
      }
      return { kind: "done" };
    });
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(0);
    stop.abort();
    controller.enqueue("ns/b");
    let stopped = false;
    void running.then(() => {
      stopped = true;
    });
    await vi.advanceTimersByTimeAsync(60_000);
    expect(stopped).toBe(false);
    gate.resolve();
    await vi.advanceTimersByTimeAsync(0);
    expect(finished).toBe(true);
    expect(stopped).toBe(true);
    expect(times("ns/b")).toEqual([]);
    expect(controller.running).toBe(false);
  });

  it("aborts the reconcile in flight at once on halt (leadership lost) and does not retry it", async () => {
    let aborted = false;
    const { controller, stop, halt, running, times } = startController(
      (_key, signal) =>
        new Promise((_resolve, reject) => {
          signal.addEventListener("abort", () => {
            aborted = true;
            reject(signal.reason);
          });
        }),
    );
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(0);
    halt.abort(new Error("leadership lost"));
    stop.abort();
    await running;
    expect(aborted).toBe(true);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(times("ns/a")).toEqual([0]);
  });

  it("holds one listener on halt however many reconciles run at once, and none once stopped, warning nothing", async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on("warning", onWarning);
    const gate = deferred();
    const signals: AbortSignal[] = [];
    const { controller, stop, halt, running } = startController(
      async (_key, signal) => {
        signals.push(signal);
        // Each reconcile listens to its signal, as a request under it does.
        signal.addEventListener("abort", () => {});
        await gate.promise;
        return { kind: "done" };
      },
      { concurrency: 16 },
    );
    for (let i = 0; i < 40; i++) controller.enqueue(`ns/r${i}`);
    await vi.advanceTimersByTimeAsync(0);
    expect(signals).toHaveLength(16);
    expect(getEventListeners(halt.signal, "abort")).toHaveLength(1);
    gate.resolve();
    await vi.advanceTimersByTimeAsync(0);
    expect(signals).toHaveLength(40);
    stop.abort();
    await running;
    expect(getEventListeners(halt.signal, "abort")).toHaveLength(0);
    // Released, a finished reconcile's signal no longer follows halt.
    halt.abort(new Error("late"));
    expect(signals[0]?.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(0); // process warnings are emitted on the next tick
    process.off("warning", onWarning);
    expect(warnings).toEqual([]);
  });

  it("reports outcomes and worker counts to its metrics hooks", async () => {
    const outcomes: string[] = [];
    const active: number[] = [];
    let errors = 0;
    let n = 0;
    const { controller } = startController(
      async () => {
        n++;
        if (n === 1) throw new TerminalError("bad spec");
        if (n === 2) return { kind: "requeueAfter", ms: 1 };
        if (n === 3) return { kind: "retry" };
        return { kind: "done" };
      },
      {
        metrics: {
          reconciled: (o) => outcomes.push(o),
          errored: () => errors++,
          activeWorkers: (c) => active.push(c),
        },
      },
    );
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(0);
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(5_000);
    expect(outcomes).toEqual(["error", "requeue_after", "requeue", "success"]);
    expect(errors).toBe(1);
    expect(Math.max(...active)).toBe(1);
    expect(active.at(-1)).toBe(0);
  });

  it("refuses to start twice", async () => {
    const { controller } = startController(ok);
    await expect(controller.start(new AbortController().signal)).rejects.toThrow(/already running/);
  });
});
