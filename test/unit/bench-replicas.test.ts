import { describe, expect, it } from "vitest";
import { byProcess, callsGoal, callsPerResync, type TappedCall } from "../bench/replicas.ts";

// The sharded bench counts what one resync costs over all replicas, although a window of one
// period may hold no pass of a replica, or two, or one cut at its edge.

/** `count` reads of `replica` from `at`, 50 ms apart (one pass's batches). */
const pass = (replica: string, at: number, count: number): TappedCall[] =>
  Array.from({ length: count }, (_, i) => ({ replica, at: at + i * 50, read: true }));

describe("callsPerResync", () => {
  it("averages each replica's passes whole in the window and sums the replicas", () => {
    const calls = [
      ...pass("a", 10_000, 11),
      ...pass("a", 80_000, 11),
      // b's first pass is cut by the window's start: only its whole second one counts.
      ...pass("b", 0, 4),
      ...pass("b", 70_000, 10),
      // c made one pass only in the window.
      ...pass("c", 50_000, 10),
    ];
    expect(callsPerResync(calls, 0, 120_000, 60_000)).toEqual({
      total: 31,
      byReplica: { a: 11, b: 10, c: 10 },
    });
  });

  it("scales a replica's other calls (lookups, creates, probes) to one period", () => {
    const calls: TappedCall[] = [
      ...pass("a", 10_000, 10),
      { replica: "a", at: 20_000, read: false },
      { replica: "a", at: 90_000, read: false },
    ];
    expect(callsPerResync(calls, 0, 120_000, 60_000).byReplica).toEqual({ a: 11 });
  });

  it("keeps a slow pass whole: a hundred reads, some 4 s apart (a service answering slowly), are one pass", () => {
    // 500 ms apart, and 4 s after every tenth: 81 s for the pass.
    const slow = (replica: string, at: number): TappedCall[] => {
      let t = at;
      return Array.from({ length: 100 }, (_, i) => {
        if (i > 0) t += i % 10 === 0 ? 4_000 : 500;
        return { replica, at: t, read: true };
      });
    };
    // Passes a period (60 s) and more after the last one ended.
    const calls = [...slow("a", 0), ...slow("a", 150_000), ...slow("a", 300_000)];
    expect(callsPerResync(calls, 0, 400_000, 60_000).byReplica).toEqual({ a: 100 });
  });

  it("counts the passes cut at the window's edges when none is whole", () => {
    expect(callsPerResync(pass("a", 1_000, 5), 0, 60_000, 60_000).total).toBe(5);
  });
});

describe("callsGoal", () => {
  it("is ⌈N/100⌉ and two per replica", () => {
    expect(callsGoal(3_000, 3)).toBe(36);
    expect(callsGoal(3_001, 2)).toBe(35);
  });
});

describe("byProcess", () => {
  it("sums the operators, names the leader's, and rounds each to 0.1", () => {
    const spent = {
      apiServer: 28.24,
      etcd: 2.06,
      benchmark: 6.44,
      "replica-2": 3.01,
      "replica-0": 4.96,
      "replica-3": 4.9,
    };
    expect(byProcess(spent, "replica-0")).toEqual({
      apiServer: 28.2,
      etcd: 2.1,
      operators: 12.9,
      benchmark: 6.4,
      "replica-0 (leader)": 5,
      "replica-2": 3,
      "replica-3": 4.9,
    });
    // In that order: the servers, the operators in all, the benchmark, then each replica by name.
    expect(Object.keys(byProcess(spent, undefined))).toEqual([
      "apiServer",
      "etcd",
      "operators",
      "benchmark",
      "replica-0",
      "replica-2",
      "replica-3",
    ]);
  });
});
