// `npm run bench`'s command line (test/bench/run.ts), run as a user runs it: `--help` lists the
// benchmarks and their options; a mistyped option, an unknown benchmark or a bad duration is
// refused in one line that says what and where to look, exit 2, before any benchmark starts.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const RUN = join(import.meta.dirname, "run.ts");
const bench = (...args: string[]) => {
  const r = spawnSync(process.execPath, [RUN, ...args], { encoding: "utf8", timeout: 30_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
};

describe("npm run bench's options", () => {
  it("--help prints the usage and every benchmark with its options", () => {
    const r = bench("--help");
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^usage: npm run bench -- \[name \.\.\.\]/);
    expect(r.stdout).toMatch(/^scale\t/m);
    expect(r.stdout).toMatch(/^\t--n <value>\t/m);
    expect(r.stdout).toMatch(/^reconcile-path\t/m);
  });

  it.each([
    [["--nope"], "npm run bench: Unknown option '--nope'; `npm run bench -- --list` shows"],
    [["nosuch"], "npm run bench: unknown benchmark(s): nosuch; `npm run bench -- --list` shows"],
    [["scale", "--duration", "0"], "npm run bench: --duration must be a positive number of seconds, got '0'"],
    [["reconcile-path", "--n", "5"], "npm run bench: --n belongs to scale, which is not selected"],
  ])("refuses %j in one line, exit 2, running nothing", (args, line) => {
    const r = bench(...args);
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toContain(line);
    expect(r.stdout).toBe("");
  });
});
