/**
 * `dms-operator plan`, the reading part: for each resource of the files, what the operator would
 * see — the service's deployment (found as the controller finds it), the forge listing behind a
 * `github` source, and, only when a cluster is given, the referenced Secrets' values, the live
 * resource's status and the other resources claiming the same name. Then the pure review.
 * Talks to the service and the cluster only through ports; writes nothing anywhere.
 */
import { isServiceError } from "../api/errors.ts";
import { InvalidSpecError } from "../crd/errors.ts";
import { type ResolvedGithub, resolveGithub } from "../crd/github.ts";
import { effectiveName, secretKeyRefs } from "../crd/mapping.ts";
import type { DeploymentSpec } from "../crd/schema.ts";
import { AmbiguousNameError, observe } from "../reconcile/observe.ts";
import type { DeploymentsPort } from "../reconcile/ports.ts";
import { RemoteSnapshot } from "../reconcile/remote.ts";
import type { Clock } from "../runtime/clock.ts";
import type { ManifestResource } from "./manifests.ts";
import { githubTarget, type RepoListing, repoReachabilityWarning } from "./repos.ts";
import {
  errorEntry,
  type LiveStatus,
  type ReviewEntry,
  type ReviewInputs,
  reviewResource,
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
  /** The value of `key` of Secret `name`, or undefined when the Secret or the key is missing. */
  readSecretKey(
    namespace: string,
    name: string,
    key: string,
    signal: AbortSignal,
  ): Promise<string | undefined>;
}

/** Inputs of {@link reviewAll}. */
export interface ReviewAllOptions {
  service: DeploymentsPort;
  /** Absent: the cluster is not read (no kubeconfig). */
  cluster?: ClusterReader;
  clock: Clock;
  signal: AbortSignal;
}

const keyOf = (namespace: string, name: string) => `${namespace}/${name}`;

/**
 * Reviews every resource, in order. A resource that cannot be planned (a missing Secret, an
 * unresolvable `github`, several service deployments with its name, an apply the CRD would
 * refuse) becomes an `error` entry; a failure to talk to the service or the cluster rejects.
 */
export async function reviewAll(
  resources: readonly ManifestResource[],
  options: ReviewAllOptions,
): Promise<ReviewEntry[]> {
  const { service, cluster, signal } = options;
  const snapshot = new RemoteSnapshot(service, options.clock, 0);
  const listings = new Map<string, Promise<RepoListing>>();
  const listing = (integrationId: string) => {
    let found = listings.get(integrationId);
    if (!found) {
      found = service.listRepos(integrationId, signal).then(
        (repos): RepoListing => ({ kind: "listed", repos }),
        (error: unknown): RepoListing => {
          if (isServiceError(error, "not_found")) return { kind: "not-found" };
          throw error;
        },
      );
      listings.set(integrationId, found);
    }
    return found;
  };
  const liveAll = cluster ? await cluster.listResources(signal) : undefined;
  const firstClaim = new Map<string, ManifestResource>();
  const entries: ReviewEntry[] = [];
  for (const item of resources) {
    const { resource } = item;
    const namespace = resource.metadata.namespace ?? cluster?.defaultNamespace ?? "default";
    const name = effectiveName(resource.spec, resource.metadata.name);
    const base = { file: item.file, line: item.line, resource, namespace };
    const live = cluster ? await cluster.getResource(namespace, resource.metadata.name, signal) : undefined;
    const fail = (message: string) =>
      errorEntry({ ...base, observed: null, adopted: false, warnings: [] }, message);

    const refused = live ? refusedOnApply(live, resource.spec, resource.metadata.name) : undefined;
    if (refused) {
      entries.push(fail(refused));
      continue;
    }
    const holder = firstClaim.get(name);
    firstClaim.set(name, holder ?? item);
    const nameConflict = holder
      ? `the service name "${name}" is also claimed by ${holder.file}:${holder.line}; the operator would stall one of them (NameConflict)`
      : claimedInCluster(liveAll, { namespace, name: resource.metadata.name }, name, live);

    const warnings: string[] = [];
    let github: ResolvedGithub | undefined;
    try {
      github = await resolveShorthand(resource.spec, listing);
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

    const secretData = cluster ? await readSecrets(cluster, namespace, resource.spec, signal) : undefined;
    let found: Awaited<ReturnType<typeof observe>>;
    try {
      found = await observe(
        service,
        snapshot,
        { deploymentId: live?.status?.deploymentId, name, live: true },
        signal,
      );
    } catch (error) {
      if (!(error instanceof AmbiguousNameError)) throw error;
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
    };
    entries.push(reviewResource(inputs));
  }
  return entries;
}

async function resolveShorthand(
  spec: DeploymentSpec,
  listing: (integrationId: string) => Promise<RepoListing>,
): Promise<ResolvedGithub | undefined> {
  if (!spec.github) return undefined;
  const { integrationId } = spec.github;
  const found = await listing(integrationId);
  if (found.kind === "not-found")
    throw new InvalidSpecError(
      "spec.github.integrationId",
      `the service has no GitHub integration ${integrationId}; use the id of an existing forge integration`,
    );
  if (found.kind === "failed") throw new InvalidSpecError("spec.github", found.reason);
  return resolveGithub(spec.github, found.repos);
}

/** The CRD's immutability rules against the live object: what `kubectl apply` would refuse. */
function refusedOnApply(live: LiveResource, spec: DeploymentSpec, name: string): string | undefined {
  const before = effectiveName(live.spec, live.metadata.name);
  const after = effectiveName(spec, name);
  if (before !== after)
    return `kubectl apply would be refused: spec.name is immutable (the cluster's resource has "${before}", the file "${after}"); keep the name or create a new resource`;
  if (live.spec.source !== spec.source)
    return `kubectl apply would be refused: spec.source is immutable (the cluster's resource has ${live.spec.source}, the file ${spec.source}); create a new resource to deploy from another source`;
  return undefined;
}

/** A claim on `name` by an older resource of the cluster (the operator's rule: the older keeps it). */
function claimedInCluster(
  all: readonly LiveResource[] | undefined,
  self: { namespace: string; name: string },
  name: string,
  live: LiveResource | undefined,
): string | undefined {
  if (!all) return undefined;
  const selfKey = keyOf(self.namespace, self.name);
  const created = live?.metadata.creationTimestamp;
  for (const other of all) {
    const otherKey = keyOf(other.metadata.namespace ?? "", other.metadata.name);
    if (otherKey === selfKey || effectiveName(other.spec, other.metadata.name) !== name) continue;
    const otherCreated = other.metadata.creationTimestamp ?? "";
    // A resource not yet in the cluster is the newest of all.
    const older =
      created === undefined || otherCreated < created || (otherCreated === created && otherKey < selfKey);
    if (older)
      return `the service name "${name}" is already claimed by the older resource ${otherKey} in the cluster; the operator would stall this one (NameConflict)`;
  }
  return undefined;
}

/** The referenced keys that exist, by Secret and key; missing ones are left out (the review names them). */
async function readSecrets(
  cluster: ClusterReader,
  namespace: string,
  spec: DeploymentSpec,
  signal: AbortSignal,
): Promise<Record<string, Record<string, string>>> {
  const data: Record<string, Record<string, string>> = {};
  for (const { secret, key } of secretKeyRefs(spec)) {
    const value = await cluster.readSecretKey(namespace, secret, key, signal);
    if (value === undefined) continue;
    data[secret] ??= {};
    data[secret][key] = value;
  }
  return data;
}
