/**
 * Every version of a namespace's Leases, in the order the API server wrote them, from a list and
 * then a watch from that list's resourceVersion: who held each Lease, when it was acquired and
 * renewed (as its holder wrote it), how often it changed hands, what it carried, and when it was
 * deleted. A sharding test reads a failover from it (the dead replica's last renewal, the
 * sharder's take, the deletion) rather than from how long the failover took.
 */
import { parseKubeTime } from "../../src/kube/lease.ts";
import { SHARDER_HOLDER_PREFIX } from "../../src/sharding/labels.ts";
import type { ClusterUser } from "./resources.ts";

/** One version of one Lease, as a watch event (or the first listing) delivered it. */
export interface LeaseVersion {
  /** The Lease's name (a replica's name for the ring's Leases). */
  name: string;
  /** `DELETED` for the Lease's deletion; its fields are then the last version's. */
  type: "ADDED" | "MODIFIED" | "DELETED";
  /** `""` when released (or never held). */
  holderIdentity: string;
  /** ms since the epoch, as the holder wrote it. */
  acquireTime: number | undefined;
  /** ms since the epoch, as the holder wrote it: when the renewal was sent. */
  renewTime: number | undefined;
  leaseTransitions: number;
  annotations: Record<string, string>;
}

/** The pod name of a holder identity `<pod name>_<suffix>` (a sharder's: `sharder/<identity>`). */
export function podOf(holderIdentity: string): string {
  const identity = holderIdentity.startsWith(SHARDER_HOLDER_PREFIX)
    ? holderIdentity.slice(SHARDER_HOLDER_PREFIX.length)
    : holderIdentity;
  const cut = identity.lastIndexOf("_");
  return cut < 0 ? identity : identity.slice(0, cut);
}

interface RawLease {
  metadata: { name: string; resourceVersion: string; annotations?: Record<string, string> };
  spec?: {
    holderIdentity?: string;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

const versionOf = (type: LeaseVersion["type"], lease: RawLease): LeaseVersion => ({
  name: lease.metadata.name,
  type,
  holderIdentity: lease.spec?.holderIdentity ?? "",
  acquireTime: parseKubeTime(lease.spec?.acquireTime)?.getTime(),
  renewTime: parseKubeTime(lease.spec?.renewTime)?.getTime(),
  leaseTransitions: lease.spec?.leaseTransitions ?? 0,
  annotations: lease.metadata.annotations ?? {},
});

/** See the module comment. Started by {@link LeaseHistory.start}; stop it after the test. */
export class LeaseHistory {
  readonly #versions: LeaseVersion[] = [];
  readonly #stop = new AbortController();
  #failed: unknown;
  #watching: Promise<void> = Promise.resolve();

  private constructor() {}

  /** Lists the Leases of `namespace` and watches them from there on. */
  static async start(user: ClusterUser, namespace: string): Promise<LeaseHistory> {
    const history = new LeaseHistory();
    const path = `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`;
    const list = (await user.client.request({ method: "GET", path })) as {
      metadata: { resourceVersion: string };
      items: RawLease[];
    };
    for (const item of list.items) history.#versions.push(versionOf("ADDED", item));
    history.#watching = history.#watch(user, path, list.metadata.resourceVersion);
    return history;
  }

  /**
   * Watches from `resourceVersion` on, again from the last version seen when the API server ends
   * a watch; any other end is kept and thrown by {@link versions}: a history with a gap would
   * say a Lease never changed hands when the test did not see it.
   */
  async #watch(user: ClusterUser, path: string, from: string): Promise<void> {
    let resourceVersion = from;
    const signal = this.#stop.signal;
    try {
      while (!signal.aborted) {
        const stream = await user.client.stream({
          method: "GET",
          path,
          query: { watch: true, resourceVersion, allowWatchBookmarks: true, timeoutSeconds: 300 },
          signal,
          timeoutMs: 330_000,
        });
        for await (const event of stream) {
          const { type, object } = event as { type: string; object: RawLease & { message?: string } };
          if (type === "ERROR") throw new Error(`the Lease watch failed: ${object.message ?? type}`);
          resourceVersion = object.metadata.resourceVersion;
          if (type === "ADDED" || type === "MODIFIED" || type === "DELETED")
            this.#versions.push(versionOf(type, object));
        }
      }
    } catch (error) {
      if (!signal.aborted) this.#failed = error;
    }
  }

  /** How many versions were seen so far: a mark to read {@link versions} from. */
  mark(): number {
    this.#check();
    return this.#versions.length;
  }

  /** The versions of the Lease `name` seen from `mark` on (default: all), oldest first. */
  versions(name: string, mark = 0): LeaseVersion[] {
    this.#check();
    return this.#versions.slice(mark).filter((v) => v.name === name);
  }

  /** Stops the watch. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#watching;
  }

  #check(): void {
    if (this.#failed !== undefined)
      throw new Error("the Lease watch ended: the history has a gap", { cause: this.#failed });
  }
}

/** How a replica's ring Lease was taken from it (see {@link takeoverOf}). */
export interface Takeover {
  /** The replica's own last version: its last renewal. */
  last: LeaseVersion;
  /** The version right before the take: {@link last}, or the replica's release of the Lease. */
  before: LeaseVersion;
  /** The first version a sharder wrote after {@link last}. */
  take: LeaseVersion;
  /** The Lease's deletion after the take, when seen. */
  deleted: LeaseVersion | undefined;
}

/**
 * The take of `replica`'s Lease after its last renewal, from the Lease's `versions` (all of them:
 * the last renewal may precede a mark); undefined when the replica never held it or no sharder
 * took it since.
 */
export function takeoverOf(versions: readonly LeaseVersion[], replica: string): Takeover | undefined {
  const own = (v: LeaseVersion) =>
    v.type !== "DELETED" &&
    v.holderIdentity !== "" &&
    !v.holderIdentity.startsWith(SHARDER_HOLDER_PREFIX) &&
    podOf(v.holderIdentity) === replica;
  const lastAt = versions.findLastIndex(own);
  const last = versions[lastAt];
  if (last === undefined) return undefined;
  const takeAt = versions.findIndex(
    (v, i) => i > lastAt && v.type !== "DELETED" && v.holderIdentity.startsWith(SHARDER_HOLDER_PREFIX),
  );
  const take = versions[takeAt];
  const before = versions[takeAt - 1];
  if (take === undefined || before === undefined) return undefined;
  const deleted = versions.find((v, i) => i > takeAt && v.type === "DELETED");
  return { last, before, take, deleted };
}

/** The versions, one line each, for an assertion's message. */
export function describeVersions(versions: readonly LeaseVersion[]): string {
  const at = (ms: number | undefined) => (ms === undefined ? "-" : new Date(ms).toISOString().slice(11, 23));
  return versions
    .map(
      (v) =>
        `${v.name} ${v.type} holder=${v.holderIdentity || '""'} acquired=${at(v.acquireTime)} renewed=${at(v.renewTime)} transitions=${v.leaseTransitions}`,
    )
    .join("; ");
}
