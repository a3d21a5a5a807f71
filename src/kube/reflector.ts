/**
 * A list+watch reflector with an in-memory cache, after kube-rs's watcher+reflector and client-go's
 * Reflector: list (a watch list, or by pages where the server offers none: `listing.ts`), then
 * watch from the list's resourceVersion with bookmarks; when a watch ends or fails, resume from
 * the last resourceVersion seen after a jittered exponential backoff; when that version is gone
 * (410), list again and emit the differences.
 */
import pino, { type Logger } from "pino";
import { Backoff, type BackoffOptions } from "../runtime/backoff.ts";
import { type Clock, systemClock } from "../runtime/clock.ts";
import { CacheIndexes } from "../runtime/compact.ts";
import { isRecord, keepEqualStrings } from "../runtime/json.ts";
import { objectKey } from "../runtime/queue-records.ts";
import { GoneError, KubeApiError } from "./errors.ts";
import {
  collectInitialEvent,
  InitialEventsCut,
  initialEventsEnd,
  ListChoice,
  type ListScope,
  listByPages,
  notServedHint,
  WATCH_IDLE_MS,
  WATCH_LIST_QUERY,
  watchError,
} from "./listing.ts";
import { collectionPath, isKubeObject, isNewerVersion, type KubeObject, refOf } from "./object.ts";

/**
 * Callbacks on cache changes. They run after the cache is updated, so a handler reading the cache
 * sees the new state. A handler that throws or rejects is logged and never stops the reflector.
 */
export interface ReflectorHandlers<T> {
  /** `key` is the cache's key of `obj` (`objectKey`), the very string the cache holds (a reflector gives it). */
  onAdd?(obj: T, key?: string): void | Promise<void>;
  onUpdate?(oldObj: T, newObj: T): void | Promise<void>;
  onDelete?(obj: T): void | Promise<void>;
}

/** Options of {@link Reflector}: what it lists and watches ({@link ListScope}), and how it keeps it. */
export interface ReflectorOptions<T extends KubeObject> extends ListScope {
  /**
   * Validates one object from the wire; `undefined` skips it (logged as invalid), `null` skips it
   * quietly (a valid object the adapter does not keep).
   */
  decode(raw: unknown): T | undefined | null;
  /**
   * Secondary indexes kept with the cache (client-go's Indexers): each function gives the index
   * values of an object, and {@link Reflector.byIndex} answers the objects under a value without
   * scanning the cache. Maintained before handlers run, so a handler sees them current.
   */
  indexers?: Record<string, (obj: T) => readonly string[]>;
  /** Server-side watch timeout: a random value in [n, 2n) seconds per watch (client-go); n = 300. */
  minWatchTimeoutSeconds?: number;
  /** The longest a watch may say nothing before it resumes on a new connection; {@link WATCH_IDLE_MS}. */
  watchIdleMs?: number;
  /** Restart backoff; default base 200 ms, max 30 s, half jitter (a restart never waits 0 ms). */
  backoff?: BackoffOptions;
  clock?: Clock;
  /** Random source for the watch timeout spread (and the backoff unless it brings its own). */
  random?: () => number;
  logger?: Logger;
}

/** A watch that stays open at least this long counts as healthy and resets the backoff. */
const HEALTHY_WATCH_MS = 5_000;

/**
 * The cache and its list+watch loop for one resource type in one scope (a namespace or all).
 *
 * Contract: `run(signal)` loops until `signal` aborts, then resolves (it never rejects). `synced`
 * resolves after the first complete list (rejects with the abort reason if stopped before; that
 * rejection is pre-handled so leaving it unobserved is harmless); `hasSynced()` says the same
 * synchronously. `get`/`list` read the cache (the last state seen, keyed `namespace/name`).
 * After a relist, handlers see exactly the difference from the previous cache: adds, updates
 * (a changed resourceVersion) and deletes.
 */
export class Reflector<T extends KubeObject> {
  readonly synced: Promise<void>;
  readonly #opts: ReflectorOptions<T>;
  readonly #cache = new Map<string, T>();
  readonly #indexes: CacheIndexes<T>;
  readonly #handlers = new Set<ReflectorHandlers<T>>();
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #backoff: Backoff;
  readonly #log: Logger;
  #resourceVersion: string | undefined;
  #hasSynced = false;
  /** A list is due (at the start, after a 410). */
  #needList = true;
  /** Whether the list due goes by a watch list or by pages. */
  readonly #lists = new ListChoice();
  readonly #syncing = Promise.withResolvers<void>();

  constructor(options: ReflectorOptions<T>) {
    this.#opts = options;
    this.#clock = options.clock ?? systemClock;
    this.#random = options.random ?? Math.random;
    const backoff = { baseMs: 200, maxMs: 30_000, jitter: 0.5, random: this.#random };
    this.#backoff = new Backoff({ ...backoff, ...options.backoff });
    this.#indexes = new CacheIndexes(options.indexers ?? {});
    this.#log = (options.logger ?? pino({ enabled: false })).child({
      reflector: options.resource.plural,
      namespace: options.namespace ?? "*",
    });
    this.synced = this.#syncing.promise;
    this.synced.catch(() => {});
  }

  /** True once the first list has filled the cache. */
  hasSynced(): boolean {
    return this.#hasSynced;
  }

  /** The cached object `namespace/name` (`name` for a cluster-scoped kind, whose namespace is ""). */
  get(namespace: string, name: string): T | undefined {
    return this.#cache.get(namespace ? `${namespace}/${name}` : name);
  }

  /** Every cached object. */
  list(): T[] {
    return [...this.#cache.values()];
  }

  /**
   * Every cached object, read in place (no copy): for a synchronous walk of a large cache, which
   * must not wait in between (the watch changes the cache under an iterator left open).
   */
  values(): IterableIterator<T> {
    return this.#cache.values();
  }

  /** The number of cached objects. */
  get size(): number {
    return this.#cache.size;
  }

  /** The cached objects whose indexer `index` gives `value`; `[]` when none (or no such index). */
  byIndex(index: string, value: string): T[] {
    const keys = this.#indexes.keys(index, value);
    const found: T[] = [];
    for (const key of keys) {
      const obj = this.#cache.get(key);
      if (obj) found.push(obj);
    }
    return found;
  }

  /**
   * The cache keys (`namespace/name`) of the objects under `value` of `index`: the index's own
   * strings, so a pass that enqueues thousands of keys makes none.
   */
  keysByIndex(index: string, value: string): string[] {
    return [...this.#indexes.keys(index, value)];
  }

  /** The cache keys of the objects for which `test` holds: the cache's own strings. */
  keysWhere(test: (obj: T) => boolean): string[] {
    const keys: string[] = [];
    for (const [key, obj] of this.#cache) if (test(obj)) keys.push(key);
    return keys;
  }

  /**
   * Puts what a write of this process answered into the cache, unless the cache already holds
   * that version or a newer one (client-go's mutation cache): the next read of the object sees
   * the write even before its watch event arrives. Handlers are not called: the watch event that
   * follows is the change notification. Versions are compared as etcd revisions; one that is not
   * a number is left to the watch.
   */
  observeWrite(obj: T): void {
    const key = objectKey(refOf(obj));
    const cached = this.#cache.get(key);
    if (!cached || !isNewerVersion(obj.metadata.resourceVersion, cached.metadata.resourceVersion)) return;
    this.#set(key, obj);
  }

  /** Drops from the cache every object `keep` refuses, telling no handler (for a cache no one reads yet). */
  retain(keep: (obj: T) => boolean): void {
    for (const [key, obj] of this.#cache) if (!keep(obj)) this.#delete(key);
  }

  /** The resourceVersion the next watch resumes from. */
  get resourceVersion(): string | undefined {
    return this.#resourceVersion;
  }

  /** Adds handlers; returns the function that removes them. */
  subscribe(handlers: ReflectorHandlers<T>): () => void {
    this.#handlers.add(handlers);
    return () => this.#handlers.delete(handlers);
  }

  /**
   * Lists and watches until `signal` aborts. Calling it again after it stopped resumes the watch
   * from the last resourceVersion (relisting only if that version expired meanwhile).
   */
  async run(signal: AbortSignal): Promise<void> {
    let attempt = 0;
    // A second run() after a stop resumes from the cache's resourceVersion, like a broken watch.
    this.#needList = !this.#hasSynced;
    while (!signal.aborted) {
      // The pause the server asked for (a 429's Retry-After): the backoff waits at least that.
      let asked = 0;
      try {
        if (this.#needList && this.#lists.byPages) await this.#relist(signal);
        const started = this.#clock.now();
        const events = await this.#watch(signal);
        const healthy = events > 0 || this.#clock.now() - started >= HEALTHY_WATCH_MS;
        attempt = healthy ? 0 : attempt + 1;
        this.#log.debug({ events }, "watch ended; resuming");
      } catch (err) {
        if (signal.aborted) break;
        if (err instanceof GoneError) {
          this.#log.info({ resourceVersion: this.#resourceVersion }, "resourceVersion expired; relisting");
          this.#needList = true;
        } else if (this.#needList && !this.#lists.byPages && this.#lists.fallsBack(err, this.#log)) {
          continue;
        } else {
          attempt += 1;
          asked = (err instanceof KubeApiError && err.retryAfterMs) || 0;
          const hint = notServedHint(err, this.#opts.resource);
          this.#log.warn({ err, attempt }, `list/watch failed${hint}; retrying with backoff`);
        }
      }
      try {
        await this.#clock.sleep(Math.max(asked, this.#backoff.delayMs(attempt)), signal);
      } catch {
        break;
      }
    }
    if (!this.#hasSynced) this.#syncing.reject(signal.reason);
  }

  /** A paged list into the cache (where the server offers no watch list, or its watch list went silent). */
  async #relist(signal: AbortSignal): Promise<void> {
    const { fresh, resourceVersion } = await listByPages(this.#opts, signal, (raw) => this.#decode(raw));
    this.#listed(fresh, resourceVersion);
  }

  /** The list is complete: the cache becomes `fresh` (handlers see the differences), the watch resumes at `resourceVersion`. */
  #listed(fresh: Map<string, T>, resourceVersion: string): void {
    this.#replace(fresh);
    this.#resourceVersion = resourceVersion;
    this.#needList = false;
    this.#lists.listed();
    if (!this.#hasSynced) {
      this.#hasSynced = true;
      this.#syncing.resolve();
    }
  }

  /**
   * Watches from the last resourceVersion, or (a list being due) as a watch list from the newest
   * state; resolves with the number of events seen when it ends.
   */
  async #watch(signal: AbortSignal): Promise<number> {
    const minTimeout = this.#opts.minWatchTimeoutSeconds ?? 300;
    const timeoutSeconds = Math.floor(minTimeout * (1 + this.#random()));
    let fresh = this.#needList ? new Map<string, T>() : undefined;
    const started = this.#clock.now();
    const stream = await this.#opts.client.stream({
      method: "GET",
      path: collectionPath(this.#opts.resource, this.#opts.namespace),
      query: {
        watch: true,
        ...(fresh ? WATCH_LIST_QUERY : { resourceVersion: this.#resourceVersion, allowWatchBookmarks: true }),
        timeoutSeconds,
        labelSelector: this.#opts.labelSelector,
        fieldSelector: this.#opts.fieldSelector,
      },
      ...(this.#opts.accept ? { accept: this.#opts.accept.watch } : {}),
      signal,
      // A client-side bound past the server's, so a half-open connection cannot hang the watch forever.
      timeoutMs: (timeoutSeconds + 30) * 1000,
      idleMs: this.#opts.watchIdleMs ?? WATCH_IDLE_MS,
    });
    let events = 0;
    for await (const event of stream) {
      if (signal.aborted) break;
      events += 1;
      if (!fresh) {
        this.#apply(event);
        continue;
      }
      const resourceVersion = initialEventsEnd(event);
      if (resourceVersion === undefined) collectInitialEvent(event, fresh, (raw) => this.#decode(raw));
      else {
        this.#listed(fresh, resourceVersion);
        fresh = undefined;
      }
    }
    if (fresh && !signal.aborted) {
      throw new InitialEventsCut(this.#clock.now() - started >= minTimeout * 1000);
    }
    return events;
  }

  #apply(event: unknown): void {
    if (!isRecord(event)) return;
    const { type, object } = event;
    if (type === "ERROR") throw watchError(object);
    if (type === "BOOKMARK") {
      const rv = isRecord(object) && isRecord(object.metadata) ? object.metadata.resourceVersion : undefined;
      if (typeof rv === "string") this.#resourceVersion = rv;
      return;
    }
    const obj = this.#decode(object);
    if (obj === null) {
      this.#drop(object);
      return;
    }
    if (!obj) return;
    this.#resourceVersion = obj.metadata.resourceVersion;
    const key = objectKey(refOf(obj));
    const old = this.#cache.get(key);
    if (type === "DELETED") {
      this.#delete(key);
      this.#emit((h) => h.onDelete?.(obj));
    } else if (type === "ADDED" || type === "MODIFIED") {
      // An event older than a write this process already cached is history the write includes.
      if (old && isNewerVersion(old.metadata.resourceVersion, obj.metadata.resourceVersion)) return;
      this.#set(key, obj);
      if (old) this.#emit((h) => h.onUpdate?.(old, obj));
      else this.#emit((h) => h.onAdd?.(obj, key));
    }
  }

  #set(key: string, obj: T): void {
    const old = this.#cache.get(key);
    // The strings the cache already holds stay: what an index or a recorder keeps from an earlier
    // version is then the cache's own copy, not one more of its own.
    if (old) keepEqualStrings(obj, old);
    this.#cache.set(key, obj);
    this.#indexes.update(key, old, obj);
  }

  #delete(key: string): void {
    const old = this.#cache.get(key);
    if (!old) return;
    this.#cache.delete(key);
    this.#indexes.update(key, old, undefined);
  }

  #replace(fresh: Map<string, T>): void {
    const previous = new Map(this.#cache);
    for (const key of previous.keys()) if (!fresh.has(key)) this.#delete(key);
    for (const [key, obj] of fresh) this.#set(key, obj);
    for (const [key, obj] of fresh) {
      const old = previous.get(key);
      if (!old) this.#emit((h) => h.onAdd?.(obj, key));
      else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) {
        this.#emit((h) => h.onUpdate?.(old, obj));
      }
    }
    for (const [key, old] of previous) {
      if (!fresh.has(key)) this.#emit((h) => h.onDelete?.(old));
    }
  }

  /** A watched object the adapter does not keep (any more): out of the cache, as if deleted. */
  #drop(raw: unknown): void {
    if (!isKubeObject(raw)) return;
    this.#resourceVersion = raw.metadata.resourceVersion;
    const key = objectKey(refOf(raw));
    const old = this.#cache.get(key);
    if (!old) return;
    this.#delete(key);
    this.#emit((h) => h.onDelete?.(old));
  }

  #decode(raw: unknown): T | undefined | null {
    const obj = this.#opts.decode(raw);
    if (obj === null) return null;
    if (!obj) {
      const meta = isRecord(raw) && isRecord(raw.metadata) ? raw.metadata : {};
      this.#log.warn(
        { namespace: meta.namespace, name: meta.name },
        "skipping an object that failed validation",
      );
    }
    return obj;
  }

  #emit(call: (handlers: ReflectorHandlers<T>) => void | Promise<void> | undefined): void {
    for (const handlers of this.#handlers) {
      try {
        const result = call(handlers);
        if (result instanceof Promise) {
          result.catch((err: unknown) => this.#log.error({ err }, "reflector handler rejected"));
        }
      } catch (err) {
        this.#log.error({ err }, "reflector handler threw");
      }
    }
  }
}
