import { describe, expect, it } from "vitest";
import {
  byProcess,
  callsGoal,
  callsPerResync,
  ofReplicaRepeats,
  type ReplicaFigures,
  replicasTable,
  serviceRate,
  steadyLeader,
  type TappedCall,
} from "../bench/replicas.ts";

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

describe("serviceRate", () => {
  /** `count` creates of `replica` from `at`, `gapMs` apart. */
  const creates = (replica: string, at: number, count: number, gapMs: number): TappedCall[] =>
    Array.from({ length: count }, (_, i) => ({ replica, at: at + i * gapMs, read: false, kind: "create" }));

  it("sums the replicas, and finds the busiest window wherever it starts", () => {
    const calls = [
      // 20 s at 40/s and 10/s: 50/s together.
      ...creates("a", 1_000, 800, 25),
      ...creates("b", 1_000, 200, 100),
      // A burst of 40 from a third replica, inside one second, at 25.5 s.
      ...creates("c", 25_500, 40, 10),
    ];
    const rate = serviceRate(calls, 1_000, 31_000);
    expect(rate.average).toBe(34.7);
    expect(rate.peak1s).toBe(50);
    // The burst alone, and the 10 s before 21 s at 50/s.
    expect(rate.peak10s).toBe(50);
    const both = serviceRate([...calls, ...creates("c", 20_500, 40, 10)], 1_000, 31_000);
    // A window of 1 s over the last creates of a and b (50) and the second burst (40).
    expect(both.peak1s).toBe(90);
    expect(both.peak10s).toBe(54);
  });

  it("counts only the service's calls on /v2/deployments inside the phase", () => {
    const calls: TappedCall[] = [
      ...creates("a", 0, 10, 10),
      { replica: "a", at: 5_000, read: false },
      ...creates("a", 20_000, 10, 10),
    ];
    expect(serviceRate(calls, 1_000, 11_000)).toEqual({ average: 0, peak1s: 0, peak10s: 0 });
    expect(serviceRate([], 0, 0)).toEqual({ average: 0, peak1s: 0, peak10s: 0 });
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

/**
 * A run's figures, only what the combination reads filled in: each replica's (peak, steady), the
 * leader being replica `leader` (killed as the leader later, as the benchmark does).
 */
function run(adoptionSeconds: number, leader: number, ...rss: Array<[number, number]>): ReplicaFigures {
  return {
    replicas: rss.length,
    n: 3000,
    loadAverage: { start: adoptionSeconds, end: 2 },
    adoptionSeconds,
    rssMiB: rss.map(([peak, steady], i) => ({
      replica: `replica-${i}`,
      share: i === leader ? 600 : 1000,
      peak,
      steady,
    })),
    resync: { serviceCalls: 33, kubeRequestsPerResource: 0 },
    kill: {
      replica: "replica-9",
      share: 0.3,
      reownedSeconds: 20,
      reconciledSeconds: 20,
      leader: { replica: `replica-${leader}`, share: 0.2, reownedSeconds: 20, reconciledSeconds: 20 },
    },
    join: { from: 3, to: 4, moved: 700, share: 0.23, ideal: 0.278 },
  } as unknown as ReplicaFigures;
}

describe("ofReplicaRepeats", () => {
  it("gives the leader's and the members' peak and steady RSS as medians over the runs, by role", () => {
    // The leader is another replica in each run: replica-1, then replica-0, then replica-2.
    const runs = [
      run(10, 1, [140, 110], [120, 100], [138, 109]),
      run(20, 0, [130, 104], [150, 112], [145, 111]),
      run(30, 2, [135, 108], [136, 107], [125, 102]),
    ];
    const combined = ofReplicaRepeats(runs);
    expect(combined.repeats?.peakMiB.leader).toEqual({
      median: 125,
      min: 120,
      max: 130,
      runs: { "1": 120, "2": 130, "3": 125 },
    });
    expect(combined.repeats?.peakMiB.members.median).toBe(139);
    expect(combined.repeats?.peakMiB.members.runs).toEqual({
      "1 replica-0": 140,
      "1 replica-2": 138,
      "2 replica-1": 150,
      "2 replica-2": 145,
      "3 replica-0": 135,
      "3 replica-1": 136,
    });
    expect(combined.repeats?.steadyMiB.leader.median).toBe(102);
    // The mean of the middle two, rounded as the figures are: (89.7 + 89.9) / 2 is 89.800…01.
    const tenths = ofReplicaRepeats([
      run(10, 0, [120, 100], [130, 89.7], [131, 89.9]),
      run(20, 0, [121, 100], [130, 89.7], [131, 89.9]),
    ]);
    expect(tenths.repeats?.steadyMiB.members.median).toBe(89.8);
    expect(combined.repeats?.peakMiB.largest).toEqual({
      median: 140,
      min: 136,
      max: 150,
      runs: { "1": 140, "2": 150, "3": 136 },
    });
    expect(combined.repeats?.runs).toBe(3);
    expect(combined.repeats?.each.map((e) => e.leader)).toEqual(["replica-1", "replica-0", "replica-2"]);
    // Every other figure, the replicas' own RSS included, is one real run's: the one whose largest
    // peak is the median (140: run 1).
    expect(combined.adoptionSeconds).toBe(10);
    expect(combined.rssMiB).toEqual(runs[0]?.rssMiB);
    expect(replicasTable([combined]).rows[0]?.[2]).toBe(
      "leader 125 (120–130); members 139 (135–150) (3 runs)",
    );
    expect(replicasTable([runs[1] as ReplicaFigures]).rows[0]?.[2]).toBe("130 / 150 / 145");
  });

  it("takes the smallest share for the leader when no leader was killed", () => {
    const older = run(10, 2, [120, 100], [130, 104], [110, 90]);
    delete (older.kill as { leader?: unknown }).leader;
    expect(steadyLeader(older)).toBe("replica-2");
  });

  it("leaves one run as it is", () => {
    const one = run(10, 0, [120, 100]);
    expect(ofReplicaRepeats([one])).toBe(one);
    expect(() => ofReplicaRepeats([])).toThrow(/no runs/);
  });
});
