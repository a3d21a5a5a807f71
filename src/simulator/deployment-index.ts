/**
 * The simulator's deployments, indexed: by id and by exact name, and in the listing's stable
 * order (created_at, then id), the deleted ones purged once their deletion delay has passed.
 * The store (store.ts) keeps one; ids are looked up as given (the store lower-cases a path's).
 */
import { type DeploymentRecord, goneAt, type Timing } from "./record.ts";

export class DeploymentIndex {
  readonly #timing: Timing;
  readonly #byId = new Map<string, DeploymentRecord>();
  readonly #byName = new Map<string, DeploymentRecord>();
  /** Live deployments sorted by (createdAt, id): the listing order. */
  #ordered: DeploymentRecord[] = [];
  #nextPurgeAt = Number.POSITIVE_INFINITY;

  constructor(timing: Timing) {
    this.#timing = timing;
  }

  /** Every live deployment (including those awaiting deletion), in listing order. */
  get ordered(): readonly DeploymentRecord[] {
    return this.#ordered;
  }

  /** The deployment of id `id` exactly, or undefined. */
  byId(id: string): DeploymentRecord | undefined {
    return this.#byId.get(id);
  }

  /** The deployment named exactly `name`, or undefined. */
  byName(name: string): DeploymentRecord | undefined {
    return this.#byName.get(name);
  }

  /**
   * The deployments `ids` names, in the listing's order (creation, then id): a `deployment_ids`
   * filter reads its ids from the index instead of scanning every deployment, as a service with
   * an index on ids would answer it.
   */
  ofIds(ids: ReadonlySet<string>): DeploymentRecord[] {
    const found: DeploymentRecord[] = [];
    for (const id of ids) {
      const record = this.#byId.get(id);
      if (record !== undefined) found.push(record);
    }
    return found.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  insert(record: DeploymentRecord): void {
    this.#byId.set(record.id, record);
    this.#byName.set(record.name, record);
    const list = this.#ordered;
    let lo = 0;
    let hi = list.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const other = list[mid];
      if (other === undefined) break;
      const before =
        other.createdAt < record.createdAt || (other.createdAt === record.createdAt && other.id < record.id);
      if (before) lo = mid + 1;
      else hi = mid;
    }
    list.splice(lo, 0, record);
  }

  /** A deletion was asked for: a purge is due at `at` at the latest. */
  purgeBy(at: number): void {
    this.#nextPurgeAt = Math.min(this.#nextPurgeAt, at);
  }

  /** Removes deployments whose deletion delay has passed by `now`. */
  sweep(now: number): void {
    if (now < this.#nextPurgeAt) return;
    let next = Number.POSITIVE_INFINITY;
    this.#ordered = this.#ordered.filter((record) => {
      const gone = goneAt(record, this.#timing);
      if (gone === undefined) return true;
      if (gone <= now) {
        this.#byId.delete(record.id);
        this.#byName.delete(record.name);
        return false;
      }
      next = Math.min(next, gone);
      return true;
    });
    this.#nextPurgeAt = next;
  }
}
