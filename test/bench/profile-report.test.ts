import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../controlplane/net.ts";
import { Inspector, inspectFlag } from "./inspector.ts";
import { cpuTallies, heapTally, report, sampledTallies } from "./profile-report.ts";

// `scale --profile` reads a real process through its inspector; the report says what the files
// hold. A child Node process with a known allocation and a known hot function shows both.

const CHILD = `
class ProbeMarker { constructor(i) { this.i = i; } }
globalThis.kept = Array.from({ length: 5000 }, (_, i) => new ProbeMarker(i));
function burnCpu() { let x = 0; for (let i = 0; i < 2e6; i++) x += Math.sqrt(i); globalThis.sink = x; }
setInterval(burnCpu, 5);
// The same bytes, dead at once or held across two collections of the young generation (then let
// go), each round run on the test's demand and the collections forced (--expose-gc): what churn
// makes dies in the first, what retainBriefly holds outlives both, however busy the machine.
function churn() { let n = 0; for (let i = 0; i < 50; i++) n += new Array(512).fill(i).length; globalThis.churned = n; }
function retainBriefly() { const held = []; for (let i = 0; i < 50; i++) held.push(new Array(512).fill(i)); return held; }
globalThis.allocationRounds = (rounds) => {
  for (let r = 0; r < rounds; r++) {
    churn();
    let held = retainBriefly();
    gc({ type: "minor" });
    gc({ type: "minor" });
    held = undefined;
  }
  gc({ type: "minor" });
  return rounds;
};
`;

describe("the inspector session and the profile report", () => {
  let child: ChildProcess;
  let dir: string;
  let inspector: Inspector;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "dms-profile-"));
    const port = await freePort();
    // Without the optimizing compilers: one may inline burnCpu into the timers' loop, and its
    // samples are then the loop's (as in any profile: an inlined function counts as its caller).
    // Nor the baseline compiler: once burnCpu runs as Sparkplug code, most of its samples are
    // given to its caller (node 24: listOnTimeout 1,349 samples of self time, burnCpu 951; with
    // --no-sparkplug 251 and 1,994), so which function comes out hottest depended on when V8
    // tiered it up.
    const noJit = ["--no-opt", "--no-maglev", "--no-sparkplug"];
    child = spawn(process.execPath, [inspectFlag(port), ...noJit, "--expose-gc", "-e", CHILD], {
      stdio: "ignore",
    });
    inspector = await Inspector.connectWhenUp(port);
  });

  afterAll(() => {
    inspector?.close();
    child?.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  it("profiles the CPU: the busy function has the most self time", async () => {
    await inspector.startCpuProfile(500);
    await sleep(600);
    const path = join(dir, "a.cpuprofile");
    await inspector.stopCpuProfile(path);
    const { self, total } = cpuTallies(JSON.parse(readFileSync(path, "utf8")));
    const hottest = [...self].sort((a, b) => b[1].amount - a[1].amount)[0]?.[0] ?? "";
    expect(hottest).toMatch(/^burnCpu /);
    // It runs from the timers' loop: its total counts in theirs; idle time counts nowhere.
    const burn = self.get(hottest)?.amount ?? 0;
    expect(burn).toBeGreaterThan(0);
    expect(
      total.get([...total.keys()].find((k) => k.startsWith("listOnTimeout ")) ?? "")?.amount,
    ).toBeGreaterThanOrEqual(burn);
    expect([...total.keys()].some((k) => k.startsWith("(idle)"))).toBe(false);
    expect(report(self, undefined, (s) => `${s.toFixed(3)} s`, 3)[1]).toContain("burnCpu");
  }, 60_000);

  it("samples allocations: what outlived the young generation is kept, what died in it is not", async () => {
    await inspector.startHeapSampling(16 * 1024);
    expect(await inspector.evaluate("allocationRounds(10)")).toBe(10);
    const path = join(dir, "a.heapprofile");
    await inspector.stopHeapSampling(path);
    const { self, ours } = sampledTallies(JSON.parse(readFileSync(path, "utf8")));
    const bytes = (name: string) =>
      [...self].filter(([k]) => k.startsWith(`${name} `)).reduce((sum, [, e]) => sum + e.amount, 0);
    expect(bytes("retainBriefly")).toBeGreaterThan(512 * 1024);
    expect(bytes("churn")).toBeLessThan(bytes("retainBriefly") / 4);
    // None of it is the operator's code.
    expect([...ours.keys()]).toEqual(["(none of the operator's)"]);
  }, 60_000);

  it("snapshots the heap: the objects kept are counted by their constructor", async () => {
    const path = join(dir, "a.heapsnapshot");
    await inspector.heapSnapshot(path);
    const tally = heapTally(JSON.parse(readFileSync(path, "utf8")));
    expect(tally.get("object ProbeMarker")?.count).toBe(5000);
    expect(tally.get("string")?.count).toBeGreaterThan(0);
    // Compared with itself less the markers, the markers are the largest change.
    const before = new Map(tally);
    before.delete("object ProbeMarker");
    const lines = report(tally, before, (b) => `${b} B`, 1);
    expect(lines[1]).toMatch(/^\s+\+\d+ B\s+0 -> 5000\s+object ProbeMarker$/);
    // Writing and parsing a whole heap's snapshot takes seconds of wall time on a loaded machine.
  }, 60_000);
});
