/**
 * The `dms-operator` command: a router of subcommands, each registered from its own file under
 * `src/commands/`. To add one, export a `RegisterCommand` there and list it below; `kubectl dms`
 * (the kubectl plugin) runs this same program, so it has every command listed here.
 *
 * Each file is imported only when needed: `dms-operator run` loads the operator and not the
 * GitOps, table and simulator code of the other commands (memory is the operator's budget). Help,
 * an unknown command or a typo loads them all, so listings and suggestions stay complete.
 */
import type { RegisterCommand } from "./commands/context.ts";
import { processContext, runProgram } from "./commands/program.ts";
import { programNameOf } from "./commands/program-name.ts";

/** A subcommand's name and how to load its registration. */
interface LazyCommand {
  name: string;
  load: () => Promise<RegisterCommand>;
}

/** Every subcommand, in the order `--help` lists them. */
export const COMMANDS: readonly LazyCommand[] = [
  { name: "run", load: async () => (await import("./commands/run.ts")).registerRunCommand },
  {
    name: "deployments",
    load: async () => (await import("./commands/deployments.ts")).registerDeploymentsCommand,
  },
  { name: "providers", load: async () => (await import("./commands/providers.ts")).registerProvidersCommand },
  { name: "repos", load: async () => (await import("./commands/repos.ts")).registerReposCommand },
  { name: "simulator", load: async () => (await import("./commands/simulator.ts")).registerSimulatorCommand },
  { name: "import", load: async () => (await import("./commands/import.ts")).registerImportCommand },
  { name: "plan", load: async () => (await import("./commands/plan.ts")).registerPlanCommand },
  { name: "revisions", load: async () => (await import("./commands/revisions.ts")).registerRevisionsCommand },
  { name: "logs", load: async () => (await import("./commands/logs.ts")).registerLogsCommand },
];

/** The commands `argv` needs: the one it names (the first argument that is not an option), else all. */
function commandsFor(argv: readonly string[]): readonly LazyCommand[] {
  const named = argv.find((arg) => !arg.startsWith("-"));
  const only = COMMANDS.find((c) => c.name === named);
  return only ? [only] : COMMANDS;
}

const argv = process.argv.slice(2);
const commands = await Promise.all(commandsFor(argv).map((c) => c.load()));
// Under kubectl (bin/kubectl-dms.mjs) the same program calls itself `kubectl dms`.
process.exitCode = await runProgram(argv, processContext(), commands, programNameOf(process.argv[1]));
