// A connection's status as its probe writes it (src/connection/status.ts `connectionStatusFrom`)
// over a status a newer release wrote: the operator rolled back to this version with its CRDs
// managed apart, the newer CRD (and its status fields) left in place. A field this version does
// not know is kept as read; a condition of a type it does not set goes.
import { describe, expect, it } from "vitest";
import {
  CONNECTION_CONDITION_TYPES,
  type ConnectionStatusInput,
  connectionStatusFrom,
} from "../../src/connection/status.ts";
import type { ConnectionStatus } from "../../src/crd/connection-schema.ts";
import { statusEqual } from "../../src/runtime/json.ts";

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
const ours = connectionStatusFrom(input);
/** A newer release's record, valid under its CRD, which this version's schema does not name. */
const checked = { endpoint: "/v3/health", at: "2030-01-01T00:00:00Z" };
const newer = (status: ConnectionStatus, extra: object = {}) =>
  ({ ...status, healthCheck: checked, ...extra }) as ConnectionStatus;
const unknownOf = (status: ConnectionStatus) => (status as Record<string, unknown>).healthCheck;
const condition = (type: string) => ({
  type,
  status: "True" as const,
  reason: "Lagging",
  message: "m",
  lastTransitionTime: "2029-12-01T00:00:00Z",
});

describe("connectionStatusFrom: a status a newer release wrote (the operator rolled back, its CRD kept)", () => {
  it("keeps a field it does not know as read, of any name (__proto__ included) or size, and writes nothing for it", () => {
    const big = "x".repeat(1_000_000);
    const previous = { ...JSON.parse('{"__proto__": {"kept": true}}'), ...newer(ours), newerLog: big };
    // The same probe again: nothing moved, so the compare that skips a write finds it equal.
    const next = connectionStatusFrom({ ...input, previous, now: T1 });
    expect(statusEqual(previous, next)).toBe(true);
    // The same values, not copies: nothing of them is read, walked or compared deeply.
    expect(unknownOf(next)).toBe(checked);
    expect((next as Record<string, unknown>).newerLog).toBe(big);
    expect(Object.hasOwn(next, "__proto__")).toBe(true);
    expect(JSON.stringify(next)).toContain('"__proto__":{"kept":true}');
    // Kept whatever the verdict, and through a held deletion.
    const failed = connectionStatusFrom({
      ...input,
      previous,
      verdict: { ok: false, reason: "Unreachable", message: "refused", transient: true },
      holding: { reason: "InUse", message: "used by 3" },
      now: T1,
    });
    expect(unknownOf(failed)).toBe(checked);
    expect(failed.conditions?.map((c) => c.type)).toEqual(["Ready", "Reconciling"]);
  });

  it("writes each field it knows as it computes it, never as read (another writer's value goes)", () => {
    const previous = newer(ours, { deployments: 9, refused: 4, observedGeneration: 0 });
    const next = connectionStatusFrom({ ...input, previous, counts: { users: 1, refused: 0 }, now: T1 });
    expect(next).toMatchObject({ deployments: 1, refused: 0, observedGeneration: 1, healthCheck: checked });
  });
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
