// What a user meets before any command runs: `--version`, "did you mean" on a typo, and on a
// Node that is too old one clear line instead of a crash inside a dependency.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { registerDeploymentsCommand } from "../../src/commands/deployments.ts";
import { registerPlanCommand } from "../../src/commands/plan-command.ts";
import { EXIT } from "../../src/commands/program.ts";
import { VERSION } from "../../src/version.ts";
import { runCli } from "../support/cli.ts";

const root = join(import.meta.dirname, "..", "..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  version: string;
  engines: { node: string };
};
const BIN = join(root, "bin", "dms-operator.mjs");

const run = (argv: string[]) => runCli(argv, { commands: [registerDeploymentsCommand, registerPlanCommand] });

describe("dms-operator --version", () => {
  it("prints package.json's version and exits 0", async () => {
    expect(VERSION).toBe(pkg.version);
    expect(await run(["--version"])).toEqual({ code: EXIT.ok, stdout: `${pkg.version}\n`, stderr: "" });
  });
});

describe("typo suggestions", () => {
  it("suggest the command a misspelt one was meant to be", async () => {
    const result = await run(["deploymnets", "list"]);
    expect(result.code).toBe(EXIT.failed);
    expect(result.stderr).toContain("error: unknown command 'deploymnets'");
    expect(result.stderr).toContain("(Did you mean deployments?)");
  });

  it("suggest the option a misspelt one was meant to be", async () => {
    const result = await run(["deployments", "list", "--outptu", "json"]);
    expect(result.code).toBe(EXIT.failed);
    expect(result.stderr).toContain("error: unknown option '--outptu'");
    expect(result.stderr).toContain("(Did you mean --output?)");
  });
});

describe("bin/dms-operator.mjs on an old Node", () => {
  // The running Node is made to report an old version before the bin loads, as Node 20 would.
  const asNode = (version: string) =>
    promisify(execFile)(
      process.execPath,
      [
        "--import",
        `data:text/javascript,Object.defineProperty(process.versions,"node",{value:"${version}"})`,
        BIN,
        "--version",
      ],
      { encoding: "utf8" },
    ).then(
      (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
      (e: { code: number; stdout: string; stderr: string }) => ({
        code: e.code,
        stdout: e.stdout,
        stderr: e.stderr,
      }),
    );

  it("says in one line which Node is needed, and exits 1 without loading the CLI", async () => {
    const min = /(\d+\.\d+)/.exec(pkg.engines.node)?.[1];
    const result = await asNode("20.11.1");
    expect(result).toEqual({
      code: 1,
      stdout: "",
      stderr: `error: dms-operator needs Node >= ${min}; this is Node 20.11.1. Install a newer Node (https://nodejs.org) and retry.\n`,
    });
    expect((await asNode("22.18.0")).code).toBe(1);
  });

  it("runs the CLI on a Node that is recent enough", async () => {
    expect(await asNode("22.19.0")).toEqual({ code: 0, stdout: `${pkg.version}\n`, stderr: "" });
  }, 30_000);
});
