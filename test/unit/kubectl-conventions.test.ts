// `kubectl dms <command>` is every command of the program (src/cli.ts's list, read here so a
// command added there is checked too), and the ones that read a cluster take kubectl's flags:
// `--kubeconfig <path>`, `--context <name>`, and `-n, --namespace <ns>` where a namespace is given.
// The CLI guide's plugin table names each of them, and which find the cluster as kubectl does.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Command } from "commander";
import { describe, expect, it } from "vitest";
import type { CliContext, RegisterCommand } from "../../src/commands/context.ts";
import { createProgram } from "../../src/commands/program.ts";
import { KUBECTL_PLUGIN_NAME } from "../../src/commands/program-name.ts";

const CLI = join(import.meta.dirname, "..", "..", "src", "cli.ts");
const CLI_GUIDE = join(import.meta.dirname, "..", "..", "docs", "guide", "cli.md");

/** src/cli.ts's COMMANDS, loaded as it loads them (importing cli.ts would run the program). */
async function registeredCommands(): Promise<{ name: string; register: RegisterCommand }[]> {
  const source = readFileSync(CLI, "utf8");
  const entries = [
    ...source.matchAll(
      /\{\s*name: "([\w-]+)",\s*load: async \(\) => \(await import\("(\.\/commands\/[\w-]+\.ts)"\)\)\.(\w+)/g,
    ),
  ];
  // Every entry of the list is understood, so none escapes the checks below.
  expect(entries.length).toBe([...source.matchAll(/\{\s*name: "/g)].length);
  return Promise.all(
    entries.map(async ([, name, path, exported]) => {
      const module = (await import(new URL(path ?? "", `file://${CLI}`).href)) as Record<string, unknown>;
      const register = module[exported ?? ""];
      if (typeof register !== "function") throw new Error(`${path} exports no ${exported}`);
      return { name: name ?? "", register: register as RegisterCommand };
    }),
  );
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
  it("has every command of the program", async () => {
    const commands = await registeredCommands();
    expect(commands.map((c) => c.name)).toEqual(expect.arrayContaining(["run", "plan", "import"]));
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
    expect(kubectlLike.map(path).sort()).toEqual(["kubectl dms logs", "kubectl dms revisions"]);
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
