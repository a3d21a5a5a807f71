// `npm run demo` end to end, as CI or a pipe sees it (stdout not a terminal): it brings up its own
// control plane, simulator and operator, gets every sample Ready, rolls out a new revision, and
// leaves nothing running or on disk but the operator log it named.
import { execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const DEMO = join(import.meta.dirname, "..", "..", "scripts", "demo.ts");
const UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";

/** Command lines of running processes that mention `text`. */
function processesMentioning(text: string): string[] {
  return execFileSync("ps", ["-eo", "args="], { encoding: "utf8" })
    .split("\n")
    .filter((line) => line.includes(text));
}

describe("npm run demo", () => {
  let work: string | undefined;
  afterAll(async () => {
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("gets the samples Ready, shows a new revision after the edit, and stops everything", async () => {
    work = await mkdtemp(join(tmpdir(), "dms-e2e-demo-"));
    const logFile = join(work, "operator.log");
    const child = spawn(process.execPath, [DEMO, `--log-file=${logFile}`, "--timeout=60s"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));

    expect(code, output).toBe(0);
    expect(output).not.toContain("\x1b["); // no in-place redrawing outside a terminal
    expect(output).toMatch(/All 7 Ready\./);
    const revision = new RegExp(
      `summarizer: new revision (${UUID}) \\(was (${UUID})\\), active (${UUID})`,
    ).exec(output);
    expect(revision, output).not.toBeNull();
    const [, latest, previous, active] = revision ?? [];
    expect(latest).not.toBe(previous);
    expect(active).toBe(latest);
    expect(output).toContain("Stopped: operator, simulator, control plane.");

    // How to point the CLI (`kubectl dms revisions`, `logs`) at the demo: the simulator, and a Node it runs on.
    const simulator = /^ {3}(http:\/\/127\.0\.0\.1:\d+) /m.exec(output)?.[1];
    expect(simulator, output).toBeDefined();
    expect(output).toContain(`export PATH=${dirname(process.execPath)}:$PATH DMS_BASE_URL=${simulator} `);
    expect(output).toContain("kubectl dms revisions summarizer -n demo");

    const kubeconfig = /export KUBECONFIG=(\S+)/.exec(output)?.[1];
    expect(kubeconfig).toBeDefined();
    const planeDir = dirname(kubeconfig ?? "");
    expect(existsSync(planeDir)).toBe(false);
    expect(processesMentioning(planeDir)).toEqual([]); // etcd, kube-apiserver and the operator (--kubeconfig)
    expect(await readFile(logFile, "utf8")).toContain("dms-operator stopped");
  }, 120_000);
});
