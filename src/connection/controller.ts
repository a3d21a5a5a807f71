/**
 * The connection controller's reconcile of a ServiceConnection or ClusterServiceConnection.
 *
 * It reads the connection's API key (and CA) from the Secrets it names (`credentials.ts`), has
 * the registry (`registry.ts`) build one service client and session for it (rebuilt only when
 * the spec, the key or the CA change), probes the credentials with `GET /v2/auth/providers`
 * (`probe.ts`) when it was built and then at most every `probeIntervalMs` (a failed probe: after
 * its backoff, {@link failedProbeBackoffMs}), records the verdict in
 * the registry and writes it as the connection's conditions (`status.ts`). When a connection's
 * usability, selector or rollout windows change, the resources using it are enqueued
 * (`onChange`). Deleting a connection is held by its finalizer while resources still use it:
 * they may need it to clean up.
 */
import type { Logger } from "pino";
import { loggedError } from "../api/errors.ts";
import type { ServiceConfig } from "../config.ts";
import {
  CONNECTION_FINALIZER,
  type ConnectionStatus,
  SERVICE_CONNECTION_KIND,
} from "../crd/connection-schema.ts";
import {
  type ConnectionId,
  connectionKey,
  type Failure,
  idOf,
  KSTATUS,
  parseConnectionKey,
} from "../crd/conventions.ts";
import type { ConnectionObject } from "../kube/connections.ts";
import type { SecretsPort } from "../reconcile/ports.ts";
import type { Clock } from "../runtime/clock.ts";
import { Action, type ReconcileResult } from "../runtime/controller.ts";
import { statusEqual } from "../runtime/json.ts";
import { readCredentials } from "./credentials.ts";
import { probeConnection } from "./probe.ts";
import type { ConnectionCache, ConnectionRegistry } from "./registry.ts";
import {
  CONNECTION_REASON,
  type ConnectionVerdict,
  connectionStatusFrom,
  type Holding,
  OPEN_TO_ALL_NAMESPACES,
} from "./status.ts";

/**
 * The connection objects: read from the watch cache, written under the resourceVersion read
 * (a conflict rejects with an error for which `isConflict` is true).
 */
export interface ConnectionStore extends ConnectionCache {
  patchStatus(
    obj: ConnectionObject,
    status: ConnectionStatus,
    signal: AbortSignal,
  ): Promise<ConnectionObject>;
  addFinalizer(obj: ConnectionObject, finalizer: string, signal: AbortSignal): Promise<ConnectionObject>;
  removeFinalizer(obj: ConnectionObject, finalizer: string, signal: AbortSignal): Promise<ConnectionObject>;
}

/** Options of {@link ConnectionReconciler}. */
export interface ConnectionReconcilerOptions {
  /** Where the connections' clients, sessions and verdicts live for the rest of the operator. */
  registry: ConnectionRegistry;
  connections: ConnectionStore;
  /** The operator's own service settings: what a connection's spec leaves out comes from them. */
  defaults: ServiceConfig;
  secrets: SecretsPort;
  /** How many Deployment resources use the connection `key` now (an index of the cache). */
  usage(key: string): number;
  /**
   * The namespace of each Deployment resource using the connection `key` (an index of the cache),
   * to count those its namespace selector refuses (`status.refused`). Default: none.
   */
  userNamespaces?: (key: string) => Iterable<string>;
  /** Called with a connection's key when whether it can be used changed. */
  onChange(key: string): void;
  /**
   * Whether this process writes the connections' finalizer and status now. Under `run --sharded`
   * every replica checks the connections (each needs their clients) but only the leader, which
   * counts every resource of the cluster, writes: a replica's own share would count too few
   * users (and let a connection in use be deleted). Default: always.
   */
  writes?: () => boolean;
  /** Enqueues the connection `key` for a reconcile of its own. Default: nothing. */
  enqueue?: (key: string) => void;
  /** Records an event about a connection object; never throws. */
  event(obj: ConnectionObject, type: "Normal" | "Warning", reason: string, note: string): void;
  isConflict(error: unknown): boolean;
  clock: Clock;
  logger: Logger;
  /**
   * A probe older than this is repeated by the next reconcile (the connection controller's
   * periodic pass runs at this period). Default 5 min.
   */
  probeIntervalMs?: number;
  /**
   * Longest one probe may take, whatever the request timeout: a service that never answers is
   * `Unreachable` after this long, and the check's worker is free again. Default 10 s.
   */
  probeDeadlineMs?: number;
}

/**
 * How long after the last of `failed` probes failed in a row the connection is probed again: 1 s,
 * doubling with each, at most 0.8 × `probeIntervalMs` (4 min of 5), so that the periodic pass
 * always probes it.
 */
export function failedProbeBackoffMs(failed: number, probeIntervalMs: number): number {
  return Math.min(probeIntervalMs * 0.8, 1_000 * 2 ** Math.max(0, failed - 1));
}

/** See the module comment. `reconcile` is the connection controller's reconciler. */
export class ConnectionReconciler {
  readonly #o: Required<ConnectionReconcilerOptions>;
  readonly #registry: ConnectionRegistry;
  /** The namespace selector each connection had at its last reconcile (see `selectorOf`). */
  readonly #selectors = new Map<string, string>();
  /** The rollout windows each connection had at its last reconcile (JSON). */
  readonly #windows = new Map<string, string>();

  constructor(options: ConnectionReconcilerOptions) {
    this.#o = {
      probeIntervalMs: 300_000,
      probeDeadlineMs: 10_000,
      userNamespaces: () => [],
      enqueue: () => {},
      writes: () => true,
      ...options,
    };
    this.#registry = options.registry;
  }

  /** The connection controller's reconcile of the connection `key` (see `connectionKey`). */
  readonly reconcile = async (key: string, signal: AbortSignal): Promise<ReconcileResult> => {
    const id = parseConnectionKey(key);
    const found = id && this.#o.connections.get(id);
    if (!id || !found) {
      this.#forget(key);
      return Action.gone();
    }
    try {
      return await this.#reconcile(key, id, found, signal);
    } catch (error) {
      if (this.#o.isConflict(error)) return Action.retry();
      throw error;
    }
  };

  async #reconcile(
    key: string,
    id: ConnectionId,
    found: ConnectionObject,
    signal: AbortSignal,
  ): Promise<ReconcileResult> {
    let obj = found;
    const writes = this.#o.writes();
    const counts = { users: this.#o.usage(key), refused: this.#refused(id, obj) };
    // Resources its selector refuses own nothing through it: they do not hold its deletion.
    const users = counts.users - counts.refused;
    // A changed selector may allow or refuse resources that already use the connection.
    const selector = this.#registry.access.selectorOf(obj.spec);
    const knownSelector = this.#selectors.get(key);
    this.#selectors.set(key, selector);
    if (knownSelector !== undefined && knownSelector !== selector) this.#o.onChange(key);
    this.#noteWindows(key, obj);
    // A deletion waits for the resources still using the connection, which stays usable (and
    // checked) meanwhile: they may need it to delete their deployments.
    let holding: Holding | undefined;
    // Past the namespace's bound nothing is read, built, sent or written but its status: not
    // even the finalizer (no client, so nothing of the service to let go of at its deletion).
    const over = this.#registry.bound.overLimit(id);
    if (obj.metadata.deletionTimestamp) {
      // A replica that does not write keeps the connection usable until it is gone.
      if (users === 0 && writes) {
        await this.#o.connections.removeFinalizer(obj, CONNECTION_FINALIZER, signal);
        this.#forget(key);
        return Action.gone();
      }
      holding = {
        reason: CONNECTION_REASON.InUse,
        message: `deletion waits until no Deployment resource uses this connection: ${users} still ${users === 1 ? "does" : "do"}`,
      };
    } else if (!over && writes)
      obj = await this.#o.connections.addFinalizer(obj, CONNECTION_FINALIZER, signal);

    // Room made by a deletion enqueues it again (see #forget), as does the periodic pass.
    if (over) {
      this.#setUnusable(key, over);
      await this.#writeStatus(obj, counts, holding, signal, over);
      return Action.done();
    }
    // Nothing is built or sent while the spec or a Secret is wrong; a change of either enqueues
    // the connection again, and a Secret that could not be read is retried with backoff.
    const credentials = await readCredentials(id, obj.spec, this.#o, signal);
    if (!credentials.ok) {
      const { failure } = credentials;
      // Deleted while in use, its Secret gone (a namespace being deleted takes its Secrets at
      // once, while the connection waits for its users; the Secret may go first, and the
      // connection be marked unusable for it before its own deletion): the client built before
      // still serves their cleanup, unprobed, until they are gone. Without it they would wait for
      // ever, and the namespace with them.
      const built = this.#registry.current(key);
      if (holding && failure.reason === CONNECTION_REASON.SecretMissing && built?.verdict?.ok) {
        const before = this.#registry.state(key);
        this.#registry.clearUnusable(key);
        if (this.#registry.state(key) !== before) this.#o.onChange(key);
        await this.#writeStatus(obj, counts, holding, signal, built.verdict);
        return Action.done();
      }
      this.#setUnusable(key, failure);
      await this.#writeStatus(obj, counts, holding, signal, failure);
      return failure.transient ? Action.retry() : Action.done();
    }
    const { config, apiKey } = credentials;
    const { entry, built } = this.#registry.entry(key, config);
    if (built && config.insecureSkipTlsVerify)
      this.#o.event(
        obj,
        "Warning",
        "InsecureSkipTLSVerify",
        "spec.insecureSkipTLSVerify is true: the service's certificate is not verified, so anyone in the path can read the API key; use it with a test service only",
      );
    const before = this.#registry.state(key);
    const wasUsable = before === "ready";
    this.#registry.clearUnusable(key);
    // Never before a Retry-After the service asked for has passed, nor a failed probe's backoff,
    // whatever brings the connection back meanwhile (a resource counted, a namespace's labels): a
    // tenant creating resources does not make the operator probe its service with each. A
    // changed spec, key or CA builds a new entry, probed at once.
    const now = this.#o.clock.now();
    const wait = entry.verdict?.ok
      ? this.#o.probeIntervalMs * 0.8
      : failedProbeBackoffMs(entry.failedProbes ?? 0, this.#o.probeIntervalMs);
    const due =
      now >= (entry.pausedUntil ?? now) && (entry.probedAt === undefined || now - entry.probedAt >= wait);
    if (due) {
      const probed = await probeConnection(entry.service, config, apiKey, signal, {
        clock: this.#o.clock,
        deadlineMs: this.#o.probeDeadlineMs,
      });
      // Asked to slow down: the service is there, and the last verdict still holds; ask again
      // once its Retry-After has passed.
      if ("retryAfterMs" in probed) entry.pausedUntil = this.#o.clock.now() + probed.retryAfterMs;
      if ("retryAfterMs" in probed && entry.verdict) return Action.requeueAfter(probed.retryAfterMs);
      const verdict = "retryAfterMs" in probed ? probed.verdict : probed;
      entry.verdict = verdict;
      entry.probedAt = this.#o.clock.now();
      entry.failedProbes = verdict.ok ? 0 : (entry.failedProbes ?? 0) + 1;
      // A connection that has just become usable lists its deployments once, so that its
      // resources find theirs in the listing instead of with one lookup each.
      if (verdict.ok && !wasUsable)
        await entry.session.snapshot.refresh(signal).catch((error: unknown) => {
          this.#o.logger.warn(
            { connection: key, err: loggedError(error) },
            "first listing of a connection failed",
          );
        });
    }
    if (this.#registry.state(key) !== before) this.#o.onChange(key);
    await this.#writeStatus(obj, counts, holding, signal, entry.verdict);
    // A transient failure is checked again after the key's backoff (and probed once the probe's
    // own has passed too), or its Retry-After; otherwise the periodic pass (every probe interval)
    // or a change of the connection or its Secret brings it back.
    const pausedMs = (entry.pausedUntil ?? 0) - this.#o.clock.now();
    if (pausedMs > 0) return Action.requeueAfter(pausedMs);
    if (entry.verdict?.ok === false && entry.verdict.transient) return Action.retry();
    return Action.done();
  }

  /**
   * Enqueues the connection's resources when its `spec.rolloutWindows` or
   * `spec.rolloutWindowsPolicy` changed: a change held under the old windows waits for the
   * opening they computed, which the new ones may move (or lift: a policy back to Advisory).
   */
  #noteWindows(key: string, obj: ConnectionObject): void {
    const windows = JSON.stringify([obj.spec.rolloutWindows ?? null, obj.spec.rolloutWindowsPolicy ?? null]);
    const known = this.#windows.get(key);
    this.#windows.set(key, windows);
    if (known !== undefined && known !== windows) this.#o.onChange(key);
  }

  /** How many of the connection's users its namespace selector refuses (their namespaces, once each). */
  #refused(id: ConnectionId, obj: ConnectionObject): number {
    if (!obj.spec.namespaceSelector) return 0;
    const checked = new Map<string, boolean>();
    let refused = 0;
    for (const namespace of this.#o.userNamespaces(connectionKey(id))) {
      let no = checked.get(namespace);
      if (no === undefined) {
        no = this.#registry.access.check(namespace, id, obj.spec).kind === "refused";
        checked.set(namespace, no);
      }
      if (no) refused += 1;
    }
    return refused;
  }

  /**
   * Writes the connection's status when it changed, and an event when its `Ready` did. `counts`:
   * the resources using it and those refused; `holding`: a held deletion's condition.
   */
  async #writeStatus(
    obj: ConnectionObject,
    counts: { users: number; refused: number },
    holding: Holding | undefined,
    signal: AbortSignal,
    verdict?: ConnectionVerdict,
  ): Promise<void> {
    if (!this.#o.writes()) return;
    const key = connectionKey(idOf(obj));
    const previous = obj.status ?? {};
    const status = connectionStatusFrom({
      previous,
      generation: obj.metadata.generation ?? 0,
      verdict: verdict ?? this.#registry.verdict(key),
      holding,
      counts,
      probedAt: this.#registry.current(key)?.probedAt,
      openToAll: !obj.metadata.namespace && !obj.spec.namespaceSelector,
      now: new Date(this.#o.clock.now()),
    });
    if (statusEqual(previous, status)) return;
    await this.#o.connections.patchStatus(obj, status, signal);
    // The verdict's changes are events too: `kubectl describe` shows when a key stopped working.
    const before = previous.conditions?.find((c) => c.type === KSTATUS.Ready);
    const after = status.conditions?.find((c) => c.type === KSTATUS.Ready);
    if (after && (before?.status !== after.status || before.reason !== after.reason))
      this.#o.event(obj, after.status === "True" ? "Normal" : "Warning", after.reason, after.message);
    const open = OPEN_TO_ALL_NAMESPACES.type;
    if (status.conditions?.some((c) => c.type === open) && !previous.conditions?.some((c) => c.type === open))
      this.#o.event(obj, "Warning", OPEN_TO_ALL_NAMESPACES.reason, OPEN_TO_ALL_NAMESPACES.message);
  }

  /** Marks the connection unusable, enqueueing its resources when what they are told changes. */
  #setUnusable(key: string, failure: Failure): void {
    const before = this.#registry.state(key);
    this.#registry.setUnusable(key, failure);
    if (this.#registry.state(key) !== before) this.#o.onChange(key);
  }

  /**
   * The connection is gone: its resources can no longer use it, and a connection of its
   * namespace refused by the per-namespace bound may take its place.
   */
  #forget(key: string): void {
    this.#selectors.delete(key);
    this.#windows.delete(key);
    if (this.#registry.forget(key)) this.#o.onChange(key);
    const id = parseConnectionKey(key);
    if (id?.kind === SERVICE_CONNECTION_KIND)
      for (const waiting of this.#registry.bound.waitingForRoom(id.namespace)) this.#o.enqueue(waiting);
  }
}
