/**
 * The work queue's records and lines (queue-records.ts): a line's stale entries
 * are skipped and compacted away in order, and a record that holds anything (a schedule, a key
 * in flight) outlives the sweeps of the passes it is not in, while one whose run ended with
 * nothing more to do is dropped at once.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { WorkQueue } from "../../src/runtime/queue.ts";
import { type KeyRecord, newRecord, READY, RecordLine } from "../../src/runtime/queue-records.ts";

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

function ready(key: string): KeyRecord {
  const record = newRecord(key, 0);
  record.state = READY;
  return record;
}

function drain(line: RecordLine): string[] {
  const out: string[] = [];
  for (let record = line.shift(); record !== undefined; record = line.shift()) out.push(record.key);
  return out;
}

describe("RecordLine", () => {
  it("keeps first-in-first-out order across its wrap and its growth", () => {
    const line = new RecordLine();
    for (let i = 0; i < 10; i++) line.push(ready(`a${i}`));
    expect(drain(line).slice(0, 3)).toEqual(["a0", "a1", "a2"]);
    // The head is now mid-ring: 40 more wrap around and grow it.
    const keys = Array.from({ length: 40 }, (_, i) => `b${i}`);
    for (const key of keys) line.push(ready(key));
    expect(line.size).toBe(40);
    expect(drain(line)).toEqual(keys);
    expect(line.size).toBe(0);
  });

  it("skips the entries of records moved out of it, and compacts them away in order", () => {
    const line = new RecordLine();
    const records = Array.from({ length: 16 }, (_, i) => ready(`k${i}`));
    for (const record of records) line.push(record);
    // Every other record moves to another line: its entry here is stale.
    const elsewhere = new RecordLine();
    for (const record of records.filter((_, i) => i % 2 === 0)) {
      line.drop(record);
      elsewhere.push(record);
    }
    expect(line.size).toBe(8);
    // Full of entries, half of them stale: the next push compacts rather than grows.
    line.push(ready("last"));
    const seen: string[] = [];
    line.each((record) => {
      seen.push(record.key);
      return true;
    });
    const odd = records.filter((_, i) => i % 2 === 1).map((r) => r.key);
    expect(seen).toEqual([...odd, "last"]);
    expect(drain(line)).toEqual([...odd, "last"]);
    expect(drain(elsewhere)).toEqual(records.filter((_, i) => i % 2 === 0).map((r) => r.key));
  });

  it("does not hand out a record taken out of the line and pushed back: only its new entry is live", () => {
    const line = new RecordLine();
    const a = ready("a");
    line.push(a);
    line.push(ready("b"));
    line.drop(a);
    line.push(a);
    expect(drain(line)).toEqual(["b", "a"]);
  });
});

describe("WorkQueue's records across passes", () => {
  it("keeps a key scheduled for later through the sweeps of passes it is not in", async () => {
    const queue = new WorkQueue();
    queue.addAfter("ns/late", 60_000);
    for (let pass = 0; pass < 5; pass++) {
      queue.addSpread(
        Array.from({ length: 2_000 }, (_, i) => `ns/k${i}`),
        1_000,
      );
      await vi.advanceTimersByTimeAsync(1_000);
      for (let i = 0; i < 2_000; i++) queue.done((await queue.get()) as string);
    }
    expect(queue.delayedCount).toBe(1);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(queue.isReady("ns/late")).toBe(true);
  });

  it("keeps a key in flight exclusive through the sweeps of passes it is not in", async () => {
    const queue = new WorkQueue();
    queue.add("ns/held");
    expect(await queue.get()).toBe("ns/held");
    for (let pass = 0; pass < 5; pass++) {
      queue.addSpread(
        Array.from({ length: 2_000 }, (_, i) => `ns/k${i}`),
        0,
      );
      for (let i = 0; i < 2_000; i++) queue.done((await queue.get()) as string);
    }
    queue.add("ns/held");
    expect(queue.isReady("ns/held")).toBe(false);
    queue.done("ns/held");
    expect(queue.isReady("ns/held")).toBe(true);
    expect(await queue.get()).toBe("ns/held");
  });

  it("drops a key's record once its run ends with nothing more to do, and keeps it while it has more", async () => {
    const queue = new WorkQueue();
    const keys = Array.from({ length: 2_000 }, (_, i) => `ns/k${i}`);
    queue.addSpread(keys, 1_000);
    expect(queue.held).toBe(2_000);
    await vi.advanceTimersByTimeAsync(1_000);
    // One key added again while in flight, one scheduled for later from within its run.
    const first = (await queue.get()) as string;
    const second = (await queue.get()) as string;
    queue.add(first);
    queue.addAfter(second, 60_000);
    queue.done(first);
    queue.done(second);
    for (let i = 2; i < 2_000; i++) queue.done((await queue.get()) as string);
    expect(queue.held).toBe(2);
    queue.done((await queue.get()) as string);
    expect(queue.held).toBe(1);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(await queue.get()).toBe(second);
    queue.done(second);
    expect(queue.held).toBe(0);
    // A key dropped is added again as new.
    queue.addSpread(keys, 0);
    expect(queue.length).toBe(2_000);
  });
});
