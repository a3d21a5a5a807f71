/**
 * Every subcommand of the program, as a light entry: its name, the line `--help` lists it with,
 * and how to load its code. `--version`, `--help`, a typo and an unknown command are answered from
 * these entries alone; a command's own module (and what it imports: the service client, the
 * Kubernetes transport, GitOps, tables, the simulator) is imported only when the command is named,
 * to run it or to show its own help. `dms-operator run` thus loads the operator and nothing of the
 * other commands (memory is the operator's budget), and `--version` loads none of them.
 *
 * This module imports nothing at run time: keep it so (test/unit/cli-registry.test.ts).
 */
import type { CommandEntry } from "./command-entry.ts";

export type { CommandEntry };

/** Every subcommand, in the order `--help` lists them. */
export const COMMANDS: readonly CommandEntry[] = [
  {
    name: "run",
    term: "run [options]",
    summary: "run the operator: watch Deployment resources and keep the service's deployments in line",
    operatorOnly: true,
    load: async () => (await import("./run.ts")).registerRunCommand,
  },
  {
    name: "status",
    term: "status [options]",
    summary:
      "one screen of Deployment resources (-n, or -A for every namespace): conditions and reasons, held rollouts, failed revisions, connections",
    load: async () => (await import("./status.ts")).registerStatusCommand,
  },
  {
    name: "reconcile",
    term: "reconcile [options] [name...]",
    summary:
      "ask the operator to reconcile Deployment resources now (names, --all or -l; annotation dms.dev/reconcile-requested-at)",
    load: async () => (await import("./annotate.ts")).registerReconcileCommand,
  },
  {
    name: "suspend",
    term: "suspend [options] [name...]",
    summary:
      "pause Deployment resources (names, --all or -l): no call to the service until resumed (annotation dms.dev/paused)",
    load: async () => (await import("./annotate.ts")).registerSuspendCommand,
  },
  {
    name: "resume",
    term: "resume [options] [name...]",
    summary: "resume suspended Deployment resources (names, --all or -l)",
    load: async () => (await import("./annotate.ts")).registerResumeCommand,
  },
  {
    name: "rollout-now",
    term: "rollout-now [options] [name...]",
    summary:
      "let changes held outside the rollout windows go out now, once (names, --all or -l; annotation dms.dev/rollout-now)",
    load: async () => (await import("./annotate.ts")).registerRolloutNowCommand,
  },
  {
    name: "rebuild",
    term: "rebuild [options] [name...]",
    summary:
      "build a new revision of Deployment resources now, of their current configuration (names, --all or -l; annotation dms.dev/rebuild-requested-at)",
    load: async () => (await import("./annotate.ts")).registerRebuildCommand,
  },
  {
    name: "deployments",
    term: "deployments",
    summary: "deployments of the service",
    load: async () => (await import("./deployments.ts")).registerDeploymentsCommand,
  },
  {
    name: "providers",
    term: "providers",
    summary: "OAuth provider configurations of the organization",
    load: async () => (await import("./providers.ts")).registerProvidersCommand,
  },
  {
    name: "repos",
    term: "repos",
    summary: "repositories of a GitHub forge integration",
    load: async () => (await import("./repos.ts")).registerReposCommand,
  },
  {
    name: "import",
    term: "import [options]",
    summary:
      "write Deployment resources (YAML) reproducing the service's deployments, so applying them makes the operator adopt each with no change",
    load: async () => (await import("./import-command.ts")).registerImportCommand,
  },
  {
    name: "plan",
    term: "plan [options]",
    summary:
      "show what the operator would do for each Deployment resource in the files; exit 0 nothing to do, 2 changes planned, 1 error",
    load: async () => (await import("./plan-command.ts")).registerPlanCommand,
  },
  {
    name: "revisions",
    term: "revisions [options] <resource>",
    summary: "list a deployment's revisions, newest first, marking the active and the latest one",
    load: async () => (await import("./revisions-command.ts")).registerRevisionsCommand,
  },
  {
    name: "logs",
    term: "logs [options] <resource>",
    summary: "print the build or deploy log of a deployment's revision (default: its latest)",
    load: async () => (await import("./logs-command.ts")).registerLogsCommand,
  },
  {
    name: "version",
    term: "version [options]",
    summary: "print the client's version and the version of the operator running in the cluster",
    load: async () => (await import("./operator-version.ts")).registerVersionCommand,
  },
  {
    name: "completion",
    term: "completion <shell>",
    summary: "print a shell completion script (bash, zsh or fish)",
    load: async () => (await import("./completion.ts")).registerCompletionCommand,
  },
  {
    name: "simulator",
    term: "simulator [options]",
    summary: "run an in-memory simulator of the service (for tests, demos and trying the operator)",
    operatorOnly: true,
    load: async () => (await import("./simulator.ts")).registerSimulatorCommand,
  },
];
