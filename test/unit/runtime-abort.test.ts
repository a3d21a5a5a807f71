// followSignal: a signal that follows a parent through the parent's one listener, instead of
// AbortSignal.any (whose registrations with its sources outlive each request); sleeps on a signal
// share that listener (onAbort), however many there are.
import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { followersOf, followSignal, onAbort, sleepOn, untilAborted } from "../../src/runtime/clock.ts";
import { ManualClock } from "../support/manual-clock.ts";

describe("followSignal", () => {
  it("aborts with the parent's reason when the parent aborts", () => {
    const parent = new AbortController();
    const followed = followSignal(parent.signal);
    expect(followed.signal.aborted).toBe(false);
    const reason = new Error("halt");
    parent.abort(reason);
    expect(followed.signal.aborted).toBe(true);
    expect(followed.signal.reason).toBe(reason);
  });

  it("aborts with the caller's reason, and the parent is untouched", () => {
    const parent = new AbortController();
    const followed = followSignal(parent.signal);
    const timeout = new DOMException("timed out", "TimeoutError");
    followed.abort(timeout);
    expect(followed.signal.reason).toBe(timeout);
    expect(parent.signal.aborted).toBe(false);
    // A later abort of the parent changes nothing: the first reason stays.
    parent.abort(new Error("later"));
    expect(followed.signal.reason).toBe(timeout);
  });

  it("puts one listener on the parent however many follow it, and a released one is not aborted", async () => {
    const parent = new AbortController();
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on("warning", onWarning);
    const many = Array.from({ length: 50 }, () => followSignal(parent.signal));
    expect(getEventListeners(parent.signal, "abort")).toHaveLength(1);
    const [released, ...others] = many;
    released?.release();
    const reason = new Error("halt");
    parent.abort(reason);
    expect(released?.signal.aborted).toBe(false);
    expect(others.every((f) => f.signal.reason === reason)).toBe(true);
    await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
    process.off("warning", onWarning);
    expect(warnings).toEqual([]);
  });

  it("takes its listener off the parent once the last follower is released", () => {
    const parent = new AbortController();
    const many = Array.from({ length: 3 }, () => followSignal(parent.signal));
    expect(followersOf(parent.signal)).toBe(3);
    for (const followed of many) followed.release();
    expect(followersOf(parent.signal)).toBe(0);
    expect(getEventListeners(parent.signal, "abort")).toHaveLength(0);
  });

  it("follows again after every follower was released", () => {
    const parent = new AbortController();
    followSignal(parent.signal).release();
    const later = followSignal(parent.signal);
    expect(getEventListeners(parent.signal, "abort")).toHaveLength(1);
    parent.abort(new Error("halt"));
    expect(later.signal.aborted).toBe(true);
  });

  it("is aborted at once, with no listener, when the parent already is", () => {
    const parent = new AbortController();
    const reason = new Error("gone");
    parent.abort(reason);
    const followed = followSignal(parent.signal);
    expect(followed.signal.aborted).toBe(true);
    expect(followed.signal.reason).toBe(reason);
    expect(getEventListeners(parent.signal, "abort")).toHaveLength(0);
    followed.release();
  });

  it("without a parent is a plain signal the caller aborts", () => {
    const followed = followSignal(undefined);
    expect(followed.signal.aborted).toBe(false);
    followed.abort(new Error("timeout"));
    expect(followed.signal.aborted).toBe(true);
    followed.release();
  });
});

describe("untilAborted", () => {
  it("resolves when the signal aborts first, and leaves no listener once the promise settles", async () => {
    const stop = new AbortController();
    const waiting = untilAborted(new Promise(() => {}), stop.signal);
    stop.abort();
    await expect(waiting).resolves.toBeUndefined();
    const other = new AbortController();
    await untilAborted(Promise.resolve(), other.signal);
    expect(getEventListeners(other.signal, "abort")).toHaveLength(0);
  });
});

describe("onAbort and sleepOn", () => {
  it("put one listener on a signal however many sleep on it, and none once every sleep resolved", async () => {
    const clock = new ManualClock();
    const stop = new AbortController();
    const before = getEventListeners(stop.signal, "abort").length;
    const sleeps = Array.from({ length: 200 }, (_, i) => sleepOn(clock, 1_000 + i, stop.signal));
    expect(getEventListeners(stop.signal, "abort")).toHaveLength(1);
    expect(followersOf(stop.signal)).toBe(200);
    clock.advance(1_100);
    // The first 101 resolved and let go of the signal; the rest still wait on the one listener.
    expect(followersOf(stop.signal)).toBe(99);
    expect(getEventListeners(stop.signal, "abort")).toHaveLength(1);
    clock.advance(100);
    await Promise.all(sleeps);
    expect(followersOf(stop.signal)).toBe(0);
    expect(getEventListeners(stop.signal, "abort")).toHaveLength(before);
  });

  it("reject every sleep at once with the signal's reason when it aborts, their timers cancelled", async () => {
    const clock = new ManualClock();
    const stop = new AbortController();
    const sleeps = Array.from({ length: 200 }, () => sleepOn(clock, 1_000, stop.signal));
    // A follower of the same signal is aborted by the same listener.
    const followed = followSignal(stop.signal);
    const reason = new Error("halt");
    stop.abort(reason);
    expect(followed.signal.reason).toBe(reason);
    const outcomes = await Promise.allSettled(sleeps);
    expect(outcomes.every((o) => o.status === "rejected" && o.reason === reason)).toBe(true);
    expect(clock.pending).toBe(0);
    expect(followersOf(stop.signal)).toBe(0);
    expect(getEventListeners(stop.signal, "abort")).toHaveLength(0);
    await expect(sleepOn(clock, 1_000, stop.signal)).rejects.toBe(reason);
  });

  it("stops a wait when told, twice harmlessly, and runs the same function given twice twice", () => {
    const stop = new AbortController();
    const runs: string[] = [];
    const fn = () => runs.push("fn");
    const first = onAbort(stop.signal, fn);
    onAbort(stop.signal, fn);
    const gone = onAbort(stop.signal, () => runs.push("gone"));
    gone();
    gone();
    first();
    first();
    expect(followersOf(stop.signal)).toBe(1);
    stop.abort();
    expect(runs).toEqual(["fn"]);
    expect(getEventListeners(stop.signal, "abort")).toHaveLength(0);
    // A signal that has aborted runs nothing later given.
    onAbort(stop.signal, fn)();
    expect(runs).toEqual(["fn"]);
  });
});
