/**
 * The name the program gives itself in help and usage texts: how it was invoked. kubectl runs a
 * plugin as the executable named `kubectl-<name>` on PATH, with the arguments after `<name>`
 * (`kubectl dms plan -n x` runs `kubectl-dms plan -n x`), so the package installs the same CLI a
 * second time as `kubectl-dms` (bin/kubectl-dms.mjs), and under that name it says `kubectl dms`.
 */

/** The program's own name. */
export const PROGRAM_NAME = "dms-operator";

/** The name under kubectl: what a user types before the command. */
export const KUBECTL_PLUGIN_NAME = "kubectl dms";

/** The executable kubectl looks for on PATH for `kubectl dms`. */
export const KUBECTL_PLUGIN_EXECUTABLE = "kubectl-dms";

/**
 * The executable kubectl runs to complete `kubectl dms …` on a TAB (kubectl's plugin completion):
 * given the words after `dms`, the last one the word being completed, it prints the candidates.
 */
export const KUBECTL_COMPLETION_EXECUTABLE = "kubectl_complete-dms";

/**
 * The name for the script the process was started with (`process.argv[1]`): {@link KUBECTL_PLUGIN_NAME}
 * for `kubectl-dms` — the link npm puts on PATH, kept as invoked because Node does not resolve
 * `argv[1]`'s symlinks — or `kubectl-dms.mjs` (npm's Windows shims run the file itself);
 * {@link PROGRAM_NAME} for anything else.
 */
export function programNameOf(script: string | undefined): string {
  return executableOf(script) === KUBECTL_PLUGIN_EXECUTABLE ? KUBECTL_PLUGIN_NAME : PROGRAM_NAME;
}

/** Whether the process was started as {@link KUBECTL_COMPLETION_EXECUTABLE} (as its shims too). */
export function isCompletionExecutable(script: string | undefined): boolean {
  return executableOf(script) === KUBECTL_COMPLETION_EXECUTABLE;
}

function executableOf(script: string | undefined): string {
  return process
    .getBuiltinModule("node:path")
    .basename(script ?? "")
    .toLowerCase()
    .replace(/\.(mjs|js|cmd|ps1|exe)$/, "");
}
