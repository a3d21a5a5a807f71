/**
 * `--max-connections-per-namespace`: the ServiceConnections of a namespace past the oldest that
 * many get no client ({@link NamespaceBound}), and wait for a deletion to make room.
 *
 * The order they get a client in: oldest first (creation time), then by name. Kept up to date
 * from the watch cache's events ({@link NamespaceOrder.upsert} on an add or update,
 * {@link NamespaceOrder.remove} on a delete), so that "is this connection among the oldest N of
 * its namespace?" is a binary search, never a scan of the namespace's connections at each check.
 *
 * Contract: after the events of a cache have been applied, {@link NamespaceOrder.rank} of a
 * cached connection is the number of its namespace's cached connections before it, and
 * {@link NamespaceOrder.count} the number of them.
 */
import { SERVICE_CONNECTION_KIND } from "../crd/connection-schema.ts";
import { type ConnectionId, type Failure, parseConnectionKey } from "../crd/conventions.ts";
import { CONNECTION_REASON } from "./status.ts";

/**
 * Default `--max-connections-per-namespace`: a team has a connection per tenant or environment,
 * a handful; each served one holds a client, its agents and a session.
 */
export const DEFAULT_MAX_CONNECTIONS_PER_NAMESPACE = 20;

/** A connection's place in its namespace's order. */
interface Place {
  created: string;
  name: string;
}

/** Whether `a` comes before `b`: created earlier, or at the same time with a smaller name. */
function precedes(a: Place, b: Place): boolean {
  return a.created !== b.created ? a.created < b.created : a.name < b.name;
}

/** The connection fields the order reads. */
export interface OrderedConnection {
  metadata: { name: string; namespace?: string; creationTimestamp?: string };
}

/** See the module's note. */
export class NamespaceOrder {
  /** Namespace → its connections' places, sorted. */
  readonly #byNamespace = new Map<string, Place[]>();
  /** `namespace/name` → its place (the creation time it was sorted by). */
  readonly #places = new Map<string, Place>();

  /** A connection was added or changed (its creation time never changes; a first sight adds it). */
  upsert(obj: OrderedConnection): void {
    const namespace = obj.metadata.namespace;
    if (!namespace) return;
    const key = `${namespace}/${obj.metadata.name}`;
    const created = obj.metadata.creationTimestamp ?? "";
    const known = this.#places.get(key);
    if (known?.created === created) return;
    if (known) this.remove(obj);
    const place = { created, name: obj.metadata.name };
    let list = this.#byNamespace.get(namespace);
    if (!list) {
      list = [];
      this.#byNamespace.set(namespace, list);
    }
    list.splice(this.#lowerBound(list, place), 0, place);
    this.#places.set(key, place);
  }

  /** A connection was deleted. */
  remove(obj: OrderedConnection): void {
    const namespace = obj.metadata.namespace;
    if (!namespace) return;
    const key = `${namespace}/${obj.metadata.name}`;
    const place = this.#places.get(key);
    const list = this.#byNamespace.get(namespace);
    if (!place || !list) return;
    this.#places.delete(key);
    const at = this.#lowerBound(list, place);
    if (list[at] === place) list.splice(at, 1);
    if (list.length === 0) this.#byNamespace.delete(namespace);
  }

  /** How many connections `namespace` has. */
  count(namespace: string): number {
    return this.#byNamespace.get(namespace)?.length ?? 0;
  }

  /** How many connections of `namespace` come before `name`; undefined when it is not known. */
  rank(namespace: string, name: string): number | undefined {
    const place = this.#places.get(`${namespace}/${name}`);
    const list = this.#byNamespace.get(namespace);
    return place && list ? this.#lowerBound(list, place) : undefined;
  }

  /** The first index of `list` whose place does not precede `place`. */
  #lowerBound(list: readonly Place[], place: Place): number {
    let low = 0;
    let high = list.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      const at = list[mid];
      if (at && precedes(at, place)) low = mid + 1;
      else high = mid;
    }
    return low;
  }
}

/**
 * Which ServiceConnections get no client: with `max` and `order`, those of a namespace with more
 * than `max` that are not among its oldest `max`; without either, none. It keeps, by namespace,
 * the connections refused for it, for a deletion to enqueue (room may have been made).
 */
export class NamespaceBound {
  readonly #max: number | undefined;
  readonly #order: NamespaceOrder | undefined;
  /** Namespace → its connections refused by the bound (keys). */
  readonly #waiting = new Map<string, Set<string>>();

  constructor(max?: number, order?: NamespaceOrder) {
    this.#max = max;
    this.#order = order;
  }

  /**
   * Why connection `id` gets no client, when its namespace has more ServiceConnections than the
   * bound and it is not among the oldest that many; undefined otherwise. A binary search of the
   * namespace's order.
   */
  overLimit(id: ConnectionId): Failure | undefined {
    const max = this.#max;
    const order = this.#order;
    if (id.kind !== SERVICE_CONNECTION_KIND || max === undefined || !order) return undefined;
    const all = order.count(id.namespace);
    if (all <= max) return undefined;
    const older = order.rank(id.namespace, id.name);
    if (older === undefined || older < max) return undefined;
    return {
      ok: false,
      reason: CONNECTION_REASON.TooManyConnections,
      message: `namespace ${id.namespace} has ${all} ServiceConnections, more than the ${max} per namespace the operator serves (--max-connections-per-namespace): the oldest ${max} are served, and this one gets no client until older ones are deleted; delete the connections this namespace no longer uses, or ask the operator's admins to raise the limit`,
      transient: false,
    };
  }

  /** The keys of `namespace`'s connections refused by the bound: room may have been made. */
  waitingForRoom(namespace: string): string[] {
    return [...(this.#waiting.get(namespace) ?? [])];
  }

  /** Records whether `key` waits for room in its namespace. */
  wait(key: string, waits: boolean): void {
    const namespace = parseConnectionKey(key)?.namespace;
    if (!namespace) return;
    const keys = this.#waiting.get(namespace);
    if (waits) {
      if (keys) keys.add(key);
      else this.#waiting.set(namespace, new Set([key]));
    } else if (keys?.delete(key) && keys.size === 0) this.#waiting.delete(namespace);
  }
}
