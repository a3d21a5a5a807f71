// The real clocks. The client's: waits honour their signal the way every Clock's do (sleepOn), and
// `now` reads a monotonic source (only differences matter to the client). Both: a delay longer
// than a Node timer holds is waited as the longest one, never as 1 ms.
import { describe, expect, it } from "vitest";
import { MAX_TIMER_MS, systemApiClock, systemClock } from "../../src/runtime/clock.ts";

describe("systemApiClock", () => {
  it("waits at least the time asked, measured on its own now()", async () => {
    const before = systemApiClock.now();
    await systemApiClock.sleep(20);
    expect(systemApiClock.now() - before).toBeGreaterThanOrEqual(19);
  });

  it("rejects a wait with the signal's own reason, at once when it already aborted", async () => {
    const reason = new Error("request cancelled");
    const controller = new AbortController();
    const waiting = systemApiClock.sleep(60_000, controller.signal);
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    await expect(systemApiClock.sleep(60_000, controller.signal)).rejects.toBe(reason);
  });
});

describe("the real clocks' longest wait", () => {
  it("holds a delay past a timer's range (a tenant's `1000h`, a Retry-After of years) as the longest, not as 1 ms", async () => {
    const warnings: string[] = [];
    const hear = (w: Error) => void warnings.push(w.name);
    process.on("warning", hear);
    const fired: string[] = [];
    const cancels = [3_600_000_000, MAX_TIMER_MS + 1, Number.POSITIVE_INFINITY].map((ms) =>
      systemClock.setTimer(ms, () => fired.push(`setTimer ${ms}`)),
    );
    const stop = new AbortController();
    const sleeping = systemApiClock.sleep(3_600_000_000, stop.signal).then(
      () => fired.push("sleep"),
      () => undefined,
    );
    try {
      // Node runs an overflowing timer after 1 ms; these 50 ms are timed after all of them.
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(fired).toEqual([]);
      expect(warnings).not.toContain("TimeoutOverflowWarning");
    } finally {
      for (const cancel of cancels) cancel();
      stop.abort();
      await sleeping;
      process.off("warning", hear);
    }
  });
});
