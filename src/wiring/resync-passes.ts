/**
 * What the periodic passes go through. The Deployment pass is per connection: each usable
 * connection (the default one included) is listed on its own, under `--listing-deadline`, and its
 * resources are enqueued as soon as ITS listing is in. One that is slow, endless or failing delays
 * only its own resources, which then report it without a call (see the reconciler). A start (a
 * restart, a new leader) is a pass like every resync: one listing per connection answers for its
 * resources. A sharded replica's "listing" is the read of its share by id ({@link shareIds}).
 * The connection pass checks (and re-probes) every connection.
 */
import { loggedError } from "../api/errors.ts";
import type { ConnectionSessions } from "../connection/registry.ts";
import { connectionKey, DEFAULT_CONNECTION, idOf } from "../crd/conventions.ts";
import type { KubeConnections } from "../kube/connections.ts";
import type { KubeDeployments } from "../kube/custom-resources.ts";
import { refOf } from "../kube/object.ts";
import {
  claimedName,
  connectionKeyOf,
  holdsClaim,
  isPaused,
  olderThan,
  reachableDeployment,
} from "../reconcile/inputs.ts";
import type { StoredResource } from "../reconcile/ports.ts";
import { startPass } from "../reconcile/service/freshness.ts";
import { objectKey } from "../runtime/queue-records.ts";
import type { ResyncOptions } from "../runtime/resync.ts";
import { CONNECTION_INDEX } from "./indexes.ts";

/** Longest wait before a connection whose listing missed its deadline or failed is listed again. */
const LISTING_RETRY_MS = 60_000;
/** The first wait before a failed listing is tried again (doubling up to LISTING_RETRY_MS). */
const LISTING_RETRY_BASE_MS = 2_000;

const keyOf = (o: Parameters<typeof refOf>[0]) => objectKey(refOf(o));

/**
 * The resources of the connection `key` in the cache. The default connection's are the only ones
 * outside the connection index: found by going through the cache once, as the single pass did.
 */
function resourcesOf(deployments: Pick<KubeDeployments, "list" | "byIndex">, key: string) {
  return key === DEFAULT_CONNECTION
    ? deployments.list().filter((o) => connectionKeyOf(o) === DEFAULT_CONNECTION)
    : deployments.byIndex(CONNECTION_INDEX, key);
}

/**
 * The keys of the connection `key`'s resources, as the cache holds them (its index's, or for the
 * default connection its own): no string made per resource and pass. At 10,000 resources those
 * strings lived through the pass's spread into the old generation, 0.9 MiB a pass.
 */
function keysOf(deployments: Pick<KubeDeployments, "keysWhere" | "keysByIndex">, key: string) {
  return key === DEFAULT_CONNECTION
    ? deployments.keysWhere((o) => connectionKeyOf(o) === DEFAULT_CONNECTION)
    : deployments.keysByIndex(CONNECTION_INDEX, key);
}

/** The Deployment pass's groups (the usable connections) and the resources of each. */
export function deploymentPassScope(
  deployments: Pick<KubeDeployments, "list" | "keysWhere" | "keysByIndex">,
  connections: Pick<ConnectionSessions, "sessions">,
): Pick<ResyncOptions, "groups" | "keys" | "ungrouped"> {
  return {
    groups: () => connections.sessions().map((s) => s.key),
    keys: (key) => keysOf(deployments, key),
    // Resources of a connection not usable at the start: told so once (its check enqueues them
    // again when that changes).
    ungrouped: () => {
      const usable = new Set(connections.sessions().map((s) => s.key));
      return deployments.list().flatMap((o) => (usable.has(connectionKeyOf(o)) ? [] : [keyOf(o)]));
    },
  };
}

/**
 * A sharded replica's share of the connection `key`, as its pass reads it: the deployment ids its
 * resources of that connection record (its cache holds its own resources only), those refused
 * the connection left out (they make no call). One walk over the connection's resources per read.
 */
export function shareIds(
  deployments: Pick<KubeDeployments, "list" | "byIndex">,
  refuses: (o: StoredResource) => boolean,
): (key: string) => () => string[] {
  return (key) => () => {
    const memo = refusedByNamespace(refuses);
    return resourcesOf(deployments, key).flatMap((o) => reachableDeployment(o, memo) ?? []);
  };
}

/**
 * The service names of a sharded replica's resources of the connection `key` that will look
 * their deployment up by name: each a lookup before its create, unless a whole listing answers
 * them (`RemoteSnapshotOptions.unrecorded`). Those are the holders of their names (the oldest
 * resource holding the claim, as the reconciler's `holderOf` rules) that record no deployment
 * id and are neither deleted, paused nor refused the connection: a claim's losers, a paused
 * resource, make no lookup, so a thousand rivals of one name count once. One walk over the
 * connection's resources.
 */
export function shareUnrecorded(
  deployments: Pick<KubeDeployments, "list" | "byIndex">,
  refuses: (o: StoredResource) => boolean,
): (key: string) => () => string[] {
  return (key) => () => {
    const memo = refusedByNamespace(refuses);
    // Within one connection a claim is its name: the holder of each name, deleted or not (a
    // resource being deleted holds its name until it is gone).
    const holders = new Map<string, StoredResource>();
    for (const o of resourcesOf(deployments, key)) {
      if (!holdsClaim(o, memo)) continue;
      const name = claimedName(o);
      const held = holders.get(name);
      if (held === undefined || olderThan(o, held)) holders.set(name, o);
    }
    const names: string[] = [];
    for (const [name, o] of holders)
      if (!o.status?.deploymentId && o.metadata.deletionTimestamp === undefined && !isPaused(o))
        names.push(name);
    return names;
  };
}

/** `refuses`, asked once per namespace: of one connection, it depends on the namespace only. */
function refusedByNamespace(refuses: (o: StoredResource) => boolean): (o: StoredResource) => boolean {
  const refused = new Map<string, boolean>();
  return (o) => {
    const namespace = o.metadata.namespace ?? "";
    let no = refused.get(namespace);
    if (no === undefined) {
      no = refuses(o);
      refused.set(namespace, no);
    }
    return no;
  };
}

/**
 * The Deployment pass's period, its retries after a failed listing and its spread; and its
 * `prepare`: each connection's listing (none for a connection without a session).
 */
export function deploymentPassTiming(
  resyncMs: number,
  connections: Pick<ConnectionSessions, "session">,
): Pick<ResyncOptions, "periodMs" | "retryMs" | "retryBaseMs" | "spreadMs" | "prepare"> {
  // A connection that has just become usable was listed by its check a moment ago.
  const reuseListingMs = Math.min(resyncMs / 2, 60_000);
  return {
    prepare: async (key, signal) => {
      const session = connections.session(key);
      if (!session) return () => {};
      // The resync logs a failed listing: what of it a log may carry (not the service's text).
      return startPass(session.snapshot, reuseListingMs, signal).catch((error: unknown) => {
        throw signal.aborted ? error : new Error(loggedError(error));
      });
    },
    periodMs: resyncMs,
    retryMs: Math.min(resyncMs, LISTING_RETRY_MS),
    // A failed listing is tried again soon, then less often: its resources heal within seconds
    // of the service's, while one that stays down costs a listing a minute.
    retryBaseMs: Math.min(resyncMs, LISTING_RETRY_BASE_MS),
    spreadMs: Math.min(resyncMs / 10, 60_000),
  };
}

/** The connection pass's keys: every watched connection of both kinds. */
export function connectionPassKeys(connections: Pick<KubeConnections, "all">): () => string[] {
  return () => connections.all.flatMap((r) => r.list()).map((c) => connectionKey(idOf(c)));
}
