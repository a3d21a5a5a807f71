/**
 * `dms-operator plan -f <file-or-dir>`: what the operator would do for each Deployment resource
 * of the files, against the live service, with the controller's own planner. Exit status 0
 * nothing to do, 2 changes planned, 1 error — so it can gate a pull request. Reads only.
 *
 * Each resource is reviewed through its own connection: the default one (the service flags and
 * environment) without `spec.connectionRef`, else the connection it names, read from the cluster
 * (`--kubeconfig`). `--connection <kind/name>` reviews only the resources using that one.
 * `--offline` checks the files against the CRD's schema and CEL rules alone, with no network.
 *
 * plan-command.ts registers the command; this module, loaded when it runs, does the work.
 */
import { flagOf, readSettings, SERVICE_FLAG_SETTINGS } from "../config.ts";
import { ConnectionReadError } from "../connection/read.ts";
import { connectionWindows } from "../connection/settings.ts";
import {
  type ConnectionId,
  connectionKey,
  connectionLabel,
  connectionOf,
  DEFAULT_CONNECTION,
  describeConnection,
} from "../crd/conventions.ts";
import { readManifestFiles, STDIN_NAME, STDIN_PATH } from "../gitops/files.ts";
import type { ClusterReader, LiveResource, ServiceChoice, ServiceFor } from "../gitops/live.ts";
import { reviewAll } from "../gitops/live.ts";
import { type ManifestProblem, type ManifestResource, parseManifests } from "../gitops/manifests.ts";
import {
  fileErrorLine,
  invalidDocuments,
  PLAN_EXIT,
  type PlanReport,
  planDocument,
  planErrorLines,
  planExitStatus,
  renderPlanJson,
  renderPlanText,
} from "../gitops/plan-report.ts";
import { DEPLOYMENTS, KubeDeployments } from "../kube/custom-resources.ts";
import { KubeApiError, NotFoundError } from "../kube/errors.ts";
import { InstallKeyError, readInstallKey } from "../kube/install-key.ts";
import { listPages } from "../kube/listing.ts";
import { collectionPath, decodeDeployment } from "../kube/object.ts";
import { secretsPort } from "../kube/secrets.ts";
import { keyedSecretDigest } from "../reconcile/secret-hash.ts";
import { deploymentsPort } from "../reconcile/service/deployments-port.ts";
import { systemClock } from "../runtime/clock.ts";
import { type CommandCluster, commandConnectionClients, kubeconfigCluster } from "./connections.ts";
import { type CliContext, type ConnectionFlags, UsageError } from "./context.ts";
import { DEFAULT_OPERATOR_NAMESPACE } from "./operator-version.ts";
import { colorEnabled, type OutputFlags, outputFormat, paint, renderDocument, yamlText } from "./output.ts";
import { protectionCheck } from "./plan-protection.ts";
import { serviceClientFrom } from "./service-client.ts";
import { RUN_SETTINGS } from "./settings.ts";

/** The flags of `plan`, as commander parses them. */
export interface PlanFlags extends ConnectionFlags, OutputFlags {
  filename: string[];
  namespace?: string;
  operatorNamespace?: string;
  maxSecretBytes?: string;
  offline?: boolean;
  verbose?: boolean;
  /** `--protection-namespaces`: more namespaces the deletion protection check lists. */
  protectionNamespaces?: string[];
}

/** The settings plan shares with `run`: it reviews secret values within the operator's limit. */
export const PLAN_SETTINGS = { maxSecretBytes: RUN_SETTINGS.maxSecretBytes };

/** Reads, reviews and prints; resolves the exit status (`--offline`: {@link runPlanOffline}). */
export async function runPlan(flags: PlanFlags, ctx: CliContext): Promise<number> {
  if (flags.offline) return runPlanOffline(flags, ctx);
  const settings = readSettings(PLAN_SETTINGS, flags, ctx.env);
  if (settings.problems.length > 0) throw new UsageError(settings.problems);
  if (flags.protectionNamespaces && flags.kubeconfig === undefined)
    throw new UsageError([
      "--protection-namespaces names namespaces of a cluster to check for protected resources the files no longer hold: pass --kubeconfig too",
    ]);
  const unread = givenFlags(flags, CLUSTER_FLAGS);
  if (unread.length > 0 && flags.kubeconfig === undefined)
    throw new UsageError([
      `${unread.join(", ")}: of the cluster plan reads with --kubeconfig: pass --kubeconfig too`,
    ]);
  const { ref: selected, kube } = kubeconfigCluster(flags, "dms-operator-plan");
  const namespace = flags.namespace ?? kube?.namespace ?? "default";
  const serviceFor = connectionServices(flags, ctx, kube, selected && connectionOf(namespace, selected));
  // Read before the files: a connection that cannot be used is the command's error, not each resource's.
  if (selected) await serviceFor(namespace, selected, ctx.stopSignal);
  const { resources, fileErrors } = await readResources(flags, ctx);
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
  const report: PlanReport = {
    entries,
    fileErrors,
    clusterRead: cluster !== undefined,
    ...(kube
      ? {
          protection: await protectionCheck(kube, entries, fileErrors, {
            signal: ctx.stopSignal,
            namespaces: flags.protectionNamespaces ?? [],
            unnamespaced: resources.flatMap((r) =>
              r.resource.metadata.namespace ? [] : [r.resource.metadata.name],
            ),
          }),
        }
      : {}),
  };
  ctx.out(renderPlan(report, flags, ctx));
  return planExitStatus(report);
}

function renderPlan(report: PlanReport, flags: PlanFlags, ctx: CliContext): string {
  switch (outputFormat(flags)) {
    case "json":
      return renderPlanJson(report);
    case "yaml":
      return yamlText(planDocument(report));
    case "name":
      // The names on stdout for a script; what makes the plan fail stays visible on stderr.
      for (const p of report.fileErrors) ctx.err(`${fileErrorLine(p)}\n`);
      for (const line of planErrorLines(report)) ctx.err(`${line}\n`);
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
      // The connection's windows, a default or binding, as the operator reads them.
      const rolloutWindows = connectionWindows(id, (await clients.read(id, signal)).spec);
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

/** The flags of what plan reads with --kubeconfig only (besides --protection-namespaces). */
const CLUSTER_FLAGS = ["operatorNamespace", "maxSecretBytes"] as const;

/** The flags of the service (its settings' environment variables are not refused: a CI job's). */
const SERVICE_FLAGS = Object.keys(SERVICE_FLAG_SETTINGS) as (keyof typeof SERVICE_FLAG_SETTINGS)[];

/** Those of `keys` given on the command line, as flags (`--operator-namespace`). */
const givenFlags = (flags: PlanFlags, keys: readonly (keyof PlanFlags)[]): string[] =>
  keys.flatMap((key) => (flags[key] === undefined ? [] : [flagOf(key)]));

/**
 * `plan --offline`: the files checked as the API server would check them on `kubectl apply`
 * (the CRD's structural schema, unknown fields, and its CEL rules that need no previous object),
 * with no network at all: neither the service nor a cluster is asked. Each refusal is a line
 * `file:line:col: error: message`; resolves 1 when there is one, else 0.
 */
export async function runPlanOffline(flags: PlanFlags, ctx: CliContext): Promise<number> {
  const online = givenFlags(flags, [
    "kubeconfig",
    "context",
    "connection",
    "protectionNamespaces",
    ...CLUSTER_FLAGS,
    ...SERVICE_FLAGS,
  ]);
  if (online.length > 0)
    throw new UsageError([
      `--offline reads no cluster and no service: drop ${online.join(", ")}, or drop --offline to plan against them`,
    ]);
  const { files, resources, fileErrors } = await readResources(flags, ctx);
  const status = fileErrors.length > 0 ? PLAN_EXIT.error : PLAN_EXIT.nothingToDo;
  const valid = resources.map((r) => ({
    file: r.file,
    line: r.line,
    namespace: r.resource.metadata.namespace ?? flags.namespace ?? null,
    name: r.resource.metadata.name,
  }));
  const invalid = invalidDocuments(fileErrors);
  const format = outputFormat(flags);
  if (format === "json" || format === "yaml") {
    // Offline, the cluster's resources are not known: neither is which of them the files dropped.
    const document = {
      exitCode: status,
      offline: true,
      valid,
      invalidDocuments: invalid,
      fileErrors,
      protectedRemovals: null,
    };
    ctx.out(renderDocument(format, document));
  } else if (format === "name") {
    // The names on stdout for a script; what makes the check fail stays visible on stderr.
    for (const p of fileErrors) ctx.err(`${fileErrorLine(p)}\n`);
    ctx.out(valid.map((v) => `deployment.dms.dev/${v.name}\n`).join(""));
  } else {
    const red = paint(colorEnabled(ctx.env, ctx.stdoutIsTTY)).red;
    for (const p of fileErrors) ctx.out(`${fileErrorLine(p, red)}\n`);
    const docs = `${invalid} invalid ${invalid === 1 ? "document" : "documents"}`;
    const read = `${files.length} ${files.length === 1 ? "file" : "files"}`;
    ctx.out(
      `${fileErrors.length > 0 ? "\n" : ""}Offline: ${valid.length} valid, ${docs} in ${read} (the CRD's schema and CEL rules; neither the service nor a cluster was asked).\n`,
    );
    ctx.out(
      "Not known offline: the resources of the cluster that the files no longer hold (plan --kubeconfig warns when a prune would delete a protected one, spec.deletionProtection: true).\n",
    );
    // The CRD's rules for these read the previous object (crd-rules.ts skips them): not run here.
    ctx.out(
      "Not known offline: whether a file changes a field that cannot change (spec.name, spec.source, spec.sourceConfig.deploymentType, spec.connectionRef), which kubectl apply refuses against the cluster's resource and the operator against the service's deployment (plan without --offline checks the service's, and with --kubeconfig the cluster's).\n",
    );
  }
  return status;
}

/**
 * The files of `-f`, their valid Deployment resources and the problems of the others; a
 * {@link UsageError} when they hold neither (a wrong path must not pass a CI gate as "nothing to
 * do").
 */
async function readResources(
  flags: PlanFlags,
  ctx: CliContext,
): Promise<{ files: readonly unknown[]; resources: ManifestResource[]; fileErrors: ManifestProblem[] }> {
  const files = await readManifestFiles(flags.filename, ctx.readStdin);
  const resources: ManifestResource[] = [];
  const fileErrors: ManifestProblem[] = [];
  for (const file of files) {
    const parsed = parseManifests(file.text, file.path);
    resources.push(...parsed.resources);
    fileErrors.push(...parsed.problems);
  }
  if (resources.length === 0 && fileErrors.length === 0)
    throw new UsageError([noResources(flags.filename, files.length)]);
  return { files, resources, fileErrors };
}

function noResources(paths: readonly string[], fileCount: number): string {
  const where = paths.map((p) => (p === STDIN_PATH ? STDIN_NAME : p)).join(", ");
  const read = fileCount === 1 ? "1 file" : `${fileCount} files`;
  return `no Deployment resources (apiVersion dms.dev/v1alpha1, kind Deployment) in ${where} (${read} read): check the path given to -f, or pipe the rendered manifests with -f -`;
}

/** Deployment resources a page of the cluster's listing holds at most: `kubectl get`'s `--chunk-size`. */
const CHUNK_SIZE = 500;

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
      const all: LiveResource[] = [];
      try {
        // Page by page: a cluster of thousands of resources is never one answer held whole.
        const request = { path: collectionPath(DEPLOYMENTS), query: { limit: CHUNK_SIZE }, signal };
        await listPages(client, request, (item) => {
          const decoded = decodeDeployment(item);
          if (decoded) all.push(decoded as LiveResource);
        });
        return all;
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
