import { execFile } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import {
  exposeGc,
  QuietCollector,
  quietCollection,
  SIZE_V8_FLAGS,
  tuneHeapForSize,
} from "../../src/runtime/heap-tuning.ts";

const MODULE = pathToFileURL(join(import.meta.dirname, "..", "..", "src", "runtime", "heap-tuning.ts")).href;

/**
 * A child Node with the shipped semi-space (1 MiB), tuned as `run` tunes it (`TUNING=module`) or
 * with the flags `CONTROL_FLAGS` names (comma-separated) instead: 300,000 objects of one
 * allocation site that live (V8 learns to pretenure the site), then as many of the same site that
 * die at once, as a resync pass's do. Prints how many full collections the second batch caused.
 */
const PROBE = [
  'import v8 from "node:v8";',
  'import { PerformanceObserver, constants } from "node:perf_hooks";',
  'if (process.env.TUNING === "module") (await import(process.env.HEAP_TUNING_MODULE)).tuneHeapForSize();',
  'else for (const flag of process.env.CONTROL_FLAGS.split(",")) v8.setFlagsFromString(flag);',
  'const make = (i) => ({ a: i, b: i + 1, c: "x" + i });',
  "const kept = [];",
  "for (let i = 0; i < 300000; i++) kept.push(make(i));",
  "globalThis.gc();",
  "await new Promise((r) => setTimeout(r, 50));",
  "let full = 0;",
  "const observer = new PerformanceObserver((list) => {",
  "  for (const e of list.getEntries()) if (e.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR) full++;",
  "});",
  'observer.observe({ entryTypes: ["gc"] });',
  "let last;",
  "for (let i = 0; i < 300000; i++) last = make(i);",
  "await new Promise((r) => setTimeout(r, 100));",
  "observer.disconnect();",
  "process.stdout.write(`${full} ${kept.length} ${last.a}`);",
].join("\n");

/** The tuning without the pretenuring flag: what `run` set before it. */
const CONTROL_FLAGS = SIZE_V8_FLAGS.filter((flag) => flag !== "--no-allocation-site-pretenuring");

async function fullCollectionsOfGarbage(tuning: "module" | "control"): Promise<number> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    // One thread collects, so that a collection the garbage started ends before the count.
    ["--expose-gc", "--single-threaded-gc", "--max-semi-space-size=1", "--input-type=module", "-e", PROBE],
    {
      encoding: "utf8",
      env: {
        ...process.env,
        HEAP_TUNING_MODULE: MODULE,
        TUNING: tuning,
        CONTROL_FLAGS: CONTROL_FLAGS.join(","),
      },
    },
  );
  const [full, kept, last] = stdout.trim().split(" ").map(Number);
  expect([kept, last]).toEqual([300_000, 299_999]);
  return full ?? Number.NaN;
}

describe("tuneHeapForSize", () => {
  it("sets V8's --optimize-for-size and --no-allocation-site-pretenuring", () => {
    const set: string[] = [];
    tuneHeapForSize((flag) => set.push(flag));
    expect(set).toEqual(["--optimize-for-size", "--no-allocation-site-pretenuring"]);
  });

  it("lets short-lived objects of a site V8 pretenured die young, set at run time", async () => {
    // One after the other: two children at once would take both cores from the other tests.
    const control = await fullCollectionsOfGarbage("control");
    const tuned = await fullCollectionsOfGarbage("module");
    // Without the pretenuring flag the site is pretenured after the first batch: the dead objects
    // fill the old generation and cost full collections (2 measured with Node 24).
    expect(
      control,
      "V8 no longer pretenures this site with 1 MiB semi-spaces: measure again whether --no-allocation-site-pretenuring is needed",
    ).toBeGreaterThan(0);
    expect(tuned).toBe(0);
  }, 30_000);
});

/** A clock whose `now` the test sets; its `sleep` is never used by `check`. */
function testClock() {
  const clock = { t: 0, now: () => clock.t, sleep: () => Promise.resolve() };
  return clock;
}

describe("QuietCollector", () => {
  /** A collector on a test clock and a CPU time the test moves: quiet below 50 ms a check, a burst from 1,000. */
  function collector() {
    const clock = testClock();
    let cpu = 0;
    let collected = 0;
    const quiet = new QuietCollector({
      gc: () => {
        collected += 1;
        cpu += 100; // the collection's own CPU time
      },
      clock,
      cpuMs: () => cpu,
      minIntervalMs: 30_000,
    });
    /** `ms` of CPU used over one check's interval, of `wallMs` (a second by default). */
    const interval = (ms: number, wallMs = 1_000) => {
      cpu += ms;
      clock.t += wallMs;
      return quiet.check();
    };
    return { quiet, interval, collected: () => collected };
  }

  it("collects once the process goes quiet after a burst, not while it works", () => {
    const c = collector();
    expect(c.interval(0)).toBe(false); // nothing done
    expect(c.interval(900)).toBe(false); // working
    expect(c.interval(900)).toBe(false);
    expect(c.interval(50)).toBe(true); // quiet, after 1,850 ms of work
    expect(c.collected()).toBe(1);
    // The collection's own time neither counts as work nor spoils the quiet for long.
    expect(c.interval(0)).toBe(false);
    expect(c.collected()).toBe(1);
  });

  it("is not quiet above 50 ms of CPU a second", () => {
    const c = collector();
    c.interval(1_000);
    expect(c.interval(51)).toBe(false);
    expect(c.interval(50)).toBe(true);
  });

  it("leaves a small amount of work to V8, until it adds up to a burst", () => {
    const c = collector();
    for (let i = 0; i < 10; i++) {
      c.interval(99);
      expect(c.interval(0)).toBe(false); // 99 ms at a time: each quiet second follows too little
    }
    c.interval(60);
    expect(c.interval(0)).toBe(true); // 1,050 since the start
  });

  it("collects at most once per interval", () => {
    const c = collector();
    c.interval(1_000);
    expect(c.interval(0)).toBe(true);
    for (let i = 0; i < 29; i++) expect(c.interval(i % 2 === 0 ? 1_000 : 0)).toBe(false);
    expect(c.interval(0)).toBe(true); // 30 s after the first
    expect(c.collected()).toBe(2);
  });

  it("checks every second while work is under way or due, and spaces its checks out to 8 s while idle", () => {
    const c = collector();
    expect(c.quiet.nextCheckMs).toBe(1_000);
    const idle = [0, 0, 0, 0].map(() => {
      c.interval(0);
      return c.quiet.nextCheckMs;
    });
    expect(idle).toEqual([2_000, 4_000, 8_000, 8_000]);
    c.interval(400); // work: back to every second
    expect(c.quiet.nextCheckMs).toBe(1_000);
    c.interval(700); // 1,100 ms since the start: a collection is due, once quiet
    expect(c.quiet.nextCheckMs).toBe(1_000);
    expect(c.interval(0)).toBe(true);
    expect(c.quiet.nextCheckMs).toBe(2_000);
  });

  it("reads quiet as CPU a second over a long interval", () => {
    const c = collector();
    c.interval(0);
    c.interval(0); // the next check in 4 s
    // 1,100 ms of work within those 4 s: 275 a second, not quiet; the next second is.
    expect(c.interval(1_100, 4_000)).toBe(false);
    expect(c.quiet.nextCheckMs).toBe(1_000);
    expect(c.interval(40)).toBe(true);
    // 150 ms over 4 s (37.5 a second) is quiet.
    const d = collector();
    d.interval(1_000);
    expect(d.interval(150, 4_000)).toBe(true);
  });

  it("sleeps the wait it decided between checks until stopped", async () => {
    const waits: number[] = [];
    const stop = new AbortController();
    const clock = {
      now: () => 0,
      sleep: async (ms: number) => {
        waits.push(ms);
        if (waits.length === 4) stop.abort();
        if (stop.signal.aborted) throw new Error("aborted");
      },
    };
    const quiet = new QuietCollector({ gc: () => {}, clock, cpuMs: () => 0 });
    await quiet.start(stop.signal);
    expect(waits).toEqual([1_000, 2_000, 4_000, 8_000]);
  });

  it("reads this process's CPU time by default", () => {
    const gcs: number[] = [];
    const quiet = new QuietCollector({
      gc: () => gcs.push(1),
      clock: testClock(),
      minWorkCpuMs: 10,
      quietCpuMs: 1e9,
    });
    expect(quiet.check()).toBe(false); // no CPU used since it was made
    // 20 ms of this process's CPU (not of the wall clock: the machine may be busy).
    const cpuAt = (u = process.cpuUsage()) => (u.user + u.system) / 1_000;
    const from = cpuAt();
    while (cpuAt() - from < 20);
    expect(quiet.check()).toBe(true);
    expect(gcs).toEqual([1]);
  });
});

describe("quietCollection", () => {
  it("is off without optimizeForSize", () => {
    expect(quietCollection(false, testClock())).toEqual([]);
  });

  it("runs V8's full collection, set up at run time", async () => {
    const gc = exposeGc();
    expect(gc).toBeTypeOf("function");
    // A full collection frees what nothing holds: a weakly held object goes.
    let held: object | undefined = { big: new Array(1000).fill(1) };
    const ref = new WeakRef(held);
    held = undefined;
    // A WeakRef keeps its target to the end of the job that made it.
    await new Promise((resolve) => setTimeout(resolve, 0));
    gc?.();
    expect(ref.deref()).toBeUndefined();
    expect(quietCollection(true, testClock()).map((r) => r.name)).toEqual(["heap-collector"]);
  });
});
