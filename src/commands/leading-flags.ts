/**
 * kubectl's flags of the cluster written before the command's name (`kubectl dms -n team-a
 * status`), as kubectl's own commands take them (`kubectl -n team-a get dmsd`: they are its global
 * flags): moved after the name, where the command declares them. kubectl itself refuses flags
 * before a plugin's name, so after `dms` is where a kubectl user puts them.
 */

/** The flags moved, and whether each takes a value. */
const CLUSTER_FLAGS: ReadonlyMap<string, boolean> = new Map([
  ["-n", true],
  ["--namespace", true],
  ["--kubeconfig", true],
  ["--context", true],
  ["-A", false],
  ["--all-namespaces", false],
]);

/**
 * `argv` with the {@link CLUSTER_FLAGS} (and their values) that come before the first word (the
 * command's name) moved right after that word; the program's own flags (`--verbose`) stay where
 * they are. Unchanged when there is no such flag, no word, or `--` comes first.
 */
export function clusterFlagsAfterCommand(argv: readonly string[]): string[] {
  const kept: string[] = [];
  const moved: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? "";
    if (arg === "--") break;
    if (!(arg.length > 1 && arg.startsWith("-")))
      return moved.length === 0 ? [...argv] : [...kept, arg, ...moved, ...argv.slice(i + 1)];
    // `-nteam-a`: a short flag with its value attached, as kubectl (and the command) take it.
    const attached = /^-[a-zA-Z]./.test(arg) && CLUSTER_FLAGS.get(arg.slice(0, 2)) === true;
    const flag = attached ? arg.slice(0, 2) : (arg.split("=", 1)[0] ?? arg);
    const takesValue = CLUSTER_FLAGS.get(flag);
    if (takesValue === undefined) {
      kept.push(arg);
      continue;
    }
    moved.push(arg);
    const value = argv[i + 1];
    if (takesValue && !attached && !arg.includes("=") && value !== undefined) {
      moved.push(value);
      i += 1;
    }
  }
  return [...argv];
}
