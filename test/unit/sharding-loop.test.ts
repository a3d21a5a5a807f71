// When the leader's sharder passes (src/sharding/sharder-loop.ts): after a short gap, at once
// after a change, else at the period or the next Lease expiry, and never once stopped.
import { describe, expect, it } from "vitest";
import { PassSchedule, SHARDER_MIN_GAP_MS, SHARDER_PERIOD_MS } from "../../src/sharding/sharder-loop.ts";
import { ManualClock } from "../support/manual-clock.ts";

/** Lets the promise callbacks run. */
const settle = async () => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

/** The schedule's next pass from time 0, with `expiry` as the next Lease expiry: when it is due. */
async function dueAt(steps: {
  expiry?: number;
  /** Poked before waiting (a change during the pass), or at this time. */
  pokeAt?: number;
  stopAt?: number;
}): Promise<number | undefined> {
  const clock = new ManualClock();
  const schedule = new PassSchedule(clock);
  const stop = new AbortController();
  if (steps.pokeAt === 0) schedule.poke();
  let due: number | undefined;
  void schedule
    .next(stop.signal, () => steps.expiry)
    .then(() => {
      due = clock.now();
    });
  for (let t = 0; t < 3 * SHARDER_PERIOD_MS && due === undefined; t += 5) {
    if (t === steps.pokeAt) schedule.poke();
    if (t === steps.stopAt) stop.abort();
    await settle();
    if (due !== undefined) break;
    clock.advance(5);
  }
  return due;
}

describe("the sharder's schedule", () => {
  it.each([
    { case: "nothing changed: at the period", steps: {}, due: SHARDER_MIN_GAP_MS + SHARDER_PERIOD_MS },
    { case: "a change during the pass: after the gap only", steps: { pokeAt: 0 }, due: SHARDER_MIN_GAP_MS },
    { case: "a change during the gap: after the gap only", steps: { pokeAt: 100 }, due: SHARDER_MIN_GAP_MS },
    { case: "a change while waiting: at once", steps: { pokeAt: 1_000 }, due: 1_000 },
    { case: "a Lease expiring before the period: just after it", steps: { expiry: 900 }, due: 905 },
    { case: "a Lease expiring after the period: at the period", steps: { expiry: 9_000 }, due: 2_200 },
    { case: "stopped during the gap: at once", steps: { stopAt: 50 }, due: 50 },
    { case: "stopped while waiting: at once", steps: { stopAt: 700 }, due: 700 },
  ])("$case", async ({ steps, due }) => {
    expect(await dueAt(steps)).toBe(due);
  });

  it("leaves no timer behind once due", async () => {
    const clock = new ManualClock();
    const schedule = new PassSchedule(clock);
    const stop = new AbortController();
    const next = schedule.next(stop.signal, () => undefined);
    clock.advance(SHARDER_MIN_GAP_MS);
    await settle();
    schedule.poke();
    await next;
    expect(clock.pending).toBe(0);
    const stopped = schedule.next(stop.signal, () => undefined);
    stop.abort();
    await stopped;
    expect(clock.pending).toBe(0);
  });
});
