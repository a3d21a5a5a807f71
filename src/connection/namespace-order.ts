/**
 * The ServiceConnections of each namespace in the order they get a client under
 * `--max-connections-per-namespace`: oldest first (creation time), then by name. Kept up to date
 * from the watch cache's events ({@link NamespaceOrder.upsert} on an add or update,
 * {@link NamespaceOrder.remove} on a delete), so that "is this connection among the oldest N of
 * its namespace?" is a binary search, never a scan of the namespace's connections at each check.
 *
 * Contract: after the events of a cache have been applied, {@link NamespaceOrder.rank} of a
 * cached connection is the number of its namespace's cached connections before it, and
 * {@link NamespaceOrder.count} the number of them.
 */

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
