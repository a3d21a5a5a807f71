/**
 * A replica's side of an inherited share (`inheritance.ts`): from the ring's Lease watch, which
 * dead replicas' Leases are held by a sharder with a ring naming this replica, and for each one a
 * second watch of its resources (the `inherit` port), kept while the Lease stays so.
 */
import type { Logger } from "pino";
import { heirOf, type Inheritance, sameInheritance } from "./inheritance.ts";
import { SHARDER_HOLDER_PREFIX } from "./labels.ts";
import type { RingLease } from "./membership.ts";

/**
 * The ring by which `self` inherits from the replica of `lease`: the Lease is another replica's,
 * held by a sharder (taken after it expired: its replica cannot write), and carries a ring that
 * names `self` among its members. Undefined otherwise.
 */
export function inheritanceFor(self: string, lease: RingLease): Inheritance | undefined {
  const ring = lease.inheritance;
  if (lease.name === self || ring === undefined) return undefined;
  if (!lease.record.holderIdentity.startsWith(SHARDER_HOLDER_PREFIX)) return undefined;
  return ring.members.includes(self) ? ring : undefined;
}

/**
 * Runs (and stops) one inherited watch per Lease that gives `self` a share. `inherit` runs the
 * watch of `owner`'s resources, keeping those whose claim `mine` accepts, until its signal aborts.
 */
export class Heirs {
  readonly #self: string;
  readonly #seed: () => Uint8Array | undefined;
  readonly #inherit: (owner: string, mine: (claim: string) => boolean, signal: AbortSignal) => Promise<void>;
  readonly #logger: Logger;
  readonly #running = new Map<string, { ring: Inheritance; stop: AbortController }>();

  constructor(o: {
    self: string;
    /** The ring's key (the install key), read before the replica joins. */
    seed: () => Uint8Array | undefined;
    inherit: (owner: string, mine: (claim: string) => boolean, signal: AbortSignal) => Promise<void>;
    logger: Logger;
  }) {
    this.#self = o.self;
    this.#seed = o.seed;
    this.#inherit = o.inherit;
    this.#logger = o.logger;
  }

  /** The dead replicas whose share this replica inherits now. */
  get owners(): string[] {
    return [...this.#running.keys()];
  }

  /** The Lease `name` is now `lease` (undefined: deleted): starts, keeps or stops its watch. */
  update(name: string, lease: RingLease | undefined, signal: AbortSignal): void {
    const ring = lease ? inheritanceFor(this.#self, lease) : undefined;
    const running = this.#running.get(name);
    if (running && sameInheritance(running.ring, ring)) return;
    if (running) {
      running.stop.abort();
      this.#running.delete(name);
      this.#logger.info({ from: name }, "no longer inheriting a share: its Lease was deleted or let go");
    }
    if (ring === undefined || signal.aborted) return;
    const stop = new AbortController();
    this.#running.set(name, { ring, stop });
    const seed = this.#seed();
    const self = this.#self;
    this.#logger.info({ from: name, members: ring.members }, "inheriting a dead replica's share");
    void this.#inherit(
      name,
      (claim) => heirOf(claim, ring, seed) === self,
      AbortSignal.any([signal, stop.signal]),
    )
      .catch((err: unknown) => this.#logger.warn({ err, from: name }, "an inherited watch failed"))
      .finally(() => {
        if (this.#running.get(name)?.stop === stop) this.#running.delete(name);
      });
  }

  /** Stops every inherited watch. */
  close(): void {
    for (const { stop } of this.#running.values()) stop.abort();
    this.#running.clear();
  }
}
