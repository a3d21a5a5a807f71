import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { LeaderElector } from "../../src/runtime/leader.ts";
import { Manager, type Runnable, ShutdownTimeoutError } from "../../src/runtime/manager.ts";
import { MemoryLease } from "./runtime-memory-lease.ts";

beforeEach(() => {
  vi.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

/**
 * A runnable that records its life: each start, whether its stop/halt signals fired, and it
 * "finishes in-flight work" for `drainMs` after its stop signal before resolving.
 */
function recorder(name: string, needLeaderElection: boolean, drainMs = 0, lease?: MemoryLease) {
  const runs: Array<{
    startedAt: number;
    stoppedAt?: number;
    halted: boolean;
    holderAtEnd?: string | undefined;
  }> = [];
  const runnable: Runnable = {
    name,
    needLeaderElection,
    start: (signal, halt) =>
      new Promise<void>((resolve) => {
        const run: (typeof runs)[number] = { startedAt: Date.now(), halted: false };
        runs.push(run);
        const finish = () => {
          if (run.stoppedAt !== undefined) return;
          run.stoppedAt = Date.now();
          run.holderAtEnd = lease?.holder;
          resolve();
        };
        halt.addEventListener("abort", () => {
          if (run.stoppedAt === undefined) run.halted = true;
          finish();
        });
        signal.addEventListener("abort", () => setTimeout(finish, drainMs), { once: true });
      }),
  };
  return { runnable, runs };
}

function elector(lease: MemoryLease, identity: string) {
  const port = lease.port(identity);
  return { port, elector: new LeaderElector({ lease: port, identity, random: () => 0 }) };
}

describe("Manager", () => {
  it("starts leader-gated runnables only while leading, and halts them at once when the lease is lost", async () => {
    const lease = new MemoryLease();
    const other = elector(lease, "other");
    const otherStop = new AbortController();
    void other.elector.run(
      otherStop.signal,
      () => new Promise((r) => otherStop.signal.addEventListener("abort", () => r())),
    );
    await vi.advanceTimersByTimeAsync(0);

    const me = elector(lease, "me");
    const manager = new Manager({ elector: me.elector });
    const informer = recorder("informer", false);
    const controller = recorder("controller", true);
    manager.add(informer.runnable);
    manager.add(controller.runnable);
    const root = new AbortController();
    const running = manager.start(root.signal);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(informer.runs).toHaveLength(1);
    expect(controller.runs).toHaveLength(0);

    otherStop.abort(); // the other instance shuts down and hands the lease over
    await vi.advanceTimersByTimeAsync(3_000);
    expect(lease.holder).toBe("me");
    expect(controller.runs).toHaveLength(1);

    me.port.down = true; // partitioned from the API server
    await vi.advanceTimersByTimeAsync(12_000);
    expect(controller.runs[0]?.halted).toBe(true);
    expect(controller.runs[0]?.stoppedAt).toBeLessThanOrEqual(1_000_000 + 33_000 + 10_000);
    expect(informer.runs[0]?.stoppedAt).toBeUndefined();

    me.port.down = false; // back: campaigns again and, once the stale lease expired, leads again
    await vi.advanceTimersByTimeAsync(30_000);
    expect(controller.runs).toHaveLength(2);
    root.abort();
    await vi.advanceTimersByTimeAsync(0);
    await running;
  });

  it("shuts down gracefully: intake stops, in-flight work finishes, then the lease is released", async () => {
    const lease = new MemoryLease();
    const me = elector(lease, "me");
    const manager = new Manager({ elector: me.elector });
    const controller = recorder("controller", true, 20_000, lease);
    manager.add(controller.runnable);
    const root = new AbortController();
    const running = manager.start(root.signal);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(controller.runs).toHaveLength(1);
    root.abort();
    let done = false;
    void running.then(() => {
      done = true;
    });
    await vi.advanceTimersByTimeAsync(19_000);
    expect(done).toBe(false);
    expect(lease.holder).toBe("me");
    await vi.advanceTimersByTimeAsync(1_000);
    expect(done).toBe(true);
    expect(controller.runs[0]?.halted).toBe(false);
    // The lease was still ours while the work drained, and released only after it finished.
    expect(controller.runs[0]?.holderAtEnd).toBe("me");
    expect(lease.holder).toBe("");
  });

  it("halts work and fails when shutdown exceeds the deadline", async () => {
    const manager = new Manager({ shutdownTimeoutMs: 30_000 });
    const stuck = recorder("stuck", false, 3_600_000);
    manager.add(stuck.runnable);
    const root = new AbortController();
    const running = manager.start(root.signal);
    const outcome = running.then(
      () => "resolved",
      (err: unknown) => err,
    );
    await vi.advanceTimersByTimeAsync(1_000);
    root.abort();
    await vi.advanceTimersByTimeAsync(30_000);
    expect(await outcome).toBeInstanceOf(ShutdownTimeoutError);
    expect(stuck.runs[0]?.halted).toBe(true);
  });

  it("runs leader-gated runnables at once when leader election is disabled, and drains them on shutdown", async () => {
    const manager = new Manager();
    const controller = recorder("controller", true, 5_000);
    manager.add(controller.runnable);
    const root = new AbortController();
    const running = manager.start(root.signal);
    await vi.advanceTimersByTimeAsync(0);
    expect(controller.runs).toHaveLength(1);
    root.abort();
    let done = false;
    void running.then(() => {
      done = true;
    });
    // Shutdown waits for the in-flight work instead of halting it.
    await vi.advanceTimersByTimeAsync(4_999);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(done).toBe(true);
    expect(controller.runs[0]).toMatchObject({ halted: false, stoppedAt: 1_000_000 + 5_000 });
  });

  it("stops everything and rejects when a runnable fails", async () => {
    const manager = new Manager();
    const healthy = recorder("informer", false);
    manager.add(healthy.runnable);
    manager.add({
      name: "broken",
      needLeaderElection: false,
      start: async () => {
        throw new Error("watch permission denied");
      },
    });
    const running = manager.start(new AbortController().signal);
    const outcome = running.then(
      () => undefined,
      (err: unknown) => err,
    );
    await vi.advanceTimersByTimeAsync(0);
    const err = await outcome;
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toBe("broken failed: watch permission denied");
    expect((err as Error).cause).toEqual(new Error("watch permission denied"));
    expect(healthy.runs[0]?.stoppedAt).toBeDefined();
  });
});
