/**
 * The `dms-operator` command: a router of subcommands, each registered from its own file under
 * `src/commands/`. To add one, export a `RegisterCommand` there and list it below.
 */
import type { RegisterCommand } from "./commands/context.ts";
import { registerDeploymentsCommand } from "./commands/deployments.ts";
import { registerImportCommand } from "./commands/import.ts";
import { registerPlanCommand } from "./commands/plan.ts";
import { processContext, runProgram } from "./commands/program.ts";
import { registerProvidersCommand } from "./commands/providers.ts";
import { registerReposCommand } from "./commands/repos.ts";
import { registerRunCommand } from "./commands/run.ts";
import { registerSimulatorCommand } from "./commands/simulator.ts";

/** Every subcommand, in the order `--help` lists them. */
export const COMMANDS: readonly RegisterCommand[] = [
  registerRunCommand,
  registerDeploymentsCommand,
  registerProvidersCommand,
  registerReposCommand,
  registerSimulatorCommand,
  registerImportCommand,
  registerPlanCommand,
];

process.exitCode = await runProgram(process.argv.slice(2), processContext(), COMMANDS);
