// `kubectl dms <command>` is every command of the program but the operator's own (`run`,
// `simulator`): src/commands/registry.ts's list, read here so a command added there is checked too.
// The ones that read a cluster take kubectl's flags: `--kubeconfig <path>`, `--context <name>`, and
// `-n, --namespace <ns>` where a namespace is given. The CLI guide's plugin table names each of them,
// and which find the cluster as kubectl does.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Command } from "commander";
import { describe, expect, it } from "vitest";
import { kubeconfigCluster } from "../../src/commands/connections.ts";
import type { CliContext, RegisterCommand } from "../../src/commands/context.ts";
import { createProgram } from "../../src/commands/program.ts";
import { KUBECTL_PLUGIN_NAME } from "../../src/commands/program-name.ts";
import { COMMANDS } from "../../src/commands/registry.ts";
import { defaultKubeconfig, resourceCluster } from "../../src/commands/resource-cluster.ts";
import { UsageError } from "../../src/commands/usage-error.ts";

const CLI_GUIDE = join(import.meta.dirname, "..", "..", "docs", "guide", "cli.md");

/**
 * The verbs shaped after kubectl's and flux's (they only read and annotate resources of the
 * cluster): they find the cluster as kubectl does, like `logs` and `revisions`.
 */
const PLUGIN_VERBS = ["status", "reconcile", "suspend", "resume", "rollout-now", "rebuild", "version"];

/** The registry's commands, loaded; the kubectl plugin's only with `plugin`. */
async function registeredCommands(plugin = true): Promise<{ name: string; register: RegisterCommand }[]> {
  const entries = COMMANDS.filter((c) => !(plugin && c.operatorOnly));
  return Promise.all(entries.map(async (c) => ({ name: c.name, register: await c.load() })));
}

const ctx: CliContext = {
  out: () => {},
  err: () => {},
  stdoutIsTTY: false,
  env: {},
  stopSignal: new AbortController().signal,
};

/** `command` and every subcommand under it. */
const walk = (command: Command): Command[] => [command, ...command.commands.flatMap(walk)];
const path = (command: Command): string =>
  command.parent ? `${path(command.parent)} ${command.name()}` : command.name();

describe("kubectl dms", () => {
  it("has every command of the program but run and simulator", async () => {
    const all = await registeredCommands(false);
    expect(all.map((c) => c.name)).toEqual(expect.arrayContaining(["run", "simulator", "plan", "import"]));
    const commands = await registeredCommands();
    expect(all.map((c) => c.name).filter((n) => !commands.some((c) => c.name === n))).toEqual([
      "run",
      "simulator",
    ]);
    const program = createProgram(
      ctx,
      commands.map((c) => c.register),
      KUBECTL_PLUGIN_NAME,
    );
    expect(program.commands.map((c) => c.name())).toEqual(commands.map((c) => c.name));
  });

  it("takes kubectl's flags in every command that reads a kubeconfig", async () => {
    const program = createProgram(
      ctx,
      (await registeredCommands()).map((c) => c.register),
      KUBECTL_PLUGIN_NAME,
    );
    const readers = walk(program).filter((c) => c.options.some((o) => o.long === "--kubeconfig"));
    expect(readers.map(path)).toEqual(expect.arrayContaining(["kubectl dms plan", "kubectl dms import"]));
    for (const command of readers) {
      const option = (long: string) => command.options.find((o) => o.long === long);
      expect(option("--kubeconfig")?.flags, path(command)).toBe("--kubeconfig <path>");
      expect(option("--context")?.flags, path(command)).toBe("--context <name>");
      const namespace = option("--namespace");
      if (namespace) expect(namespace.flags, path(command)).toBe("-n, --namespace <ns>");
    }
    // `-n` means the namespace wherever a command takes it, never anything else.
    for (const command of walk(program))
      for (const o of command.options.filter((o) => o.short === "-n"))
        expect(o.long, path(command)).toBe("--namespace");
  });

  it("the CLI guide's plugin table names every command that reads a cluster, and those that default to KUBECONFIG and ~/.kube/config", async () => {
    const program = createProgram(
      ctx,
      (await registeredCommands()).map((c) => c.register),
      KUBECTL_PLUGIN_NAME,
    );
    const readers = walk(program).filter((c) => c.options.some((o) => o.long === "--kubeconfig"));
    // A command whose --kubeconfig help names ~/.kube/config finds the cluster as kubectl does.
    const kubectlLike = readers.filter((c) =>
      c.options.find((o) => o.long === "--kubeconfig")?.description.includes("~/.kube/config"),
    );
    expect(kubectlLike.map(path).sort()).toEqual(
      ["logs", "revisions", ...PLUGIN_VERBS].map((verb) => `kubectl dms ${verb}`).sort(),
    );
    const section = readFileSync(CLI_GUIDE, "utf8").split("## kubectl plugin")[1]?.split("\n## ")[0] ?? "";
    const row = (first: string) => {
      const line = section.split("\n").find((l) => l.startsWith(`| ${first} |`));
      expect(line, `docs/guide/cli.md's kubectl plugin table has a row ${first}`).toBeDefined();
      return line?.split(" | ")[2] ?? "";
    };
    for (const command of readers) expect(row("`--kubeconfig <file>`")).toContain(`\`${command.name()}\``);
    for (const command of kubectlLike) {
      expect(row("`KUBECONFIG=a:b:c`"), path(command)).toContain(`\`${command.name()}\``);
      expect(row("neither"), path(command)).toContain(`\`${command.name()}\``);
      expect(row("`--context <name>`"), path(command)).toContain(`\`${command.name()}\``);
    }
  });
});

describe("the kubeconfig of the verbs, logs and revisions", () => {
  it("takes an empty --kubeconfig for none given, as kubectl does", () => {
    const env = { KUBECONFIG: "/clusters/dev.yaml" };
    expect(defaultKubeconfig({ kubeconfig: "" }, env)).toEqual({ request: {}, env });
    expect(defaultKubeconfig({ kubeconfig: "", context: "dev" }, env)).toEqual({
      request: { context: "dev" },
      env,
    });
    expect(defaultKubeconfig({ kubeconfig: "/a.yaml" }, env)).toEqual({
      request: { kubeconfig: "/a.yaml" },
      env: {},
    });
  });

  it("takes --service with an empty --kubeconfig: no cluster flag given", () => {
    expect(resourceCluster({ service: true, kubeconfig: "" }, {}, "test")).toBeUndefined();
    expect(() => resourceCluster({ service: true, kubeconfig: "/a.yaml" }, {}, "test")).toThrow(
      /drop --kubeconfig/,
    );
  });
});

describe("the kubeconfig of plan and import", () => {
  it("refuses an empty --kubeconfig, naming it, rather than reading another cluster or none", () => {
    const refused = (() => {
      try {
        kubeconfigCluster({ kubeconfig: "" }, "test");
      } catch (error) {
        return error;
      }
    })();
    expect(refused).toBeInstanceOf(UsageError);
    expect(String((refused as Error).message)).toMatch(/^--kubeconfig is empty: name the kubeconfig file/);
    expect(kubeconfigCluster({}, "test").kube).toBeUndefined();
  });
});
