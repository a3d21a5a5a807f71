/**
 * Registers `plan` (plan.ts, loaded when it runs, does the work). Exit status 0 nothing to do, 2
 * changes planned, 1 an error, a refusal, or a mistake in the call (as every command: see
 * `EXIT` in program.ts).
 */
import { type Command, InvalidArgumentError } from "commander";
import { addServiceOptions, CONNECTION_HELP, namespaceArgument, type RegisterCommand } from "./context.ts";
import { addOutputOptions } from "./output-options.ts";
import { CommandExit, EXIT } from "./program.ts";
import { PLAN_MAX_SECRET_BYTES } from "./words.ts";

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** `--protection-namespaces a,b` (repeatable): each a namespace name, in the order given, once. */
function namespaceList(value: string, previous: string[] = []): string[] {
  const names = value.split(",").map((n) => n.trim());
  if (names.some((n) => n === ""))
    throw new InvalidArgumentError("must be namespace names separated by commas, e.g. team-a,team-b.");
  return [...new Set([...previous, ...names.map(namespaceArgument)])];
}

/** plan's formats: the report (table, the default; `text` still accepted), its data, or the names reviewed. */
const PLAN_FORMATS = ["table", "name", "json", "yaml"] as const;

/** Registers `plan` on `program`. */
export const registerPlanCommand: RegisterCommand = (program, ctx) => {
  const secretBytes = PLAN_MAX_SECRET_BYTES;
  const command = program
    .command("plan")
    .description(
      "show what the operator would do for each Deployment resource in the files (create, adopt, patch, nothing, blocked); with --offline, only check them against the CRD's schema and CEL rules, with no network; exit 0 nothing to do, 2 changes planned, 1 error",
    )
    .requiredOption(
      "-f, --filename <path>",
      "manifest file or directory (recursive; .yaml, .yml, .json), or - for standard input (e.g. kubectl kustomize output); repeatable",
      collect,
    )
    .option(
      "--offline",
      "check the files as kubectl apply would have the API server check them (the CRD's schema and CEL rules), asking neither the service nor a cluster: for CI without credentials; exit 0 valid, 1 a refusal (file:line:col)",
    )
    .option(
      "--kubeconfig <path>",
      "read referenced Secrets, the live resources and the connections they name from this cluster (without it, secret values are not checked, and resources with spec.connectionRef cannot be planned)",
    )
    .option("--context <name>", "kubeconfig context to use")
    .option(
      "-n, --namespace <ns>",
      "namespace of the resources that name none, as kubectl apply -n (default: the kubeconfig context's, else default)",
      namespaceArgument,
    )
    .option(
      "--protection-namespaces <ns,...>",
      "with --kubeconfig: more namespaces where plan looks for protected resources (spec.deletionProtection: true) that the files no longer hold, beyond the files' namespaces and those a GitOps tool's label marks lead to; a resource of the files without metadata.namespace counts as in each (Argo CD's destination or Flux's targetNamespace may put it there); repeatable",
      namespaceList,
    )
    .option(
      "--operator-namespace <ns>",
      "with --kubeconfig: the operator's namespace, whose Secret dms-operator-install-key keys the secrets digests in status (default dms-system); without the right to get it, secret values are compared only with digests recorded before the key",
      namespaceArgument,
    )
    .option(
      "--connection <kind/name>",
      `review only the resources using this connection (the others are listed as skipped): ${CONNECTION_HELP}. Without it, each resource is reviewed through its own`,
    )
    .option(
      `${secretBytes.flag} ${secretBytes.arg}`,
      `with --kubeconfig: the operator's limit on the secret values one resource sends; over it the resource is an error, as the operator would stall it (SecretsTooLarge) (default ${secretBytes.default}) (env ${secretBytes.env})`,
    );
  addOutputOptions(command, { formats: PLAN_FORMATS, textAlias: true, headers: false, default: "table" });
  addServiceOptions(command).action(async (_flags: unknown, cmd: Command) => {
    const { runPlan } = await import("./plan.ts");
    const status = await runPlan(cmd.optsWithGlobals(), ctx);
    if (status !== EXIT.ok) throw new CommandExit(status);
  });
};
