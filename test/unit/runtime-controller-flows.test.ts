/**
 * The controller's fair shares (controller.ts over queue.ts's flows): a cap of reconciles per
 * flow, a reconcile that gives its worker back (`DeferredError`), the time a reconcile has left
 * (deadline.ts), and the report of keys long waiting at a slow flow's cap.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { currentDeadline, DeferredError } from "../../src/runtime/clock.ts";
import { Controller, type ControllerOptions, type ReconcileResult } from "../../src/runtime/controller.ts";
import type { KeyFlow } from "../../src/runtime/queue.ts";

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

/** Keys `<flow>:<name>`: the flow before the colon. */
const flowOf = (key: string): KeyFlow => ({ flow: key.slice(0, key.indexOf(":")) });

type Reconcile = (key: string, signal: AbortSignal) => Promise<ReconcileResult>;

function startController(reconcile: Reconcile, options: Partial<ControllerOptions> = {}) {
  const started: Array<{ key: string; at: number }> = [];
  let waitingProbe: (() => Map<string, number>) | undefined;
  const controller = new Controller({
    name: "test",
    backoff: { jitter: 0 },
    random: () => 0.5,
    flowOf,
    metrics: { observeWaiting: (probe) => (waitingProbe = probe) },
    ...options,
    reconcile: (key, signal) => {
      started.push({ key, at: Date.now() });
      return reconcile(key, signal);
    },
  });
  const stop = new AbortController();
  const running = controller.start(stop.signal);
  return { controller, started, stop, running, waiting: () => waitingProbe?.() ?? new Map() };
}

describe("Controller flows", () => {
  it("reconciles a healthy flow's key at once while a slow flow holds its cap of the workers", async () => {
    // Slow reconciles take 10 s each; 4 workers, at most 2 per flow.
    const { controller, started, stop, running, waiting } = startController(
      async (key) => {
        if (key.startsWith("slow:")) await new Promise((r) => setTimeout(r, 10_000));
        return { kind: "done" };
      },
      { concurrency: 4, maxPerFlow: 2 },
    );
    for (let i = 0; i < 50; i++) controller.enqueue(`slow:${i}`);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(started.map((s) => s.key)).toEqual(["slow:0", "slow:1"]);
    expect(waiting()).toEqual(new Map([["slow", 48]]));
    controller.enqueue("healthy:a");
    await vi.advanceTimersByTimeAsync(0);
    expect(started.at(-1)).toEqual({ key: "healthy:a", at: 1_000 });
    stop.abort();
    await vi.advanceTimersByTimeAsync(10_000);
    await running;
  });

  it("reconciles other flows' keys on the seats a borrowing flow held past the bound, its reconciles hanging", async () => {
    // Four workers, one per flow: the hole flow's first keys end at once (it borrows two seats),
    // its next ones never (a service that stops answering: until the reconcile's deadline).
    const { controller, started, stop, running } = startController(
      async (key, signal) => {
        const ms = ["hole:0", "hole:1", "hole:2"].includes(key) ? 10 : key.startsWith("hole:") ? 0 : 5_000;
        if (ms > 0) await new Promise((r) => setTimeout(r, ms));
        else await new Promise((r) => signal.addEventListener("abort", r, { once: true }));
        return { kind: "done" };
      },
      { concurrency: 4, maxPerFlow: 1, borrowMs: 1_000 },
    );
    for (let i = 0; i < 10; i++) controller.enqueue(`hole:${i}`);
    await vi.advanceTimersByTimeAsync(100);
    expect(started.map((s) => s.key)).toEqual(["hole:0", "hole:1", "hole:2", "hole:3", "hole:4", "hole:5"]);
    for (const flow of ["a", "b", "c"]) controller.enqueue(`${flow}:x`);
    await vi.advanceTimersByTimeAsync(0);
    // The idle worker kept for other flows takes the first; the others wait for a seat.
    expect(started.slice(6).map((s) => s.key)).toEqual(["a:x"]);
    await vi.advanceTimersByTimeAsync(1_000);
    // The hole's two borrowed seats, held a second, are given back: two more workers run.
    expect(started.slice(6).map((s) => s.key)).toEqual(["a:x", "b:x", "c:x"]);
    expect(started.at(-1)?.at).toBeLessThan(1_100);
    stop.abort();
    await vi.advanceTimersByTimeAsync(120_000);
    await running;
  });

  it("reconciles an edit before the keys of its flow's pass, and an object's interval after it", async () => {
    // Each reconcile takes 10 ms; one worker. big:0 asks to come again after its interval.
    const { controller, started, stop, running } = startController(
      async (key) => {
        await new Promise((r) => setTimeout(r, 10));
        return key === "big:0" ? { kind: "done", intervalMs: 5 } : { kind: "done" };
      },
      { concurrency: 1, intervalJitter: 0 },
    );
    const pass = controller.pass(["big:0", "big:1", "big:2", "big:3"], 0);
    await vi.advanceTimersByTimeAsync(0);
    controller.enqueue("big:edit");
    await vi.advanceTimersByTimeAsync(100);
    await pass;
    // The edit after the pass's first key, not after its last; big:0's interval behind the pass.
    expect(started.map((s) => s.key).slice(0, 6)).toEqual([
      "big:0",
      "big:edit",
      "big:1",
      "big:2",
      "big:3",
      "big:0",
    ]);
    stop.abort();
    await vi.advanceTimersByTimeAsync(100);
    await running;
  });

  it("requeues a deferred reconcile when asked, as no failure, and counts it as waiting meanwhile", async () => {
    let defer = true;
    const seenLeft: number[] = [];
    const { controller, started, stop, running, waiting } = startController(
      async () => {
        seenLeft.push(currentDeadline()?.timeLeft() ?? -1);
        if (defer) throw new DeferredError("the token comes later", 30_000);
        return { kind: "done" };
      },
      { concurrency: 2, reconcileTimeoutMs: 60_000, backoff: { baseMs: 1_000, jitter: 0 } },
    );
    controller.enqueue("t:a");
    await vi.advanceTimersByTimeAsync(0);
    expect(seenLeft).toEqual([60_000]);
    expect(waiting()).toEqual(new Map([["t", 1]]));
    defer = false;
    // Not after the backoff (1 s): after the 30 s asked for.
    await vi.advanceTimersByTimeAsync(29_999);
    expect(started).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(started.map((s) => s.at)).toEqual([0, 30_000]);
    expect(waiting()).toEqual(new Map());
    stop.abort();
    await running;
  });

  it("puts work a reconcile started and that outlives it under no deadline once the reconcile ended", async () => {
    // A connection's check starts that connection's resync loop, which runs for as long as the
    // operator does: past the check's deadline, it must not be told it has no time left.
    const seen: Array<number | undefined> = [];
    let loop: Promise<void> | undefined;
    const { controller, stop, running } = startController(
      async () => {
        loop ??= (async () => {
          for (let i = 0; i < 3; i++) {
            seen.push(currentDeadline()?.timeLeft());
            await new Promise((r) => setTimeout(r, 60_000));
          }
        })();
        return { kind: "done" };
      },
      { concurrency: 1, reconcileTimeoutMs: 120_000 },
    );
    controller.enqueue("connection:a");
    await vi.advanceTimersByTimeAsync(180_000);
    // Inside the reconcile: its time left; after it ended, none (never 0 or less, 2 min on).
    expect(seen).toEqual([120_000, undefined, undefined]);
    stop.abort();
    await running;
    await loop;
  });

  it("reports the keys long waiting at a slow flow's cap once per wait", async () => {
    const reports: string[][] = [];
    let waits: ((key: string) => boolean) | undefined;
    const { controller, stop, running } = startController(
      async (key) => {
        if (key.startsWith("slow:")) await new Promise((r) => setTimeout(r, 50_000));
        return { kind: "done" };
      },
      {
        concurrency: 2,
        maxPerFlow: 1,
        waiting: {
          afterMs: 30_000,
          slowMs: 1_000,
          report: (keys, stillWaits) => {
            reports.push([...keys]);
            waits = stillWaits;
          },
        },
      },
    );
    for (const key of ["slow:a", "slow:b", "slow:c", "slow:d"]) controller.enqueue(key);
    // a runs 0–50 s, b 50–100 s, c 100–150 s: the flow's reconciles take 50 s each.
    await vi.advanceTimersByTimeAsync(30_000);
    // At 30 s nothing has waited more than 30 s, and the flow's reconciles are not known slow yet.
    expect(reports).toEqual([]);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(reports).toEqual([["slow:c", "slow:d"]]);
    // The report's writes ask whether a key still waits: c and d do, a (running) does not.
    expect([waits?.("slow:c"), waits?.("slow:d"), waits?.("slow:a")]).toEqual([true, true, false]);
    // c runs from 100 s, d still waits at 120 s: each wait is told once.
    await vi.advanceTimersByTimeAsync(60_000);
    expect(reports).toEqual([["slow:c", "slow:d"]]);
    expect([waits?.("slow:c"), waits?.("slow:d")]).toEqual([false, true]);
    stop.abort();
    await vi.advanceTimersByTimeAsync(50_000);
    await running;
  });
});
