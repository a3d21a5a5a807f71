/**
 * The completion scripts of bash, zsh and fish, each written from the program's completion tree
 * (completion.ts's `completionNodes`): the words each shell completes after the path of commands
 * typed, the values of flags that take one of a list, and the names of Deployment resources read
 * with kubectl. Shared by the three: a flag's words, the flags that take a value (whose value is
 * never a command), quoting.
 */
import type { CompletionFlag, CompletionNode } from "./completion-node.ts";
import { KUBECTL_PLUGIN_EXECUTABLE, KUBECTL_PLUGIN_NAME } from "./program-name.ts";
import { VALUE_DESCRIPTIONS } from "./words.ts";

/** The words of a flag: its long and short forms. */
const wordsOf = (flag: CompletionFlag) => [flag.long, flag.short].filter((w): w is string => w !== undefined);

const flagWords = (node: CompletionNode) => node.flags.flatMap(wordsOf);

/** Flags that take a value in every command that has them: the word after them is not a command. */
const valueFlags = (nodes: readonly CompletionNode[]) => {
  const bare = new Set(nodes.flatMap((n) => n.flags.filter((f) => !f.takesValue).flatMap(wordsOf)));
  return [...new Set(nodes.flatMap((n) => n.flags.filter((f) => f.takesValue).flatMap(wordsOf)))].filter(
    (w) => !bare.has(w),
  );
};

/**
 * Flags that take a value in some commands and none in others (`-f`: `plan`'s `--filename`,
 * `logs`' `--follow`), each with the paths of the commands where it takes one.
 */
function valueFlagsOfSome(nodes: readonly CompletionNode[]): { word: string; paths: string[] }[] {
  const always = new Set(valueFlags(nodes));
  const paths = new Map<string, string[]>();
  for (const node of nodes)
    for (const word of node.flags.filter((f) => f.takesValue).flatMap(wordsOf))
      if (!always.has(word)) paths.set(word, [...(paths.get(word) ?? []), node.path.join(" ")]);
  return [...paths].map(([word, where]) => ({ word, paths: where }));
}

/**
 * The `case` arms of the bash and zsh scripts' loop over the words typed (`$path`: the commands so
 * far): the word after such a flag is its value in a command where it takes one.
 */
const skipValueOfSome = (nodes: readonly CompletionNode[], path: string) =>
  valueFlagsOfSome(nodes)
    .map(
      ({ word, paths }) =>
        `      ${word}) case "${path}" in ${paths.map((p) => `${JSON.stringify(p)}|${JSON.stringify(`${p} `)}*`).join("|")}) ((i++)) ;; esac ;;\n`,
    )
    .join("");

/**
 * The `case "$path|$prev"` arm of the bash and zsh scripts doing `then` after such a flag, in a
 * command where it takes a value (a newline and the arm; nothing when there is no such flag).
 */
function valueOfSomeArm(nodes: readonly CompletionNode[], then: string): string {
  const patterns = valueFlagsOfSome(nodes).flatMap(({ word, paths }) =>
    paths.map((path) => prevPatterns(path, word)),
  );
  return patterns.length === 0 ? "" : `\n    ${patterns.join("|")}) ${then} ;;`;
}

/** The function name for `executable`: `_dms_operator`. */
const functionName = (executable: string) => `_${executable.replace(/[^A-Za-z0-9]/g, "_")}`;

/**
 * The `case "$path|$prev"` patterns that match `flag` of `node` as the word before the cursor, in
 * the command or past its arguments (bash and zsh alike).
 */
function valuePatterns(node: CompletionNode, flag: CompletionNode["flags"][number]): string {
  return wordsOf(flag)
    .map((w) => prevPatterns(node.path.join(" "), w))
    .join("|");
}

/** The `case "$path|$prev"` patterns of `word` before the cursor in the command `path` or past its arguments. */
const prevPatterns = (path: string, word: string) =>
  `${JSON.stringify(`${path}|${word}`)}|${JSON.stringify(`${path} `)}*${JSON.stringify(`|${word}`)}`;

/**
 * The `case "$path|$prev"` arms of the bash script: after a flag that takes one of a list of
 * values (`-o`, `--status`, `--type`), those values, in the command (and past its arguments).
 */
function valueCases(nodes: readonly CompletionNode[]): string {
  return nodes
    .flatMap((node) =>
      node.flags.flatMap((flag) => {
        if (!flag.values) return [];
        return [
          `    ${valuePatterns(node, flag)}) COMPREPLY=($(compgen -W ${JSON.stringify(flag.values.join(" "))} -- "$cur")); return 0 ;;`,
        ];
      }),
    )
    .join("\n");
}

/** The bash script (also the body of the zsh one). */
export function bashScript(executable: string, nodes: readonly CompletionNode[]): string {
  const fn = functionName(executable);
  const cases = nodes.map((node) => {
    const path = node.path.join(" ");
    const words = [...node.subcommands, ...flagWords(node)].join(" ");
    const names = node.takesResource ? "names=1; " : "";
    const exact = `    ${JSON.stringify(path)}) words=${JSON.stringify(words)}; ${names};;`;
    // After a leaf command's argument: its flags still, and more names where it takes several.
    const more = node.takesResource && node.variadic ? " names=1;" : "";
    const after =
      node.subcommands.length === 0 && path !== ""
        ? `\n    ${JSON.stringify(`${path} `)}*) words=${JSON.stringify(flagWords(node).join(" "))};${more} ;;`
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
        # bash splits --namespace=x at = (COMP_WORDBREAKS): the value is the word after the =.
        [[ "\${COMP_WORDS[i+1]}" == "=" ]] && ((i++))
        kube+=("$w" "\${COMP_WORDS[i+1]}"); ((i++)) ;;
      --namespace=*|--kubeconfig=*|--context=*) kube+=("$w") ;;
      ${valueFlags(nodes)
        .filter((f) => !["-n", "--namespace", "--kubeconfig", "--context"].includes(f))
        .join("|")})
        [[ "\${COMP_WORDS[i+1]}" == "=" ]] && ((i++))
        ((i++)) ;;
${skipValueOfSome(nodes, "$path")}      -*) ;;
      *) path="\${path:+$path }$w" ;;
    esac
  done
  case "$path|$prev" in
${valueCases(nodes)}${valueOfSomeArm(nodes, 'COMPREPLY=($(compgen -f -- "$cur")); return 0')}
  esac
  case "$prev" in
    ${valueFlags(nodes).join("|")})
      COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
  esac
  case "$path" in
${cases.join("\n")}
  esac
  if [[ "$cur" != -* && $names == 1 ]]; then
    # Each name as a word of its own, never expanded: compgen -W would run what a name holds.
    local name
    COMPREPLY=()
    while IFS= read -r name; do
      [[ -n "$name" && "$name" == "$cur"* ]] && COMPREPLY+=("$name")
    done < <(${fn}_names "\${kube[@]}")
  else
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
  fi
  return 0
}
complete -F ${fn} ${executable}
`;
}

/**
 * What `kubectl get deployments.dms.dev` is asked for the names a zsh or fish completion offers:
 * each resource's name, a tab, and its Ready condition's status (empty before any reconcile).
 */
const NAMES_JSONPATH =
  '{range .items[*]}{.metadata.name}{"\\t"}{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}';

/** The command line that prints a completion's names, with the kubectl flags typed in `$kube`. */
const namesCommand = (kube: string) =>
  `kubectl get deployments.dms.dev ${kube} -o jsonpath=${shellQuote(NAMES_JSONPATH)} 2>/dev/null`;

/** The kubectl flags the zsh script collected, as its words. */
// biome-ignore lint/suspicious/noTemplateCurlyInString: a zsh expansion, not a template
const ZSH_KUBE_ARGS = '"${kube[@]}"';

/** `text` in single quotes, for bash, zsh and fish alike (fish's rules differ: {@link fishQuote}). */
const shellQuote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

/** A `value:description` entry of zsh's `_describe` (a colon in the value escaped). */
const zshEntry = (value: string, description: string | undefined) =>
  shellQuote(description ? `${value.replace(/:/g, "\\:")}:${description}` : value.replace(/:/g, "\\:"));

/** One line of help: the part before its first `;`, `:` or `(`, as the fish script shows. */
const shortHelp = (description: string) => description.split(/[;:(]/)[0]?.trim().slice(0, 60) ?? "";

/** The flags of `node` as `_describe` entries, each with its help. */
const zshFlags = (node: CompletionNode) =>
  node.flags
    .flatMap((f) =>
      [f.long, f.short]
        .filter((w): w is string => w !== undefined)
        .map((w) => zshEntry(w, shortHelp(f.description))),
    )
    .join(" ");

/**
 * The zsh script: zsh's own completion (`_describe`), so that each candidate shows what it is:
 * commands, flags with their help, the values of `-o`, `--status` and `--type` with their
 * descriptions, and resource names with their Ready condition. As a file named `_<program>` in
 * `$fpath` it is autoloaded; sourced, it registers itself with `compdef`.
 */
export function zshScript(executable: string, nodes: readonly CompletionNode[]): string {
  const fn = functionName(executable);
  const program = executable === KUBECTL_PLUGIN_EXECUTABLE ? KUBECTL_PLUGIN_NAME : executable;
  const kubeFlags = ["-n", "--namespace", "--kubeconfig", "--context"];
  const valueCasesZsh = nodes.flatMap((node) =>
    node.flags.flatMap((flag) => {
      if (!flag.values) return [];
      const entries = flag.values.map((v) => zshEntry(v, VALUE_DESCRIPTIONS[v])).join(" ");
      return [
        `    ${valuePatterns(node, flag)}) described=(${entries}); _describe -t values value described; return ;;`,
      ];
    }),
  );
  const cases = nodes.map((node) => {
    const path = node.path.join(" ");
    const subs = node.subcommands.map((c) => zshEntry(c, undefined)).join(" ");
    const names = node.takesResource ? " names=1;" : "";
    const exact = `    ${JSON.stringify(path)}) subcommands=(${subs}); flags=(${zshFlags(node)});${names} ;;`;
    const more = node.takesResource && node.variadic ? " names=1;" : "";
    const after =
      node.subcommands.length === 0 && path !== ""
        ? `\n    ${JSON.stringify(`${path} `)}*) flags=(${zshFlags(node)});${more} ;;`
        : "";
    return exact + after;
  });
  return `#compdef ${executable}
# zsh completion for ${executable}, written by \`${program} completion zsh\`.
# Load it now with: source <(${program} completion zsh) (after compinit), or write it to a
# directory of $fpath as _${executable}.
${fn}_names() {
  local -a kube described
  local i line name ready
  for ((i = 2; i < CURRENT; i++)); do
    case "\${words[i]}" in
      ${kubeFlags.join("|")}) kube+=("\${words[i]}" "\${words[i+1]}"); ((i++)) ;;
      --namespace=*|--kubeconfig=*|--context=*) kube+=("\${words[i]}") ;;
    esac
  done
  for line in \${(f)"$(${namesCommand(ZSH_KUBE_ARGS)})"}; do
    name="\${line%%$'\\t'*}"; ready="\${line#*$'\\t'}"
    # A name typed already is not offered again.
    (( \${words[(I)$name]} && \${words[(I)$name]} < CURRENT )) && continue
    if [[ -n "$ready" ]]; then ready="Ready=$ready"; else ready="not reconciled yet"; fi
    described+=("\${name//:/\\:}:$ready")
  done
  _describe -t names 'Deployment resource' described
}
${fn}() {
  local cur="\${words[CURRENT]}" prev="\${words[CURRENT-1]}" cmdpath="" w i names=0
  local -a subcommands flags described
  for ((i = 2; i < CURRENT; i++)); do
    w="\${words[i]}"
    case "$w" in
      ${valueFlags(nodes).join("|")}) ((i++)) ;;
${skipValueOfSome(nodes, "$cmdpath")}      -*) ;;
      *) cmdpath="\${cmdpath:+$cmdpath }$w" ;;
    esac
  done
  case "$cmdpath|$prev" in
${valueCasesZsh.join("\n")}${valueOfSomeArm(nodes, "_files; return")}
  esac
  case "$prev" in
    ${valueFlags(nodes).join("|")}) _files; return ;;
  esac
  case "$cmdpath" in
${cases.join("\n")}
  esac
  if [[ "$cur" == -* ]]; then
    _describe -t flags flag flags
  elif (( \${#subcommands} )); then
    _describe -t commands command subcommands
  elif (( names )); then
    ${fn}_names
  fi
}
if [[ "\${funcstack[1]}" == "_${executable}" ]]; then
  ${fn} "$@"
else
  compdef ${fn} ${executable}
fi
`;
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
    ...valueFlagsOfSome(nodes).flatMap(({ word, paths }) => [
      `            case ${fishQuote(word)}`,
      `                string match -q -r -- ${fishQuote(`^(${paths.join("|")})( |$)`)} "$path"; and set skip 1`,
    ]),
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
    "            case '--namespace=*' '--kubeconfig=*' '--context=*'",
    "                set -a args $words[$i]",
    "        end",
    "    end",
    // name<TAB>Ready=<status>, each shown with its state; one typed already is not offered again.
    `    for line in (${namesCommand("$args")})`,
    "        set -l parts (string split -m 1 \\t -- $line)",
    "        contains -- $parts[1] $words; and continue",
    '        if test -n "$parts[2]"',
    "            printf '%s\\tReady=%s\\n' $parts[1] $parts[2]",
    "        else",
    "            printf '%s\\tnot reconciled yet\\n' $parts[1]",
    "        end",
    "    end",
    "end",
    // The values of -o, --status and --type, each with its description.
    `function __${fn}_values`,
    "    for value in $argv",
    "        switch $value",
    ...[...new Set(nodes.flatMap((n) => n.flags.flatMap((f) => f.values ?? [])))].flatMap((value) => [
      `            case ${fishQuote(value)}`,
      `                printf '%s\\t%s\\n' ${fishQuote(value)} ${fishQuote(VALUE_DESCRIPTIONS[value] ?? "")}`,
    ]),
    "        end",
    "    end",
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
    // Past the first name too, where the command takes several.
    if (node.takesResource)
      lines.push(
        `complete -c ${executable} -n ${fishQuote(node.variadic ? within : at)} -a '(__${fn}_names)'`,
      );
    for (const flag of node.flags) {
      const parts = [
        `complete -c ${executable} -n ${fishQuote(node.subcommands.length > 0 && path !== "" ? at : within)}`,
      ];
      if (flag.long) parts.push(`-l ${flag.long.slice(2)}`);
      if (flag.short) parts.push(`-s ${flag.short.slice(1)}`);
      if (flag.values) parts.push(`-x -a ${fishQuote(`(__${fn}_values ${flag.values.join(" ")})`)}`);
      else if (flag.takesValue) parts.push("-r");
      parts.push(`-d ${fishQuote(shortHelp(flag.description))}`);
      lines.push(parts.join(" "));
    }
  }
  return `${lines.join("\n")}\n`;
}
