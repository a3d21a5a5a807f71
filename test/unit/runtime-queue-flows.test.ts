/**
 * The work queue's flows (queue.ts): a cap of keys in flight per flow and per part of a flow,
 * keys over it waiting without being handed out, and the flows served in turn.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type KeyFlow, WorkQueue } from "../../src/runtime/queue.ts";

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

/** Resolves with the key `get` hands out, or "pending" when nothing is handed out right now. */
async function poll(queue: WorkQueue): Promise<string | undefined | "pending"> {
  const controller = new AbortController();
  const result = queue.get(controller.signal);
  await vi.advanceTimersByTimeAsync(0);
  controller.abort();
  const key = await result;
  return key === undefined ? "pending" : key;
}

/** Keys `<flow>:<part>/<name>`: the flow before the colon, the part (if any) up to the slash. */
const flowOf = (key: string): KeyFlow => {
  const [flow = "", rest = ""] = key.split(":");
  const part = rest.includes("/") ? rest.slice(0, rest.indexOf("/")) : undefined;
  return part === undefined ? { flow } : { flow, part };
};

/** Takes every key `get` hands out now, in order. */
async function drain(queue: WorkQueue): Promise<string[]> {
  const out: string[] = [];
  for (;;) {
    const key = await poll(queue);
    if (key === "pending" || key === undefined) return out;
    out.push(key);
  }
}

describe("WorkQueue flows", () => {
  it("hands out at most the cap of one flow's keys, and another flow's key while that one is at its cap", async () => {
    const queue = new WorkQueue({ flowOf, maxPerFlow: 2 });
    for (const name of ["a", "b", "c", "d"]) queue.add(`slow:${name}`);
    expect(await drain(queue)).toEqual(["slow:a", "slow:b"]);
    // The slow flow holds its cap: its keys wait, counted as waiting at the cap.
    expect(queue.length).toBe(2);
    expect(queue.waitingAtCap()).toEqual(new Map([["slow", 2]]));
    queue.add("fast:x");
    expect(await poll(queue)).toBe("fast:x");
    queue.done("fast:x");
    expect(await poll(queue)).toBe("pending");
    // A seat comes free: the next key of the flow goes, to a get already waiting.
    const waiting = queue.get();
    await vi.advanceTimersByTimeAsync(0);
    queue.done("slow:a");
    expect(await waiting).toBe("slow:c");
    expect(queue.waitingAtCap()).toEqual(new Map([["slow", 1]]));
  });

  it("serves the flows in turn, whatever the size of each one's backlog", async () => {
    const queue = new WorkQueue({ flowOf });
    for (let i = 0; i < 5; i++) queue.add(`big:${i}`);
    queue.add("small:0");
    queue.add("small:1");
    queue.add("third:0");
    expect(await drain(queue)).toEqual([
      "big:0",
      "small:0",
      "third:0",
      "big:1",
      "small:1",
      "big:2",
      "big:3",
      "big:4",
    ]);
  });

  it("caps a shared flow as a whole, and serves its parts in turn", async () => {
    const queue = new WorkQueue({ flowOf, maxPerFlow: 2 });
    for (const name of ["a", "b", "c", "d"]) queue.add(`shared:ns1/${name}`);
    queue.add("shared:ns2/a");
    queue.add("shared:ns2/b");
    expect(await drain(queue)).toEqual(["shared:ns1/a", "shared:ns2/a"]);
    // The flow holds its cap, though each part holds one.
    expect(queue.waitingAtCap()).toEqual(new Map([["shared", 4]]));
    queue.add("other:x");
    expect(await drain(queue)).toEqual(["other:x"]);
    queue.done("shared:ns1/a");
    queue.done("shared:ns2/a");
    // The parts in turn, not ns1's backlog first.
    expect(await drain(queue)).toEqual(["shared:ns1/b", "shared:ns2/b"]);
  });

  it("keeps the fresh and follow-up lines within a flow", async () => {
    const queue = new WorkQueue({ flowOf });
    for (const name of ["a", "b", "c"]) queue.add(`f:${name}`);
    queue.addAfter("f:up", 0, { followUp: true });
    expect(await drain(queue)).toEqual(["f:up", "f:a", "f:b", "f:c"]);
  });

  it("reports the keys long waiting at the cap of a flow whose keys are slow, not those of a quick one", async () => {
    const queue = new WorkQueue({ flowOf, maxPerFlow: 1 });
    queue.add("slow:a");
    queue.add("slow:b");
    for (let i = 0; i < 500; i++) queue.add(`quick:${i}`);
    expect(await drain(queue)).toEqual(["slow:a", "quick:0"]);
    // The quick flow turns over every 100 ms; slow:a holds its flow's seat for 40 s.
    for (let i = 1; i <= 400; i++) {
      vi.advanceTimersByTime(100);
      queue.done(`quick:${i - 1}`);
      expect(await queue.get()).toBe(`quick:${i}`);
    }
    // Both flows have keys waiting at their cap for 40 s; only the slow one's seat is held long.
    expect(queue.waitingSince(Date.now() - 30_000, 1_000)).toEqual(["slow:b"]);
    expect(queue.waitingSince(Date.now() - 30_000)).toHaveLength(1 + 99);
    expect(queue.waitingSince(Date.now() - 50_000, 1_000)).toEqual([]);
    // Once the slow key ended, its flow stays known slow by how long its keys took.
    queue.done("slow:a");
    expect(await queue.get()).toBe("slow:b");
    queue.add("slow:c");
    vi.advanceTimersByTime(40_000);
    queue.done("slow:b");
    expect(await queue.get()).toBe("slow:c");
    queue.add("slow:d");
    vi.advanceTimersByTime(31_000);
    expect(queue.waitingSince(Date.now() - 30_000, 1_000)).toContain("slow:d");
  });

  it("drops the state of a flow once it holds no key", async () => {
    const queue = new WorkQueue({ flowOf, maxPerFlow: 1 });
    queue.add("a:1");
    expect(await poll(queue)).toBe("a:1");
    queue.done("a:1");
    expect(queue.waitingAtCap()).toEqual(new Map());
    queue.shutDown();
    expect(await poll(queue)).toBe("pending");
  });
});
