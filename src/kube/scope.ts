/**
 * Several reflectors of one resource type, one per watched namespace (or a single one for all
 * namespaces), seen as one cache. Sharding by `--namespaces` needs this: a ServiceAccount allowed
 * in three namespaces cannot list the resource across all of them.
 */
import type { Logger } from "pino";
import type { BackoffOptions } from "../runtime/backoff.ts";
import type { Clock } from "../runtime/clock.ts";
import type { KubeClient } from "./client.ts";
import type { KubeObject } from "./object.ts";
import { Reflector, type ReflectorHandlers, type ReflectorOptions } from "./reflector.ts";

/**
 * Which objects an operator instance watches. `namespaces` empty or absent means all namespaces;
 * `labelSelector` (Kubernetes selector syntax) narrows the Deployment resources.
 */
export interface WatchScope {
  namespaces?: readonly string[];
  labelSelector?: string;
}

/**
 * What a resource adapter reads and runs: one {@link Reflector}, or {@link ScopedReflectors} over
 * several. `get(namespace, name)` takes `""` for a cluster-scoped kind's namespace.
 */
export type ScopedCache<T extends KubeObject> = Pick<
  Reflector<T>,
  | "synced"
  | "hasSynced"
  | "run"
  | "get"
  | "list"
  | "size"
  | "byIndex"
  | "keysByIndex"
  | "keysWhere"
  | "observeWrite"
  | "retain"
  | "subscribe"
> & { values(): Iterable<T> };

/**
 * The cache of the scope `namespaces` (all namespaces when empty or absent): `make`'s one
 * reflector when the scope is one namespace or all, read without a layer between (as
 * controller-runtime's cache is a multi-namespace cache only when given several namespaces);
 * else their union, {@link ScopedReflectors}.
 */
export function scopedCache<T extends KubeObject>(
  namespaces: readonly string[] | undefined,
  make: (namespace: string | undefined) => Reflector<T>,
): ScopedCache<T> {
  const scopes = [...new Set(namespaces)];
  return scopes.length <= 1 ? make(scopes[0]) : new ScopedReflectors(scopes, make);
}

/**
 * A cache over one reflector per namespace, for a scope of several.
 *
 * Contract: `make` is called once per namespace of `namespaces`. `synced` resolves when every
 * reflector has synced; `run` runs them all until `signal` aborts; `get`/`list`
 * read the union of their caches; `subscribe` adds the same handlers to every reflector.
 */
export class ScopedReflectors<T extends KubeObject> implements ScopedCache<T> {
  readonly synced: Promise<void>;
  readonly #byNamespace: Map<string, Reflector<T>>;

  constructor(namespaces: readonly string[], make: (namespace: string) => Reflector<T>) {
    this.#byNamespace = new Map(namespaces.map((ns) => [ns, make(ns)]));
    this.synced = Promise.all([...this.#byNamespace.values()].map((r) => r.synced)).then(() => undefined);
    this.synced.catch(() => {});
  }

  /** True when every reflector has completed its first list. */
  hasSynced(): boolean {
    return [...this.#byNamespace.values()].every((r) => r.hasSynced());
  }

  /** Runs every reflector until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    await Promise.all([...this.#byNamespace.values()].map((r) => r.run(signal)));
  }

  /** The cached object `namespace/name`, if it is in scope and seen. */
  get(namespace: string, name: string): T | undefined {
    return this.#byNamespace.get(namespace)?.get(namespace, name);
  }

  /** Every cached object. */
  list(): T[] {
    return [...this.#byNamespace.values()].flatMap((r) => r.list());
  }

  /** Every cached object without a copy (see {@link Reflector.values}). */
  *values(): Generator<T> {
    for (const reflector of this.#byNamespace.values()) yield* reflector.values();
  }

  /** The number of cached objects. */
  get size(): number {
    let size = 0;
    for (const r of this.#byNamespace.values()) size += r.size;
    return size;
  }

  /** The cached objects under `value` of the secondary index `index` (see {@link ReflectorOptions.indexers}). */
  byIndex(index: string, value: string): T[] {
    return [...this.#byNamespace.values()].flatMap((r) => r.byIndex(index, value));
  }

  /** The cache keys under `value` of `index` (see {@link Reflector.keysByIndex}). */
  keysByIndex(index: string, value: string): string[] {
    return [...this.#byNamespace.values()].flatMap((r) => r.keysByIndex(index, value));
  }

  /** The cache keys of the objects for which `test` holds (see {@link Reflector.keysWhere}). */
  keysWhere(test: (obj: T) => boolean): string[] {
    return [...this.#byNamespace.values()].flatMap((r) => r.keysWhere(test));
  }

  /** Caches what a write answered, if newer than the cached object (see {@link Reflector.observeWrite}). */
  observeWrite(obj: T): void {
    this.#byNamespace.get(obj.metadata.namespace ?? "")?.observeWrite(obj);
  }

  /** Drops every object `keep` refuses from each namespace's cache (see {@link Reflector.retain}). */
  retain(keep: (obj: T) => boolean): void {
    for (const r of this.#byNamespace.values()) r.retain(keep);
  }

  /** Adds `handlers` to every reflector; returns the function that removes them. */
  subscribe(handlers: ReflectorHandlers<T>): () => void {
    const undo = [...this.#byNamespace.values()].map((r) => r.subscribe(handlers));
    return () => {
      for (const u of undo) u();
    };
  }
}

/** The watch settings every resource adapter passes to its reflectors. */
export interface WatchOptions {
  client: KubeClient;
  logger?: Logger;
  clock?: Clock;
  backoff?: BackoffOptions;
  /** Server-side watch timeout floor, seconds (tests use a few seconds to exercise restarts). */
  minWatchTimeoutSeconds?: number;
  /** The longest a watch may say nothing before it is resumed on a new connection (ms). */
  watchIdleMs?: number;
}

/** What one adapter's reflectors watch and how they decode it; the rest comes from {@link WatchOptions}. */
export type ReflectorSpec<T extends KubeObject> = Omit<
  ReflectorOptions<T>,
  "client" | "namespace" | keyof WatchOptions
>;

/**
 * Base of a resource adapter backed by one reflector per watched namespace (KubeDeployments,
 * KubeSecrets): builds the {@link scopedCache} from the shared {@link WatchOptions} and the
 * adapter's {@link ReflectorSpec}, and exposes the manager-facing `synced`, `hasSynced` and `run`.
 * Subclasses read through `cache`.
 */
export abstract class WatchedResource<T extends KubeObject> {
  protected readonly cache: ScopedCache<T>;

  constructor(namespaces: readonly string[] | undefined, options: WatchOptions, spec: ReflectorSpec<T>) {
    const { client, logger, clock, backoff, minWatchTimeoutSeconds, watchIdleMs } = options;
    // Only the settings given: an explicit undefined would hide the reflector's defaults.
    const shared = {
      ...(logger ? { logger } : {}),
      ...(clock ? { clock } : {}),
      ...(backoff ? { backoff } : {}),
      ...(minWatchTimeoutSeconds ? { minWatchTimeoutSeconds } : {}),
      ...(watchIdleMs ? { watchIdleMs } : {}),
    };
    this.cache = scopedCache(
      namespaces,
      (namespace) =>
        new Reflector<T>({ ...spec, ...shared, client, ...(namespace !== undefined ? { namespace } : {}) }),
    );
  }

  /** Resolves when every watched namespace has been listed once. */
  get synced(): Promise<void> {
    return this.cache.synced;
  }

  /** True when every watched namespace has been listed once. */
  hasSynced(): boolean {
    return this.cache.hasSynced();
  }

  /** Lists and watches until `signal` aborts (a manager runnable). */
  run(signal: AbortSignal): Promise<void> {
    return this.cache.run(signal);
  }
}
