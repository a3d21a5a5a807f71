/**
 * `dms-operator revisions <resource>`: a deployment's revisions, newest first, with what each
 * deployed, marking the active one (what is live), the latest (what the spec last asked for) and,
 * with the resource read from a cluster, the one its spec would redeploy instead of building
 * (`reuse`, see `spec.revisionReuse`).
 *
 * Which deployment (resource-flags.ts): by default `<resource>` is a Deployment resource of the
 * cluster found as kubectl finds it (`--kubeconfig`, else `KUBECONFIG`, else `~/.kube/config`; of
 * `-n`, else the kubeconfig context's namespace), reached through its own connection
 * (`spec.connectionRef`, or the default one from the service flags) and found as the operator
 * finds it (its `status.deploymentId` when that deployment carries the resource's name, else by
 * name). With `--service` (the service of the flags and environment) or `--connection`,
 * `<resource>` is the service's deployment name (or id).
 *
 * revisions-command.ts registers the command; this module, loaded when it runs, does the work.
 *
 * The revision listing (GET /v2/deployments/{deployment_id}/revisions) is not in the shared spec:
 * a service without it gets a clear error and exit status 1. `-o json|yaml` show each revision as
 * the service answered it, but for the values of any `secrets` it carries: `(hidden)`.
 */
import type { ServiceClient } from "../api/client.ts";
import { RevisionsRouteMissingError } from "../api/errors.ts";
import type { RevisionListing, RevisionRow } from "../api/revision-listing.ts";
import { escapeForTerminal } from "../api/terminal-text.ts";
import { type Deployment, isUuid, ROUTES } from "../api/wire.ts";
import { reuseTarget } from "../reconcile/revision-reuse.ts";
import type { CliContext, ConnectionFlags } from "./context.ts";
import { hideSecretValue } from "./deployments.ts";
import { type Listing, type OutputFlags, renderFor } from "./output.ts";
import { commandTarget, deploymentNamed } from "./resource-deployment.ts";
import type { ResourceLookupFlags } from "./resource-flags.ts";

/** The flags of `revisions`, as commander parses them. */
export interface RevisionsFlags extends ConnectionFlags, ResourceLookupFlags, OutputFlags {
  maxItems?: number;
  verbose?: boolean;
}

/** One line of the output: a revision (or an item that could not be read) and its marks. */
export interface RevisionLine {
  id: string | null;
  status: string | null;
  created_at: string | null;
  source: string | null;
  /** What it deployed: the image, or `<repo_ref>@<commit>` (or what else it names). */
  deployed: string | null;
  /** The deployment's `active_revision_id`: what is live. */
  active: boolean;
  /** The deployment's `latest_revision_id`: the newest, which a rollout makes active. */
  latest: boolean;
  /**
   * The revision the resource's spec would redeploy instead of building a new one
   * (`spec.revisionReuse`; only with the resource read from a cluster).
   */
  reuse?: boolean;
  /** Why the item could not be read (only for such an item). */
  unreadable?: string;
  /** The revision as the service answered it (json and yaml only). */
  revision?: unknown;
}

/** A table of ids (short), marks, statuses and ages; `-o name` prints each revision's id whole. */
const LISTING: Listing<RevisionLine> = {
  columns: [
    { header: "ID", value: (l) => l.id, show: "id" },
    { header: "MARK", value: (l) => marks(l) },
    {
      header: "STATUS",
      value: (l) => (l.unreadable === undefined ? l.status : "(unreadable)"),
      show: "status",
    },
    { header: "AGE", wideHeader: "CREATED", value: (l) => l.created_at, show: "time" },
    { header: "SOURCE", value: (l) => l.source },
    { header: "DEPLOYED", value: (l) => l.unreadable ?? l.deployed },
  ],
  name: (l) => `revision/${l.id ?? "(unreadable)"}`,
  empty: "No revisions.",
  data: (l) => forMachines(l),
};

/** Runs `revisions <resource>` (see the module comment). */
export async function runRevisions(resource: string, flags: RevisionsFlags, ctx: CliContext): Promise<void> {
  const target = await commandTarget(resource, flags, ctx, "dms-operator-revisions", byNameOrId);
  const { client, deployment, resource: live } = target;
  let listing: RevisionListing;
  try {
    listing = await client.listRevisions(deployment.id, {
      signal: ctx.stopSignal,
      ...(flags.maxItems === undefined ? {} : { maxItems: flags.maxItems }),
    });
  } catch (error) {
    if (!(error instanceof RevisionsRouteMissingError)) throw error;
    throw new Error(
      `the service at ${client.baseUrl} has no revision listing (GET ${ROUTES.REVISIONS} answered ${error.status}); the deployment ${deployment.name} (${deployment.id}) reports latest revision ${deployment.latest_revision_id ?? "none"}, active ${deployment.active_revision_id ?? "none"}`,
      { cause: error },
    );
  }
  const lines = revisionLines(listing.rows, deployment);
  // The revision the resource's spec would redeploy instead of building (spec.revisionReuse).
  const reuse = live
    ? reuseTarget(
        live.spec,
        live.status,
        deployment,
        listing.rows.flatMap((r) => (r.ok ? [r.revision] : [])),
      )
    : undefined;
  if (reuse?.kind === "redeploy")
    for (const line of lines) if (line.id === reuse.revisionId) line.reuse = true;
  ctx.out(renderFor(ctx, flags, lines, LISTING));
  for (const note of notes(listing, lines, deployment)) ctx.err(`${escapeForTerminal(note)}\n`);
}

/** The output lines of `rows`, marked with `deployment`'s active and latest revision. */
export function revisionLines(rows: readonly RevisionRow[], deployment: Deployment): RevisionLine[] {
  const mark = (id: string | undefined) => ({
    active: id !== undefined && id === deployment.active_revision_id,
    latest: id !== undefined && id === deployment.latest_revision_id,
  });
  return rows.map((row): RevisionLine => {
    if (!row.ok) {
      const { id, created_at, message } = row.unreadable;
      const none = { status: null, source: null, deployed: null };
      return { id: id ?? null, created_at: created_at ?? null, ...none, ...mark(id), unreadable: message };
    }
    const r = row.revision;
    return {
      id: r.id,
      status: r.status,
      created_at: r.created_at ?? null,
      source: r.source ?? null,
      deployed: deployedOf(r.source_revision_config ?? undefined),
      ...mark(r.id),
      revision: r,
    };
  });
}

/** What a revision deployed: its image, or `<ref>@<commit, 7 characters>`, or its tarball. */
export function deployedOf(config: Record<string, unknown> | undefined): string | null {
  if (!config) return null;
  const text = (key: string) =>
    typeof config[key] === "string" && config[key] !== "" ? (config[key] as string) : undefined;
  const image = text("image_uri");
  if (image) return image;
  const ref = text("repo_ref");
  const sha = text("repo_commit_sha")?.slice(0, 7);
  if (ref || sha) return sha ? `${ref ?? ""}@${sha}` : (ref ?? null);
  return text("source_tarball_path") ?? null;
}

function marks(line: RevisionLine): string {
  return [line.active ? "active" : "", line.latest ? "latest" : "", line.reuse ? "reuse" : ""]
    .filter((m) => m !== "")
    .join(",");
}

/** A line as json and yaml show it: the revision as answered, with the marks (no table-only fields). */
function forMachines(line: RevisionLine): Record<string, unknown> {
  const marked = { active: line.active, latest: line.latest, ...(line.reuse ? { reuse: true } : {}) };
  if (line.unreadable !== undefined)
    return { id: line.id, created_at: line.created_at, ...marked, unreadable: line.unreadable };
  return { ...withSecretsHidden(line.revision as Record<string, unknown>), ...marked };
}

/**
 * `revision` with the values of the `secrets` it carries (a service may answer the secrets a
 * revision was made with) replaced, as `deployments list` shows a deployment's: never printed by
 * accident, into a CI log, say.
 */
function withSecretsHidden(revision: Record<string, unknown>): Record<string, unknown> {
  const { secrets } = revision;
  if (!Array.isArray(secrets)) return revision;
  return { ...revision, secrets: secrets.map(hideSecretValue) };
}

/** What stderr says besides the listing: a cut listing, unreadable items, marks not shown. */
function notes(listing: RevisionListing, lines: readonly RevisionLine[], deployment: Deployment): string[] {
  const out: string[] = [];
  if (listing.truncated)
    out.push(
      `warning: the service lists more than ${lines.length} revisions; only those were read (raise --max-items to read more)`,
    );
  const unreadable = lines.filter((l) => l.unreadable !== undefined).length;
  if (unreadable > 0)
    out.push(`warning: ${unreadable} item(s) of the listing could not be read; shown as (unreadable)`);
  for (const [what, id] of [
    ["active", deployment.active_revision_id],
    ["latest", deployment.latest_revision_id],
  ] as const)
    if (id && !lines.some((l) => l.id === id))
      out.push(`note: the ${what} revision ${id} is not in the listing`);
  return out;
}

/** The deployment with this id (a uuid) or exact name. */
async function byNameOrId(client: ServiceClient, key: string, signal: AbortSignal): Promise<Deployment> {
  if (isUuid(key)) {
    const found = await client.getDeployment(key, { signal });
    if (found) return found;
  }
  return deploymentNamed(client, key, signal);
}
