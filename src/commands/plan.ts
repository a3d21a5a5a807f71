/**
 * `dms-operator plan -f <file-or-dir>`: what the operator would do for each Deployment resource
 * of the files, against the live service, with the controller's own planner. Exit status 0
 * nothing to do, 2 changes planned, 1 error — so it can gate a pull request. Reads only.
 *
 * Each resource is reviewed through its own connection: the default one (the service flags and
 * environment) without `spec.connectionRef`, else the connection it names, read from the cluster
 * (`--kubeconfig`). `--connection <kind/name>` reviews only the resources using that one.
 */
import type { Command } from "commander";
import { stringify } from "yaml";
import { flagOf, readSettings, settingHelp } from "../config.ts";
import { ConnectionReadError } from "../connection/read.ts";
import { deploymentsPort } from "../connection/service-port.ts";
import { readManifestFiles, STDIN_NAME, STDIN_PATH } from "../gitops/files.ts";
import type { ClusterReader, LiveResource, ServiceChoice, ServiceFor } from "../gitops/live.ts";
import { reviewAll } from "../gitops/live.ts";
import { type ManifestProblem, type ManifestResource, parseManifests } from "../gitops/manifests.ts";
import {
  type PlanReport,
  planDocument,
  planExitStatus,
  renderPlanJson,
  renderPlanText,
} from "../gitops/plan-report.ts";
import { DEPLOYMENTS, decodeDeployment, KubeDeployments } from "../kube/deployments.ts";
import { KubeApiError, NotFoundError } from "../kube/errors.ts";
import { INSTALL_KEY_SECRET, InstallKeyError, readInstallKey } from "../kube/install-key.ts";
import { listItems } from "../kube/object.ts";
import { secretsPort } from "../kube/reconcile-adapters.ts";
import { collectionPath } from "../kube/reflector.ts";
import {
  type ConnectionId,
  connectionKey,
  connectionLabel,
  connectionOf,
  DEFAULT_CONNECTION,
  describeConnection,
} from "../naming/connection.ts";
import { keyedSecretDigest } from "../reconcile/plan/secret-hash.ts";
import { systemClock } from "../runtime/clock.ts";
import { type CommandCluster, commandConnectionClients, kubeconfigCluster } from "./connections.ts";
import {
  addServiceOptions,
  type CliContext,
  CONNECTION_HELP,
  type ConnectionFlags,
  namespaceArgument,
  type RegisterCommand,
  serviceClientFrom,
  UsageError,
} from "./context.ts";
import { DEFAULT_OPERATOR_NAMESPACE } from "./operator-version.ts";
import { addOutputOptions, colorEnabled, type OutputFlags, outputFormat, paint } from "./output.ts";
import { CommandExit, EXIT } from "./program.ts";
import { RUN_SETTINGS } from "./settings.ts";

interface PlanFlags extends ConnectionFlags, OutputFlags {
  filename: string[];
  namespace?: string;
  operatorNamespace?: string;
  maxSecretBytes?: string;
  verbose?: boolean;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** The settings plan shares with `run`: it reviews secret values within the operator's limit. */
const PLAN_SETTINGS = { maxSecretBytes: RUN_SETTINGS.maxSecretBytes };

/** Registers `plan` on `program`. */
export const registerPlanCommand: RegisterCommand = (program, ctx) => {
  const command = program
    .command("plan")
    .description(
      "show what the operator would do for each Deployment resource in the files (create, adopt, patch, nothing, blocked); exit 0 nothing to do, 2 changes planned, 1 error",
    )
    .requiredOption(
      "-f, --filename <path>",
      "manifest file or directory (recursive; .yaml, .yml, .json), or - for standard input (e.g. kubectl kustomize output); repeatable",
      collect,
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
      "--operator-namespace <ns>",
      `with --kubeconfig: the operator's namespace, whose Secret ${INSTALL_KEY_SECRET} keys the secrets digests in status (default ${DEFAULT_OPERATOR_NAMESPACE}); without the right to get it, secret values are compared only with digests recorded before the key`,
      namespaceArgument,
    )
    .option(
      "--connection <kind/name>",
      `review only the resources using this connection (the others are listed as skipped): ${CONNECTION_HELP}. Without it, each resource is reviewed through its own`,
    )
    .option(
      `${flagOf("maxSecretBytes")} ${PLAN_SETTINGS.maxSecretBytes.arg}`,
      `with --kubeconfig: the operator's limit on the secret values one resource sends; over it the resource is an error, as the operator would stall it (SecretsTooLarge) ${settingHelp({ ...PLAN_SETTINGS.maxSecretBytes, help: "" })}`,
    )
    // 2 means "changes planned" here, so a mistake in the call must not end with 2.
    .exitOverride((error) => {
      throw error.exitCode === 0 ? error : new CommandExit(EXIT.failed);
    });
  addOutputOptions(command, { formats: PLAN_FORMATS, textAlias: true, headers: false, default: "table" });
  addServiceOptions(command).action(async (_flags: unknown, cmd: Command) => {
    const flags = cmd.optsWithGlobals<PlanFlags>();
    let status: number;
    try {
      status = await runPlan(flags, ctx);
    } catch (error) {
      if (!(error instanceof UsageError)) throw error;
      for (const line of error.lines) ctx.err(`error: ${line}\n`);
      status = EXIT.failed;
    }
    if (status !== EXIT.ok) throw new CommandExit(status);
  });
};

/** Reads, reviews and prints; resolves the exit status. */
async function runPlan(flags: PlanFlags, ctx: CliContext): Promise<number> {
  const settings = readSettings(PLAN_SETTINGS, flags, ctx.env);
  if (settings.problems.length > 0) throw new UsageError(settings.problems);
  const { ref: selected, kube } = kubeconfigCluster(flags, "dms-operator-plan");
  const namespace = flags.namespace ?? kube?.namespace ?? "default";
  const serviceFor = connectionServices(flags, ctx, kube, selected && connectionOf(namespace, selected));
  // Read before the files: a connection that cannot be used is the command's error, not each resource's.
  if (selected) await serviceFor(namespace, selected, ctx.stopSignal);
  const files = await readManifestFiles(flags.filename, ctx.readStdin);
  const resources: ManifestResource[] = [];
  const fileErrors: ManifestProblem[] = [];
  for (const file of files) {
    const parsed = parseManifests(file.text, file.path);
    resources.push(...parsed.resources);
    fileErrors.push(...parsed.problems);
  }
  // A wrong path must not pass a CI gate as "nothing to do".
  if (resources.length === 0 && fileErrors.length === 0)
    throw new UsageError([noResources(flags.filename, files.length)]);
  const cluster =
    kube && clusterReader(kube, namespace, flags.operatorNamespace ?? DEFAULT_OPERATOR_NAMESPACE);
  const entries = await reviewAll(resources, {
    serviceFor,
    namespace,
    ...(cluster ? { cluster } : {}),
    maxSecretBytes: settings.values.maxSecretBytes,
    clock: systemClock,
    signal: ctx.stopSignal,
  });
  // Likewise a --connection that no resource uses: its gate would pass with nothing reviewed.
  if (selected && fileErrors.length === 0 && entries.every((e) => e.action === "skipped"))
    throw new UsageError([
      `no resource of the files uses --connection ${flags.connection} (${entries.length} read, each with another spec.connectionRef or none): check the connection, or plan without --connection`,
    ]);
  const report: PlanReport = { entries, fileErrors, clusterRead: cluster !== undefined };
  ctx.out(renderPlan(report, flags, ctx));
  return planExitStatus(report);
}

/** plan's formats: the report (table, the default; `text` still accepted), its data, or the names reviewed. */
const PLAN_FORMATS = ["table", "name", "json", "yaml"] as const;

function renderPlan(report: PlanReport, flags: PlanFlags, ctx: CliContext): string {
  switch (outputFormat(flags, ctx.stdoutIsTTY, "table")) {
    case "json":
      return renderPlanJson(report);
    case "yaml":
      return stringify(planDocument(report));
    case "name":
      // The names on stdout for a script; what makes the plan fail stays visible on stderr.
      for (const p of report.fileErrors) ctx.err(`${p.file}:${p.line}:${p.column}: error: ${p.message}\n`);
      return report.entries.map((e) => `deployment.dms.dev/${e.name}\n`).join("");
    default:
      return renderPlanText(report, paint(colorEnabled(ctx.env, ctx.stdoutIsTTY)));
  }
}

/**
 * The service of each resource's connection: the default one from the flags and environment
 * (checked on first use, so files whose resources all name a connection need no --base-url),
 * the others read from the cluster. With `selected` (`--connection`), the resources using
 * another connection are skipped.
 */
function connectionServices(
  flags: PlanFlags,
  ctx: CliContext,
  kube: CommandCluster | undefined,
  selected: ConnectionId | undefined,
): ServiceFor {
  let defaultChoice: ServiceChoice | undefined;
  const clients = kube && commandConnectionClients(kube, flags, ctx);
  return async (namespace, ref, signal) => {
    const id = connectionOf(namespace, ref);
    const key = connectionKey(id);
    if (selected && key !== connectionKey(selected))
      return { kind: "skip", reason: skipReason(id, selected) };
    if (!id) {
      defaultChoice ??= defaultService(flags, ctx);
      return defaultChoice;
    }
    const label = `spec.connectionRef ${connectionLabel(ref)}`;
    if (!clients)
      return {
        kind: "error",
        message: `${label}: the connection's settings and API key are in the cluster; pass --kubeconfig (and --context) to read them`,
      };
    try {
      const service = deploymentsPort(await clients.client(id, signal));
      const windows = (await clients.read(id, signal)).spec.rolloutWindows;
      // The connection's windows are the default of its resources, as the operator reads them.
      const rolloutWindows = windows ? { windows, from: describeConnection(id) } : undefined;
      return { kind: "service", key, service, ...(rolloutWindows ? { rolloutWindows } : {}) };
    } catch (error) {
      if (!(error instanceof ConnectionReadError)) throw error;
      // With --connection, the flag names the connection; else the resource's reference does.
      if (selected) throw new UsageError([`--connection ${flags.connection}: ${error.message}`]);
      return { kind: "error", message: `${label}: ${error.message}` };
    }
  };
}

/** The default connection's service, or a {@link UsageError} saying which resources need it. */
function defaultService(flags: PlanFlags, ctx: CliContext): ServiceChoice {
  try {
    return {
      kind: "service",
      key: DEFAULT_CONNECTION,
      service: deploymentsPort(serviceClientFrom(flags, ctx)),
    };
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    throw new UsageError([
      ...error.lines,
      "the service settings above are needed by the resources without spec.connectionRef, which use the default connection",
    ]);
  }
}

function skipReason(id: ConnectionId | undefined, selected: ConnectionId): string {
  const uses = id ? `uses ${describeConnection(id)}` : "uses the default connection (no spec.connectionRef)";
  return `${uses}, not --connection's ${describeConnection(selected)}; plan without --connection reviews each resource through its own`;
}

function noResources(paths: readonly string[], fileCount: number): string {
  const where = paths.map((p) => (p === STDIN_PATH ? STDIN_NAME : p)).join(", ");
  const read = fileCount === 1 ? "1 file" : `${fileCount} files`;
  return `no Deployment resources (apiVersion dms.dev/v1alpha1, kind Deployment) in ${where} (${read} read): check the path given to -f, or pipe the rendered manifests with -f -`;
}

/** Reads through the kubeconfig's credentials; nothing is cached or watched. */
function clusterReader(
  kube: CommandCluster,
  defaultNamespace: string,
  operatorNamespace: string,
): ClusterReader {
  const { client } = kube;
  const deployments = new KubeDeployments({ client });
  return {
    defaultNamespace,
    getResource: async (namespace, name, signal) => {
      const found = await deployments.getLive({ namespace, name }, signal);
      return found as LiveResource | undefined;
    },
    listResources: async (signal) => {
      try {
        const list = await client.request({ method: "GET", path: collectionPath(DEPLOYMENTS), signal });
        return listItems(list).flatMap((item) => {
          const decoded = decodeDeployment(item);
          return decoded ? [decoded as LiveResource] : [];
        });
      } catch (error) {
        // Without permission to list every namespace, claims in other namespaces go unchecked.
        if (error instanceof KubeApiError && (error.status === 403 || error.status === 404)) return undefined;
        throw error;
      }
    },
    secrets: secretsPort(kube.secrets),
    // The operator's install key, when this kubeconfig may read it (none yet: digests are plain).
    secretDigest: (signal) =>
      readInstallKey(client, operatorNamespace, signal).then(keyedSecretDigest, (error: unknown) => {
        if (error instanceof NotFoundError || error instanceof InstallKeyError) return undefined;
        throw error;
      }),
  };
}
