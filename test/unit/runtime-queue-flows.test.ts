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

/** Lets promises and due timers run. */
async function settle(): Promise<void> {
  await vi.advanceTimersByTimeAsync(0);
}

/** A fixed pool of workers, each taking a key, holding it until `finish`, then asking again. */
class Workers {
  readonly #queue: WorkQueue;
  readonly #held = new Map<string, () => void>();

  private constructor(queue: WorkQueue) {
    this.#queue = queue;
  }

  static async start(queue: WorkQueue, count: number): Promise<Workers> {
    const workers = new Workers(queue);
    for (let i = 0; i < count; i++) void workers.#run();
    await settle();
    return workers;
  }

  async #run(): Promise<void> {
    for (;;) {
      const key = await this.#queue.get();
      if (key === undefined) return;
      await new Promise<void>((end) => this.#held.set(key, end));
      this.#held.delete(key);
      this.#queue.done(key);
    }
  }

  /** The keys held now, in the order they were handed out. */
  holding(): string[] {
    return [...this.#held.keys()];
  }

  /** Ends `keys` after `ms` in flight (from now), and lets the freed workers ask again. */
  async finish(ms: number, ...keys: string[]): Promise<void> {
    vi.advanceTimersByTime(ms);
    for (const key of keys) this.#held.get(key)?.();
    await settle();
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
    // No key is short of a 0 ms bound: nothing borrows (borrowing below).
    const queue = new WorkQueue({ flowOf, maxPerFlow: 2, borrowMs: 0 });
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

  it("counts a flow's keys waiting at its cap under each part's label when its parts name one", async () => {
    // A namespace's own connections: one flow, a part each, counted per connection.
    const labelled = (key: string): KeyFlow => {
      const keyFlow = flowOf(key);
      return keyFlow.part === undefined ? keyFlow : { ...keyFlow, label: `conn-${keyFlow.part}` };
    };
    const queue = new WorkQueue({ flowOf: labelled, maxPerFlow: 2, borrowMs: 0 });
    for (const name of ["a", "b", "c"]) queue.add(`ns:one/${name}`);
    for (const name of ["a", "b"]) queue.add(`ns:two/${name}`);
    expect(await drain(queue)).toEqual(["ns:one/a", "ns:two/a"]);
    expect(queue.waitingAtCap()).toEqual(
      new Map([
        ["conn-one", 2],
        ["conn-two", 1],
      ]),
    );
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

  it("lends a flow alone every idle worker but a cap's worth once its keys are short, one more per short key ended", async () => {
    const queue = new WorkQueue({ flowOf, maxPerFlow: 2, borrowMs: 1_000 });
    const workers = await Workers.start(queue, 8);
    for (let i = 0; i < 20; i++) queue.add(`big:${i}`);
    await settle();
    // No key of it has ended yet: nothing is known of its keys, nothing lent.
    expect(workers.holding()).toEqual(["big:0", "big:1"]);
    await workers.finish(10, "big:0", "big:1");
    // Two short keys ended: two seats beyond the cap.
    expect(workers.holding()).toEqual(["big:2", "big:3", "big:4", "big:5"]);
    await workers.finish(10, "big:2", "big:3", "big:4", "big:5");
    // Six in a row: every worker but two, its cap's worth (kept idle for other flows' keys).
    expect(workers.holding()).toEqual(["big:6", "big:7", "big:8", "big:9", "big:10", "big:11"]);
    expect(queue.waitingAtCap()).toEqual(new Map([["big", 8]]));
  });

  it("never lends a worker to a flow whose keys are slow, or one of whose keys has run the bound", async () => {
    const queue = new WorkQueue({ flowOf, maxPerFlow: 1, borrowMs: 1_000 });
    const workers = await Workers.start(queue, 4);
    for (let i = 0; i < 10; i++) queue.add(`slow:${i}`);
    queue.add("other:a");
    await settle();
    expect(workers.holding()).toEqual(["slow:0", "other:a"]);
    // Its one key took the bound: no seat beyond its cap, though two workers are idle.
    await workers.finish(1_000, "slow:0");
    expect(workers.holding()).toEqual(["other:a", "slow:1"]);
    // Short keys earn seats (one idle worker is never lent).
    await workers.finish(10, "slow:1");
    expect(workers.holding()).toEqual(["other:a", "slow:2", "slow:3"]);
    await workers.finish(10, "slow:2", "slow:3");
    expect(workers.holding()).toEqual(["other:a", "slow:4", "slow:5"]);
    // Three earned, one lent; but its keys in flight have run the bound: the worker the other
    // flow gives back is not lent.
    await workers.finish(1_000, "other:a");
    expect(workers.holding()).toEqual(["slow:4", "slow:5"]);
    expect(queue.waitingAtCap()).toEqual(new Map([["slow", 4]]));
    // They end as long keys: every seat beyond the cap is lost.
    await workers.finish(0, "slow:4");
    expect(workers.holding()).toEqual(["slow:5"]);
    await workers.finish(0, "slow:5");
    expect(workers.holding()).toEqual(["slow:6"]);
  });

  it("never lends a worker to a flow whose keys took the bound on average lately, its quick failures between", async () => {
    const queue = new WorkQueue({ flowOf, maxPerFlow: 1, borrowMs: 1_000 });
    const workers = await Workers.start(queue, 4);
    for (let i = 0; i < 14; i++) queue.add(`mixed:${i}`);
    await settle();
    await workers.finish(5_000, "mixed:0");
    // Seven quick ends in a row (failures at once, say): seven seats earned, but its keys still
    // took more than the bound on average (1.05 s: each end weighs a fifth).
    for (let i = 1; i <= 7; i++) await workers.finish(10, `mixed:${i}`);
    expect(workers.holding()).toEqual(["mixed:8"]);
    // The eighth brings the average under it (0.85 s): it borrows.
    await workers.finish(10, "mixed:8");
    expect(workers.holding()).toEqual(["mixed:9", "mixed:10", "mixed:11"]);
  });

  it("hands the next worker to come free to another flow's key, not to the flow borrowing", async () => {
    const queue = new WorkQueue({ flowOf, maxPerFlow: 1, borrowMs: 1_000 });
    const workers = await Workers.start(queue, 4);
    for (let i = 0; i < 20; i++) queue.add(`big:${i}`);
    await settle();
    await workers.finish(10, "big:0");
    await workers.finish(10, "big:1", "big:2");
    // Three short keys ended: three workers held, one of its own and two lent; one kept idle.
    expect(workers.holding()).toEqual(["big:3", "big:4", "big:5"]);
    // Another flow's key takes the idle worker at once; a third flow's waits: no worker is idle.
    queue.add("newcomer:x");
    queue.add("third:y");
    await settle();
    expect(workers.holding()).toEqual(["big:3", "big:4", "big:5", "newcomer:x"]);
    // The next worker to come free goes to it, whatever the big flow's backlog and seats earned.
    await workers.finish(10, "big:3");
    expect(workers.holding()).toEqual(["big:4", "big:5", "newcomer:x", "third:y"]);
    // The next is kept idle; so is the one after: three flows active lately, the big flow's share
    // of the four workers is its cap.
    await workers.finish(10, "big:4");
    expect(workers.holding()).toEqual(["big:5", "newcomer:x", "third:y"]);
    await workers.finish(10, "newcomer:x");
    expect(workers.holding()).toEqual(["big:5", "third:y"]);
  });

  it("lends a flow no more than its share of the workers while another flow was active lately", async () => {
    const queue = new WorkQueue({ flowOf, maxPerFlow: 2, borrowMs: 1_000, workers: 12 });
    const workers = await Workers.start(queue, 12);
    queue.add("quiet:a");
    for (let i = 0; i < 40; i++) queue.add(`big:${i}`);
    await settle();
    expect(workers.holding()).toEqual(["quiet:a", "big:0", "big:1"]);
    await workers.finish(10, "quiet:a");
    await workers.finish(10, "big:0", "big:1");
    await workers.finish(10, "big:2", "big:3", "big:4", "big:5");
    // Six short keys earned six seats beyond the cap (8 of 12, two kept idle), but the quiet flow
    // ended a key 20 ms ago: two flows active, the big one's share is 6 of the 12.
    expect(workers.holding()).toEqual(["big:6", "big:7", "big:8", "big:9", "big:10", "big:11"]);
    // The quiet flow's last key ended the bound ago: alone again, every seat it earned.
    await workers.finish(985, "big:6");
    expect(workers.holding()).toEqual([
      "big:7",
      "big:8",
      "big:9",
      "big:10",
      "big:11",
      "big:12",
      "big:13",
      "big:14",
      "big:15",
    ]);
  });

  it("gives back a borrowed seat whose key has run the bound, the borrowing flow's next keys waiting", async () => {
    // Four seats, seven workers: the three beyond the seats take reclaimed seats only.
    const queue = new WorkQueue({ flowOf, maxPerFlow: 1, borrowMs: 1_000, workers: 4 });
    const workers = await Workers.start(queue, 7);
    for (let i = 0; i < 10; i++) queue.add(`big:${i}`);
    await settle();
    await workers.finish(10, "big:0");
    await workers.finish(10, "big:1", "big:2");
    // Three seats held (two borrowed); the fourth is the cap's worth kept idle: another flow's key
    // takes it, a third flow's waits, whatever the workers waiting.
    queue.add("other:a");
    queue.add("third:b");
    queue.add("fourth:c");
    await settle();
    expect(workers.holding()).toEqual(["big:3", "big:4", "big:5", "other:a"]);
    // The big flow's service stops answering: its keys run on. Its borrowed seats are given back
    // once they have run the bound; the waiting keys go; its own next keys wait.
    await workers.finish(999);
    expect(workers.holding()).toEqual(["big:3", "big:4", "big:5", "other:a"]);
    await workers.finish(1);
    expect(workers.holding()).toEqual(["big:3", "big:4", "big:5", "other:a", "third:b", "fourth:c"]);
    expect(queue.waitingAtCap()).toEqual(new Map([["big", 4]]));
    // The seats are all taken again: no more keys in flight, though a worker waits.
    queue.add("fifth:d");
    await settle();
    expect(workers.holding()).toHaveLength(6);
  });

  it("keeps a part's cap while another part of a flow that may borrow has a key", async () => {
    const queue = new WorkQueue({ flowOf, maxPerFlow: 1, borrowMs: 1_000 });
    const workers = await Workers.start(queue, 6);
    queue.add("other:o");
    queue.add("third:p");
    for (const name of ["a", "b", "c", "d", "e", "f"]) queue.add(`shared:ns1/${name}`);
    await settle();
    // One short key ended: one seat beyond the cap, its share of six workers among three flows (2).
    await workers.finish(10, "shared:ns1/a");
    expect(workers.holding()).toEqual(["other:o", "third:p", "shared:ns1/b", "shared:ns1/c"]);
    // ns2's key waits: its flow holds its share.
    queue.add("shared:ns2/x");
    await settle();
    expect(workers.holding()).toEqual(["other:o", "third:p", "shared:ns1/b", "shared:ns1/c"]);
    // A seat of the flow comes free. ns1 is first in turn, at its part's cap: ns2's key, below its
    // part's cap, goes, not ns1's next.
    await workers.finish(10, "shared:ns1/b");
    expect(workers.holding()).toEqual(["other:o", "third:p", "shared:ns1/c", "shared:ns2/x"]);
  });

  it("takes an edit before the resync keys of its flow, and moves a resync key edited meanwhile", async () => {
    const queue = new WorkQueue({ flowOf, maxPerFlow: 1, borrowMs: 0 });
    queue.addSpread(["f:pass-0", "f:pass-1", "f:pass-2", "f:pass-3"], 0);
    expect(await drain(queue)).toEqual(["f:pass-0"]);
    queue.add("f:edit");
    queue.add("f:pass-3");
    queue.addAfter("f:interval", 0, { resync: true });
    queue.addAfter("f:up", 0, { followUp: true });
    queue.done("f:pass-0");
    const order: string[] = [];
    for (let i = 0; i < 6; i++) {
      const key = await poll(queue);
      if (key === "pending" || key === undefined) break;
      order.push(key);
      queue.done(key);
    }
    // The follow-up's turn, then fresh work's: the edits first, the resyncs after, in order.
    expect(order).toEqual(["f:up", "f:edit", "f:pass-3", "f:pass-1", "f:pass-2", "f:interval"]);
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
