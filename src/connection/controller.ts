/**
 * The connections: the reconcile of a ServiceConnection or ClusterServiceConnection, and the
 * answer to "may this Deployment resource reach the service now, and through what?".
 *
 * A connection's reconcile reads its API key from the Secret it names, builds one service client
 * and session for it (rebuilt only when the spec or the key change), probes the credentials with
 * `GET /v2/auth/providers` when it was built and then at most every `probeIntervalMs`, and writes
 * the result as its `Ready` condition. Resources using a connection that is missing, not Ready or
 * another namespace's make no service call (`ConnectionNotReady`), nor do those of a namespace the
 * connection's namespace selector refuses (`ConnectionNotAllowed`, see `access.ts`); when a
 * connection's usability or selector changes, the resources using it are enqueued (`onChange`). Deleting a connection is held by its
 * finalizer while resources still use it: they may need it to clean up.
 */
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import { isServiceError, truncate, wholeMessage } from "../api/errors.ts";
import { redactAndTruncate } from "../api/redact.ts";
import type { ServiceConfig } from "../config.ts";
import {
  CLUSTER_SERVICE_CONNECTION_KIND,
  CONNECTION_FINALIZER,
  type ConnectionStatus,
  SERVICE_CONNECTION_KIND,
} from "../crd/connection-schema.ts";
import type { Condition } from "../crd/schema.ts";
import {
  type ConnectionId,
  connectionKey,
  connectionOf,
  DEFAULT_CONNECTION,
  describeConnection,
  parseConnectionKey,
} from "../identity/connection.ts";
import type { ConnectionObject } from "../kube/connections.ts";
import type { DeploymentsPort, SecretRead, SecretsPort, StoredResource } from "../reconcile/ports.ts";
import type { ServiceSession, SessionLookup, Sessions } from "../reconcile/session.ts";
import {
  CONDITION,
  formatTime,
  MAX_MESSAGE_LENGTH,
  removeCondition,
  setCondition,
  statusEqual,
} from "../reconcile/status.ts";
import type { Clock } from "../runtime/clock.ts";
import { Action, type ReconcileResult } from "../runtime/controller.ts";
import { NamespaceAccess } from "./access.ts";
import { apiKeyFrom, apiKeySecretOf, connectionSpecProblems, serviceConfigOf } from "./settings.ts";

/** Reasons of a connection's `Ready` condition (and of its Reconciling/Stalled). */
export const CONNECTION_REASON = {
  Connected: "Connected",
  Unauthorized: "Unauthorized",
  Unreachable: "Unreachable",
  SecretMissing: "SecretMissing",
  /** The Secret could not be read (e.g. forbidden to the operator); retried with backoff. */
  SecretUnreadable: "SecretUnreadable",
  /** Deletion waits for the Deployment resources still using the connection. */
  InUse: "InUse",
  /** The spec holds what the operator refuses to send (a base URL or header it does not allow). */
  InvalidSpec: "InvalidSpec",
  /** The probe's answer was larger than the operator's limit. */
  ResponseTooLarge: "ResponseTooLarge",
} as const;

/** The service as one connection reaches it, built by the composition root. */
export interface ConnectionService {
  port: DeploymentsPort;
  /** The credential probe: the number of OAuth providers the service lists. */
  probe(signal: AbortSignal): Promise<number>;
}

/**
 * The connection objects: read from the watch cache, written under the resourceVersion read
 * (a conflict rejects with an error for which `isConflict` is true).
 */
export interface ConnectionStore {
  /** True when connections of `kind` are watched (the cluster kind needs a cluster-wide install). */
  watches(kind: ConnectionId["kind"]): boolean;
  get(id: ConnectionId): ConnectionObject | undefined;
  patchStatus(
    obj: ConnectionObject,
    status: ConnectionStatus,
    signal: AbortSignal,
  ): Promise<ConnectionObject>;
  addFinalizer(obj: ConnectionObject, finalizer: string, signal: AbortSignal): Promise<ConnectionObject>;
  removeFinalizer(obj: ConnectionObject, finalizer: string, signal: AbortSignal): Promise<ConnectionObject>;
}

/** Options of {@link Connections}. */
export interface ConnectionsOptions {
  connections: ConnectionStore;
  /** The session of the operator's own settings, for resources without `spec.connectionRef`. */
  defaultSession: ServiceSession;
  /** The operator's own service settings: what a connection's spec leaves out comes from them. */
  defaults: ServiceConfig;
  /** Builds the client of a connection's settings. */
  connect(config: ServiceConfig, key: string): ConnectionService;
  /**
   * Builds the session (its snapshot, listings, revision tracking) of the connection `key` over
   * its port.
   */
  session(port: DeploymentsPort, key: string): ServiceSession;
  secrets: SecretsPort;
  /** How many Deployment resources use the connection `key` now (an index of the cache). */
  usage(key: string): number;
  /**
   * The namespace of each Deployment resource using the connection `key` (an index of the cache),
   * to count those its namespace selector refuses (`status.refused`). Default: none.
   */
  userNamespaces?: (key: string) => Iterable<string>;
  /** Who may use which connection (namespace selectors). Default: everyone may use every one. */
  access?: NamespaceAccess;
  /** Called with a connection's key when whether it can be used changed. */
  onChange(key: string): void;
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

/** What the last probe of a connection said. */
type Verdict =
  | { ok: true; providers: number; message: string }
  | { ok: false; reason: string; message: string; transient: boolean };

/** A connection as this instance knows it: its client and session, and its last verdict. */
interface Entry {
  /** Digest of the settings the client was built from (the key included, never kept itself). */
  fingerprint: string;
  service: ConnectionService;
  session: ServiceSession;
  verdict?: Verdict;
  probedAt?: number;
}

/** See the module comment. `reconcile` is the connection controller's reconciler. */
export class Connections implements Sessions {
  readonly #o: Required<ConnectionsOptions>;
  readonly #entries = new Map<string, Entry>();
  /** Connections found unusable for a reason other than the probe (e.g. their Secret). */
  readonly #unusable = new Map<string, Verdict & { ok: false }>();
  /** The namespace selector each connection had at its last reconcile (see `selectorOf`). */
  readonly #selectors = new Map<string, string>();

  constructor(options: ConnectionsOptions) {
    this.#o = {
      probeIntervalMs: 300_000,
      probeDeadlineMs: 10_000,
      userNamespaces: () => [],
      access: new NamespaceAccess(),
      ...options,
    };
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
      const access = this.#o.access.check(namespace, undefined);
      return access.kind === "allowed" ? { kind: "ready", session: this.#o.defaultSession } : access;
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
    const access = this.#o.access.check(namespace, id, found.spec);
    if (access.kind !== "allowed") return access;
    const key = connectionKey(id);
    const problem = this.#unusable.get(key);
    if (problem) return { kind: "unavailable", message: notReady(id, problem) };
    const entry = this.#entries.get(key);
    if (!entry?.verdict) return { kind: "pending" };
    if (!entry.verdict.ok) return { kind: "unavailable", message: notReady(id, entry.verdict) };
    return { kind: "ready", session: entry.session };
  }

  /** The sessions usable now, the default one first: a resync pass lists each once. */
  sessions(): { key: string; session: ServiceSession }[] {
    const ready = [...this.#entries].filter(([key, e]) => e.verdict?.ok && !this.#unusable.has(key));
    return [
      { key: DEFAULT_CONNECTION, session: this.#o.defaultSession },
      ...ready.map(([key, e]) => ({ key, session: e.session })),
    ];
  }

  /** The session of a ready connection `key` (`default` included), if any. */
  session(key: string): ServiceSession | undefined {
    return this.sessions().find((s) => s.key === key)?.session;
  }

  /** True when `obj`'s namespace may not use its connection now (see `access.ts`). */
  refuses(obj: StoredResource): boolean {
    const namespace = obj.metadata.namespace ?? "";
    const id = connectionOf(namespace, obj.spec.connectionRef);
    // A missing connection refuses no one (its resources are told it is missing), nor does a
    // ServiceConnection (its own namespace's only).
    if (id && id.kind !== CLUSTER_SERVICE_CONNECTION_KIND) return false;
    const spec = id ? this.#o.connections.get(id)?.spec : undefined;
    if (id && !spec) return false;
    return this.#o.access.check(namespace, id, spec).kind === "refused";
  }

  /**
   * Per connection key (`default`, `ClusterServiceConnection/<name>`), how many of `resources`
   * its namespace selector refuses now. One pass, each (connection, namespace) checked once.
   */
  refusals(resources: Iterable<StoredResource>): Map<string, number> {
    const counts = new Map<string, number>();
    const checked = new Map<string, boolean>();
    for (const obj of resources) {
      const namespace = obj.metadata.namespace ?? "";
      const id = connectionOf(namespace, obj.spec.connectionRef);
      if (id && id.kind !== CLUSTER_SERVICE_CONNECTION_KIND) continue;
      const memo = `${connectionKey(id)}\n${namespace}`;
      let refused = checked.get(memo);
      if (refused === undefined) {
        refused = this.refuses(obj);
        checked.set(memo, refused);
      }
      if (!refused) continue;
      const label = connectionKey(id);
      counts.set(label, (counts.get(label) ?? 0) + 1);
    }
    return counts;
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
    const counts = { users: this.#o.usage(key), refused: this.#refused(id, obj) };
    // Resources its selector refuses own nothing through it: they do not hold its deletion.
    const users = counts.users - counts.refused;
    // A changed selector may allow or refuse resources that already use the connection.
    const selector = this.#o.access.selectorOf(obj.spec);
    const knownSelector = this.#selectors.get(key);
    this.#selectors.set(key, selector);
    if (knownSelector !== undefined && knownSelector !== selector) this.#o.onChange(key);
    // A deletion waits for the resources still using the connection, which stays usable (and
    // checked) meanwhile: they may need it to delete their deployments.
    let holding: { reason: string; message: string } | undefined;
    if (obj.metadata.deletionTimestamp) {
      if (users === 0) {
        await this.#o.connections.removeFinalizer(obj, CONNECTION_FINALIZER, signal);
        this.#forget(key);
        return Action.gone();
      }
      holding = {
        reason: CONNECTION_REASON.InUse,
        message: `deletion waits until no Deployment resource uses this connection: ${users} still ${users === 1 ? "does" : "do"}`,
      };
    } else obj = await this.#o.connections.addFinalizer(obj, CONNECTION_FINALIZER, signal);

    // The CRD refuses these, but not in a connection stored before its rules: nothing is built
    // or sent until the spec changes (a change enqueues the connection again).
    const invalid = connectionSpecProblems(obj.spec);
    if (invalid.length > 0) {
      const verdict = {
        ok: false,
        reason: CONNECTION_REASON.InvalidSpec,
        message: invalid.join("; "),
        transient: false,
      } as const;
      this.#setUnusable(key, verdict);
      await this.#writeStatus(obj, counts, holding, signal, verdict);
      return Action.done();
    }

    const secret = apiKeySecretOf(id, obj.spec);
    let read: SecretRead;
    try {
      read = await this.#o.secrets.read(secret.namespace, secret.name, secret.key, signal);
    } catch (error) {
      if (signal.aborted) throw error;
      // Said on the connection and its resources, not only in the log: a Secret the operator
      // may not read (a namespaced install, a ClusterServiceConnection's Secret elsewhere).
      const verdict = {
        ok: false,
        reason: CONNECTION_REASON.SecretUnreadable,
        message: `cannot read Secret ${secret.namespace}/${secret.name} (spec.apiKeySecretRef): ${error instanceof Error ? error.message : String(error)}; the operator needs get on Secrets in namespace ${secret.namespace}`,
        transient: true,
      } as const;
      this.#setUnusable(key, verdict);
      await this.#writeStatus(obj, counts, holding, signal, verdict);
      return Action.retry();
    }
    const apiKey = apiKeyFrom(read, secret);
    if (!apiKey.ok) {
      const verdict = {
        ok: false,
        reason: CONNECTION_REASON.SecretMissing,
        message: `Secret ${secret.namespace}/${secret.name} (spec.apiKeySecretRef) ${apiKey.problem}`,
        transient: false,
      } as const;
      this.#setUnusable(key, verdict);
      await this.#writeStatus(obj, counts, holding, signal, verdict);
      return Action.done();
    }

    const config = serviceConfigOf(obj.spec, apiKey.apiKey, this.#o.defaults);
    const entry = this.#entry(key, obj, config);
    const before = this.#state(key);
    const wasUsable = before === "ready";
    this.#unusable.delete(key);
    const due =
      entry.probedAt === undefined ||
      !entry.verdict?.ok ||
      this.#o.clock.now() - entry.probedAt >= this.#o.probeIntervalMs * 0.8;
    if (due) {
      const verdict = await this.#probe(entry, config, apiKey.apiKey, signal);
      // Asked to slow down: the service is there, and the last verdict still holds; ask again
      // once its Retry-After has passed.
      if ("retryAfterMs" in verdict && entry.verdict) return Action.requeueAfter(verdict.retryAfterMs);
      entry.verdict = "retryAfterMs" in verdict ? verdict.verdict : verdict;
      entry.probedAt = this.#o.clock.now();
      // A connection that has just become usable lists its deployments once, so that its
      // resources find theirs in the listing instead of with one lookup each.
      if (entry.verdict.ok && !wasUsable)
        await entry.session.snapshot.refresh(signal).catch((error: unknown) => {
          this.#o.logger.warn(
            { connection: key, err: String(error) },
            "first listing of a connection failed",
          );
        });
    }
    if (this.#state(key) !== before) this.#o.onChange(key);
    await this.#writeStatus(obj, counts, holding, signal, entry.verdict);
    // A transient failure is probed again after the key's backoff; otherwise the periodic pass
    // (every probe interval) or a change of the connection or its Secret brings it back.
    if (entry.verdict?.ok === false && entry.verdict.transient) return Action.retry();
    return Action.done();
  }

  /** The entry of `key`, rebuilt when the settings (spec or key) changed. */
  #entry(key: string, obj: ConnectionObject, config: ServiceConfig): Entry {
    const fingerprint = createHash("sha256").update(JSON.stringify(config)).digest("hex");
    const existing = this.#entries.get(key);
    if (existing?.fingerprint === fingerprint) return existing;
    const service = this.#o.connect(config, key);
    const entry: Entry = { fingerprint, service, session: this.#o.session(service.port, key) };
    this.#entries.set(key, entry);
    if (config.insecureSkipTlsVerify)
      this.#o.event(
        obj,
        "Warning",
        "InsecureSkipTLSVerify",
        "spec.insecureSkipTLSVerify is true: the service's certificate is not verified, so anyone in the path can read the API key; use it with a test service only",
      );
    return entry;
  }

  /** The probe's verdict; a 429 also says how long to wait before asking again. */
  async #probe(
    entry: Entry,
    config: ServiceConfig,
    apiKey: string,
    signal: AbortSignal,
  ): Promise<Verdict | { retryAfterMs: number; verdict: Verdict }> {
    const deadlineMs = this.#o.probeDeadlineMs;
    const deadline = new AbortController();
    const cancel = this.#o.clock.setTimer(deadlineMs, () => deadline.abort(new Error("probe deadline")));
    try {
      const providers = await entry.service.probe(AbortSignal.any([signal, deadline.signal]));
      return { ok: true, providers, message: `the service at ${config.baseUrl} accepted the API key` };
    } catch (error) {
      if (signal.aborted) throw error;
      // Redacted whole, then cut (to leave room for the fix): a key cut in two would escape redaction.
      const detail = deadline.signal.aborted
        ? `no answer to GET /v2/auth/providers within the probe's deadline of ${deadlineMs} ms`
        : redactAndTruncate(wholeMessage(error), [apiKey], 2000);
      if (isServiceError(error, "too_large"))
        return {
          ok: false,
          reason: CONNECTION_REASON.ResponseTooLarge,
          message: `the service at ${config.baseUrl} answered the probe with more than the operator accepts: ${detail}`,
          transient: true,
        };
      if (isServiceError(error, "unauthorized"))
        return {
          ok: false,
          reason: CONNECTION_REASON.Unauthorized,
          message: `the service refused the API key (${detail}): put a valid key in the Secret named by spec.apiKeySecretRef${config.tenantId ? ", and check spec.tenantId" : ""}`,
          transient: false,
        };
      const unreachable = {
        ok: false,
        reason: CONNECTION_REASON.Unreachable,
        message: `cannot reach the service at ${config.baseUrl}: ${detail}`,
        transient: true,
      } as const;
      if (isServiceError(error, "rate_limited"))
        return {
          retryAfterMs: Math.max(1_000, (error.retryAfterSeconds ?? 1) * 1_000),
          verdict: unreachable,
        };
      return unreachable;
    } finally {
      cancel();
    }
  }

  /** How many of the connection's users its namespace selector refuses (their namespaces, once each). */
  #refused(id: ConnectionId, obj: ConnectionObject): number {
    if (!obj.spec.namespaceSelector) return 0;
    const checked = new Map<string, boolean>();
    let refused = 0;
    for (const namespace of this.#o.userNamespaces(connectionKey(id))) {
      let no = checked.get(namespace);
      if (no === undefined) {
        no = this.#o.access.check(namespace, id, obj.spec).kind === "refused";
        checked.set(namespace, no);
      }
      if (no) refused += 1;
    }
    return refused;
  }

  /**
   * Writes the connection's status when it changed. `counts`: the resources using it and those
   * refused; `holding`: a held deletion's condition.
   */
  async #writeStatus(
    obj: ConnectionObject,
    counts: { users: number; refused: number },
    holding: { reason: string; message: string } | undefined,
    signal: AbortSignal,
    verdict?: Verdict,
  ): Promise<void> {
    const key = connectionKey(idOf(obj));
    const entry = this.#entries.get(key);
    const last = verdict ?? this.#unusable.get(key) ?? entry?.verdict;
    const previous = obj.status ?? {};
    const now = new Date(this.#o.clock.now());
    const generation = obj.metadata.generation ?? 0;
    let conditions: Condition[] = [...(previous.conditions ?? [])];
    const put = (type: string, status: Condition["status"], reason: string, message: string) => {
      conditions = setCondition(
        conditions,
        {
          type,
          status,
          reason,
          message: truncate(message, MAX_MESSAGE_LENGTH),
          observedGeneration: generation,
        },
        now,
      );
    };
    if (last?.ok) put(CONDITION.Ready, "True", CONNECTION_REASON.Connected, last.message);
    else if (last) put(CONDITION.Ready, "False", last.reason, last.message);
    const progress =
      holding ??
      (last && !last.ok && last.transient
        ? { reason: last.reason, message: `retrying: ${last.message}` }
        : undefined);
    if (progress) put(CONDITION.Reconciling, "True", progress.reason, progress.message);
    else conditions = removeCondition(conditions, CONDITION.Reconciling);
    if (last && !last.ok && !last.transient && !holding)
      put(CONDITION.Stalled, "True", last.reason, last.message);
    else conditions = removeCondition(conditions, CONDITION.Stalled);

    const status: ConnectionStatus = {
      observedGeneration: generation,
      conditions,
      deployments: counts.users,
      refused: counts.refused,
    };
    const providers = last?.ok ? last.providers : previous.providers;
    if (providers !== undefined) status.providers = providers;
    const probedAt = entry?.probedAt;
    if (probedAt !== undefined) status.lastProbeTime = formatTime(new Date(probedAt));
    else if (previous.lastProbeTime) status.lastProbeTime = previous.lastProbeTime;
    if (statusEqual(previous, status)) return;
    await this.#o.connections.patchStatus(obj, status, signal);
    // The verdict's changes are events too: `kubectl describe` shows when a key stopped working.
    const before = previous.conditions?.find((c) => c.type === CONDITION.Ready);
    const after = conditions.find((c) => c.type === CONDITION.Ready);
    if (after && (before?.status !== after.status || before.reason !== after.reason))
      this.#o.event(obj, after.status === "True" ? "Normal" : "Warning", after.reason, after.message);
  }

  /**
   * What the connection's resources are told, coarsely: `pending`, `ready`, or `unavailable/`
   * with the reason. When it changes, they are enqueued to tell them (a detail of a message that
   * changes alone does not re-enqueue them all).
   */
  #state(key: string): string {
    const problem = this.#unusable.get(key) ?? this.#entries.get(key)?.verdict;
    if (!problem) return "pending";
    return problem.ok ? "ready" : `unavailable/${problem.reason}`;
  }

  #setUnusable(key: string, verdict: Verdict & { ok: false }): void {
    const before = this.#state(key);
    this.#unusable.set(key, verdict);
    if (this.#state(key) !== before) this.#o.onChange(key);
  }

  /** The connection is gone: its resources can no longer use it. */
  #forget(key: string): void {
    const known = this.#entries.has(key) || this.#unusable.has(key);
    this.#selectors.delete(key);
    this.#entries.delete(key);
    this.#unusable.delete(key);
    if (known) this.#o.onChange(key);
  }
}

/** The {@link ConnectionId} of a connection object (a cluster one has no namespace). */
export function idOf(obj: ConnectionObject): ConnectionId {
  const namespace = obj.metadata.namespace ?? "";
  return {
    kind: namespace ? SERVICE_CONNECTION_KIND : CLUSTER_SERVICE_CONNECTION_KIND,
    namespace,
    name: obj.metadata.name,
  };
}

/** What a resource is told about a connection that cannot be used. */
function notReady(id: ConnectionId, verdict: { reason: string; message: string }): string {
  return `${describeConnection(id)} is not Ready (${verdict.reason}): ${verdict.message}`;
}
