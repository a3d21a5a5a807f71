// The event recorder's series, against a fake API server that records what it is sent: a repeat
// patches its series, series are forgotten least recently seen first (at most `maxTracked`), and
// an expired one starts a new Event; writes about one object are limited as client-go's spam filter
// limits them.
import { describe, expect, it } from "vitest";
import type { KubeClient, KubeRequest } from "../../src/kube/client.ts";
import {
  EVENT_WRITES_AT_ONCE,
  EVENT_WRITES_WAITING,
  type EventInput,
  type EventRegarding,
  KubeEventRecorder,
  TurnGate,
} from "../../src/kube/events.ts";
import { ManualClock } from "../support/manual-clock.ts";

function recorder(
  options: { maxTracked?: number; dedupeWindowMs?: number; spamBurst?: number; spamRefillMs?: number } = {},
) {
  const sent: KubeRequest[] = [];
  const client = { request: async (req: KubeRequest) => void sent.push(req) } as unknown as KubeClient;
  const clock = new ManualClock({ start: 1_000_000 });
  const events = new KubeEventRecorder({ client, reportingInstance: "test", clock, ...options });
  /** The kind of write each record caused: a new Event or a series patch. */
  const writes = () => sent.map((r) => (r.method === "POST" ? "create" : "patch"));
  return { events, clock, writes, sent };
}

/** A recorder whose writes wait until `answer`ed, in order; `sent`: the namespace of each write. */
function unansweredRecorder() {
  const sent: string[] = [];
  const answer: Array<() => void> = [];
  const client = {
    request: (req: KubeRequest) =>
      new Promise<void>((resolve) => {
        sent.push(String((req.body as { metadata?: { namespace?: string } })?.metadata?.namespace));
        answer.push(resolve);
      }),
  } as unknown as KubeClient;
  const events = new KubeEventRecorder({
    client,
    reportingInstance: "test",
    clock: new ManualClock({ start: 0 }),
  });
  return { sent, answer, events };
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

describe("KubeEventRecorder when idle", () => {
  it("forgets a burst's series and buckets a window after it, without a write to do it", async () => {
    const { events, clock, writes } = recorder({ dedupeWindowMs: 60_000 });
    for (let i = 0; i < 50; i++) await events.record(about(`r${i}`), created);
    for (let i = 0; i < 30; i++) await events.record(about("noisy"), { ...created, note: `step ${i}` });
    expect(events.tracked).toEqual({ series: 75, objects: 51 });
    // A window on (the recorder looks a window and a millisecond after its first write, then as
    // often while anything is tracked): every series is past it; no bucket is full again yet.
    clock.advance(60_001);
    expect(events.tracked).toEqual({ series: 0, objects: 51 });
    // One write is back in a bucket 5 minutes after it was taken: at the look after that, only
    // the spent bucket is left (25 writes, full again 125 minutes after the burst).
    clock.advance(4 * 60_001);
    expect(events.tracked).toEqual({ series: 0, objects: 1 });
    clock.advance(120 * 60_001);
    expect(events.tracked).toEqual({ series: 0, objects: 0 });
    expect(clock.pending).toBe(0);
    // What is written next is what would have been: a new Event, the noisy object's burst whole.
    const before = writes().length;
    for (let i = 0; i < 30; i++) await events.record(about("noisy"), { ...created, note: `again ${i}` });
    expect(writes().slice(before)).toEqual(Array(25).fill("create"));
    expect(clock.pending).toBe(1);
  });

  it("keeps what is still within the window when it looks", async () => {
    const { events, clock, writes } = recorder({ dedupeWindowMs: 60_000 });
    await events.record(about("a"), created);
    clock.advance(30_000);
    await events.record(about("b"), created);
    clock.advance(30_001); // the look: a is past the window, b half of one
    expect(events.tracked.series).toBe(1);
    await events.record(about("b"), created);
    expect(writes()).toEqual(["create", "create", "patch"]);
  });
});

describe("KubeEventRecorder spam filter (client-go's: a burst of 25 per object, then one per 5 minutes)", () => {
  it("writes 25 Events about one object at once, then one per 5 minutes; other objects keep their own budget", async () => {
    const { events, clock, writes } = recorder();
    for (let i = 0; i < 100; i++) await events.record(about("noisy"), { ...created, note: `step ${i}` });
    expect(writes()).toHaveLength(25);
    await events.record(about("quiet"), created);
    expect(writes()).toHaveLength(26);
    clock.advance(5 * 60_000 - 1);
    await events.record(about("noisy"), { ...created, note: "late" });
    expect(writes()).toHaveLength(26);
    clock.advance(1);
    await events.record(about("noisy"), { ...created, note: "later" });
    await events.record(about("noisy"), { ...created, note: "too soon" });
    expect(writes()).toHaveLength(27);
    // An hour refills 12, up to the burst.
    clock.advance(60 * 60_000);
    for (let i = 0; i < 20; i++) await events.record(about("noisy"), { ...created, note: `hour ${i}` });
    expect(writes()).toHaveLength(27 + 12);
  });

  it("counts a dropped repeat in its series: the next patch carries it", async () => {
    const { events, clock, sent } = recorder({ spamBurst: 2, spamRefillMs: 60_000 });
    await events.record(about("a"), created);
    await events.record(about("a"), created);
    for (let i = 0; i < 5; i++) await events.record(about("a"), created);
    expect(sent).toHaveLength(2);
    clock.advance(60_000);
    await events.record(about("a"), created);
    expect(sent).toHaveLength(3);
    expect(sent[2]?.body).toMatchObject({ series: { count: 8 } });
  });

  it("tracks at most maxTracked objects: a forgotten one starts with a full burst", async () => {
    const { events, writes } = recorder({ spamBurst: 1, maxTracked: 2 });
    await events.record(about("a"), created);
    await events.record(about("a"), { ...created, note: "dropped" });
    expect(writes()).toHaveLength(1);
    await events.record(about("b"), created);
    await events.record(about("c"), created); // a is forgotten
    await events.record(about("a"), { ...created, note: "again" });
    expect(writes()).toHaveLength(4);
  });
});

describe("Event writes shared by namespace in turns", () => {
  it("TurnGate: at most atOnce running; the waiting started one group after another; past maxWaiting, not run", async () => {
    const gate = new TurnGate(2, 10);
    const started: string[] = [];
    const release: Array<() => void> = [];
    const task = (name: string) => () =>
      new Promise<string>((resolve) => {
        started.push(name);
        release.push(() => resolve(name));
      });
    const runs = [1, 2, 3, 4, 5].map((i) => gate.run("a", task(`a${i}`)));
    runs.push(gate.run("b", task("b1")));
    expect(started).toEqual(["a1", "a2"]);
    expect(gate.load).toEqual({ running: 2, waiting: 4 });
    for (let i = 0; i < 4; i++) {
      release.shift()?.();
      await new Promise((r) => setImmediate(r));
    }
    // a's next, then b's: a namespace's backlog delays another's write by one turn.
    expect(started).toEqual(["a1", "a2", "a3", "b1", "a4", "a5"]);
    while (release.length > 0) {
      release.shift()?.();
      await new Promise((r) => setImmediate(r));
    }
    expect(await Promise.all(runs)).toEqual(["a1", "a2", "a3", "a4", "a5", "b1"]);
    // Full: a write past maxWaiting is not made.
    const full = new TurnGate(1, 1);
    void full.run("a", () => new Promise(() => {}));
    void full.run("a", async () => "waits");
    expect(await full.run("b", async () => "refused")).toBeUndefined();
  });

  it("a namespace's thousand Events hold at most four writes on the wire, and another's goes after one of them", async () => {
    const { sent, answer, events } = unansweredRecorder();
    const of = (namespace: string, name: string): EventRegarding => ({ ...about(name), namespace });
    const recorded = Array.from({ length: 1_000 }, (_, i) => events.record(of("team-a", `r${i}`), created));
    recorded.push(events.record(of("team-b", "app"), created));
    await new Promise((r) => setImmediate(r));
    expect(sent).toHaveLength(EVENT_WRITES_AT_ONCE);
    for (let i = 0; i < 2; i++) {
      answer.shift()?.();
      await new Promise((r) => setImmediate(r));
    }
    expect(sent.slice(0, EVENT_WRITES_AT_ONCE + 2)).toContain("team-b");
    while (answer.length > 0) {
      answer.shift()?.();
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(recorded);
  });
});

describe("Event writes: one namespace's object count does not take the whole waiting room", () => {
  const failed: EventInput = {
    type: "Warning",
    reason: "ServiceUnavailable",
    action: "Reconcile",
    note: "503",
  };
  const of = (namespace: string, name: string): EventRegarding => ({
    apiVersion: "dms.dev/v1alpha1",
    kind: "Deployment",
    namespace,
    name,
    uid: `uid-${namespace}-${name}`,
  });
  const tick = () => new Promise((r) => setImmediate(r));

  it("writes another namespace's Event while a namespace of 1,100 failing resources fills the queue", async () => {
    const { sent: sentNamespaces, answer, events } = unansweredRecorder();
    // Team a: 1,100 resources whose connection fails at once, a Warning each (an API server a
    // little slow: the 4 writes on the wire have not come back yet).
    const hostile = EVENT_WRITES_AT_ONCE + EVENT_WRITES_WAITING + 96;
    const recorded = Array.from({ length: hostile }, (_, i) => events.record(of("team-a", `r${i}`), failed));
    // Team b: one resource, one Warning: it takes the place of team a's newest.
    recorded.push(events.record(of("team-b", "app"), failed));
    await tick();
    while (answer.length > 0) {
      answer.shift()?.();
      await tick();
    }
    await Promise.all(recorded);
    expect(sentNamespaces.filter((ns) => ns === "team-b")).toHaveLength(1);
    expect(sentNamespaces).toHaveLength(EVENT_WRITES_AT_ONCE + EVENT_WRITES_WAITING);
  });

  it("TurnGate: full, another group's write takes the place of the longest line's newest; the longest's own is not made", async () => {
    const gate = new TurnGate(1, 10);
    void gate.run("a", () => new Promise(() => {})); // on the wire, never answered
    const a = Array.from({ length: 20 }, (_, i) => gate.run("a", async () => `a${i}`));
    // Full with a's first ten; the other ten were not made.
    expect(await Promise.all(a.slice(10))).toEqual(Array(10).fill(undefined));
    const b = gate.run("b", async () => "b");
    expect(gate.load.waiting).toBe(10);
    // a's newest waiting gave up its place.
    expect(await a[9]).toBeUndefined();
    // Lines of 9 and 1: b's next takes another of a's; levelled at 5 and 5, neither gives way.
    const more = Array.from({ length: 6 }, () => gate.run("b", async () => "b+"));
    expect(await more[5]).toBeUndefined();
    expect(await Promise.race([b, tick().then(() => "waiting")])).toBe("waiting");
  });
});
