/**
 * `completion bash|zsh|fish`: a completion script for the program (`dms-operator`, or
 * `kubectl-dms` when run as the kubectl plugin), generated from its own command tree, so a new
 * command or flag is completed without touching this file. It completes commands, subcommands,
 * flags, the values of flags that take one of a list (`-o`, `--status`, `--type`), and the names
 * of Deployment resources (`kubectl get deployments.dms.dev -o name`, with the `-n`,
 * `--kubeconfig` and `--context` already typed) where a command takes them, every argument of a
 * command taking several. The zsh and fish scripts show what each is beside it: a flag's help, a
 * value's description (words.ts's VALUE_DESCRIPTIONS, as `kubectl dms`'s completer gives them), a
 * resource's Ready condition. kubectl's own completion of `kubectl dms …`
 * (bin/kubectl_complete-dms.mjs) answers from completion-table.ts instead (completion-plugin.ts),
 * which {@link completionTableSource} writes from the same tree. The scripts themselves:
 * completion-scripts.ts.
 */
import { type Command, InvalidArgumentError } from "commander";
import type { CompletionFlag, CompletionNode } from "./completion-node.ts";
import { bashScript, fishScript, zshScript } from "./completion-scripts.ts";
import type { RegisterCommand } from "./context.ts";
import { commandEntriesOf, createProgram, loadCommands } from "./program.ts";
import { KUBECTL_PLUGIN_EXECUTABLE, KUBECTL_PLUGIN_NAME, PROGRAM_NAME } from "./program-name.ts";
import { DEPLOYMENT_STATUSES, SHELLS, type Shell } from "./words.ts";

/** Values of flags that take free text, where the service lists the usual ones. */
const KNOWN_VALUES: Readonly<Record<string, readonly string[]>> = { "--status": DEPLOYMENT_STATUSES };

/**
 * The completion tree of `program`: every command under it (help excluded) and its flags (hidden
 * ones excluded), depth first.
 */
export function completionNodes(program: Command): CompletionNode[] {
  const nodes: CompletionNode[] = [];
  const walk = (command: Command, path: string[]) => {
    const subs = command.commands.filter((c) => c.name() !== "help");
    const resource = command.registeredArguments.find((a) => a.name() === "name" || a.name() === "resource");
    nodes.push({
      path,
      flags: [
        ...command.options
          .filter((o) => !o.hidden)
          .map((o): CompletionFlag => {
            const values = o.argChoices ?? (o.long ? KNOWN_VALUES[o.long] : undefined);
            return {
              ...(o.long ? { long: o.long } : {}),
              ...(o.short ? { short: o.short } : {}),
              takesValue: o.required || o.optional,
              description: o.description,
              ...(values ? { values: [...values] } : {}),
            };
          }),
        { long: "--help", short: "-h", takesValue: false, description: "display help" },
      ],
      subcommands: subs.map((c) => c.name()),
      takesResource: resource !== undefined,
      ...(resource?.variadic ? { variadic: true } : {}),
    });
    for (const sub of subs) walk(sub, [...path, sub.name()]);
  };
  walk(program, []);
  return nodes;
}

/** The script for `shell` of the program named `name`, its commands being `commands`. */
export function completionScript(shell: Shell, name: string, program: Command): string {
  const executable = name === KUBECTL_PLUGIN_NAME ? KUBECTL_PLUGIN_EXECUTABLE : PROGRAM_NAME;
  const nodes = completionNodes(program);
  if (shell === "bash") return bashScript(executable, nodes);
  if (shell === "zsh") return zshScript(executable, nodes);
  return fishScript(executable, nodes);
}

function shellArgument(value: string): Shell {
  const shell = SHELLS.find((s) => s === value);
  if (!shell) throw new InvalidArgumentError(`must be one of ${SHELLS.join(", ")}.`);
  return shell;
}

/** Registers `completion <shell>`. */
export const registerCompletionCommand: RegisterCommand = (program, ctx) => {
  program
    .command("completion")
    .description(
      "print a completion script for bash, zsh or fish: commands, flags, and Deployment resource names (read with kubectl); e.g. source <(dms-operator completion bash), or write it to your shell's completion directory",
    )
    .argument("<shell>", `${SHELLS.join(", ")}`, shellArgument)
    .action(async (shell: Shell) => {
      const name = program.name();
      // Every command of the program, loaded to read its flags (this command only is slow to start).
      const registers = await loadCommands(commandEntriesOf(program));
      const full = createProgram(ctx, registers, name);
      ctx.out(completionScript(shell, name, full));
    });
};

/**
 * The TypeScript source of completion-table.ts: the plugin's command tree, `nodes`, written out,
 * each distinct flag once (most commands share the service's and kubectl's flags)
 * (test/unit/cli-completion.test.ts checks it against the commands, and rewrites it under
 * `UPDATE_COMPLETION_TABLE=1`).
 */
export function completionTableSource(nodes: readonly CompletionNode[]): string {
  const flags: CompletionFlag[] = [];
  const index = new Map<string, number>();
  const indexOf = (flag: CompletionFlag) => {
    const key = JSON.stringify(flag);
    if (!index.has(key)) index.set(key, flags.push(flag) - 1);
    return index.get(key);
  };
  const compact = nodes.map(({ flags: own, ...node }) => ({ ...node, flags: own.map(indexOf) }));
  return `/**
 * The command tree of \`kubectl dms\` as completion sees it: written out from the commands by
 * test/unit/cli-completion.test.ts (UPDATE_COMPLETION_TABLE=1 vitest run
 * test/unit/cli-completion.test.ts rewrites it), so that a TAB loads no command (see
 * completion-plugin.ts). Each flag is written once, in FLAGS; a command lists the indexes of its
 * own. Do not edit by hand.
 */
import type { CompletionFlag, CompletionNode } from "./completion-node.ts";

const FLAGS: readonly CompletionFlag[] = ${JSON.stringify(flags)};

const NODES: readonly (Omit<CompletionNode, "flags"> & { flags: readonly number[] })[] = ${JSON.stringify(compact)};

export const PLUGIN_COMPLETION: readonly CompletionNode[] = NODES.map((node) => ({
  ...node,
  flags: node.flags.flatMap((i) => FLAGS[i] ?? []),
}));
`;
}
