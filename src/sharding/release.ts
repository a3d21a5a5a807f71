/**
 * A join's share released whole, not resource by resource. When one replica joins a ring that
 * otherwise stays as it was (same members, same leader), every claim the ring moves goes to the
 * newcomer, and each owner can give it all of them at once: it stops reconciling them, waits for
 * their reconciles and unanswered writes to end, then writes on its own Lease that it released
 * them ({@link RELEASED_ANNOTATION}: the newcomer's identity and the ring). The newcomer, reading
 * its identity there, watches that owner's resources and reconciles at once those the ring gives
 * it, as an heir does a dead replica's share (`heirs.ts`). Once its list of that owner's resources
 * is complete, the newcomer says so on its own Lease ({@link HOLDING_ANNOTATION}); the owner then
 * labels each one for it in the background, and drops the annotation once none is left labelled
 * for itself. The labels wait for that list: their writes and watch events would otherwise share
 * the API server with it, and the list is what the newcomer's reconciles wait for.
 *
 * Never two writers: the owner writes the annotation only once no reconcile or unanswered write
 * of a released resource can run, and never reconciles one again while the release lasts; the
 * newcomer reconciles them only while the owner's Lease carries the release naming its identity.
 * Released are also the resources the owner reconciles for another replica (a dead one's share
 * inherited, or a share released to it as it joined) whose claim the ring gives the newcomer:
 * another's label write brings each into the owner's share, and the newcomer reconciles it then:
 * the release lasts while one of them is left labelled for that other replica.
 * A release the newcomer cannot take up ends, and the owner reconciles the resources again, once
 * the newcomer's process can no longer write: its Lease released by it or taken by a sharder, or
 * not held by that process for a Lease duration since the owner saw it so (deleted, its holder
 * cleared or another, by hand or not: `replica-handoff.ts`). An owner that dies while releasing has its Lease taken with a ring
 * ({@link releasedRecord}) that gives the released claims to the same newcomer; an owner that
 * restarts takes the release over from its Lease before its first reconcile.
 */
import { decodeInheritance, encodeInheritance, heirOf, type Inheritance } from "./inheritance.ts";
import { isReplicaName } from "./labels.ts";

/** On an owner's own Lease while it releases a joined replica's share: `<identity>@<ring>`. */
export const RELEASED_ANNOTATION = "sharding.dms.dev/released";

/**
 * On a joined replica's own Lease: the live replicas whose released share it has listed, comma
 * separated (`<replica>,<replica>`). An owner writes its labels for the newcomer once it is named
 * there (or {@link LABELS_UNHEARD_MS} after its release was written, should the newcomer never say).
 */
export const HOLDING_ANNOTATION = "sharding.dms.dev/holding";

/**
 * How long an owner's labels wait for the newcomer to name it in {@link HOLDING_ANNOTATION}: a
 * newcomer that never says (a process of an earlier version, one whose list never ends) still gets
 * its labels, a minute later.
 */
export const LABELS_UNHEARD_MS = 60_000;

/** The most replicas {@link decodeHolding} reads from one annotation. */
const MAX_HOLDING = 64;

/** The annotation's value for `owners` (sorted, each once); undefined for none. */
export function encodeHolding(owners: Iterable<string>): string | undefined {
  const names = [...new Set(owners)].sort();
  return names.length === 0 ? undefined : names.join(",");
}

/** The replicas an annotation's value names; what is no replica's name is left out. */
export function decodeHolding(value: string | undefined): readonly string[] | undefined {
  if (value === undefined || value === "") return undefined;
  const names = value.split(",", MAX_HOLDING).filter(isReplicaName);
  return names.length === 0 ? undefined : names;
}

/** A release: to whom (the replica and the process holding its Lease), by which ring. */
export interface Release {
  /** The joined replica (its Lease's name). */
  readonly heir: string;
  /** The process holding the heir's Lease when the release began (`<pod>_<suffix>`). */
  readonly identity: string;
  /** The ring with the heir in it: the released claims are those it gives the heir. */
  readonly ring: Inheritance;
}

/**
 * What a release gives its heir, remembered resource by resource while it lasts: whether the
 * release's ring gives the claim of each resource to the heir (`heirOf`, a keyed sha256 per ring
 * member), asked of every resource of the share at each renewal of the owner's Lease while the
 * release lasts. The ring does not change while it does, so the answer for a claim does not
 * either: each resource's is kept with the claim it was computed for (a resource created again
 * under its name with another claim is computed again), and all of them are dropped when the key
 * the ring is hashed with changes. One per resource the owner's cache holds: a resource that
 * leaves the cache is {@link forget}-ed, and a new release starts with none.
 */
export class ReleasedClaims {
  readonly release: Release;
  readonly #seed: () => Uint8Array | undefined;
  /** The key the answers were hashed with (null: none computed yet). */
  #keyedWith: Uint8Array | undefined | null = null;
  readonly #given = new Map<string, { claim: string; given: boolean }>();

  /** `seed`: the ring's key (the install key) as it is now; undefined: unkeyed (tests). */
  constructor(release: Release, seed: () => Uint8Array | undefined) {
    this.release = release;
    this.#seed = seed;
  }

  /** Whether the release gives its heir the resource `key`, which claims `claim`. */
  gives(key: string, claim: string): boolean {
    const seed = this.#seed();
    if (seed !== this.#keyedWith) {
      this.#given.clear();
      this.#keyedWith = seed;
    }
    const known = this.#given.get(key);
    if (known !== undefined && known.claim === claim) return known.given;
    const given = heirOf(claim, this.release.ring, seed) === this.release.heir;
    this.#given.set(key, { claim, given });
    return given;
  }

  /** The resource `key` left the cache. */
  forget(key: string): void {
    this.#given.delete(key);
  }

  /** The resources whose answer is kept. */
  get size(): number {
    return this.#given.size;
  }
}

/** The longest identity a release names (a pod name and a suffix). */
const MAX_IDENTITY = 128;

/** The replica (pod) name of a leader election identity `<pod name>_<suffix>`. */
export function podOfIdentity(identity: string): string {
  const cut = identity.lastIndexOf("_");
  return cut < 0 ? identity : identity.slice(0, cut);
}

/** The annotation's value for `release`. */
export function encodeRelease(release: Release): string {
  return `${release.identity}@${encodeInheritance(release.ring)}`;
}

/**
 * The release an annotation's value names; undefined when there is none or it cannot be read (an
 * identity whose pod part is no replica's name, or that the ring does not name): such a Lease
 * releases nothing.
 */
export function decodeRelease(value: string | undefined): Release | undefined {
  if (value === undefined) return undefined;
  const cut = value.indexOf("@");
  if (cut <= 0 || cut > MAX_IDENTITY) return undefined;
  const identity = value.slice(0, cut);
  if (!/^[a-z0-9._-]+$/.test(identity)) return undefined;
  const ring = decodeInheritance(value.slice(cut + 1));
  const heir = podOfIdentity(identity);
  if (ring === undefined || !isReplicaName(heir) || !ring.members.includes(heir)) return undefined;
  return { heir, identity, ring };
}

/**
 * The replica that joined between the rings `before` and `after`, when that is all that changed
 * (the same leader, the same members and one more); undefined otherwise.
 */
export function joinedOne(
  before: Inheritance | undefined,
  after: Inheritance | undefined,
): string | undefined {
  if (before === undefined || after === undefined) return undefined;
  if (before.leader !== after.leader || after.members.length !== before.members.length + 1) return undefined;
  // One more member, and only one of them new: every other one was a member before (members are
  // sorted and each named once).
  const was = new Set(before.members);
  const added = after.members.filter((m) => !was.has(m));
  return added.length === 1 ? added[0] : undefined;
}

/**
 * The ring a sharder writes on the Lease of `owner` taken while it released a share by `ring`:
 * `ring` without the owner (and without a leader if the owner was it). It gives every claim the
 * owner released to the same heir (its other members keep their weights, and among equal weights
 * the order is the same), so the heir keeps what it was reconciling, and the owner's own claims go
 * to the survivors.
 */
export function releasedRecord(owner: string, ring: Inheritance): Inheritance | undefined {
  const members = ring.members.filter((m) => m !== owner);
  if (members.length === 0) return undefined;
  return { members, leader: ring.leader === owner ? undefined : ring.leader };
}
