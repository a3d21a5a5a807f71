/**
 * The `dms-operator` command, and the kubectl plugin `kubectl dms` (bin/kubectl-dms.mjs): a router
 * of subcommands, each listed in `src/commands/registry.ts` and registered from its own file
 * under `src/commands/`. Only the command named on the command line is loaded (see the registry);
 * the plugin has the commands of the registry that are not the operator's own (`run`, `simulator`).
 * Started as `kubectl_complete-dms` (bin/kubectl_complete-dms.mjs), it completes `kubectl dms …`
 * for kubectl.
 */
import { processContext } from "./commands/process-context.ts";
import { isCompletionExecutable, programNameOf } from "./commands/program-name.ts";

const argv = process.argv.slice(2);
if (isCompletionExecutable(process.argv[1])) {
  // A TAB: answered from static word lists, with neither the harness nor commander loaded.
  const { completePlugin } = await import("./commands/completion-plugin.ts");
  process.exitCode = await completePlugin(argv, processContext());
} else {
  // commander's imports of Node's modules without their namespaces (commander-builtins.ts).
  const { withLightCommanderBuiltins } = await import("./commands/commander-builtins.ts");
  const [{ runCommands }, { COMMANDS }] = await withLightCommanderBuiltins(() =>
    Promise.all([import("./commands/program.ts"), import("./commands/registry.ts")]),
  );
  // Under kubectl (bin/kubectl-dms.mjs) the same program calls itself `kubectl dms`.
  process.exitCode = await runCommands(argv, processContext(), programNameOf(process.argv[1]), COMMANDS);
}
