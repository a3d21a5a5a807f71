/**
 * The labels of the cluster's namespaces, for namespace selectors (a ClusterServiceConnection's
 * `spec.namespaceSelector`, `--default-connection-namespace-selector`): a metadata-only watch of
 * `namespaces` whose cache keeps each namespace's name, resourceVersion and labels, nothing else
 * (no annotations, no managedFields, no status), and tells when a namespace's labels changed.
 */
import type { KubeClient } from "./client.ts";
import { KubeApiError } from "./errors.ts";
import { collectionPath, isKubeObject, type ResourceType } from "./object.ts";
import { WatchedResource, type WatchOptions } from "./scope.ts";
import { METADATA_LIST_ACCEPT, METADATA_WATCH_ACCEPT } from "./secrets.ts";

/** The core resource type `namespaces` (cluster-scoped). */
export const NAMESPACES: ResourceType = { group: "", version: "v1", plural: "namespaces" };

/** What the cache keeps of a namespace. */
export interface NamespaceMeta {
  metadata: { name: string; resourceVersion: string; labels: Readonly<Record<string, string>> };
}

const NO_LABELS: Readonly<Record<string, string>> = Object.freeze({});

/** Keeps the name, resourceVersion and labels of a namespace from the wire. */
export function decodeNamespaceMeta(raw: unknown): NamespaceMeta | undefined {
  if (!isKubeObject(raw)) return undefined;
  const { name, resourceVersion, labels } = raw.metadata;
  return { metadata: { name, resourceVersion, labels: labels ?? NO_LABELS } };
}

/** Why watching namespaces failed with 403, and how to fix it. */
export const NAMESPACES_FORBIDDEN =
  "the operator may not list and watch namespaces, which it needs to apply namespace selectors (ClusterServiceConnection spec.namespaceSelector, --default-connection-namespace-selector): grant list and watch on namespaces cluster-wide (the ClusterRole dms-operator of manifests/rbac does; for a namespaced install see docs/guide/connections.md, Who may use a connection), or run without --cluster-connections and without --default-connection-namespace-selector";

/**
 * The namespaces' labels.
 *
 * Contract: `labels(name)` answers from the cache (undefined for a namespace not seen yet);
 * `onLabelsChange` listeners receive the name of every namespace that appears, goes, or whose
 * labels changed (not on other changes: a namespace's status or annotations). `run` first asks
 * for one namespace, and rejects with an error naming the missing permission on a 403, so that
 * an operator without it stops at start-up with that message instead of retrying forever.
 */
export class KubeNamespaces extends WatchedResource<NamespaceMeta> {
  readonly #client: KubeClient;

  constructor(options: WatchOptions) {
    super(undefined, options, {
      resource: NAMESPACES,
      decode: decodeNamespaceMeta,
      accept: { list: METADATA_LIST_ACCEPT, watch: METADATA_WATCH_ACCEPT },
    });
    this.#client = options.client;
  }

  /** The labels of namespace `name`, or undefined when it has not been seen. */
  labels(name: string): Readonly<Record<string, string>> | undefined {
    return this.cache.get("", name)?.metadata.labels;
  }

  /** Calls `listener` with a namespace's name when its labels may have changed; returns the unsubscribe. */
  onLabelsChange(listener: (name: string) => void): () => void {
    const notify = (n: NamespaceMeta) => listener(n.metadata.name);
    return this.cache.subscribe({
      onAdd: notify,
      onDelete: notify,
      onUpdate: (old, n) => {
        if (!sameLabels(old.metadata.labels, n.metadata.labels)) notify(n);
      },
    });
  }

  /** Checks the permission once, then lists and watches until `signal` aborts. */
  override async run(signal: AbortSignal): Promise<void> {
    try {
      await this.#client.request({
        method: "GET",
        path: collectionPath(NAMESPACES),
        query: { limit: 1 },
        accept: METADATA_LIST_ACCEPT,
        signal,
      });
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 403)
        throw new Error(NAMESPACES_FORBIDDEN, { cause: error });
      // Anything else (the API server restarting) is the reflector's to retry.
    }
    return super.run(signal);
  }
}

function sameLabels(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}
