// A connection's status as its probe writes it (src/connection/status.ts `connectionStatusFrom`)
// over a status another writer added to: a condition of a type the operator does not set goes.
import { describe, expect, it } from "vitest";
import {
  CONNECTION_CONDITION_TYPES,
  type ConnectionStatusInput,
  connectionStatusFrom,
} from "../../src/connection/status.ts";

const T0 = new Date("2030-01-01T00:00:00Z");
const T1 = new Date("2030-01-01T00:05:00Z");
const input: ConnectionStatusInput = {
  previous: undefined,
  generation: 1,
  verdict: { ok: true, reason: "Connected", message: "the service answered", providers: 2 },
  holding: undefined,
  counts: { users: 3, refused: 0 },
  probedAt: T0.getTime(),
  now: T0,
};
const condition = (type: string) => ({
  type,
  status: "True" as const,
  reason: "Lagging",
  message: "m",
  lastTransitionTime: "2029-12-01T00:00:00Z",
});

describe("connectionStatusFrom: conditions read", () => {
  it("drops a condition of a type it does not set (it could not keep it current), keeps its own", () => {
    expect([...CONNECTION_CONDITION_TYPES]).toEqual([
      "Ready",
      "Reconciling",
      "Stalled",
      "OpenToAllNamespaces",
    ]);
    const open = connectionStatusFrom({ ...input, openToAll: true });
    const previous = { ...open, conditions: [...(open.conditions ?? []), condition("Degraded")] };
    const next = connectionStatusFrom({ ...input, previous, openToAll: true, now: T1 });
    expect(next.conditions?.map((c) => c.type)).toEqual(["Ready", "OpenToAllNamespaces"]);
    expect(next.conditions).toEqual(open.conditions);
    // With no verdict yet, Ready is kept as it was, and the other type goes all the same.
    const waiting = connectionStatusFrom({ ...input, previous, verdict: undefined, openToAll: true });
    expect(waiting.conditions?.map((c) => c.type)).toEqual(["Ready", "OpenToAllNamespaces"]);
  });
});
