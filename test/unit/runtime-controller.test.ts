import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  Controller,
  type ControllerOptions,
  type ReconcileResult,
  ReconcileTimeoutError,
  TerminalError,
} from "../../src/runtime/controller.ts";

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
    resyncMs: 0,
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
    const { controller, times } = startController(
      async () => {
        throw new TerminalError("spec rejected by the service");
      },
      { resyncMs: 60_000 },
    );
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(times("ns/a")).toEqual([0]);
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(0);
    expect(times("ns/a")).toEqual([0, 3_600_000]);
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

  it("resyncs after a success within interval ± jitter, per-key interval override included", async () => {
    const randoms = [0, 0.9999, 0.5];
    let i = 0;
    const { controller, times } = startController(
      async (key) => (key === "ns/b" ? { kind: "done", resyncAfterMs: 60_000 } : { kind: "done" }),
      {
        resyncMs: 600_000,
        resyncJitter: 0.1,
        random: () => randoms[i++ % randoms.length] ?? 0.5,
      },
    );
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(0);
    await vi.advanceTimersByTimeAsync(540_000 + 660_000);
    const a = times("ns/a");
    expect(a[0]).toBe(0);
    // random 0 → 540 s; then random 0.9999 → ~660 s later.
    expect(a[1]).toBe(540_000);
    expect(a[2]).toBeGreaterThanOrEqual(540_000 + 659_000);
    expect(a[2]).toBeLessThanOrEqual(540_000 + 660_000);
    controller.enqueue("ns/b");
    await vi.advanceTimersByTimeAsync(0);
    const started = times("ns/b")[0] ?? 0;
    await vi.advanceTimersByTimeAsync(66_000);
    const b = times("ns/b");
    expect(b).toHaveLength(2);
    const gap = (b[1] ?? 0) - started;
    expect(gap).toBeGreaterThanOrEqual(54_000);
    expect(gap).toBeLessThanOrEqual(66_000);
  });

  it("requeues after the asked delay when it is sooner than the resync", async () => {
    let n = 0;
    const { controller, times } = startController(
      async () => (n++ === 0 ? { kind: "requeueAfter", ms: 5_000 } : { kind: "done" }),
      {
        resyncMs: 600_000,
        resyncJitter: 0,
      },
    );
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(700_000);
    expect(times("ns/a")).toEqual([0, 5_000, 605_000]);
  });

  it("schedules nothing for an object that is gone", async () => {
    const { controller, times } = startController(async () => ({ kind: "gone" }), { resyncMs: 1_000 });
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

  it("enqueues the known keys at start, spread over the window", async () => {
    const keys = Array.from({ length: 50 }, (_, i) => `ns/r${i}`);
    let r = 0;
    const { times } = startController(ok, {
      listKeys: () => keys,
      startSpreadMs: 10_000,
      concurrency: 50,
      random: () => (r++ % 50) / 50,
    });
    await vi.advanceTimersByTimeAsync(10_000);
    const starts = keys.map((k) => times(k)[0]);
    expect(starts.every((t) => t !== undefined && t >= 0 && t < 10_000)).toBe(true);
    expect(new Set(starts).size).toBeGreaterThan(40);
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
        resyncMs: 600_000,
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
