/**
 * The simulator's in-memory state and the service's rules: uuids and timestamps assigned by the
 * server, revisions, unique names, deletion, and listing in a stable order (created_at, then id;
 * the indexes are deployment-index.ts's). Tests use it directly to look at or tamper with the
 * state; the HTTP layer only translates.
 */
import { randomUUID } from "node:crypto";
import {
  DEPLOYMENT_SOURCES,
  type Deployment,
  type ForgeRepo,
  type OAuthProvider,
  type Revision,
  type RevisionSource,
  type SourceRevisionConfig,
} from "../api/wire.ts";
import type { CreateDeploymentBody, PatchDeploymentBody } from "../api/wire-requests.ts";
import { seededProviders, seededRepos } from "./catalog.ts";
import {
  applyChange,
  checkDeploymentType,
  checkSecretReferences,
  newRecord,
  type RedeployBehaviour,
  rebuild,
  redeployRevision,
  seededRecord,
} from "./changes.ts";
import { DeploymentIndex } from "./deployment-index.ts";
import { type DriftChange, driftCheck } from "./drift.ts";
import { notFound, ServiceError, validationError } from "./errors.ts";
import { type ListingFaults, pageJson } from "./listing.ts";
import { type LogsQuery, logPage } from "./logs.ts";
import type { ListQuery } from "./query.ts";
import {
  type DeploymentRecord,
  invalidate,
  render,
  renderJson,
  renderRevision,
  revisionStatusAt,
  type SecretsMode,
  statusAt,
  type Timing,
} from "./record.ts";
import type { SimulatorSeed } from "./seed.ts";
import { TracingProjects, tracingProjectConflict } from "./tracing-projects.ts";
import { issuesOf, oneOf } from "./validation.ts";

/** How the store is set up; see `SimulatorOptions` for the meaning of each. */
export interface StoreOptions {
  tenantId: string;
  timing: Timing;
  secretsMode: SecretsMode;
  now: () => number;
  seed?: SimulatorSeed;
  /** Whether deletes leave tracing projects behind (see tracing-projects.ts); default false. */
  keepTracingProjects?: boolean;
  /** What an empty `secrets` list in a PATCH means, read per PATCH (see {@link EMPTY_SECRETS_MODES}). */
  emptySecrets?: { mode: EmptySecretsMode };
}

/**
 * What an empty `secrets` list in a PATCH means: `clears` (default: the list replaces the
 * secrets, as the spec reads), or `unchanged`, as the service's own provider treats it, modelling
 * a service where the last secret cannot be cleared that way.
 */
export const EMPTY_SECRETS_MODES = ["clears", "unchanged"] as const;
export type EmptySecretsMode = (typeof EMPTY_SECRETS_MODES)[number];

/** A revision as tests see it. */
export interface RevisionView {
  id: string;
  created_at: string;
  /** True once the revision has become active (it may since have been superseded). */
  activated: boolean;
  /** Its status now, as the revisions route answers it. */
  status: string;
  revision_source: RevisionSource | null;
  source_revision_config: SourceRevisionConfig;
  /** The revision a redeploy made it from (the route's `new-revision` behaviour). */
  redeploy_of?: string;
}

/** One redeploy the route answered, as tests see it. */
export interface RedeployView {
  /** When it was asked for, on the store's clock. */
  at: string;
  deployment_id: string;
  /** The revision the request named. */
  revision_id: string;
  behaviour: RedeployBehaviour;
  /** The revision that goes live: a new one (`new-revision`) or the one named (`switch-active`). */
  live_revision_id: string;
}

/** Redeploys the store remembers (the oldest are forgotten first). */
export const REDEPLOYS_KEPT = 1000;

/** The simulated service's state. Every method reads the injected clock; none starts a timer. */
export class SimulatorStore {
  /** The tenant every deployment belongs to. */
  readonly tenantId: string;
  readonly #timing: Timing;
  readonly #mode: SecretsMode;
  readonly #now: () => number;
  readonly #providers: OAuthProvider[];
  readonly #repos: ReadonlyMap<string, ForgeRepo[]>;
  readonly #index: DeploymentIndex;
  /** Tracing projects left behind by deletes (see tracing-projects.ts). */
  readonly tracingProjects: TracingProjects;
  /** The redeploys answered, oldest first, at most {@link REDEPLOYS_KEPT}. */
  readonly #redeploys: RedeployView[] = [];
  /** What an empty `secrets` list in a PATCH means; change `mode` for the next PATCH. */
  readonly emptySecrets: { mode: EmptySecretsMode };

  constructor(options: StoreOptions) {
    this.tenantId = options.seed?.tenantId ?? options.tenantId;
    this.#timing = options.timing;
    this.#mode = options.secretsMode;
    this.#now = options.now;
    this.#index = new DeploymentIndex(options.timing);
    const start = this.#now();
    this.#providers = seededProviders(options.seed, this.tenantId, start);
    this.#repos = seededRepos(options.seed);
    const tracing = options.seed?.tracingProjects;
    this.emptySecrets = options.emptySecrets ?? { mode: "clears" };
    this.tracingProjects = new TracingProjects(
      tracing?.keep ?? options.keepTracingProjects ?? false,
      tracing?.names ?? [],
    );
    // Seeded deployments without a created_at are spaced 1 ms apart, so they list in seed order.
    const seeded = options.seed?.deployments ?? [];
    seeded.forEach((d, i) => {
      this.#index.insert(seededRecord(d, this.tenantId, start, start - (seeded.length - i)));
    });
  }

  /** The time on the store's clock, in ms since the epoch. */
  now(): number {
    return this.#now();
  }

  /** The OAuth providers (GET /v2/auth/providers). */
  providers(): OAuthProvider[] {
    return structuredClone(this.#providers);
  }

  /** The repositories of an integration, or undefined when the integration is unknown. */
  repos(integrationId: string): ForgeRepo[] | undefined {
    const repos = this.#repos.get(integrationId.toLowerCase());
    return repos === undefined ? undefined : structuredClone(repos);
  }

  /** Every live deployment (including those awaiting deletion) in listing order, as the API renders it. */
  list(): Deployment[] {
    const now = this.#sweep();
    return this.#index.ordered.map((r) => render(r, now, this.#timing, this.#mode));
  }

  /** One deployment as the API renders it, or undefined when unknown or gone. */
  get(id: string): Deployment | undefined {
    const now = this.#sweep();
    const record = this.#index.byId(id.toLowerCase());
    return record === undefined ? undefined : render(record, now, this.#timing, this.#mode);
  }

  /** The deployment named exactly `name`, or undefined. */
  getByName(name: string): Deployment | undefined {
    const now = this.#sweep();
    const record = this.#index.byName(name);
    return record === undefined ? undefined : render(record, now, this.#timing, this.#mode);
  }

  /** The revisions of a deployment, oldest first; undefined when the deployment is unknown or gone. */
  revisions(id: string): RevisionView[] | undefined {
    const now = this.#sweep();
    return this.#index.byId(id.toLowerCase())?.revisions.map((r) => ({
      id: r.id,
      created_at: new Date(r.createdAt).toISOString(),
      activated: r.activeAt <= now,
      status: revisionStatusAt(r, now).status,
      revision_source: r.revisionSource,
      source_revision_config: { ...r.sourceRevisionConfig },
      ...(r.redeployOf === undefined ? {} : { redeploy_of: r.redeployOf }),
    }));
  }

  /** The redeploys answered (of one deployment, when `id` is given), oldest first. */
  redeploys(id?: string): RedeployView[] {
    const all = this.#redeploys.map((r) => ({ ...r }));
    return id === undefined ? all : all.filter((r) => r.deployment_id === id.toLowerCase());
  }

  /**
   * GET /v2/deployments/{id}/revisions/{revision_id}: the revision at this instant. 404 (naming
   * what is missing, never the bare "Not Found" of an unknown route) when either is unknown.
   */
  revision(id: string, revisionId: string): Revision {
    const now = this.#sweep();
    const record = this.#live(id);
    const revision = record.revisions.find((r) => r.id === revisionId.toLowerCase());
    if (revision === undefined) throw notFound("Revision");
    return renderRevision(record, revision, now);
  }

  /**
   * One page of GET /v2/deployments/{id}/revisions (not in the shared spec), newest first, as the
   * deployment listing pages: `{resources, offset}` with `offset` the one to pass next. 404 when
   * the deployment is unknown or gone.
   */
  revisionPage(id: string, limit: number, offset: number): { resources: Revision[]; offset: number } {
    const now = this.#sweep();
    const record = this.#live(id);
    const newest = [...record.revisions].reverse().slice(offset, offset + limit);
    const resources = newest.map((revision) => renderRevision(record, revision, now));
    return { resources, offset: offset + resources.length };
  }

  /**
   * GET /v2/deployments/{id}/revisions/{revision_id}/logs: one page of the revision's build or
   * deploy log as written by now (see logs.ts). 404 naming what is missing when either is unknown.
   */
  revisionLogs(id: string, revisionId: string, query: LogsQuery): ReturnType<typeof logPage> {
    const now = this.#sweep();
    const record = this.#live(id);
    const revision = record.revisions.find((r) => r.id === revisionId.toLowerCase());
    if (revision === undefined) throw notFound("Revision");
    return logPage(record, revision, query, now);
  }

  /**
   * POST /v2/deployments: a new deployment with a first revision, AWAITING_DATABASE until
   * `readyAfterMs` passed. 409 when the name is taken (also by one awaiting deletion), 422 for
   * secret references on a source other than external_docker; 409 naming the tracing project when
   * one of the name remains (see tracing-projects.ts).
   */
  create(body: CreateDeploymentBody): Deployment {
    const now = this.#sweep();
    if (this.#index.byName(body.name) !== undefined) {
      throw new ServiceError(409, `A deployment named '${body.name}' already exists`);
    }
    if (this.tracingProjects.has(body.name)) throw new ServiceError(409, tracingProjectConflict(body.name));
    const source = body.source;
    if (!oneOf(DEPLOYMENT_SOURCES, source)) throw new ServiceError(422, `unknown source '${source}'`);
    checkSecretReferences(source, body.secret_references);
    const record = newRecord(randomUUID(), body.name, source, this.tenantId, now);
    this.#index.insert(record);
    applyChange(record, { ...body, new_revision: true }, now, this.#timing);
    return render(record, now, this.#timing, this.#mode);
  }

  /**
   * PATCH /v2/deployments/{id}: merges `source_config` (given non-null fields; `resource_spec`
   * replaced whole) and `source_revision_config`, replaces `secrets` and `secret_references`.
   * A changed revision config or secrets, or a `revision_source`, makes a new revision.
   * `display_name` is set when given (`null` leaves it). 404 when unknown, 409 while awaiting
   * deletion, 422 for a `source_config.deployment_type` other than the deployment's. Under
   * {@link emptySecrets} `unchanged`, `secrets: []` leaves the secrets as they are.
   */
  patch(id: string, body: PatchDeploymentBody): Deployment {
    const now = this.#sweep();
    const record = this.#live(id);
    if (record.deleteRequestedAt !== undefined) {
      throw new ServiceError(409, "Deployment is being deleted and cannot be changed");
    }
    checkSecretReferences(record.source, body.secret_references);
    checkDeploymentType(record, body.source_config?.deployment_type);
    const { display_name: displayName, ...change } = body;
    if (this.emptySecrets.mode === "unchanged" && change.secrets?.length === 0) delete change.secrets;
    applyChange(record, change, now, this.#timing);
    if (displayName !== undefined && displayName !== null) record.displayName = displayName;
    return render(record, now, this.#timing, this.#mode);
  }

  /**
   * POST /v2/deployments/{id}/revisions (a rebuild): a new revision of the deployment's current
   * configuration, answered as the revisions route answers it. 404 when unknown, 409 while
   * awaiting deletion.
   */
  createRevision(id: string): Revision {
    const now = this.#sweep();
    const record = this.#live(id);
    if (record.deleteRequestedAt !== undefined) {
      throw new ServiceError(409, "Deployment is being deleted and cannot be changed");
    }
    return renderRevision(record, rebuild(record, now, this.#timing), now);
  }

  /**
   * POST /v2/deployments/{id}/revisions/{revision_id}/redeploy: deploys that revision's config
   * again without a build, as `behaviour` says (see `redeployRevision`), and records which
   * revision was named. 404 naming what is missing when either is unknown, 409 while awaiting
   * deletion.
   */
  redeploy(id: string, revisionId: string, behaviour: RedeployBehaviour): Deployment {
    const now = this.#sweep();
    const record = this.#live(id);
    const revision = record.revisions.find((r) => r.id === revisionId.toLowerCase());
    if (revision === undefined) throw notFound("Revision");
    if (record.deleteRequestedAt !== undefined) {
      throw new ServiceError(409, "Deployment is being deleted and cannot be changed");
    }
    const live = redeployRevision(record, revision, behaviour, now, this.#timing);
    if (this.#redeploys.length >= REDEPLOYS_KEPT) this.#redeploys.shift();
    this.#redeploys.push({
      at: new Date(now).toISOString(),
      deployment_id: record.id,
      revision_id: revision.id,
      behaviour,
      live_revision_id: live,
    });
    return render(record, now, this.#timing, this.#mode);
  }

  /**
   * DELETE /v2/deployments/{id}: AWAITING_DELETE now, gone after `deleteAfterMs`. Idempotent until
   * gone; 404 after. `deleteTracingProject` (`delete_tracing_project=true`): the tracing project
   * of its name goes too; without it, it stays while {@link tracingProjects} keep them.
   */
  delete(id: string, options: { deleteTracingProject?: boolean } = {}): void {
    const now = this.#sweep();
    const record = this.#live(id);
    this.tracingProjects.deleted(record.name, options.deleteTracingProject === true);
    if (record.deleteRequestedAt !== undefined) return;
    record.deleteRequestedAt = now;
    record.updatedAt = now;
    invalidate(record);
    this.#index.purgeBy(now + this.#timing.deleteAfterMs);
  }

  /** Changes a deployment as someone else would (see {@link DriftChange}); 404 when unknown, 422 when malformed. */
  drift(id: string, change: DriftChange): Deployment {
    const issues = issuesOf(driftCheck, change, ["body"]);
    if (issues.length > 0) throw validationError(issues);
    const now = this.#sweep();
    const record = this.#live(id);
    // Before the change: a revision the drift itself makes fails too.
    if (change.fail_revisions !== undefined) record.failRevisions = change.fail_revisions ?? undefined;
    applyChange(record, change, now, this.#timing);
    if (change.image_version !== undefined) record.imageVersion = change.image_version;
    if (change.status !== undefined) record.statusOverride = change.status ?? undefined;
    if (change.quirks !== undefined)
      record.quirks = change.quirks === null ? undefined : structuredClone(change.quirks);
    if (change.deployment_type !== undefined)
      record.sourceConfig = { ...record.sourceConfig, deployment_type: change.deployment_type };
    if (change.display_name !== undefined) record.displayName = change.display_name ?? undefined;
    if (change.remote_reconciled !== undefined) record.remoteReconciled = change.remote_reconciled;
    if (change.tag_value_ids !== undefined) record.tagValueIds = [...change.tag_value_ids];
    return render(record, now, this.#timing, this.#mode);
  }

  /**
   * One page of GET /v2/deployments as JSON. The response `offset` is the one to pass next
   * (request offset + items returned); past the end the page is empty.
   */
  listPageJson(query: ListQuery, faults: ListingFaults): string {
    const now = this.#sweep();
    return pageJson(
      query.deploymentIds === undefined ? this.#index.ordered : this.#index.ofIds(query.deploymentIds),
      query,
      faults,
      (record) => renderJson(record, now, this.#timing, this.#mode),
      (record) => statusAt(record, now, this.#timing),
      now,
    );
  }

  #live(id: string): DeploymentRecord {
    const record = this.#index.byId(id.toLowerCase());
    if (record === undefined) throw notFound("Deployment");
    return record;
  }

  /** Removes deployments whose deletion delay has passed; returns the clock's `now`. */
  #sweep(): number {
    const now = this.#now();
    this.#index.sweep(now);
    return now;
  }
}
