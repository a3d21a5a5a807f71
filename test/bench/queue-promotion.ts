/**
 * What a steady resync pass of the work queue alone promotes to V8's old generation: N keys
 * spread over `spreadMs` (`addSpread`), taken by W workers that end each key at once (the next
 * tick), pass after pass. Before each pass a full collection settles the heap; the old
 * generation's growth during the pass is what the pass promoted (no full collection runs within
 * one at this size; a run where one did is marked).
 *
 *   node --expose-gc test/bench/queue-promotion.ts [--n 10000] [--spread-ms 3000] [--workers 16] [--passes 6]
 *     [--queue flows|plain|fifo]
 */

import { parseArgs } from "node:util";
import { getHeapSpaceStatistics } from "node:v8";
import { WorkQueue } from "../../src/runtime/queue.ts";

const { values } = parseArgs({
  options: {
    n: { type: "string", default: "10000" },
    "spread-ms": { type: "string", default: "3000" },
    workers: { type: "string", default: "16" },
    passes: { type: "string", default: "6" },
    /** flows: 50 parts of one flow, a cap of 4, `workers` seats; plain: no flows; fifo: a plain FIFO. */
    queue: { type: "string", default: "flows" },
  },
});
const n = Number(values.n);
const spreadMs = Number(values["spread-ms"]);
const workers = Number(values.workers);
const passes = Number(values.passes);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with node --expose-gc");

const oldUsed = () =>
  getHeapSpaceStatistics()
    .filter((s) => s.space_name === "old_space" || s.space_name === "large_object_space")
    .reduce((sum, s) => sum + s.space_used_size, 0);

const keys = Array.from({ length: n }, (_, i) => `namespace-${i % 50}/resource-${i}`);
/**
 * A plain first-in-first-out queue with the same surface, to tell the harness's own promotion
 * (its promises, the workers' awaits) from the queue's.
 */
class Fifo {
  #keys: string[] = [];
  #head = 0;
  #waiters: Array<(key: string | undefined) => void> = [];
  addSpread(keys: string[], spreadMs: number): void {
    const moments = 32;
    for (let m = 0; m < moments; m++)
      setTimeout(
        () => {
          for (let i = m; i < keys.length; i += moments) this.#push(keys[i] as string);
        },
        (m * spreadMs) / moments,
      );
  }
  #push(key: string): void {
    const waiter = this.#waiters.shift();
    if (waiter) waiter(key);
    else this.#keys.push(key);
  }
  get(): Promise<string | undefined> {
    if (this.#head < this.#keys.length) {
      const key = this.#keys[this.#head++];
      if (this.#head === this.#keys.length) {
        this.#keys = [];
        this.#head = 0;
      }
      return Promise.resolve(key);
    }
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
  done(_key: string): void {}
  shutDown(): void {
    for (const waiter of this.#waiters) waiter(undefined);
  }
}

const mode = values.queue;
const queue =
  mode === "fifo"
    ? new Fifo()
    : mode === "plain"
      ? new WorkQueue()
      : new WorkQueue({
          flowOf: (key) => ({ flow: "c", part: key.slice(0, key.indexOf("/")) }),
          maxPerFlow: 4,
          workers,
        });
let ended = 0;
let passDone: (() => void) | undefined;
const worker = async () => {
  for (;;) {
    const key = await queue.get();
    if (key === undefined) return;
    await new Promise((resolve) => setImmediate(resolve));
    queue.done(key);
    ended += 1;
    if (ended === n) passDone?.();
  }
};
const running = Array.from({ length: workers }, worker);

const MiB = 1024 * 1024;
// The queue's timers are unref'd: hold the process open while passes run.
const keepAlive = setInterval(() => {}, 1000);
for (let pass = 1; pass <= passes; pass++) {
  gc();
  const before = oldUsed();
  ended = 0;
  const finished = new Promise<void>((resolve) => {
    passDone = resolve;
  });
  queue.addSpread(keys, spreadMs);
  await finished;
  const after = oldUsed();
  const promoted = (after - before) / MiB;
  console.log(
    `pass ${pass}: ${promoted.toFixed(2)} MiB promoted${after < before ? " (a full collection ran)" : ""}`,
  );
}
queue.shutDown();
await Promise.all(running);
clearInterval(keepAlive);
