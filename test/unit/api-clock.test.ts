// The client's real clock: waits honour their signal the way every Clock's do (sleepOn), and
// `now` reads a monotonic source (only differences matter to the client).
import { describe, expect, it } from "vitest";
import { systemApiClock } from "../../src/runtime/clock.ts";

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
