// The program names itself after how it was started: `kubectl-dms` (what kubectl runs for
// `kubectl dms`) makes every help and usage text say `kubectl dms`; anything else says
// `dms-operator`. The packed plugin run by the real kubectl is in test/tools/cli-package.test.ts.
import { describe, expect, it } from "vitest";
import { registerDeploymentsCommand } from "../../src/commands/deployments.ts";
import { registerPlanCommand } from "../../src/commands/plan-command.ts";
import { EXIT } from "../../src/commands/program.ts";
import {
  isCompletionExecutable,
  KUBECTL_PLUGIN_NAME,
  PROGRAM_NAME,
  programNameOf,
} from "../../src/commands/program-name.ts";
import { runCli } from "../support/cli.ts";

const commands = [registerDeploymentsCommand, registerPlanCommand];

describe("programNameOf", () => {
  it("is `kubectl dms` for the kubectl plugin's executable, as npm links it and as its shims run it", () => {
    for (const script of [
      "/usr/local/bin/kubectl-dms",
      "/usr/local/lib/node_modules/dms-operator/bin/kubectl-dms.mjs",
      "kubectl-dms.mjs",
      "C:/Users/me/AppData/Roaming/npm/node_modules/dms-operator/bin/Kubectl-Dms.mjs",
    ])
      expect(programNameOf(script), script).toBe(KUBECTL_PLUGIN_NAME);
  });

  it("is `dms-operator` for every other way of starting it", () => {
    for (const script of [
      "/usr/local/bin/dms-operator",
      "/repo/bin/dms-operator.mjs",
      "/repo/src/cli.ts",
      "/repo/dist/cli.js",
      "/usr/local/bin/kubectl-dms-plan",
      "/usr/local/bin/kubectl",
      undefined,
    ])
      expect(programNameOf(script), String(script)).toBe(PROGRAM_NAME);
  });
});

describe("isCompletionExecutable", () => {
  it("is true for kubectl's completer of the plugin only, as npm links it and as its shims run it", () => {
    for (const script of [
      "/usr/local/bin/kubectl_complete-dms",
      "/x/bin/kubectl_complete-dms.mjs",
      "kubectl_complete-dms.cmd",
    ])
      expect(isCompletionExecutable(script), script).toBe(true);
    for (const script of [
      "/usr/local/bin/kubectl-dms",
      "/usr/local/bin/dms-operator",
      "kubectl_complete-dmsx",
      undefined,
    ])
      expect(isCompletionExecutable(script), String(script)).toBe(false);
  });
});

describe("help and usage texts under a program name", () => {
  it("say `kubectl dms` for the program and each command", async () => {
    const top = await runCli(["--help"], { commands, name: KUBECTL_PLUGIN_NAME });
    expect(top.code).toBe(EXIT.ok);
    expect(top.stdout).toMatch(/^Usage: kubectl dms \[options\] \[command\]\n/);
    const plan = await runCli(["plan", "--help"], { commands, name: KUBECTL_PLUGIN_NAME });
    expect(plan.stdout).toMatch(/^Usage: kubectl dms plan \[options\]\n/);
    const list = await runCli(["deployments", "list", "--help"], { commands, name: KUBECTL_PLUGIN_NAME });
    expect(list.stdout).toMatch(/^Usage: kubectl dms deployments list \[options\]\n/);
  });

  it("list the same commands and options as `dms-operator`", async () => {
    const plugin = await runCli(["--help"], { commands, name: KUBECTL_PLUGIN_NAME });
    const own = await runCli(["--help"], { commands });
    expect(own.stdout).toMatch(/^Usage: dms-operator \[options\] \[command\]\n/);
    expect(plugin.stdout.replace("Usage: kubectl dms", "Usage: dms-operator")).toBe(own.stdout);
  });

  it("keep commander's usage errors and suggestions", async () => {
    const typo = await runCli(["plna"], { commands, name: KUBECTL_PLUGIN_NAME });
    expect(typo.code).toBe(EXIT.failed);
    expect(typo.stderr).toContain("error: unknown command 'plna'");
    expect(typo.stderr).toContain("(Did you mean plan?)");
  });
});
