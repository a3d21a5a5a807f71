// An optional route of the service, as one connection knows it: off once the service says it has
// none, said once in the log, and not asked again (the revision tracker, the log reader and the
// redeployer each hold one).
import { describe, expect, it } from "vitest";
import { OptionalRoute } from "../../src/reconcile/service/optional-route.ts";
import { LogCapture } from "../support/logs.ts";

class RouteMissing extends Error {}
const isMissing = (error: unknown) => error instanceof RouteMissing;

describe("OptionalRoute", () => {
  it("is present until the service answers that it has no such route", () => {
    const logs = new LogCapture();
    const route = new OptionalRoute(logs.logger);
    expect(route.missing).toBeUndefined();
    expect(route.turnsOff(new Error("503"), isMissing, "the service has no logs route", "no tails")).toBe(
      false,
    );
    expect(route.missing).toBeUndefined();
    expect(logs.lines).toEqual([]);
  });

  it("turns the feature off for the connection, and says so once", () => {
    const logs = new LogCapture();
    const route = new OptionalRoute(logs.logger);
    const why = "the service has no logs route";
    expect(route.turnsOff(new RouteMissing("404"), isMissing, why, "no tails", true)).toBe(true);
    expect(route.turnsOff(new RouteMissing("404"), isMissing, why, "no tails", true)).toBe(true);
    expect(route.missing).toBe(why);
    expect(logs.messages()).toEqual(["the service has no logs route: no tails"]);
    expect(logs.lines[0]?.record.err).toBe("404");
  });

  it("off by configuration from the start: nothing said", () => {
    const logs = new LogCapture();
    const route = new OptionalRoute(logs.logger, "revision tracking is off by configuration");
    expect(route.missing).toBe("revision tracking is off by configuration");
    expect(logs.lines).toEqual([]);
  });
});
