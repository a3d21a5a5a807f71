/**
 * What a steady resync pass of the work queue alone promotes to V8's old generation: N keys
 * spread over `spreadMs` (`addSpread`), taken by W workers that end each key at once (the next
 * tick), pass after pass. Before each pass a full collection settles the heap; the old
 * generation's growth during the pass is what the pass promoted (no full collection runs within
 * one at this size; a run where one did is marked).
 *
 *   node --expose-gc test/bench/queue-promotion.ts [--n 10000] [--spread-ms 3000] [--workers 16] [--passes 6]
 */
import { getHeapSpaceStatistics } from "node:v8";
import { parseArgs } from "node:util";
import { WorkQueue } from "../../src/runtime/queue.ts";

const { values } = parseArgs({
  options: {
    n: { type: "string", default: "10000" },
    "spread-ms": { type: "string", default: "3000" },
    workers: { type: "string", default: "16" },
    passes: { type: "string", default: "6" },
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
const queue = new WorkQueue({ flowOf: (key) => ({ flow: "c", part: key.slice(0, key.indexOf("/")) }), maxPerFlow: 4, workers });
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
  console.log(`pass ${pass}: ${promoted.toFixed(2)} MiB promoted${after < before ? " (a full collection ran)" : ""}`);
}
queue.shutDown();
await Promise.all(running);
clearInterval(keepAlive);
