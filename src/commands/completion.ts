/**
 * `completion bash|zsh|fish`: a completion script for the program (`dms-operator`, or
 * `kubectl-dms` when run as the kubectl plugin), generated from its own command tree, so a new
 * command or flag is completed without touching this file. kubectl's own completion of
 * `kubectl dms …` asks {@link completePlugin} (bin/kubectl_complete-dms.mjs) instead. It completes commands, subcommands and
 * flags, and the names of Deployment resources (`kubectl get deployments.dms.dev -o name`, with
 * the `-n`, `--kubeconfig` and `--context` already typed) where a command takes one. The zsh
 * script is the bash one under zsh's `bashcompinit`.
 */
import { type Command, InvalidArgumentError } from "commander";
import { isRecord } from "../json.ts";
import { DEPLOYMENTS } from "../kube/deployments.ts";
import { listItems } from "../kube/object.ts";
import { collectionPath } from "../kube/reflector.ts";
import type { CommandEntry } from "./command-entry.ts";
import type { CliContext, RegisterCommand } from "./context.ts";
import { pluginCluster } from "./plugin-cluster.ts";
import { commandEntriesOf, createProgram, EXIT, loadCommand, loadCommands } from "./program.ts";
import { KUBECTL_PLUGIN_EXECUTABLE, KUBECTL_PLUGIN_NAME, PROGRAM_NAME } from "./program-name.ts";

/** The shells a script is written for. */
export const SHELLS = ["bash", "zsh", "fish"] as const;
export type Shell = (typeof SHELLS)[number];

/** A command as completion sees it: its path of names, its flags, and whether it takes a resource name. */
export interface CompletionNode {
  /** e.g. `["deployments", "list"]`. */
  path: string[];
  flags: { long?: string; short?: string; takesValue: boolean; description: string }[];
  subcommands: string[];
  /** Takes a Deployment resource's name as its argument (`<name>` or `<resource>`). */
  takesResource: boolean;
}

/** The completion tree of `program`: every command under it (help excluded), depth first. */
export function completionNodes(program: Command): CompletionNode[] {
  const nodes: CompletionNode[] = [];
  const walk = (command: Command, path: string[]) => {
    const subs = command.commands.filter((c) => c.name() !== "help");
    nodes.push({
      path,
      flags: [
        ...command.options.map((o) => ({
          ...(o.long ? { long: o.long } : {}),
          ...(o.short ? { short: o.short } : {}),
          takesValue: o.required || o.optional,
          description: o.description,
        })),
        { long: "--help", short: "-h", takesValue: false, description: "display help" },
      ],
      subcommands: subs.map((c) => c.name()),
      takesResource: command.registeredArguments.some((a) => a.name() === "name" || a.name() === "resource"),
    });
    for (const sub of subs) walk(sub, [...path, sub.name()]);
  };
  walk(program, []);
  return nodes;
}

const flagWords = (node: CompletionNode) =>
  node.flags.flatMap((f) => [f.long, f.short].filter((w): w is string => w !== undefined));

/** Flags that take a value, in any command: the word after them is not a command. */
const valueFlags = (nodes: readonly CompletionNode[]) =>
  [
    ...new Set(nodes.flatMap((n) => n.flags.filter((f) => f.takesValue).flatMap((f) => [f.long, f.short]))),
  ].filter((w): w is string => w !== undefined);

/** The function name for `executable`: `_dms_operator`. */
const functionName = (executable: string) => `_${executable.replace(/[^A-Za-z0-9]/g, "_")}`;

/** The bash script (also the body of the zsh one). */
export function bashScript(executable: string, nodes: readonly CompletionNode[]): string {
  const fn = functionName(executable);
  const cases = nodes.map((node) => {
    const path = node.path.join(" ");
    const words = [...node.subcommands, ...flagWords(node)].join(" ");
    const names = node.takesResource ? "names=1; " : "";
    const exact = `    ${JSON.stringify(path)}) words=${JSON.stringify(words)}; ${names};;`;
    // After a leaf command's argument: its flags still.
    const after =
      node.subcommands.length === 0 && path !== ""
        ? `\n    ${JSON.stringify(`${path} `)}*) words=${JSON.stringify(flagWords(node).join(" "))} ;;`
        : "";
    return exact + after;
  });
  return `# bash completion for ${executable}, written by \`${executable === KUBECTL_PLUGIN_EXECUTABLE ? KUBECTL_PLUGIN_NAME : executable} completion bash\`.
# Load it now with: source <(${executable === KUBECTL_PLUGIN_EXECUTABLE ? KUBECTL_PLUGIN_NAME : executable} completion bash)
${fn}_names() {
  kubectl get deployments.dms.dev -o name "$@" 2>/dev/null | sed 's|^[^/]*/||'
}
${fn}() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}"
  local path="" words="" names=0 i w
  local kube=()
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    case "$w" in
      -n|--namespace|--kubeconfig|--context)
        kube+=("$w" "\${COMP_WORDS[i+1]}"); ((i++)) ;;
      ${valueFlags(nodes)
        .filter((f) => !["-n", "--namespace", "--kubeconfig", "--context"].includes(f))
        .join("|")})
        ((i++)) ;;
      -*) ;;
      *) path="\${path:+$path }$w" ;;
    esac
  done
  case "$prev" in
    ${valueFlags(nodes).join("|")})
      COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
  esac
  case "$path" in
${cases.join("\n")}
  esac
  if [[ "$cur" != -* && $names == 1 ]]; then
    COMPREPLY=($(compgen -W "$(${fn}_names "\${kube[@]}")" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
  fi
  return 0
}
complete -F ${fn} ${executable}
`;
}

/** The zsh script: the bash one under `bashcompinit`. */
export function zshScript(executable: string, nodes: readonly CompletionNode[]): string {
  return `#compdef ${executable}
# zsh completion for ${executable}: the bash completion under zsh's bashcompinit.
# Load it now with: source <(${executable === KUBECTL_PLUGIN_EXECUTABLE ? KUBECTL_PLUGIN_NAME : executable} completion zsh)
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit
${bashScript(executable, nodes)}`;
}

const fishQuote = (text: string) => `'${text.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;

/** The fish script. */
export function fishScript(executable: string, nodes: readonly CompletionNode[]): string {
  const fn = functionName(executable).slice(1);
  const skip = valueFlags(nodes).join(" ");
  const lines = [
    `# fish completion for ${executable}: ${executable === KUBECTL_PLUGIN_EXECUTABLE ? KUBECTL_PLUGIN_NAME : executable} completion fish | source`,
    `function __${fn}_path`,
    "    set -l words (commandline -opc)",
    "    set -e words[1]",
    "    set -l path",
    "    set -l skip 0",
    "    for w in $words",
    "        if test $skip = 1",
    "            set skip 0",
    "            continue",
    "        end",
    "        switch $w",
    `            case ${skip}`,
    "                set skip 1",
    "            case '-*'",
    "            case '*'",
    "                set -a path $w",
    "        end",
    "    end",
    "    string join ' ' -- $path",
    "end",
    `function __${fn}_names`,
    "    set -l words (commandline -opc)",
    "    set -l args",
    "    for i in (seq (count $words))",
    "        switch $words[$i]",
    "            case -n --namespace --kubeconfig --context",
    "                set -a args $words[$i] $words[(math $i + 1)]",
    "        end",
    "    end",
    "    kubectl get deployments.dms.dev -o name $args 2>/dev/null | string replace -r '^[^/]*/' ''",
    "end",
    `complete -c ${executable} -f`,
  ];
  for (const node of nodes) {
    const path = node.path.join(" ");
    const at = `test (__${fn}_path) = ${fishQuote(path)}`;
    const within =
      path === "" ? "true" : `string match -q -r -- ${fishQuote(`^${path}( |$)`)} (__${fn}_path)`;
    for (const sub of node.subcommands)
      lines.push(
        `complete -c ${executable} -n ${fishQuote(path === "" ? `test -z (__${fn}_path)` : at)} -a ${sub}`,
      );
    if (node.takesResource) lines.push(`complete -c ${executable} -n ${fishQuote(at)} -a '(__${fn}_names)'`);
    for (const flag of node.flags) {
      const parts = [
        `complete -c ${executable} -n ${fishQuote(node.subcommands.length > 0 && path !== "" ? at : within)}`,
      ];
      if (flag.long) parts.push(`-l ${flag.long.slice(2)}`);
      if (flag.short) parts.push(`-s ${flag.short.slice(1)}`);
      if (flag.takesValue) parts.push("-r");
      parts.push(`-d ${fishQuote(flag.description.split(/[;:(]/)[0]?.trim().slice(0, 60) ?? "")}`);
      lines.push(parts.join(" "));
    }
  }
  return `${lines.join("\n")}\n`;
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

/** Cobra's shell completion directives, which kubectl relays from a plugin's completer. */
export const DIRECTIVE = { files: 0, noFiles: 4 } as const;

/** Most resource names offered; each completion lists at most this many from the API server. */
export const MAX_COMPLETED_NAMES = 500;
/** A completion's call to the API server ends within this (the user waits on a TAB). */
export const COMPLETION_TIMEOUT_MS = 5000;

/** The Deployment resources' names for a completion, or none when the cluster cannot say. */
export type NameLister = (
  flags: { kubeconfig?: string; context?: string; namespace?: string },
  ctx: CliContext,
) => Promise<string[]>;

const listResourceNames: NameLister = async (flags, ctx) => {
  try {
    const cluster = pluginCluster(flags, ctx.env, "kubectl-dms-completion");
    const list = await cluster.client.request({
      method: "GET",
      path: collectionPath(DEPLOYMENTS, cluster.namespace),
      query: { limit: MAX_COMPLETED_NAMES },
      timeoutMs: COMPLETION_TIMEOUT_MS,
      signal: ctx.stopSignal,
    });
    return listItems(list).flatMap((item) =>
      isRecord(item) && isRecord(item.metadata) && typeof item.metadata.name === "string"
        ? [item.metadata.name]
        : [],
    );
  } catch {
    // A TAB shows nothing rather than an error in the middle of the command line.
    return [];
  }
};

/**
 * The candidates for the last of `words` (the words after `kubectl dms`, the last one being
 * completed, possibly empty) and the directive for the shell: command names from the registry
 * alone; past a command, only that command is loaded, and its subcommands, flags and (where it
 * takes one) the Deployment resources' names of the namespace typed (`-n`, `--kubeconfig`,
 * `--context`) are offered; after a flag that takes a value, the shell's own file completion.
 */
export async function completions(
  words: readonly string[],
  ctx: CliContext,
  entries: readonly CommandEntry[],
  names: NameLister = listResourceNames,
): Promise<{ candidates: string[]; directive: number }> {
  const typed = words.slice(0, -1);
  const partial = words.at(-1) ?? "";
  const offer = (all: readonly string[], directive: number = DIRECTIVE.noFiles) => ({
    candidates: all.filter((c) => c.startsWith(partial)),
    directive,
  });
  const first = typed.find((w) => !w.startsWith("-"));
  if (first === undefined)
    return offer(
      partial.startsWith("-")
        ? ["--help", "--version", "--verbose"]
        : [...entries.map((e) => e.name), "help"],
    );
  const entry = entries.find((e) => e.name === first);
  if (!entry) return offer([]);
  const nodes = completionNodes(createProgram(ctx, [await loadCommand(entry)], KUBECTL_PLUGIN_NAME));
  const takesValue = new Set(valueFlags(nodes));
  const given: Record<string, string> = {};
  const positional: string[] = [];
  for (let i = 0; i < typed.length; i++) {
    const word = typed[i] ?? "";
    const [flag, inline] =
      word.startsWith("--") && word.includes("=") ? word.split(/=(.*)/s) : [word, undefined];
    if (flag?.startsWith("-")) {
      const value = inline ?? (takesValue.has(flag) ? typed[++i] : undefined);
      if (value !== undefined && flag) given[flag] = value;
      continue;
    }
    positional.push(word);
  }
  const prev = typed.at(-1) ?? "";
  if (takesValue.has(prev)) return { candidates: [], directive: DIRECTIVE.files };
  // The path of command names typed (`deployments list`); the other words are arguments.
  let path: string[] = [];
  let args = 0;
  for (const word of positional) {
    const deeper = [...path, word].join(" ");
    if (nodes.some((n) => n.path.join(" ") === deeper)) path = [...path, word];
    else args++;
  }
  const node = nodes.find((n) => n.path.join(" ") === path.join(" "));
  if (!node) return offer([]);
  if (partial.startsWith("-"))
    return offer(node.flags.flatMap((f) => [f.long, f.short]).filter((w): w is string => !!w));
  if (node.subcommands.length > 0) return offer(node.subcommands);
  if (node.takesResource && args === 0) {
    const flags = {
      ...(given["--kubeconfig"] ? { kubeconfig: given["--kubeconfig"] } : {}),
      ...(given["--context"] ? { context: given["--context"] } : {}),
      ...((given["-n"] ?? given["--namespace"]) ? { namespace: given["-n"] ?? given["--namespace"] } : {}),
    };
    return offer(await names(flags, ctx));
  }
  return offer([]);
}

/**
 * Prints the {@link completions} of `words` as kubectl reads a plugin's completer's answer;
 * `entries` are the program's (the plugin's commands are those not the operator's own).
 */
export async function completePlugin(
  words: readonly string[],
  ctx: CliContext,
  entries: readonly CommandEntry[],
): Promise<number> {
  const { candidates, directive } = await completions(
    words,
    ctx,
    entries.filter((c) => !c.operatorOnly),
  );
  ctx.out(`${candidates.map((c) => `${c}\n`).join("")}:${directive}\n`);
  return EXIT.ok;
}
