/**
 * The resources in transit at a sharded replica (`inherited-deployments.ts`): each one an
 * inherited watch let go (not deleted), or held when it stopped, stays a claimant of its service
 * name here (a younger rival must not take the name meanwhile) but is not reconciled, until a
 * watch here adds it or its time is over.
 */
import { claimOf } from "../reconcile/inputs.ts";
import { addItem, itemsOf, type OneOrMany, removeItem } from "../runtime/compact.ts";
import { type ObjectRef, objectKey } from "../runtime/queue-records.ts";
import { type DeploymentObject, refOf } from "./object.ts";

/**
 * How long a resource an inherited watch let go (not deleted) stays a claimant here, waiting for
 * the own watch to add it: far more than one watch can run behind the other on a loaded API server.
 */
export const TRANSIT_MS = 15_000;

/** Options of {@link Transit}. */
export interface TransitOptions {
  /** How long a resource is held (see {@link TRANSIT_MS}). */
  ms: number;
  /** Whether a watch of `owner`'s resources is listing now (it may find the resource again). */
  listing(owner: string): boolean;
  /** Its time is over and no watch added it: out of the cache. */
  left(obj: DeploymentObject): void;
}

/** See the module comment. */
export class Transit {
  readonly #o: TransitOptions;
  readonly #byKey = new Map<string, { obj: DeploymentObject; timer: ReturnType<typeof setTimeout> }>();
  /** The keys in transit by what each claims: a claim check reads only its rivals. */
  readonly #byClaim = new Map<string, OneOrMany<string>>();

  constructor(o: TransitOptions) {
    this.#o = o;
  }

  get size(): number {
    return this.#byKey.size;
  }

  /**
   * Holds `obj`, let go by the inherited watch of `owner` (or held as it stopped), for the time
   * given, and longer while a watch of `owner` lists again (see the module comment).
   */
  hold(obj: DeploymentObject, owner: string): void {
    const key = objectKey(refOf(obj));
    this.arrived(refOf(obj));
    const wait = (): ReturnType<typeof setTimeout> => {
      const timer = setTimeout(() => {
        const entry = this.#byKey.get(key);
        if (entry?.obj !== obj) return;
        if (this.#o.listing(owner)) entry.timer = wait();
        else {
          this.arrived(refOf(obj));
          this.#o.left(obj);
        }
      }, this.#o.ms);
      timer.unref?.();
      return timer;
    };
    this.#byKey.set(key, { obj, timer: wait() });
    this.#byClaim.set(claimOf(obj), addItem(this.#byClaim.get(claimOf(obj)), key));
  }

  /** Whether `ref` is in transit. */
  has(ref: ObjectRef): boolean {
    return this.#byKey.has(objectKey(ref));
  }

  /** Ends `ref`'s transit, if it was in transit: the object it was, for the add that ends it. */
  arrived(ref: ObjectRef): DeploymentObject | undefined {
    const key = objectKey(ref);
    const entry = this.#byKey.get(key);
    if (!entry) return undefined;
    clearTimeout(entry.timer);
    this.#byKey.delete(key);
    const claim = claimOf(entry.obj);
    const left = removeItem(this.#byClaim.get(claim), key);
    if (left === undefined) this.#byClaim.delete(claim);
    else this.#byClaim.set(claim, left);
    return entry.obj;
  }

  /** The resources in transit claiming `claim`, by key. */
  *claiming(claim: string): Generator<[string, DeploymentObject]> {
    for (const key of itemsOf(this.#byClaim.get(claim))) {
      const obj = this.#byKey.get(key)?.obj;
      if (obj) yield [key, obj];
    }
  }
}
