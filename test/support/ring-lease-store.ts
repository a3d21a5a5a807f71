/**
 * The ring's Leases in memory, as a replica's `RingLeases` port reads and writes them through the
 * API server: each write bumps a resourceVersion, an update at another one and a create of a Lease
 * that exists are conflicts, and every watcher hears each change at once. A replica's own Lease
 * carries what its callbacks return at each write (the ring it moves by, its release, the shares
 * it holds), as the Kubernetes adapter writes them as annotations. {@link edit} and
 * {@link remove} are a user's `kubectl edit lease` and `kubectl delete lease`.
 */
import { LeaseConflictError, type LeaseRecord, type LeaseSnapshot } from "../../src/runtime/leader.ts";
import { encodeRelease, RELEASED_ANNOTATION } from "../../src/sharding/release.ts";
import type {
  RingLeaseObject,
  RingLeases,
  ShardLease,
  WatchHandlers,
} from "../../src/sharding/sharder-loop.ts";

/** A Lease of {@link RingLeaseStore}: what the adapter gives a replica. */
export type StoredLease = RingLeaseObject;

/** A Lease record held by `holderIdentity` since `acquiredAt`, renewed at `renewedAt` (ms). */
export function leaseRecord(
  holderIdentity: string,
  leaseDurationMs: number,
  acquiredAt: number,
  renewedAt = acquiredAt,
  leaseTransitions = 0,
): LeaseRecord {
  return {
    holderIdentity,
    leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
    acquireTime: new Date(acquiredAt),
    renewTime: new Date(renewedAt),
    leaseTransitions,
  };
}

/** The ring's Leases in memory (see the module comment). */
export class RingLeaseStore implements RingLeases<StoredLease> {
  readonly #leases = new Map<string, StoredLease>();
  readonly #watchers = new Set<WatchHandlers<StoredLease>>();
  #version = 0;
  readonly synced = Promise.resolve();

  list(): readonly StoredLease[] {
    return [...this.#leases.values()];
  }

  get(name: string): StoredLease | undefined {
    return this.#leases.get(name);
  }

  subscribe(handlers: WatchHandlers<StoredLease>): () => void {
    this.#watchers.add(handlers);
    return () => this.#watchers.delete(handlers);
  }

  /** Nothing to list or watch: every write is heard as it is made. */
  async run(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
  }

  readonly lease: RingLeases["lease"] = (name, inheritance, movingBy, released, holding, fingerprint) => {
    const annotated = (record: LeaseRecord): Omit<StoredLease, "metadata"> => {
      const holds = holding === undefined ? [] : [...holding()];
      return {
        record,
        inheritance,
        movingBy: movingBy?.(),
        released: released?.(),
        holding: holds.length === 0 ? undefined : holds,
        fingerprint: fingerprint?.(),
      };
    };
    return {
      get: async () => {
        const lease = this.#leases.get(name);
        return lease === undefined ? undefined : snapshot(lease);
      },
      create: async (record) => {
        if (this.#leases.has(name)) throw new LeaseConflictError(`the Lease ${name} already exists`);
        return snapshot(this.#write(name, annotated(structuredClone(record))));
      },
      update: async (record, resourceVersion) => {
        if (this.#leases.get(name)?.metadata.resourceVersion !== resourceVersion)
          throw new LeaseConflictError(`the Lease ${name} has been modified`);
        return snapshot(this.#write(name, annotated(structuredClone(record))));
      },
      delete: async (resourceVersion) => {
        if (this.#leases.get(name)?.metadata.resourceVersion !== resourceVersion) return false;
        this.remove(name);
        return true;
      },
    } satisfies ShardLease;
  };

  /** Writes `record` on the Lease `name` as another process would (created when it is new). */
  put(name: string, record: LeaseRecord, rest: Omit<StoredLease, "metadata" | "record"> = {}): StoredLease {
    return this.#write(name, { ...rest, record: structuredClone(record) });
  }

  /** `kubectl edit lease name`: its spec changed by hand, its annotations kept. */
  edit(name: string, change: Partial<LeaseRecord>): StoredLease {
    const lease = this.#leases.get(name);
    if (lease === undefined) throw new Error(`no Lease ${name} to edit`);
    const { metadata: _, ...rest } = lease;
    return this.#write(name, { ...rest, record: { ...lease.record, ...change } });
  }

  /** `kubectl delete lease name`. */
  remove(name: string): void {
    const lease = this.#leases.get(name);
    if (lease === undefined) return;
    this.#leases.delete(name);
    for (const w of [...this.#watchers]) w.onDelete?.(lease);
  }

  #write(name: string, body: Omit<StoredLease, "metadata">): StoredLease {
    const old = this.#leases.get(name);
    const lease: StoredLease = { ...body, metadata: { name, resourceVersion: String(++this.#version) } };
    this.#leases.set(name, lease);
    for (const w of [...this.#watchers]) {
      if (old === undefined) w.onAdd?.(lease);
      else w.onUpdate?.(old, lease);
    }
    return lease;
  }
}

function snapshot(lease: StoredLease): LeaseSnapshot {
  const release = lease.released;
  return {
    record: structuredClone(lease.record),
    resourceVersion: lease.metadata.resourceVersion,
    ...(release === undefined ? {} : { annotations: { [RELEASED_ANNOTATION]: encodeRelease(release) } }),
  };
}
