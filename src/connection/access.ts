/**
 * A connection's resources: who may use the connection, and what share of the workers they hold.
 *
 * Who: a ClusterServiceConnection only from the namespaces its `spec.namespaceSelector` selects,
 * the default connection (the operator's own credentials, for resources without
 * `spec.connectionRef`) only from those `--default-connection-namespace-selector` selects. A
 * ServiceConnection is its own namespace's only, which `connectionOf` already ensures. Absent
 * selectors allow every namespace. Pure over the namespace labels it is given.
 *
 * Their share: each connection's fair share of the Deployment controller's workers: the flow of a
 * resource's key (the connection it uses, read from the watch cache: one lookup, no scan;
 * `connectionFlowOf`, in `crd/conventions.ts` with the connections' keys), the cap of reconciles per flow, and the report of the resources that wait for their connection's share.
 * A ServiceConnection belongs to one namespace, which may make many: the ServiceConnections of a
 * namespace are one flow together, a part each, so the cap holds for the namespace's own
 * connections together (a tenant's hundred connections to a slow service hold its one cap, not a
 * hundred) and the namespaces are served in turn, not their connections. A
 * ClusterServiceConnection, and the default connection (the operator's own flags), serve many
 * namespaces: their resources are one flow per connection with a part per namespace, so the cap
 * holds for the connection and for each namespace within it, and the namespaces are served in
 * turn. `spec.connectionRef` cannot change, so a key's flow never moves.
 */

import type { Logger } from "pino";
import { type ConnectionSpec, SERVICE_CONNECTION_KIND } from "../crd/connection-schema.ts";
import {
  type ConnectionId,
  connectionFlowOf,
  connectionOf,
  describeConnection,
  limitingSelector,
} from "../crd/conventions.ts";
import {
  describeFix,
  formatSelector,
  type Labels,
  labelArguments,
  type Selector,
  type SelectorResult,
  selectorFromObject,
  unmet,
} from "../crd/label-selector.ts";
import type { KubeDeployments } from "../kube/custom-resources.ts";
import { ConflictError } from "../kube/errors.ts";
import { saysWaitingForShare, waitingForShare } from "../reconcile/share-wait.ts";
import type { Clock } from "../runtime/clock.ts";
import type { ControllerOptions } from "../runtime/controller.ts";
import { inTurns } from "../runtime/in-turns.ts";
import { parseObjectKey } from "../runtime/queue-records.ts";

/** `--default-connection-namespace-selector`, as given and as parsed. */
export interface DefaultConnectionSelector {
  text: string;
  selector: Selector;
}

/** Whether a namespace may use a connection now. */
export type Access = { kind: "allowed" } | { kind: "refused"; message: string } | { kind: "pending" };

/** Options of {@link NamespaceAccess}. */
export interface NamespaceAccessOptions {
  /**
   * The labels of a namespace from the namespace watch; undefined for a namespace not seen (yet).
   * Absent when namespaces are not watched: then any selector refuses (it cannot be checked).
   */
  labels?: (namespace: string) => Labels | undefined;
  /** Which namespaces may use the default connection; absent: every watched one. */
  defaultSelector?: DefaultConnectionSelector;
}

const ALLOWED: Access = { kind: "allowed" };
const PENDING: Access = { kind: "pending" };

/** See the module comment. */
export class NamespaceAccess {
  readonly #o: NamespaceAccessOptions;
  /** Whether `--default-connection-namespace-selector` limits the default connection's users. */
  readonly limitsDefault: boolean;
  /** Parsed selectors, by the spec object the watch cache holds (replaced on every change). */
  readonly #parsed = new WeakMap<object, SelectorResult>();

  constructor(options: NamespaceAccessOptions = {}) {
    this.#o = options;
    this.limitsDefault = options.defaultSelector !== undefined;
  }

  /**
   * Whether the resources of `namespace` may use connection `id` (undefined: the default one),
   * whose spec is `spec`. `pending` when a selector applies and the namespace has not been seen.
   */
  check(namespace: string, id: ConnectionId | undefined, spec?: ConnectionSpec): Access {
    if (!id) return this.#checkDefault(namespace);
    const selector = limitingSelector(id, spec);
    if (!selector) return ALLOWED;
    const parsed = this.#parse(selector);
    const who = describeConnection(id);
    if (!parsed.ok)
      return {
        kind: "refused",
        message: `${who} may not be used: its spec.namespaceSelector is invalid (${parsed.problem}), so it refuses every namespace; a cluster admin must fix the selector`,
      };
    return this.#match(namespace, parsed.selector, (failed, labels) =>
      [
        `${who} may not be used from namespace ${namespace}: its spec.namespaceSelector (${formatSelector(parsed.selector) || "{}"}) does not select this namespace.`,
        `The namespace needs ${describeFix(failed, labels)}: if this team is meant to use that tenant, a cluster admin labels it (kubectl label namespace ${namespace} ${labelArguments(failed)}) or widens the selector; otherwise use a connection of the namespace's own (a ServiceConnection in ${namespace})`,
      ].join(" "),
    );
  }

  /** A digest of what decides access to a connection: when it changes, its users are re-checked. */
  selectorOf(spec: ConnectionSpec | undefined): string {
    const selector = spec?.namespaceSelector;
    if (!selector) return "";
    const parsed = this.#parse(selector);
    return parsed.ok ? `selects ${formatSelector(parsed.selector)}` : `invalid ${parsed.problem}`;
  }

  #checkDefault(namespace: string): Access {
    const selector = this.#o.defaultSelector;
    if (!selector) return ALLOWED;
    return this.#match(namespace, selector.selector, (failed, labels) =>
      [
        `the default connection (the operator's own credentials, for resources without spec.connectionRef) may not be used from namespace ${namespace}: --default-connection-namespace-selector (${selector.text}) does not select this namespace.`,
        `The namespace needs ${describeFix(failed, labels)}: if it is meant to use the operator's own tenant, the operator's admins label it (kubectl label namespace ${namespace} ${labelArguments(failed)}); otherwise set spec.connectionRef to a connection this namespace may use (a ServiceConnection in ${namespace})`,
      ].join(" "),
    );
  }

  #match(
    namespace: string,
    selector: Selector,
    refusal: (failed: ReturnType<typeof unmet>, labels: Labels) => string,
  ): Access {
    if (selector.length === 0) return ALLOWED;
    if (!this.#o.labels)
      return {
        kind: "refused",
        message: `namespace ${namespace} cannot be checked against a namespace selector: this operator does not watch namespaces`,
      };
    const labels = this.#o.labels(namespace);
    if (!labels) return PENDING;
    const failed = unmet(selector, labels);
    return failed.length === 0 ? ALLOWED : { kind: "refused", message: refusal(failed, labels) };
  }

  #parse(selector: NonNullable<ConnectionSpec["namespaceSelector"]>): SelectorResult {
    let parsed = this.#parsed.get(selector);
    if (!parsed) {
      parsed = selectorFromObject(selector);
      this.#parsed.set(selector, parsed);
    }
    return parsed;
  }
}

/**
 * A resource is reported `WaitingForConnectionShare` once it has waited this long at its
 * connection's cap, in a connection whose reconciles lately took {@link SLOW_RECONCILE_MS} or more
 * each: one status write per wait, and none for the resources of a connection that is merely
 * large (a pass over 10,000 settled resources, each reconciled in milliseconds; 10,000 creates,
 * each a second or less on a loaded machine: reported, each would cost a second status write
 * when its reconcile replaces the report).
 */
const SHARE_WAIT_REPORT_MS = 60_000;
/**
 * See {@link SHARE_WAIT_REPORT_MS}. Also the bound of borrowing (queue.ts's `borrowMs`): a
 * connection whose reconciles end sooner borrows the workers no other connection has a key for,
 * one that is slow never. One figure for both: a connection is slow at 5 s a reconcile, whether it
 * is reported or lent workers. Why not 1 s: on a loaded machine (load 25 on 2 cores, three other
 * operators at 10,000 beside it) a lone connection's creates took p50 0.5 s, a third over 1 s, the
 * longest 7 s: at 1 s it was back at its cap whenever the machine was busy. A slow service's reads
 * (~10 s each, up to the deadline) still never borrow.
 */
const SLOW_RECONCILE_MS = 5_000;
/**
 * Most resources reported in one look (every {@link SHARE_WAIT_REPORT_MS}), the namespaces in turn;
 * the others of that look are not.
 */
const MAX_REPORTS = 500;
/** How long one report's status write may take. */
const REPORT_WRITE_MS = 10_000;
/**
 * The pause between two reports' writes: 200 resources reported over 5 s rather than at once, so
 * that the reports do not crowd the other tenants' writes to the API server.
 */
const REPORT_SPACING_MS = 25;

/**
 * The Deployment controller's options for fair shares: the flow of each key, the cap, and the
 * report of waiting resources (their `Synced` and `Reconciling` conditions say
 * `WaitingForConnectionShare` until their reconcile, which writes its own, runs).
 */
export function connectionShares(
  config: { concurrency: number; maxReconcilesPerConnection?: number | undefined },
  deployments: KubeDeployments,
  clock: Clock,
  logger: Logger,
): Pick<ControllerOptions, "flowOf" | "maxPerFlow" | "borrowMs" | "waiting"> {
  const maxPerConnection =
    config.maxReconcilesPerConnection ?? defaultMaxReconcilesPerConnection(config.concurrency);
  // The newest look not yet begun: a look that comes while another's writes go on replaces the one
  // waiting behind them (it lists every key still waiting), so an API server slow to answer them
  // (each write up to REPORT_WRITE_MS) holds one look in waiting, not a minute's more every minute.
  let next: { keys: readonly string[]; stillWaits: (key: string) => boolean } | undefined;
  let writing = false;
  const write = async () => {
    writing = true;
    try {
      for (let look = next; look; look = next) {
        next = undefined;
        // One write at a time, spaced: the reports cost the API server little.
        for (const key of look.keys)
          if (await reportWaiting(deployments, key, look.stillWaits, maxPerConnection, clock, logger))
            await clock.sleep(REPORT_SPACING_MS);
      }
    } finally {
      writing = false;
    }
  };
  const report = (keys: readonly string[], stillWaits: (key: string) => boolean) => {
    // A resource of each namespace in turn: one namespace's thousands do not crowd another's few out.
    next = { keys: inTurns(keys, (key) => parseObjectKey(key).namespace, MAX_REPORTS), stillWaits };
    if (!writing)
      write().catch((error: unknown) =>
        logger.warn({ err: error }, "could not report the resources waiting for their connection's share"),
      );
  };
  return {
    flowOf: connectionFlowOf(deployments),
    maxPerFlow: maxPerConnection,
    borrowMs: SLOW_RECONCILE_MS,
    waiting: { afterMs: SHARE_WAIT_REPORT_MS, slowMs: SLOW_RECONCILE_MS, report },
  };
}

/** `--max-reconciles-per-connection` when none is given: a quarter of `--concurrency`, rounded up. */
export function defaultMaxReconcilesPerConnection(concurrency: number): number {
  return Math.max(1, Math.ceil(concurrency / 4));
}

/**
 * The message of a resource waiting at its connection's cap: a ServiceConnection's (`ownNamespace`)
 * is its namespace's, shared by the namespace's ServiceConnections together.
 */
export function shareWaitMessage(maxPerConnection: number, ownNamespace = false): string {
  return ownNamespace
    ? `waiting for its namespace's share: the other reconciles of this namespace's ServiceConnections, slow to end, hold the ${maxPerConnection} they may run at once together (--max-reconciles-per-connection); this one runs in turn`
    : `waiting for its connection's share: the connection's other reconciles, slow to end, hold the ${maxPerConnection} it may run at once (--max-reconciles-per-connection); this one runs in turn`;
}

/**
 * Writes `WaitingForConnectionShare` on the resource of `key`, unless it says so already or no
 * longer waits (`stillWaits`: its reconcile, handed out since the keys were told, writes its own
 * status, which a late report would overwrite); true when a write was sent.
 */
async function reportWaiting(
  deployments: KubeDeployments,
  key: string,
  stillWaits: (key: string) => boolean,
  maxPerConnection: number,
  clock: Clock,
  logger: Logger,
): Promise<boolean> {
  const ref = parseObjectKey(key);
  const obj = deployments.get(ref);
  const status = obj?.status;
  if (!obj || !status || saysWaitingForShare(status) || !stillWaits(key)) return false;
  const generation = obj.metadata.generation ?? 0;
  const ownNamespace = connectionOf(ref.namespace, obj.spec.connectionRef)?.kind === SERVICE_CONNECTION_KIND;
  const message = shareWaitMessage(maxPerConnection, ownNamespace);
  const next = waitingForShare(status, generation, message, new Date(clock.now()));
  try {
    const signal = AbortSignal.timeout(REPORT_WRITE_MS);
    await deployments.patchStatus(ref, next, signal, obj.metadata.resourceVersion);
  } catch (error) {
    // A newer version (its own reconcile wrote it meanwhile) says what it says: nothing to report.
    if (!(error instanceof ConflictError))
      logger.warn({ err: error, key }, "could not report a resource waiting for its connection's share");
  }
  return true;
}
