/**
 * A sharded replica's Deployment resources: its own share (the watch of `shard.dms.dev/owner=<its
 * name>`) and, while it inherits part of a dead replica's share, a second watch of that replica's
 * resources (`owner=<dead replica>`) keeping only those it inherits. Readers see one cache: an
 * object is in it while either watch holds it, the own watch's version first (a resource labelled
 * for this replica is in both until the second watch hears of the new label). See
 * `sharding/inheritance.ts` and docs/guide/sharding.md, "Failover".
 *
 * The two watches are two streams: when the sharder labels an inherited resource for this
 * replica, the second watch may drop it before the own watch adds it. Meanwhile the resource is
 * *in transit*: still a claimant of its service name (a younger rival here must not take the
 * name for that moment), but not reconciled here (it may be on its way to another replica). It
 * stays so until a watch here adds it (an update, as if it never left) or for {@link TRANSIT_MS}
 * (then it is deleted from the cache; `transit.ts`). So is every resource a second watch held
 * when it stops: one whose ring changed (an heir died, a release became a record) starts again,
 * and they wait for its list.
 */
import type { DeploymentResourceStatus } from "../crd/schema.ts";
import { CLAIM_INDEX, claimOf, claimOnTheWire } from "../reconcile/inputs.ts";
import { type ObjectRef, objectKey } from "../runtime/queue-records.ts";
import {
  CustomResources,
  DEPLOYMENTS,
  KubeDeployments,
  type KubeDeploymentsOptions,
} from "./custom-resources.ts";
import { type DeploymentObject, decodeDeployment, refOf } from "./object.ts";
import type { ReflectorHandlers } from "./reflector.ts";
import { TRANSIT_MS, Transit } from "./transit.ts";

/**
 * One dead replica's resources that this replica inherits (a watch of their owner label). Listed
 * ahead of a take ({@link ShareDeployments.prefetch}) it keeps every one until told which it keeps.
 */
class InheritedShare extends CustomResources<DeploymentObject, DeploymentResourceStatus> {
  readonly #filter: { keep: KeepClaim | undefined };

  constructor(options: KubeDeploymentsOptions, keep: KeepClaim | undefined) {
    const filter = { keep };
    // Another heir's resource: not kept. The reflector reads null as "not kept" (dropped from
    // the cache if it was in it); the adapter's type knows only undefined, "unusable".
    const notKept = null as unknown as undefined;
    super(DEPLOYMENTS, options, (raw) => {
      const keeps = filter.keep;
      // Told apart by its claim before its decode: a joined replica lists its owners' whole
      // shares to keep about a quarter of them.
      const claim = keeps === undefined ? undefined : claimOnTheWire(raw);
      if (claim !== undefined && keeps !== undefined && !keeps(claim)) return notKept;
      const obj = decodeDeployment(raw);
      if (obj === undefined || keeps === undefined || claim !== undefined || keeps(claimOf(obj))) return obj;
      return notKept;
    });
    this.#filter = filter;
  }

  /** Keeps from now on only what `keep` holds for, and drops the rest from the cache. */
  keepOnly(keep: KeepClaim): void {
    this.#filter.keep = keep;
    this.cache.retain((obj) => keep(claimOf(obj)));
  }

  /** A write's answer, for the next read (see `Reflector.observeWrite`). */
  observe(obj: DeploymentObject): void {
    this.cache.observeWrite(obj);
  }
}

/** Which claims an inherited watch keeps (`reconcile/inputs.ts`, `claimOf`: the ring places resources by them). */
export type KeepClaim = (claim: string) => boolean;

/** A share listed ahead of a take, until an inherit adopts it or its signal aborts. */
interface Prefetched {
  share: InheritedShare;
  stop: AbortController;
  running: Promise<void>;
  adopted: boolean;
}

/** Options of {@link ShareDeployments}. */
export interface ShareDeploymentsOptions extends KubeDeploymentsOptions {
  /** The label selector of the dead replica `owner`'s resources (the scope's, and its owner label). */
  inheritedSelector(owner: string): string;
  /** See {@link TRANSIT_MS}. */
  transitMs?: number;
}

/** See the module comment. {@link inherit} runs a second watch; every reader sees the union. */
export class ShareDeployments extends KubeDeployments {
  readonly #options: ShareDeploymentsOptions;
  readonly #inherited = new Map<string, InheritedShare>();
  /** Shares listed ahead of a take, by owner (see {@link prefetch}). */
  readonly #prefetched = new Map<string, Prefetched>();
  readonly #handlers = new Set<ReflectorHandlers<DeploymentObject>>();
  /** Per owner inherited, resolved when its watch ended. */
  readonly #ended = new Map<string, Promise<void>>();
  /** Resources an inherited watch let go that the own watch has not added yet, by key (see the module comment). */
  readonly #transit: Transit;
  /** The subscription to the own watch's events, made with the first reader's. */
  #ownEvents: (() => void) | undefined;

  constructor(options: ShareDeploymentsOptions) {
    super(options);
    this.#options = options;
    this.#transit = new Transit({
      ms: options.transitMs ?? TRANSIT_MS,
      listing: (owner) => this.#inherited.get(owner)?.hasSynced() === false,
      left: (obj) => this.#emit((h) => h.onDelete?.(obj)),
    });
  }

  /**
   * Watches the resources labelled for the dead replica `owner`, keeping those for which `keep`
   * holds (the ones the ring written on its Lease gives this replica), until `signal` aborts;
   * resolves then, what the own watch does not hold in transit (see the module comment). A second
   * call for the same `owner` starts once the first one ended (stop that one first: the ring it
   * kept by may have changed), its list finding them as updates. `listed`: once its list is done.
   */
  async inherit(owner: string, keep: KeepClaim, signal: AbortSignal, listed?: () => void): Promise<void> {
    for (let running = this.#ended.get(owner); running !== undefined; running = this.#ended.get(owner))
      await running;
    if (signal.aborted) return;
    let ended = () => {};
    this.#ended.set(
      owner,
      new Promise<void>((resolve) => {
        ended = resolve;
      }),
    );
    const early = this.#prefetched.get(owner);
    this.#prefetched.delete(owner);
    const adopted = early !== undefined && !early.stop.signal.aborted;
    const share = adopted ? early.share : this.#share(owner, keep);
    if (adopted) {
      // Listed ahead of the take: that watch is this one, stopping with `signal` from now on.
      early.adopted = true;
      const stop = () => early.stop.abort();
      signal.addEventListener("abort", stop, { once: true });
      void early.running.finally(() => signal.removeEventListener("abort", stop));
      if (signal.aborted) stop();
      const listed = share.hasSynced();
      share.keepOnly(keep);
      if (!listed) {
        // What its list collected so far was kept whole: filtered once the list is complete.
        await share.synced.catch(() => undefined);
        if (!share.hasSynced()) {
          await early.running;
          this.#ended.delete(owner);
          ended();
          return;
        }
        share.keepOnly(keep);
      }
    }
    this.#inherited.set(owner, share);
    const own = (obj: DeploymentObject) => super.get(refOf(obj)) !== undefined;
    const handlers = {
      onAdd: (obj: DeploymentObject) => {
        if (own(obj) || this.#elsewhere(obj, share)) return;
        // Back from transit (never reported deleted): an update.
        const was = this.#transit.arrived(refOf(obj));
        this.#emit((h) => (was ? h.onUpdate?.(was, obj) : h.onAdd?.(obj)));
      },
      onUpdate: (old: DeploymentObject, obj: DeploymentObject) => {
        if (!own(obj)) this.#emit((h) => h.onUpdate?.(old, obj));
      },
      onDelete: (obj: DeploymentObject) => {
        if (own(obj) || this.#elsewhere(obj, share)) return;
        // Let go, not deleted: on its way to a watch, maybe the own one (see the module comment).
        if (obj.metadata.deletionTimestamp === undefined) this.#transit.hold(obj, owner);
        else this.#emit((h) => h.onDelete?.(obj));
      },
    };
    const unsubscribe = share.subscribe(handlers);
    // Adopted, its list is done: the handlers hear of what it kept as a list's adds.
    if (adopted) for (const obj of share.list()) handlers.onAdd(obj);
    if (listed !== undefined)
      void share.synced.then(
        () => {
          if (!signal.aborted) listed();
        },
        () => undefined,
      );
    try {
      await (adopted ? early.running : share.run(signal));
    } finally {
      unsubscribe();
      this.#inherited.delete(owner);
      // Not known to be deleted: on its way to a watch, maybe the next one of `owner` (see above).
      for (const obj of share.list())
        if (!own(obj) && !this.#elsewhere(obj, share)) this.#transit.hold(obj, owner);
      this.#ended.delete(owner);
      ended();
    }
  }

  /**
   * Lists and watches the resources of `owner`, a replica that stopped renewing its Lease, before
   * a sharder takes it: keeps every one, shows none to readers, until {@link inherit} of `owner`
   * adopts the watch (keeping then what it keeps; its resources are already listed) or `signal`
   * aborts (the replica renewed after all, or the ring gave this replica nothing of its share).
   * Resolves once its list is complete, or it stopped before.
   */
  prefetch(owner: string, signal: AbortSignal): Promise<void> {
    if (signal.aborted || this.#prefetched.has(owner) || this.#ended.has(owner)) return Promise.resolve();
    const stop = new AbortController();
    const entry: Prefetched = {
      share: this.#share(owner, undefined),
      stop,
      running: Promise.resolve(),
      adopted: false,
    };
    const abort = () => {
      if (!entry.adopted) stop.abort();
    };
    signal.addEventListener("abort", abort, { once: true });
    entry.running = entry.share.run(stop.signal).finally(() => {
      signal.removeEventListener("abort", abort);
      if (this.#prefetched.get(owner) === entry) this.#prefetched.delete(owner);
    });
    this.#prefetched.set(owner, entry);
    return entry.share.synced.catch(() => undefined);
  }

  /** The watch of `owner`'s resources, keeping those `keep` holds for (every one: undefined). */
  #share(owner: string, keep: KeepClaim | undefined): InheritedShare {
    const { scope, inheritedSelector } = this.#options;
    return new InheritedShare(
      {
        ...this.#options,
        scope: {
          ...(scope?.namespaces ? { namespaces: scope.namespaces } : {}),
          labelSelector: inheritedSelector(owner),
        },
      },
      keep,
    );
  }

  /** The dead replicas whose resources this replica inherits now. */
  inheriting(): string[] {
    return [...this.#inherited.keys()];
  }

  /** Whether an inherited watch other than `except` holds `obj`. */
  #elsewhere(obj: DeploymentObject, except?: InheritedShare): boolean {
    for (const share of this.#inherited.values())
      if (share !== except && share.get(refOf(obj)) !== undefined) return true;
    return false;
  }

  #inheritedGet(ref: ObjectRef): DeploymentObject | undefined {
    for (const share of this.#inherited.values()) {
      const obj = share.get(ref);
      if (obj !== undefined) return obj;
    }
    return undefined;
  }

  #emit(call: (handlers: ReflectorHandlers<DeploymentObject>) => unknown): void {
    for (const handlers of this.#handlers) {
      try {
        const result = call(handlers);
        if (result instanceof Promise)
          result.catch((err: unknown) => this.#options.logger?.error({ err }, "cache handler rejected"));
      } catch (err) {
        // As the reflector does: one handler's failure is not the others'.
        this.#options.logger?.error({ err }, "cache handler threw");
      }
    }
  }

  /** The inherited objects that the own watch does not hold (each once). */
  *#inheritedOnly(): Generator<DeploymentObject> {
    const seen = new Set<string>();
    for (const share of this.#inherited.values())
      for (const obj of share.list()) {
        const key = objectKey(refOf(obj));
        if (seen.has(key) || super.get(refOf(obj)) !== undefined) continue;
        seen.add(key);
        yield obj;
      }
  }

  override subscribe(handlers: ReflectorHandlers<DeploymentObject>): () => void {
    this.#handlers.add(handlers);
    // The own watch's events, seen through the union, once for every reader (an add ends a
    // transit once): an object it adds that an inherited watch held or that was in transit was
    // in the cache already (an update), one it deletes that an inherited watch holds stays.
    this.#ownEvents ??= super.subscribe({
      onAdd: (obj, key) => {
        const inherited = this.#inheritedGet(refOf(obj)) ?? this.#transit.arrived(refOf(obj));
        this.#emit((h) => (inherited ? h.onUpdate?.(inherited, obj) : h.onAdd?.(obj, key)));
      },
      onUpdate: (old, obj) => this.#emit((h) => h.onUpdate?.(old, obj)),
      onDelete: (obj) => {
        const inherited = this.#inheritedGet(refOf(obj));
        this.#emit((h) => (inherited ? h.onUpdate?.(obj, inherited) : h.onDelete?.(obj)));
      },
    });
    return () => {
      this.#handlers.delete(handlers);
    };
  }

  /** Whether `ref` is in transit: not in the cache, a claimant still, and maybe back soon. */
  inTransit(ref: ObjectRef): boolean {
    return this.#transit.has(ref);
  }

  override get(ref: ObjectRef): DeploymentObject | undefined {
    return super.get(ref) ?? (this.#inherited.size > 0 ? this.#inheritedGet(ref) : undefined);
  }

  override list(): DeploymentObject[] {
    const own = super.list();
    return this.#inherited.size === 0 ? own : [...own, ...this.#inheritedOnly()];
  }

  /** The cached objects under `value` of `index`; for the claim index, those in transit too (see the module comment). */
  override byIndex(index: string, value: string): DeploymentObject[] {
    const own = super.byIndex(index, value);
    if (this.#inherited.size === 0 && this.#transit.size === 0) return own;
    const found = new Map(own.map((o) => [objectKey(refOf(o)), o]));
    for (const share of this.#inherited.values())
      for (const obj of share.byIndex(index, value)) {
        const key = objectKey(refOf(obj));
        if (!found.has(key) && super.get(refOf(obj)) === undefined) found.set(key, obj);
      }
    if (index === CLAIM_INDEX)
      for (const [key, obj] of this.#transit.claiming(value)) if (!found.has(key)) found.set(key, obj);
    return [...found.values()];
  }

  override keysByIndex(index: string, value: string): string[] {
    if (this.#inherited.size === 0 && this.#transit.size === 0) return super.keysByIndex(index, value);
    return this.byIndex(index, value).map((o) => objectKey(refOf(o)));
  }

  override keysWhere(test: (obj: DeploymentObject) => boolean): string[] {
    const own = super.keysWhere(test);
    if (this.#inherited.size === 0) return own;
    for (const obj of this.#inheritedOnly()) if (test(obj)) own.push(objectKey(refOf(obj)));
    return own;
  }

  override get size(): number {
    if (this.#inherited.size === 0) return super.size;
    let size = super.size;
    for (const _ of this.#inheritedOnly()) size += 1;
    return size;
  }

  override async patchStatus(
    ref: ObjectRef,
    status: DeploymentResourceStatus,
    signal: AbortSignal,
    resourceVersion?: string,
  ): Promise<DeploymentObject> {
    return this.#observed(await super.patchStatus(ref, status, signal, resourceVersion));
  }

  override async addFinalizer(obj: DeploymentObject, finalizer: string, signal: AbortSignal) {
    return this.#observed(await super.addFinalizer(obj, finalizer, signal));
  }

  override async removeFinalizer(obj: DeploymentObject, finalizer: string, signal: AbortSignal) {
    return this.#observed(await super.removeFinalizer(obj, finalizer, signal));
  }

  /** A write's answer cached by the inherited watch that holds it too (the own one cached it). */
  #observed(obj: DeploymentObject): DeploymentObject {
    for (const share of this.#inherited.values()) share.observe(obj);
    return obj;
  }
}
