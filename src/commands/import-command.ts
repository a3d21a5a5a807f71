/**
 * Registers `import` (import.ts, loaded when it runs, does the work).
 */
import { type Command, InvalidArgumentError, Option } from "commander";
import { isObjectName } from "../gitops/names.ts";
import { addServiceOptions, CONNECTION_HELP, namespaceArgument, type RegisterCommand } from "./context.ts";
import { DEPLOYMENT_STATUSES } from "./words.ts";

/** Flag parser: a Kubernetes object name. */
function objectNameArgument(value: string): string {
  if (!isObjectName(value))
    throw new InvalidArgumentError("must be a Kubernetes name: lower-case letters, digits, '-' and '.'.");
  return value;
}

/** Flag parser: a name, not empty (an empty one would match every deployment's part). */
function nonEmpty(value: string): string {
  if (value === "") throw new InvalidArgumentError("must not be empty.");
  return value;
}

/** Registers `import` on `program`. */
export const registerImportCommand: RegisterCommand = (program, ctx) => {
  const command = program
    .command("import")
    .description(
      "write Deployment resources (YAML) reproducing the service's deployments, so applying them makes the operator adopt each with no change",
    )
    .addOption(
      new Option("--name <name>", "only the deployment of exactly this name (an error when there is none)")
        .argParser(nonEmpty)
        .conflicts("nameContains"),
    )
    .option("--name-contains <text>", "only deployments whose name contains this text")
    .addOption(
      new Option("--status <status>", "only deployments in this status").choices(DEPLOYMENT_STATUSES),
    )
    .option(
      "-n, --namespace <ns>",
      "metadata.namespace of every object written (with a ServiceConnection: its namespace, default the kubeconfig context's)",
      namespaceArgument,
    )
    .option(
      "--secrets-from <secret>",
      "read every secret from this one Kubernetes Secret (keys <metadata.name>.<secret>) and write its manifest",
      objectNameArgument,
    )
    .option("--out-dir <dir>", "write one file per resource into this directory instead of stdout")
    .option(
      "--force",
      "with --out-dir: overwrite files that exist (without it, import writes nothing when one exists)",
    )
    .option(
      "--print-secret-values",
      "with --secrets-from and no --out-dir: print the Secret manifest even when it holds real secret values",
    )
    .option(
      "--connection <kind/name>",
      `import this connection's tenant, writing spec.connectionRef in each resource: ${CONNECTION_HELP}`,
    )
    .option("--kubeconfig <path>", "read --connection and its Secret from this cluster")
    .option("--context <name>", "kubeconfig context to use");
  addServiceOptions(command).action(async (_flags: unknown, cmd: Command) => {
    const { runImport } = await import("./import.ts");
    await runImport(cmd.optsWithGlobals(), ctx);
  });
};
