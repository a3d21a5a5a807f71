/**
 * The `dms-operator` command, and the kubectl plugin `kubectl dms` (bin/kubectl-dms.mjs): a router
 * of subcommands, each listed in `src/commands/registry.ts` and registered from its own file
 * under `src/commands/`. Only the command named on the command line is loaded (see the registry);
 * the plugin has the commands of the registry that are not the operator's own (`run`, `simulator`).
 */
import { processContext, runCommands } from "./commands/program.ts";
import { programNameOf } from "./commands/program-name.ts";

// Under kubectl (bin/kubectl-dms.mjs) the same program calls itself `kubectl dms`.
process.exitCode = await runCommands(process.argv.slice(2), processContext(), programNameOf(process.argv[1]));
