/**
 * `dms-operator plan`, the reading part: for each resource of the files, what the operator would
 * see — the service's deployment (found as the controller finds it), the forge listing behind a
 * `github` source, and, only when a cluster is given, the referenced Secrets' values, the live
 * resource's status and the other resources claiming the same name. Each resource is reviewed
 * against the service of its own connection (`spec.connectionRef`, else the default one), with a
 * listing per connection. Then the pure review.
 * Talks to the service and the cluster only through ports; writes nothing anywhere.
 */
import { isServiceError } from "../api/errors.ts";
import type { ForgeRepo } from "../api/wire.ts";
import { type ConnectionRef, connectionLabel } from "../crd/conventions.ts";
import { InvalidSpecError } from "../crd/errors.ts";
import type { ResolvedGithub } from "../crd/github.ts";
import { effectiveName } from "../crd/mapping.ts";
import type { DeploymentSpec } from "../crd/schema.ts";
import {
  type Claimant,
  claimedName,
  claimOf,
  olderClaimant,
  type ReadSecrets,
  readSecrets,
} from "../reconcile/inputs.ts";
import { lookUp } from "../reconcile/observe.ts";
import type {
  DeploymentListings,
  DeploymentLookups,
  ForgeRepos,
  RevisionRedeploys,
  SecretsPort,
} from "../reconcile/ports.ts";
import { RepoListings } from "../reconcile/repo-listings.ts";
import type { InheritedWindows } from "../reconcile/rollout-gate.ts";
import { DEFAULT_MAX_SECRET_BYTES, SecretsTooLargeError } from "../reconcile/secret-budget.ts";
import type { SecretDigest } from "../reconcile/secret-hash.ts";
import { AmbiguousNameError, UnreadableDeploymentError } from "../reconcile/service/lookup-errors.ts";
import { RemoteSnapshot } from "../reconcile/service/snapshot.ts";
import type { Clock } from "../runtime/clock.ts";
import type { ManifestResource } from "./manifests.ts";
import { githubTarget, type RepoListing, repoReachabilityWarning } from "./repos.ts";
import {
  errorEntry,
  type LiveStatus,
  type ReviewEntry,
  type ReviewInputs,
  reviewResource,
  skippedEntry,
} from "./review.ts";

/** A Deployment resource as the cluster holds it (the fields plan reads). */
export interface LiveResource {
  metadata: { namespace?: string; name: string; creationTimestamp?: string };
  spec: DeploymentSpec;
  status?: LiveStatus;
}

/** What plan reads from the cluster (with `--kubeconfig`). Reads only; never a write. */
export interface ClusterReader {
  /** Namespace of resources that name none: the kubeconfig context's, else `default`. */
  defaultNamespace: string;
  /** The live resource, or undefined when the cluster has none (or does not know the CRD). */
  getResource(namespace: string, name: string, signal: AbortSignal): Promise<LiveResource | undefined>;
  /** Every Deployment resource of the cluster, for name claims; undefined when not allowed to list. */
  listResources(signal: AbortSignal): Promise<LiveResource[] | undefined>;
  /** The cluster's Secrets, read as the controller reads them. */
  secrets: SecretsPort;
  /**
   * The operator's secrets digests, keyed with its install key; undefined when it cannot be read
   * (then a keyed digest in status leaves the secrets' equality unknown).
   */
  secretDigest?(signal: AbortSignal): Promise<SecretDigest | undefined>;
}

/**
 * What a review asks of a connection's service: reads only (lookups as the controller makes them,
 * its listings, the forge's repositories). No write capability reaches the review at all.
 */
export type ServiceReads = DeploymentLookups &
  DeploymentListings &
  ForgeRepos &
  Partial<Pick<RevisionRedeploys, "recentRevisions">>;

/**
 * The service a resource is reviewed against, by its connection: a port (`key` tells connections
 * apart: each has its own listing) and the connection's rollout windows if it has any, a reason
 * not to review it (`plan --connection` selects another connection), or why it cannot be
 * reviewed (an `error` entry).
 */
export type ServiceChoice =
  | { kind: "service"; key: string; service: ServiceReads; rolloutWindows?: InheritedWindows }
  | { kind: "skip"; reason: string }
  | { kind: "error"; message: string };

/**
 * The service of the connection that a resource of `namespace` with `ref` uses. Called once per
 * resource, in order; it may reject (a failure of the cluster, settings the command cannot use).
 */
export type ServiceFor = (
  namespace: string,
  ref: ConnectionRef | undefined,
  signal: AbortSignal,
) => Promise<ServiceChoice>;

/** Inputs of {@link reviewAll}. */
export interface ReviewAllOptions {
  serviceFor: ServiceFor;
  /** Namespace of the resources that name none (`--namespace`); default: the cluster's, else `default`. */
  namespace?: string;
  /** Absent: the cluster is not read (no kubeconfig). */
  cluster?: ClusterReader;
  /** The operator's `--max-secret-bytes`, applied to the values read from the cluster. Default 1 MiB. */
  maxSecretBytes?: number;
  clock: Clock;
  signal: AbortSignal;
}

/**
 * Reviews every resource, in order. A resource that cannot be planned (a connection that cannot
 * be used, a missing Secret, secret values over `maxSecretBytes`, an unresolvable `github`,
 * several service deployments with its name, an apply the CRD would refuse) becomes an `error`
 * entry; one `serviceFor` skips, a `skipped` entry; a failure to talk to the service or the
 * cluster rejects.
 */
export async function reviewAll(
  resources: readonly ManifestResource[],
  options: ReviewAllOptions,
): Promise<ReviewEntry[]> {
  const { cluster, signal, maxSecretBytes = DEFAULT_MAX_SECRET_BYTES } = options;
  const connections = new Map<string, ConnectionState>();
  const liveAll = cluster ? await cluster.listResources(signal) : undefined;
  const secretDigest = await cluster?.secretDigest?.(signal);
  const firstClaim = new Map<string, ManifestResource>();
  const entries: ReviewEntry[] = [];
  for (const item of resources) {
    const { resource } = item;
    const namespace =
      resource.metadata.namespace ?? options.namespace ?? cluster?.defaultNamespace ?? "default";
    const name = effectiveName(resource.spec, resource.metadata.name);
    const base = { file: item.file, line: item.line, resource, namespace };
    const fail = (message: string) =>
      errorEntry({ ...base, observed: null, adopted: false, warnings: [] }, message);

    const choice = await options.serviceFor(namespace, resource.spec.connectionRef, signal);
    if (choice.kind === "skip") {
      entries.push(skippedEntry({ ...base, observed: null, adopted: false, warnings: [] }, choice.reason));
      continue;
    }
    const live = cluster ? await cluster.getResource(namespace, resource.metadata.name, signal) : undefined;
    const refused = live ? refusedOnApply(live, resource.spec, resource.metadata.name) : undefined;
    if (refused) {
      entries.push(fail(refused));
      continue;
    }
    if (choice.kind === "error") {
      entries.push(fail(choice.message));
      continue;
    }
    const { service } = choice;
    let state = connections.get(choice.key);
    if (!state) {
      state = connectionState(service, options.clock, signal);
      connections.set(choice.key, state);
    }
    const { snapshot, repos, listing } = state;
    const self: Claimant = {
      metadata: {
        namespace,
        name: resource.metadata.name,
        // Not applied yet: the newest of all.
        ...(live?.metadata.creationTimestamp ? { creationTimestamp: live.metadata.creationTimestamp } : {}),
      },
      spec: resource.spec,
    };
    // Two files claim the same name only on one connection (one tenant).
    const claim = claimOf(self);
    const holder = firstClaim.get(claim);
    firstClaim.set(claim, holder ?? item);
    const nameConflict = holder
      ? `the service name "${name}" is also claimed by ${holder.file}:${holder.line}; the operator would stall one of them (NameConflict)`
      : claimedInCluster(liveAll, self);

    const warnings: string[] = [];
    let github: ResolvedGithub | undefined;
    try {
      github = await repos.resolve(resource.spec, signal);
    } catch (error) {
      if (!(error instanceof InvalidSpecError)) throw error;
      entries.push(fail(error.message));
      continue;
    }
    const target = githubTarget(resource.spec.source, resource.spec.revisionSource, {
      integration_id: resource.spec.sourceConfig?.integrationId ?? null,
      repo_url: resource.spec.sourceConfig?.repoUrl ?? null,
    });
    if (target) {
      const warning = repoReachabilityWarning(
        target.integrationId,
        target.repoUrl,
        await listing(target.integrationId),
      );
      if (warning) warnings.push(warning);
    }

    let secretData: ReadSecrets["data"] | undefined;
    try {
      secretData = cluster
        ? (await readSecrets(resource.spec, namespace, cluster.secrets, signal, maxSecretBytes)).data
        : undefined;
    } catch (error) {
      // What the operator would report (SecretsTooLarge): it would send nothing either.
      if (!(error instanceof SecretsTooLargeError)) throw error;
      entries.push(fail(error.message));
      continue;
    }
    let found: Awaited<ReturnType<typeof lookUp>>;
    try {
      found = await lookUp(
        service,
        snapshot,
        { deploymentId: live?.status?.deploymentId, name, live: true, liveName: true },
        signal,
      );
    } catch (error) {
      // The resource's failure, as the operator stalls it alone (AmbiguousName, UnreadableDeployment).
      if (!(error instanceof AmbiguousNameError || error instanceof UnreadableDeploymentError)) throw error;
      entries.push(fail(error.message));
      continue;
    }
    const inputs: ReviewInputs = {
      ...base,
      observed: found.deployment,
      adopted: found.adopted,
      warnings,
      ...(live?.status ? { live: live.status } : {}),
      ...(secretData ? { secretData } : {}),
      ...(github ? { github } : {}),
      ...(nameConflict ? { nameConflict } : {}),
      ...(choice.rolloutWindows ? { inheritedWindows: choice.rolloutWindows } : {}),
      ...(secretDigest ? { secretDigest } : {}),
      now: options.clock.now(),
    };
    const entry = reviewResource(inputs);
    // A new revision the operator might redeploy instead (spec.revisionReuse): the one read the
    // controller makes, and only then. A listing that cannot be read leaves the plan as it was.
    const observedId = found.deployment?.id;
    if (entry.newRevision && observedId && live?.status?.revisionHistory?.length && service.recentRevisions) {
      const revisions = await service.recentRevisions(observedId, signal).catch((error: unknown) => {
        if (signal.aborted) throw error;
        return undefined;
      });
      if (revisions) {
        entries.push(reviewResource({ ...inputs, revisions }));
        continue;
      }
    }
    entries.push(entry);
  }
  return entries;
}

/** What the review keeps per connection for the whole run: the controller's listings and shorthand resolution. */
interface ConnectionState {
  snapshot: RemoteSnapshot;
  repos: RepoListings;
  listing(integrationId: string): Promise<RepoListing>;
}

function connectionState(service: ServiceReads, clock: Clock, signal: AbortSignal): ConnectionState {
  // A command's one run: every listing kept while it runs.
  const repos = new RepoListings(service, clock, Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY);
  const listings = new Map<string, Promise<RepoListing>>();
  return {
    snapshot: new RemoteSnapshot(service, clock, { maxAgeMs: 0 }),
    repos,
    listing: (integrationId) => {
      let found = listings.get(integrationId);
      if (!found) {
        found = listingOf(repos.list(integrationId, signal));
        listings.set(integrationId, found);
      }
      return found;
    },
  };
}

/** A listing as the reachability warning reads it: an unknown integration is an answer, not a failure. */
function listingOf(repos: Promise<ForgeRepo[]>): Promise<RepoListing> {
  return repos.then(
    (found): RepoListing => ({ kind: "listed", repos: found }),
    (error: unknown): RepoListing => {
      if (isServiceError(error, "not_found")) return { kind: "not-found" };
      throw error;
    },
  );
}

/** The CRD's immutability rules against the live object: what `kubectl apply` would refuse. */
function refusedOnApply(live: LiveResource, spec: DeploymentSpec, name: string): string | undefined {
  const before = effectiveName(live.spec, live.metadata.name);
  const after = effectiveName(spec, name);
  if (before !== after)
    return `kubectl apply would be refused: spec.name is immutable (the cluster's resource has "${before}", the file "${after}"); keep the name or create a new resource`;
  if (live.spec.source !== spec.source)
    return `kubectl apply would be refused: spec.source is immutable (the cluster's resource has ${live.spec.source}, the file ${spec.source}); create a new resource to deploy from another source`;
  const [was, is] = [connectionLabel(live.spec.connectionRef), connectionLabel(spec.connectionRef)];
  if (was !== is)
    return `kubectl apply would be refused: spec.connectionRef is immutable (the cluster's resource uses ${was}, the file ${is}); create a new resource to deploy through another connection`;
  // The CRD's rule compares two set values only: left out (or first set) it is the operator's check.
  const [had, wants] = [live.spec.sourceConfig?.deploymentType, spec.sourceConfig?.deploymentType];
  if (had !== undefined && wants !== undefined && had !== wants)
    return `kubectl apply would be refused: spec.sourceConfig.deploymentType cannot change (the cluster's resource has ${had}, the file ${wants}): the service fixes a deployment's type at creation; keep ${had}, or create a new resource (with another spec.name) of the type ${wants}`;
  return undefined;
}

/** A claim on `self`'s service name by an older resource of the cluster (the controller's rule). */
function claimedInCluster(all: readonly LiveResource[] | undefined, self: Claimant): string | undefined {
  const holder = all ? olderClaimant(self, all) : undefined;
  if (!holder) return undefined;
  return `the service name "${claimedName(self)}" is already claimed by the older resource ${holder.metadata.namespace ?? ""}/${holder.metadata.name} in the cluster; the operator would stall this one (NameConflict)`;
}
