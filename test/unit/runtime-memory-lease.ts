import {
  LeaseConflictError,
  type LeasePort,
  type LeaseRecord,
  type LeaseSnapshot,
} from "../../src/runtime/leader.ts";

/** One Lease object in memory, with resourceVersion-based optimistic concurrency like the API server. */
export class MemoryLease {
  snapshot: LeaseSnapshot | undefined;
  #version = 0;
  writes: Array<{ by: string; record: LeaseRecord }> = [];

  /** A port for one client; `down()` makes that client's calls fail (a partitioned instance). */
  port(name: string): LeasePort & { down: boolean } {
    const port = {
      down: false,
      get: async (): Promise<LeaseSnapshot | undefined> => {
        if (port.down) throw new Error("connection refused");
        return this.snapshot && structuredClone(this.snapshot);
      },
      create: async (record: LeaseRecord): Promise<LeaseSnapshot> => {
        if (port.down) throw new Error("connection refused");
        if (this.snapshot) throw new LeaseConflictError("leases.coordination.k8s.io already exists");
        return this.#write(name, record);
      },
      update: async (record: LeaseRecord, resourceVersion: string): Promise<LeaseSnapshot> => {
        if (port.down) throw new Error("connection refused");
        if (this.snapshot?.resourceVersion !== resourceVersion)
          throw new LeaseConflictError("the object has been modified");
        return this.#write(name, record);
      },
    };
    return port;
  }

  #write(by: string, record: LeaseRecord): LeaseSnapshot {
    this.snapshot = { record: structuredClone(record), resourceVersion: String(++this.#version) };
    this.writes.push({ by, record: structuredClone(record) });
    return structuredClone(this.snapshot);
  }

  get holder(): string | undefined {
    return this.snapshot?.record.holderIdentity;
  }
}
