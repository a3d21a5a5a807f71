/**
 * kubectl's completion of `kubectl dms …` (bin/kubectl_complete-dms.mjs): on each TAB kubectl
 * starts this with the words typed after `dms`, the last one being completed, and offers what it
 * prints, one candidate a line (`candidate<TAB>description` where there is one to give), then
 * `:<directive>`.
 *
 * Answered from static word lists (completion-table.ts, the plugin's command tree written out
 * and checked against the commands by test/unit/cli-completion.test.ts): no command is loaded,
 * not even commander, so a TAB starts as fast as `node` itself. Only the names of Deployment
 * resources are asked of the API server, with the Kubernetes client loaded then.
 */
import type { CompletionNode } from "./completion-node.ts";
import { PLUGIN_COMPLETION } from "./completion-table.ts";
import type { CliContext } from "./context.ts";
import { VALUE_DESCRIPTIONS } from "./words.ts";

// biome-ignore lint/suspicious/noControlCharactersInRegex: replacing them is the point
const CONTROLS = /[\u0000-\u001f\u007f]/g;

/** Cobra's shell completion directives, which kubectl relays from a plugin's completer. */
export const DIRECTIVE = { files: 0, noFiles: 4 } as const;

/** Most resource names offered; each completion lists at most this many from the API server. */
export const MAX_COMPLETED_NAMES = 500;
/** A completion's call to the API server ends within this (the user waits on a TAB). */
export const COMPLETION_TIMEOUT_MS = 5000;

/** A candidate and what it is, for the shell to show beside it. */
export interface Candidate {
  value: string;
  description?: string;
}

/** The Deployment resources' names (and their state) for a completion, or none when the cluster cannot say. */
export type NameLister = (
  flags: { kubeconfig?: string; context?: string; namespace?: string },
  ctx: CliContext,
) => Promise<Candidate[]>;

const listResourceNames: NameLister = async (flags, ctx) => {
  try {
    const [{ pluginCluster }, { DEPLOYMENTS }, { listItems }, { collectionPath }, { isRecord }] =
      await Promise.all([
        import("./plugin-cluster.ts"),
        import("../kube/custom-resources.ts"),
        import("../kube/listing.ts"),
        import("../kube/object.ts"),
        import("../runtime/json.ts"),
      ]);
    const cluster = pluginCluster(flags, ctx.env, "kubectl-dms-completion");
    const list = await cluster.client.request({
      method: "GET",
      path: collectionPath(DEPLOYMENTS, cluster.namespace),
      query: { limit: MAX_COMPLETED_NAMES },
      timeoutMs: COMPLETION_TIMEOUT_MS,
      signal: ctx.stopSignal,
    });
    return listItems(list).flatMap((item) => {
      if (!isRecord(item) || !isRecord(item.metadata) || typeof item.metadata.name !== "string") return [];
      const conditions =
        isRecord(item.status) && Array.isArray(item.status.conditions) ? item.status.conditions : [];
      const ready = conditions.find((c) => isRecord(c) && c.type === "Ready");
      const paused =
        isRecord(item.metadata.annotations) && item.metadata.annotations["dms.dev/paused"] === "true";
      const state = isRecord(ready)
        ? `Ready=${String(ready.status)}${typeof ready.reason === "string" ? ` ${ready.reason}` : ""}`
        : "not reconciled yet";
      // One line each: a name or reason with a control character would break the shell's list.
      const description = `${state}${paused ? ", suspended" : ""}`.replace(CONTROLS, " ");
      return [{ value: item.metadata.name, description }];
    });
  } catch {
    // A TAB shows nothing rather than an error in the middle of the command line.
    return [];
  }
};

/** The candidates of `values`, each with its description where the word lists have one. */
const described = (values: readonly string[]): Candidate[] =>
  values.map((value) => {
    const description = VALUE_DESCRIPTIONS[value];
    return description === undefined ? { value } : { value, description };
  });

/**
 * The candidates for the last of `words` (the words after `kubectl dms`, the last one being
 * completed, possibly empty) and the directive for the shell, from `nodes` (the plugin's command
 * tree): command names; past a command, its subcommands, flags and (where it takes one) the
 * Deployment resources' names of the namespace typed (`-n`, `--kubeconfig`, `--context`); after a
 * flag that takes one of a list of values (`-o`, `--status`, `--type`), those values; after
 * another flag that takes a value, the shell's own file completion.
 */
export async function completions(
  words: readonly string[],
  ctx: CliContext,
  nodes: readonly CompletionNode[] = PLUGIN_COMPLETION,
  names: NameLister = listResourceNames,
): Promise<{ candidates: Candidate[]; directive: number }> {
  const typed = words.slice(0, -1);
  const partial = words.at(-1) ?? "";
  const offer = (all: readonly (string | Candidate)[], directive: number = DIRECTIVE.noFiles) => ({
    candidates: all
      .map((c) => (typeof c === "string" ? { value: c } : c))
      .filter((c) => c.value.startsWith(partial)),
    directive,
  });
  const root = nodes.find((n) => n.path.length === 0);
  const first = typed.find((w) => !w.startsWith("-"));
  if (first === undefined)
    return offer(
      partial.startsWith("-") ? ["--help", "--version", "--verbose"] : [...(root?.subcommands ?? []), "help"],
    );
  const own = nodes.filter((n) => n.path[0] === first);
  if (own.length === 0) return offer([]);
  const flagOf = (word: string) =>
    own.flatMap((n) => n.flags).find((f) => f.long === word || f.short === word);
  const given: Record<string, string> = {};
  const positional: string[] = [];
  for (let i = 0; i < typed.length; i++) {
    const word = typed[i] ?? "";
    const [flag, inline] =
      word.startsWith("--") && word.includes("=") ? word.split(/=(.*)/s) : [word, undefined];
    if (flag?.startsWith("-")) {
      const value = inline ?? (flagOf(flag)?.takesValue ? typed[++i] : undefined);
      if (value !== undefined && flag) given[flag] = value;
      continue;
    }
    positional.push(word);
  }
  // The path of command names typed (`deployments list`); the other words are arguments.
  let path: string[] = [];
  const args: string[] = [];
  for (const word of positional) {
    const deeper = [...path, word].join(" ");
    if (args.length === 0 && nodes.some((n) => n.path.join(" ") === deeper)) path = [...path, word];
    else args.push(word);
  }
  const node = nodes.find((n) => n.path.join(" ") === path.join(" "));
  if (!node) return offer([]);
  const nodeFlag = (word: string) => node.flags.find((f) => f.long === word || f.short === word);
  // A value being typed: after `-o ` or inline as `--output=`.
  const inline = /^(--[^=]+)=(.*)$/s.exec(partial);
  const valued = inline ? nodeFlag(inline[1] ?? "") : undefined;
  if (valued?.values) {
    const prefix = `${inline?.[1]}=`;
    const rest = inline?.[2] ?? "";
    return {
      candidates: described(valued.values)
        .filter((c) => c.value.startsWith(rest))
        .map((c) => ({ ...c, value: prefix + c.value })),
      directive: DIRECTIVE.noFiles,
    };
  }
  const prev = typed.at(-1) ?? "";
  const before = prev.startsWith("-") && !prev.includes("=") ? nodeFlag(prev) : undefined;
  if (before?.takesValue) {
    if (before.values) return offer(described(before.values));
    return { candidates: [], directive: DIRECTIVE.files };
  }
  if (partial.startsWith("-"))
    return offer(node.flags.flatMap((f) => [f.long, f.short]).filter((w): w is string => !!w));
  if (node.subcommands.length > 0) return offer(node.subcommands);
  if (node.takesResource && (args.length === 0 || node.variadic)) {
    const flags = {
      ...(given["--kubeconfig"] ? { kubeconfig: given["--kubeconfig"] } : {}),
      ...(given["--context"] ? { context: given["--context"] } : {}),
      ...((given["-n"] ?? given["--namespace"]) ? { namespace: given["-n"] ?? given["--namespace"] } : {}),
    };
    const found = await names(flags, ctx);
    return offer(found.filter((c) => !args.includes(c.value)));
  }
  return offer([]);
}

/** Prints the {@link completions} of `words` as kubectl reads a plugin's completer's answer. */
export async function completePlugin(words: readonly string[], ctx: CliContext): Promise<number> {
  const { candidates, directive } = await completions(words, ctx);
  const lines = candidates.map((c) => (c.description ? `${c.value}\t${c.description}\n` : `${c.value}\n`));
  ctx.out(`${lines.join("")}:${directive}\n`);
  return 0;
}
