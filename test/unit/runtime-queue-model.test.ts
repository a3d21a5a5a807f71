/**
 * WorkQueue against a model: random keys of random flows and parts are added (now, later, as
 * follow-ups and resyncs, rate limited), workers ask for keys, give up waiting (their signal
 * aborts) and end their keys, and time moves, on a manual clock. After every step a key is held
 * by one worker at most, the caps hold (borrowing off), no worker waits while a key it may take is
 * ready, and no flow below its cap with a key ready is passed twice by another; at the end every
 * key added since its last hand-out is handed out again, and the queue holds nothing.
 */
import { describe, expect, it } from "vitest";
import { type KeyFlow, WorkQueue } from "../../src/runtime/queue.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { seeded } from "../support/seeded.ts";

function assert(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(message);
}

/** Keys `<flow>:<part>/<name>`, or `<flow>:<name>` for a key of the flow's one part. */
const flowOf = (key: string): KeyFlow => {
  const [flow = "", rest = ""] = key.split(":");
  const part = rest.includes("/") ? rest.slice(0, rest.indexOf("/")) : undefined;
  return part === undefined ? { flow } : { flow, part };
};
const partOf = (key: string) => {
  const { flow, part = "" } = flowOf(key);
  return `${flow}\0${part}`;
};

async function settle(): Promise<void> {
  for (let i = 0; i < 4; i++) await Promise.resolve();
}

interface Getter {
  stop: AbortController | undefined;
  key: string | undefined | "waiting";
}

async function run(seed: number, borrowing: boolean): Promise<void> {
  const random = seeded(seed);
  const clock = new ManualClock();
  const cap = 1 + random.int(3);
  const workers = random.chance(0.5) ? undefined : cap + random.int(6);
  const queue = new WorkQueue({
    clock,
    flowOf,
    maxPerFlow: cap,
    borrowMs: borrowing ? 1 + random.int(50) : 0,
    ...(workers === undefined ? {} : { workers }),
    backoff: { baseMs: 5, maxMs: 40 },
  });
  const keys: string[] = [];
  for (const flow of ["f0", "f1", "f2", "f3"])
    for (const part of ["", "p0/", "p1/"])
      for (const name of ["k0", "k1", "k2"]) keys.push(`${flow}:${part}${name}`);
  const getters: Getter[] = [];
  /** The keys held, in flight. */
  const held = new Set<string>();
  /** Keys added since their last hand-out. */
  const owed = new Set<string>();
  const handedOut: string[] = [];
  /** The flows waiting their turn, and those served since each began to. */
  const passed = new Map<string, Set<string>>();

  const get = () => {
    const getter: Getter = { stop: random.chance(0.4) ? new AbortController() : undefined, key: "waiting" };
    getters.push(getter);
    void queue.get(getter.stop?.signal).then((key) => {
      getter.key = key;
      if (key === undefined) return;
      assert(!held.has(key), `${key} handed out twice`);
      held.add(key);
      owed.delete(key);
      handedOut.push(key);
    });
  };
  const waitingGetters = () => getters.filter((g) => g.key === "waiting" && !g.stop?.signal.aborted);

  const inFlightBy = (of: (key: string) => string) => {
    const counts = new Map<string, number>();
    for (const key of held) counts.set(of(key), (counts.get(of(key)) ?? 0) + 1);
    return counts;
  };
  /** Flows with a ready key in a part below the cap, the flow below it too. */
  const eligibleFlows = () => {
    const flows = inFlightBy((k) => flowOf(k).flow);
    const parts = inFlightBy(partOf);
    const out = new Set<string>();
    for (const key of keys)
      if (
        queue.isReady(key) &&
        (flows.get(flowOf(key).flow) ?? 0) < cap &&
        (parts.get(partOf(key)) ?? 0) < cap
      )
        out.add(flowOf(key).flow);
    return out;
  };

  const check = () => {
    assert(queue.inFlight().count === held.size, `in flight ${queue.inFlight().count}, held ${held.size}`);
    if (!borrowing) {
      for (const [flow, n] of inFlightBy((k) => flowOf(k).flow)) assert(n <= cap, `${flow} over its cap`);
      for (const [part, n] of inFlightBy(partOf)) assert(n <= cap, `${part} over its cap`);
      if (workers !== undefined) assert(held.size <= workers, "over the workers");
    }
    // No worker waits while a key it may take is ready.
    if (waitingGetters().length > 0 && (workers === undefined || held.size < workers))
      assert(eligibleFlows().size === 0, "a worker waits while a key it may take is ready");
  };

  for (let i = 0; i < 250; i++) {
    const eligible = eligibleFlows();
    const before = handedOut.length;
    const dice = random.next();
    const key = random.pick(keys);
    if (dice < 0.2) queue.add(key);
    else if (dice < 0.3)
      queue.addAfter(key, random.int(30), random.pick([{}, { followUp: true }, { resync: true }]));
    else if (dice < 0.35) queue.addRateLimited(key);
    else if (dice < 0.37) queue.forget(key);
    else if (dice < 0.55) get();
    else if (dice < 0.62) {
      const waiting = waitingGetters().filter((g) => g.stop !== undefined);
      if (waiting.length > 0) random.pick(waiting).stop?.abort();
    } else if (dice < 0.85) {
      if (held.size > 0) {
        const done = random.pick([...held]);
        held.delete(done);
        queue.done(done);
      }
    } else clock.advance(random.int(20));
    // What an add's bookkeeping owes: each add now or later is handed out after it.
    if (dice < 0.35) owed.add(key);
    await settle();
    check();
    // No flow below its cap with a key ready is passed twice by another before its turn: a flow
    // waits its turn from the first step it is seen so until it is served.
    for (const flow of passed.keys()) if (!eligible.has(flow)) passed.delete(flow);
    for (const flow of eligible) if (!passed.has(flow)) passed.set(flow, new Set());
    for (const key of handedOut.slice(before)) {
      const served = flowOf(key).flow;
      passed.delete(served);
      for (const [flow, by] of passed) {
        assert(!by.has(served), `${served} served twice while ${flow} waited its turn`);
        by.add(served);
      }
    }
  }
  // Drain: time moves past every delay and backoff, and the workers end what they hold.
  for (let round = 0; round < 200 && (owed.size > 0 || held.size > 0 || queue.delayedCount > 0); round++) {
    for (const key of [...held]) {
      held.delete(key);
      queue.done(key);
    }
    clock.advance(1_000);
    while (waitingGetters().length < 4) get();
    await settle();
    check();
  }
  expect([...owed]).toEqual([]);
  expect(held.size).toBe(0);
  expect(queue.length).toBe(0);
  expect(queue.delayedCount).toBe(0);
  expect(queue.waitingAtCap().size).toBe(0);
  queue.shutDown();
  await settle();
  expect(waitingGetters()).toEqual([]);
  await queue.drained();
}

describe("WorkQueue, against a model", () => {
  it("caps, hand-outs, turns and the drain hold with borrowing off (120 seeds)", async () => {
    for (let seed = 1; seed <= 120; seed++) await run(seed * 2654435761, false);
  });

  it("hand-outs, turns and the drain hold with borrowing on (120 seeds)", async () => {
    for (let seed = 1; seed <= 120; seed++) await run(seed * 40503, true);
  });
});
