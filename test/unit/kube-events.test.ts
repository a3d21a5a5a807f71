// The event recorder's series, against a fake API server that records what it is sent: a repeat
// patches its series, series are forgotten least recently seen first (at most `maxTracked`), and
// an expired one starts a new Event.
import { describe, expect, it } from "vitest";
import type { KubeClient, KubeRequest } from "../../src/kube/client.ts";
import { type EventInput, type EventRegarding, KubeEventRecorder } from "../../src/kube/events.ts";
import { ManualClock } from "../support/manual-clock.ts";

function recorder(options: { maxTracked?: number; dedupeWindowMs?: number } = {}) {
  const sent: KubeRequest[] = [];
  const client = { request: async (req: KubeRequest) => void sent.push(req) } as unknown as KubeClient;
  const clock = new ManualClock({ start: 1_000_000 });
  const events = new KubeEventRecorder({ client, reportingInstance: "test", clock, ...options });
  /** The kind of write each record caused: a new Event or a series patch. */
  const writes = () => sent.map((r) => (r.method === "POST" ? "create" : "patch"));
  return { events, clock, writes };
}

const about = (name: string): EventRegarding => ({
  apiVersion: "dms.dev/v1alpha1",
  kind: "Deployment",
  namespace: "ns",
  name,
  uid: `uid-${name}`,
});
const created: EventInput = { type: "Normal", reason: "Created", action: "Reconcile", note: "created" };

describe("KubeEventRecorder series", () => {
  it("patches the series of a repeat and creates an Event for a different note", async () => {
    const { events, writes } = recorder();
    await events.record(about("a"), created);
    await events.record(about("a"), created);
    await events.record(about("a"), { ...created, note: "created again" });
    expect(writes()).toEqual(["create", "patch", "create"]);
  });

  it("forgets the least recently seen series first, a repeat counting as seen", async () => {
    const { events, clock, writes } = recorder({ maxTracked: 3 });
    for (const name of ["a", "b", "c"]) {
      await events.record(about(name), created);
      clock.advance(1);
    }
    await events.record(about("a"), created); // a is now the most recently seen
    clock.advance(1);
    await events.record(about("d"), created); // four series: b goes
    expect(writes()).toEqual(["create", "create", "create", "patch", "create"]);
    await events.record(about("a"), created);
    await events.record(about("c"), created);
    await events.record(about("b"), created);
    expect(writes().slice(5)).toEqual(["patch", "patch", "create"]);
  });

  it("starts a new Event once the last occurrence is older than the window", async () => {
    const { events, clock, writes } = recorder({ dedupeWindowMs: 60_000 });
    await events.record(about("a"), created);
    clock.advance(60_000);
    await events.record(about("a"), created);
    clock.advance(60_001);
    await events.record(about("b"), created); // forgets a
    await events.record(about("a"), created);
    expect(writes()).toEqual(["create", "patch", "create", "create"]);
  });
});
