/**
 * `dms-operator import`: the service's deployments as Deployment resources (YAML) that reproduce
 * them exactly, for onboarding existing deployments into Git. See `src/gitops/importer.ts` for
 * the rules and docs/gitops.md for the workflow.
 */
import { existsSync } from "node:fs";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { ServiceClient } from "../api/client.ts";
import { isServiceError, RequestValidationError } from "../api/errors.ts";
import { escapeForTerminal } from "../api/terminal-text.ts";
import type { Deployment, DeploymentStatus, ForgeRepo } from "../api/wire.ts";
import { ConnectionReadError } from "../connection/read.ts";
import { type ConnectionId, connectionOf, describeConnection } from "../crd/conventions.ts";
import { renderFiles, renderStream, skippedLines } from "../gitops/import-render.ts";
import { type ImportResult, importDeployments } from "../gitops/importer.ts";
import { githubTarget, type RepoListing } from "../gitops/repos.ts";
import { commandConnectionClients, kubeconfigCluster } from "./connections.ts";
import { type CliContext, type ConnectionFlags, UsageError } from "./context.ts";
import { serviceClientFrom } from "./service-client.ts";

/** The flags of `import`, as commander parses them. */
export interface ImportFlags extends ConnectionFlags {
  name?: string;
  nameContains?: string;
  status?: DeploymentStatus;
  namespace?: string;
  secretsFrom?: string;
  outDir?: string;
  printSecretValues?: boolean;
  force?: boolean;
  verbose?: boolean;
}

/** Runs `import` (see the module comment); import-command.ts registers it. */
export async function runImport(flags: ImportFlags, ctx: CliContext): Promise<void> {
  const signal = ctx.stopSignal;
  const { client, connection } = await serviceOf(flags, ctx);
  const contains = flags.name ?? flags.nameContains;
  const listed = await client.listAllDeployments(
    {
      ...(contains !== undefined ? { name_contains: contains } : {}),
      ...(flags.status !== undefined ? { status: flags.status } : {}),
    },
    { signal, pageSize: 100 },
  );
  const deployments =
    flags.name === undefined ? listed : named(listed, flags.name, flags.status, client.baseUrl);
  const repos = new Map<string, RepoListing>();
  for (const d of deployments) {
    const target = githubTarget(d.source, undefined, d.source_config);
    if (!target || repos.has(target.integrationId)) continue;
    repos.set(
      target.integrationId,
      await listRepos(target.integrationId, (id) => client.listRepos(id, { signal })),
    );
  }
  // A ServiceConnection serves its own namespace only: the resources are written into it.
  const namespace = connection?.namespace || flags.namespace;
  const settings = {
    repos,
    ...(namespace !== undefined ? { namespace } : {}),
    ...(flags.secretsFrom !== undefined ? { secretsFrom: flags.secretsFrom } : {}),
    ...(connection ? { connectionRef: { kind: connection.kind, name: connection.name } } : {}),
  };
  const result = importDeployments(deployments, settings);
  const files = renderFiles(result, settings);
  if (flags.outDir === undefined) {
    // Values on a terminal end up in scrollback, CI logs and shell history: only when asked.
    if (files.some((f) => f.sensitive) && !flags.printSecretValues)
      throw new UsageError([
        `Secret ${flags.secretsFrom ?? ""} would hold the real values of secrets the service shows; pass --out-dir <dir> to write it to a file readable by its owner only, or --print-secret-values to print it`,
      ]);
    ctx.out(renderStream(result, files));
  } else {
    const outDir = flags.outDir;
    await mkdir(outDir, { recursive: true });
    const targets = files.map((file) => ({ file, path: join(outDir, file.name) }));
    // A *.secret.yaml the user already filled in must never be lost to a second import.
    const existing = flags.force ? [] : targets.filter((t) => existsSync(t.path)).map((t) => t.path);
    if (existing.length > 0)
      throw new UsageError([
        `import would overwrite ${existing.length} existing file(s); nothing was written (pass --force to overwrite them):`,
        ...existing,
      ]);
    for (const { file, path } of targets) {
      // "wx" also refuses a file created since the check above.
      const flag = flags.force ? "w" : "wx";
      const mode = file.ownerOnly ? 0o600 : 0o644;
      // `mode` applies only to a file created now: one --force overwrites keeps its own, so it
      // is set first, before the values are in it.
      if (flags.force && existsSync(path)) await chmod(path, mode);
      await writeFile(path, file.text, { mode, flag });
      ctx.out(`wrote ${path}\n`);
    }
    for (const line of skippedLines(result)) ctx.out(`# ${escapeForTerminal(line)}\n`);
  }
  report(result, flags, connection, ctx);
}

/**
 * The service to import from: the flags' and environment's, or with `--connection` the
 * connection read from the cluster (whose id is returned with the client).
 */
async function serviceOf(
  flags: ImportFlags,
  ctx: CliContext,
): Promise<{ client: ServiceClient; connection?: ConnectionId }> {
  // import reads a cluster only for --connection: --kubeconfig alone is a mistake, not ignored.
  if (flags.connection === undefined && flags.kubeconfig !== undefined)
    throw new UsageError([
      "--kubeconfig is read only for --connection: add --connection <kind/name>, or drop --kubeconfig",
    ]);
  const { ref, kube } = kubeconfigCluster(flags, "dms-operator-import");
  const connection = connectionOf(flags.namespace ?? kube?.namespace ?? "default", ref);
  if (!connection || !kube) return { client: serviceClientFrom(flags, ctx) };
  const clients = commandConnectionClients(kube, flags, ctx);
  try {
    return { client: await clients.client(connection, ctx.stopSignal), connection };
  } catch (error) {
    if (!(error instanceof ConnectionReadError)) throw error;
    throw new ConnectionReadError(`--connection ${flags.connection}: ${error.message}`, { cause: error });
  }
}

/**
 * The deployments named exactly `name` of those listed by `name_contains`: the service's filter
 * matches part of a name, so `--name support-agent` would also bring `support-agent-canary`. None
 * is an error naming those that contain it, since the one asked for is not there to import.
 */
function named(
  listed: Deployment[],
  name: string,
  status: string | undefined,
  baseUrl: string,
): Deployment[] {
  const exact = listed.filter((d) => d.name === name);
  if (exact.length > 0) return exact;
  const near = listed.map((d) => `"${escapeForTerminal(d.name)}"`);
  const shown = near.length > 5 ? [...near.slice(0, 5), "…"] : near;
  throw new Error(
    `the service at ${baseUrl} has no deployment named "${escapeForTerminal(name)}"${status === undefined ? "" : ` in status ${status}`}${near.length > 0 ? `; ${near.length} contain it: ${shown.join(", ")} (--name-contains imports those)` : ""}`,
  );
}

async function listRepos(
  integrationId: string,
  list: (id: string) => Promise<ForgeRepo[]>,
): Promise<RepoListing> {
  try {
    return { kind: "listed", repos: await list(integrationId) };
  } catch (error) {
    if (isServiceError(error, "not_found")) return { kind: "not-found" };
    // An integration id the service answered that is no uuid: this deployment's warning, not the
    // import's end.
    if (isServiceError(error) || error instanceof RequestValidationError)
      return { kind: "failed", reason: error.message };
    throw error;
  }
}

/** Diagnostics on stderr: warnings, skipped deployments, what the user must do about secrets. */
function report(
  result: ImportResult,
  flags: ImportFlags,
  connection: ConnectionId | undefined,
  ctx: CliContext,
): void {
  for (const r of result.resources)
    for (const w of r.warnings) ctx.err(`${escapeForTerminal(`warning: ${r.deployment.name}: ${w}`)}\n`);
  for (const line of skippedLines(result)) ctx.err(`${escapeForTerminal(line)}\n`);
  const keys = result.resources.flatMap((r) => r.keys);
  const hidden = keys.filter((k) => k.state !== "value");
  if (flags.secretsFrom !== undefined && hidden.length > 0) {
    const masked = hidden.some((k) => k.state === "masked");
    ctx.err(
      `note: the service ${masked ? "masks" : "does not return"} the values of ${hidden.length} secret(s): Secret ${flags.secretsFrom} has placeholders marked FILL IN that you must fill before applying\n`,
    );
  }
  const withSecrets = result.resources.filter((r) => r.secretName !== undefined);
  if (flags.secretsFrom === undefined && withSecrets.length > 0) {
    ctx.err(
      `note: ${withSecrets.length} deployment(s) read secrets from Secrets not written here (${withSecrets.map((r) => r.secretName).join(", ")}); pass --secrets-from <name> to get a manifest\n`,
    );
  }
  const through = connection ? ` through ${describeConnection(connection)}` : "";
  ctx.err(`imported ${result.resources.length} deployment(s)${through}, skipped ${result.skipped.length}\n`);
}
