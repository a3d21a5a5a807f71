/**
 * The connections this instance can use now: one service client and session per connection (the
 * default one of the operator's flags included), and the answer to "may this Deployment resource
 * reach the service now, and through what?".
 *
 * The connection controller (`controller.ts`) fills it as it checks each connection: it builds a
 * connection's entry (rebuilt only when the settings change), records its probe's verdict, or
 * marks it unusable for a reason found before any probe (its Secret, its spec). Everything else
 * only reads it, through {@link ConnectionSessions}: resources using a connection that is missing,
 * not Ready or another namespace's make no service call (`ConnectionNotReady`), nor do those of a
 * namespace the connection's namespace selector refuses (`ConnectionNotAllowed`, see `access.ts`).
 */
import { createHash } from "node:crypto";
import type { ServiceConfig } from "../config.ts";
import { CLUSTER_SERVICE_CONNECTION_KIND, SERVICE_CONNECTION_KIND } from "../crd/connection-schema.ts";
import {
  type ConnectionId,
  connectionKey,
  connectionOf,
  DEFAULT_CONNECTION,
  describeConnection,
  type Failure,
  limitingSelector,
} from "../crd/conventions.ts";
import type { ConnectionObject } from "../kube/connections.ts";
import type { DeploymentsPort, StoredResource } from "../reconcile/ports.ts";
import type { ServiceSession, SessionLookup, Sessions } from "../reconcile/service/session.ts";
import { NamespaceAccess } from "./access.ts";
import { NamespaceBound } from "./namespace-bound.ts";
import { connectionWindows } from "./settings.ts";
import { CONNECTION_REASON, type ConnectionVerdict } from "./status.ts";

const TOO_MANY_CONNECTIONS = CONNECTION_REASON.TooManyConnections;
/** What the calls of a client replaced by a change of its connection's settings are told. */
const REPLACED =
  "the connection's settings changed (its spec, API key or CA): its client was replaced, and a call is made again through the new one";

/** The service as one connection reaches it, built by the composition root. */
export interface ConnectionService {
  port: DeploymentsPort;
  /** The credential probe: the number of OAuth providers the service lists. */
  probe(signal: AbortSignal): Promise<number>;
  /**
   * Closes the client for good, saying `why` to the calls it refuses from now on and cutting
   * those in flight: called when the registry replaces or drops it.
   */
  close?(why: string): void;
}

/** The connection objects as the watch cache holds them. */
export interface ConnectionCache {
  /** True when connections of `kind` are watched (the cluster kind needs a cluster-wide install). */
  watches(kind: ConnectionId["kind"]): boolean;
  get(id: ConnectionId): ConnectionObject | undefined;
}

/** A connection as this instance knows it: its client and session, and its last probe. */
export interface ConnectionEntry {
  /** Digest of the settings the client was built from (the key included, never kept itself). */
  readonly fingerprint: string;
  readonly service: ConnectionService;
  readonly session: ServiceSession;
  /** The last probe's verdict and when it was made (epoch ms); set by the connection controller. */
  verdict?: ConnectionVerdict;
  probedAt?: number;
  /** Probes failed in a row since the entry was built or a probe succeeded (their backoff). */
  failedProbes?: number;
  /** Until when (epoch ms) the service asked not to be probed again (a 429's Retry-After). */
  pausedUntil?: number;
}

/**
 * What the Deployment reconciler, the resync passes, the rollout poller and the metrics ask of
 * the connections.
 */
export interface ConnectionSessions extends Sessions {
  /** The sessions usable now, the default one first: a resync pass lists each once. */
  sessions(): { key: string; session: ServiceSession }[];
  /** The session of a ready connection `key` (`default` included), if any. */
  session(key: string): ServiceSession | undefined;
  /** True when `obj`'s namespace may not use its connection now (see `access.ts`). */
  refuses(obj: StoredResource): boolean;
  /**
   * Per connection key (`default`, `ClusterServiceConnection/<name>`), how many of `resources`
   * its namespace selector refuses now.
   */
  refusals(resources: Iterable<StoredResource>): Map<string, number>;
}

/** Options of {@link ConnectionRegistry}. */
export interface ConnectionRegistryOptions {
  connections: ConnectionCache;
  /** The session of the operator's own settings, for resources without `spec.connectionRef`. */
  defaultSession: ServiceSession;
  /** Builds the client of a connection's settings. */
  connect(config: ServiceConfig, key: string): ConnectionService;
  /**
   * Builds the session (its snapshot, listings, revision tracking) of the connection `key` over
   * its port.
   */
  session(port: DeploymentsPort, key: string): ServiceSession;
  /** Who may use which connection (namespace selectors). Default: everyone may use every one. */
  access?: NamespaceAccess;
  /** Which ServiceConnections of a namespace get a client (`--max-connections-per-namespace`). Default: all. */
  bound?: NamespaceBound;
}

/** See the module comment. */
export class ConnectionRegistry implements ConnectionSessions {
  /** Who may use which connection; the connection controller counts refused users with it. */
  readonly access: NamespaceAccess;
  /** Which ServiceConnections get no client, and wait for room; the connection controller asks it. */
  readonly bound: NamespaceBound;
  readonly #o: ConnectionRegistryOptions;
  readonly #entries = new Map<string, ConnectionEntry>();
  /** Connections found unusable for a reason other than the probe (e.g. their Secret). */
  readonly #unusable = new Map<string, Failure>();

  constructor(options: ConnectionRegistryOptions) {
    this.#o = options;
    this.access = options.access ?? new NamespaceAccess();
    this.bound = options.bound ?? new NamespaceBound();
  }

  /**
   * Whether `obj` may reach the service now, and through which session. Whether its namespace may
   * use the connection is asked first, before whether it is Ready: a refused namespace learns
   * nothing of a connection it may not use but that it exists.
   */
  lookup(obj: StoredResource): SessionLookup {
    const namespace = obj.metadata.namespace ?? "";
    const id = connectionOf(namespace, obj.spec.connectionRef);
    if (!id) {
      // Without --default-connection-namespace-selector every namespace may use it: nothing to check.
      const access = this.access.limitsDefault ? this.access.check(namespace, undefined) : undefined;
      return !access || access.kind === "allowed"
        ? { kind: "ready", session: this.#o.defaultSession }
        : access;
    }
    if (!this.#o.connections.watches(id.kind))
      return {
        kind: "unavailable",
        message: `${describeConnection(id)} cannot be used: this operator watches only some namespaces (a namespaced install), and a ClusterServiceConnection needs the cluster-wide install; use a ServiceConnection in namespace ${obj.metadata.namespace}`,
      };
    const found = this.#o.connections.get(id);
    if (!found)
      return {
        kind: "unavailable",
        message:
          id.kind === SERVICE_CONNECTION_KIND
            ? `${describeConnection(id)} not found: a Deployment uses a ServiceConnection of its own namespace only; create it there, or use a ClusterServiceConnection`
            : `${describeConnection(id)} not found: create it, or fix spec.connectionRef`,
      };
    // Asked only where a selector limits the connection's users: check() allows every other use.
    if (limitingSelector(id, found.spec)) {
      const access = this.access.check(namespace, id, found.spec);
      if (access.kind !== "allowed") return access;
    }
    const key = connectionKey(id);
    const problem = this.#unusable.get(key);
    if (problem) return unavailable(id, problem);
    const entry = this.#entries.get(key);
    if (!entry?.verdict) return { kind: "pending" };
    if (!entry.verdict.ok) return unavailable(id, entry.verdict);
    // Read from the watch cache at each lookup: a change of the windows alone rebuilds nothing.
    const rolloutWindows = connectionWindows(id, found.spec);
    return rolloutWindows
      ? { kind: "ready", session: entry.session, rolloutWindows }
      : { kind: "ready", session: entry.session };
  }

  sessions(): { key: string; session: ServiceSession }[] {
    const ready = [...this.#entries].filter(([key, e]) => e.verdict?.ok && !this.#unusable.has(key));
    return [
      { key: DEFAULT_CONNECTION, session: this.#o.defaultSession },
      ...ready.map(([key, e]) => ({ key, session: e.session })),
    ];
  }

  session(key: string): ServiceSession | undefined {
    return this.sessions().find((s) => s.key === key)?.session;
  }

  refuses(obj: StoredResource): boolean {
    const namespace = obj.metadata.namespace ?? "";
    const id = connectionOf(namespace, obj.spec.connectionRef);
    // A missing connection refuses no one (its resources are told it is missing), nor does a
    // ServiceConnection (its own namespace's only).
    if (id && id.kind !== CLUSTER_SERVICE_CONNECTION_KIND) return false;
    const spec = id ? this.#o.connections.get(id)?.spec : undefined;
    if (id && !spec) return false;
    return this.access.check(namespace, id, spec).kind === "refused";
  }

  /**
   * See {@link ConnectionSessions.refusals}. One pass, each (connection, namespace) checked once,
   * nothing allocated per resource: it runs at every scrape of /metrics over every cached resource.
   */
  refusals(resources: Iterable<StoredResource>): Map<string, number> {
    const counts = new Map<string, number>();
    // Per connection (undefined: the default), per namespace: refused or not.
    const checked = new Map<string | undefined, Map<string, boolean>>();
    for (const obj of resources) {
      const ref = obj.spec.connectionRef;
      // A ServiceConnection is its own namespace's only: it refuses no one.
      if (ref && ref.kind !== CLUSTER_SERVICE_CONNECTION_KIND) continue;
      const namespace = obj.metadata.namespace ?? "";
      let byNamespace = checked.get(ref?.name);
      if (!byNamespace) {
        byNamespace = new Map();
        checked.set(ref?.name, byNamespace);
      }
      let refused = byNamespace.get(namespace);
      if (refused === undefined) {
        refused = this.refuses(obj);
        byNamespace.set(namespace, refused);
      }
      if (!refused) continue;
      const label = connectionKey(connectionOf(namespace, ref));
      counts.set(label, (counts.get(label) ?? 0) + 1);
    }
    return counts;
  }

  /**
   * The entry of `key` for `config`: the one there when it was built from the same settings
   * (spec, key and CA), a new one otherwise (`built`), which has not been probed yet.
   */
  entry(key: string, config: ServiceConfig): { entry: ConnectionEntry; built: boolean } {
    const fingerprint = createHash("sha256").update(JSON.stringify(config)).digest("hex");
    const existing = this.#entries.get(key);
    if (existing?.fingerprint === fingerprint) return { entry: existing, built: false };
    // A reconcile that took the old session before sends nothing more through it: not to the
    // old base URL, nor with the old key or CA.
    existing?.service.close?.(REPLACED);
    const service = this.#o.connect(config, key);
    const entry: ConnectionEntry = { fingerprint, service, session: this.#o.session(service.port, key) };
    this.#entries.set(key, entry);
    return { entry, built: true };
  }

  /** The entry of `key` as it is, if one was built. */
  current(key: string): ConnectionEntry | undefined {
    return this.#entries.get(key);
  }

  /** What is known of `key`: why it is unusable, else its last probe's verdict. */
  verdict(key: string): ConnectionVerdict | undefined {
    return this.#unusable.get(key) ?? this.#entries.get(key)?.verdict;
  }

  /**
   * What the connection's resources are told, coarsely: `pending`, `ready`, or `unavailable/`
   * with the reason. The connection controller enqueues them when it changes (a detail of a
   * message that changes alone does not re-enqueue them all).
   */
  state(key: string): string {
    const known = this.verdict(key);
    if (!known) return "pending";
    return known.ok ? "ready" : `unavailable/${known.reason}`;
  }

  /**
   * Marks `key` unusable for `failure`, found before any probe (its spec or a Secret, the
   * per-namespace bound): a client built before is dropped.
   */
  setUnusable(key: string, failure: Failure): void {
    this.#unusable.set(key, failure);
    this.bound.wait(key, failure.reason === TOO_MANY_CONNECTIONS);
    if (failure.reason === TOO_MANY_CONNECTIONS) this.#drop(key, failure.message);
  }

  /** `key`'s settings could be read again: its probe's verdict speaks for it. */
  clearUnusable(key: string): void {
    this.#unusable.delete(key);
    this.bound.wait(key, false);
  }

  /** Drops `key` (its connection is gone); true when anything was known of it. */
  forget(key: string): boolean {
    const known = this.#entries.has(key) || this.#unusable.has(key);
    this.#drop(key, "the connection was deleted");
    this.#unusable.delete(key);
    this.bound.wait(key, false);
    return known;
  }

  /** Drops `key`'s client, if any, closing it: its calls in flight or to come fail with `why`. */
  #drop(key: string, why: string): void {
    this.#entries.get(key)?.service.close?.(why);
    this.#entries.delete(key);
  }
}

/** What a resource is told about a connection that cannot be used. */
function notReady(id: ConnectionId, verdict: { reason: string; message: string }): string {
  return `${describeConnection(id)} is not Ready (${verdict.reason}): ${verdict.message}`;
}

/**
 * What a resource of a connection that is not Ready is told: why, and whether the connection
 * retries on its own (a transient failure: the resource waits, as for a retried call of its own).
 */
function unavailable(id: ConnectionId, failure: Failure): SessionLookup {
  const message = notReady(id, failure);
  return failure.transient
    ? { kind: "unavailable", message, retrying: true }
    : { kind: "unavailable", message };
}
