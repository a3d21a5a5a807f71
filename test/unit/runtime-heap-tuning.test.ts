import { execFile } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import type { ReconcileOutcome } from "../../src/runtime/controller.ts";
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
  function collector(minWork = 3) {
    const clock = testClock();
    let collected = 0;
    const quiet = new QuietCollector({ gc: () => collected++, clock, minWork, minIntervalMs: 30_000 });
    const work = (n: number) => {
      for (let i = 0; i < n; i++) quiet.worked();
    };
    return { clock, quiet, work, collected: () => collected };
  }

  it("collects once the work goes quiet after a burst, not while it runs", () => {
    const c = collector();
    expect(c.quiet.check()).toBe(false); // nothing done
    c.work(3);
    expect(c.quiet.check()).toBe(false); // work since the last check: not quiet yet
    c.clock.t += 1_000;
    expect(c.quiet.check()).toBe(true);
    expect(c.collected()).toBe(1);
    c.clock.t += 1_000;
    expect(c.quiet.check()).toBe(false); // nothing done since
    expect(c.collected()).toBe(1);
  });

  it("leaves a small amount of work to V8", () => {
    const c = collector();
    c.work(2);
    c.quiet.check();
    c.clock.t += 60_000;
    expect(c.quiet.check()).toBe(false);
    c.work(1); // the third since the last collection: a burst, once quiet
    c.quiet.check();
    expect(c.quiet.check()).toBe(true);
  });

  it("collects at most once per interval", () => {
    const c = collector();
    c.work(3);
    c.quiet.check();
    expect(c.quiet.check()).toBe(true);
    c.work(3);
    c.quiet.check();
    c.clock.t += 29_999;
    expect(c.quiet.check()).toBe(false);
    c.clock.t += 1;
    expect(c.quiet.check()).toBe(true);
    expect(c.collected()).toBe(2);
  });

  it("counts the reconciles its hooks report, and reports them on", () => {
    const c = collector(2);
    const seen: ReconcileOutcome[] = [];
    const hooks = c.quiet.counting({ reconciled: (outcome) => seen.push(outcome) });
    hooks.reconciled?.("success", 0.1);
    hooks.reconciled?.("error", 0.2);
    expect(seen).toEqual(["success", "error"]);
    c.quiet.check();
    expect(c.quiet.check()).toBe(true);
  });

  it("checks every checkMs until stopped", async () => {
    let checks = 0;
    const stop = new AbortController();
    const clock = {
      now: () => 0,
      sleep: async () => {
        checks += 1;
        if (checks === 3) stop.abort();
        if (stop.signal.aborted) throw new Error("aborted");
      },
    };
    const quiet = new QuietCollector({ gc: () => {}, clock });
    await quiet.start(stop.signal);
    expect(checks).toBe(3);
  });
});

describe("quietCollection", () => {
  it("is off without optimizeForSize: the hooks as given, no runnable", () => {
    const hooks = { reconciled: () => {} };
    const off = quietCollection(false, testClock());
    expect(off.runnables).toEqual([]);
    expect(off.counting(hooks)).toBe(hooks);
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
    const on = quietCollection(true, testClock());
    expect(on.runnables.map((r) => r.name)).toEqual(["heap-collector"]);
  });
});
