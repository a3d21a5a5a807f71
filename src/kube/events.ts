/**
 * Kubernetes Events (`events.k8s.io/v1`) about Deployment resources, deduplicated the way
 * client-go's events broadcaster does it: a repeat of the same event updates the existing Event's
 * `series` instead of creating one more object for `kubectl describe` to scroll through.
 *
 * Writes are also limited per object, with client-go's EventCorrelator spam filter numbers: a
 * burst of 25 Events (creates and series patches alike) per object and source, then one more
 * every 5 minutes. Whatever a tenant makes its resource do, its Events cost the API server and
 * etcd at most that much; the records past it are dropped (a repeat still counts in its series).
 */
import { createHash, randomInt } from "node:crypto";
import pino, { type Logger } from "pino";
import { cutToBytes, printableNote } from "../api/printable.ts";
import type { EventNote, EventsPort } from "../reconcile/ports.ts";
import { type CancelTimer, type Clock, systemClock } from "../runtime/clock.ts";
import { type KubeClient, PatchType } from "./client.ts";
import { isNotFound } from "./errors.ts";
import { collectionPath, itemPath, type KubeObject, type ResourceType, toMicroTime } from "./object.ts";
import { TurnGate } from "./turn-gate.ts";

/**
 * Event writes on the wire at once, of the client's 16 sockets: Events are written beside the
 * fair queue, and a namespace's thousand would otherwise hold the sockets every other
 * namespace's status writes wait for.
 */
export const EVENT_WRITES_AT_ONCE = 4;
/**
 * Event writes waiting in all, in turns by namespace; past it a record is dropped (said at debug),
 * the newest of the namespace waiting most when another namespace's needs its place (turn-gate.ts).
 */
export const EVENT_WRITES_WAITING = 1_000;

/** The object an Event is about. `namespace` is `""` for a cluster-scoped object. */
export interface EventRegarding {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid?: string;
  resourceVersion?: string;
}

/**
 * What happened. `reason` and `action` are short CamelCase words; `note` is for humans, already
 * redacted of secret values: the recorder cuts it to {@link NOTE_LIMIT_BYTES}, and a value cut
 * in two would escape a redaction made afterwards.
 */
export type EventInput = EventNote;

/** The API server refuses notes longer than this many bytes. */
export const NOTE_LIMIT_BYTES = 1024;

/** `note` cut to at most {@link NOTE_LIMIT_BYTES} UTF-8 bytes, on a character boundary, marked with `…`. */
export function truncateNote(note: string): string {
  return cutToBytes(note, NOTE_LIMIT_BYTES);
}

/** Options of {@link KubeEventRecorder}. */
export interface KubeEventRecorderOptions {
  client: KubeClient;
  /** This instance, e.g. the pod name. */
  reportingInstance: string;
  /** A repeat within this long of the last occurrence joins the series; default 10 min. */
  dedupeWindowMs?: number;
  /** Series tracked at most; the least recently seen are forgotten first. Default 4096. */
  maxTracked?: number;
  /** Event writes per object at once (the spam filter's burst). Default 25, as client-go. */
  spamBurst?: number;
  /** One more write per object every this many ms once the burst is spent. Default 5 min, as client-go. */
  spamRefillMs?: number;
  clock?: Clock;
  logger?: Logger;
}

interface Series {
  namespace: string;
  name: string;
  count: number;
  lastObservedMs: number;
  /** Repeats the spam filter dropped since the last write: added to the next patch's count. */
  dropped: number;
}

/** How long one Event write may take. */
const EVENT_WRITE_TIMEOUT_MS = 10_000;

/** The resource type `events.events.k8s.io`. */
const EVENTS: ResourceType = { group: "events.k8s.io", version: "v1", plural: "events" };
/** The `reportingController` of every Event the operator writes. */
const REPORTING_CONTROLLER = "dms.dev/operator";

/**
 * Writes `events.k8s.io/v1` Events about objects.
 *
 * Contract: `record` resolves once the Event is written or the write failed (failures are logged,
 * never thrown). The first occurrence of (object, type, reason, action, note) creates an Event; a
 * repeat within the window patches that Event's `series` (count, lastObservedTime); an Event that
 * expired on the server meanwhile is created again. Records of the same key are written in order.
 * Over any `t` ms, at most `spamBurst + t / spamRefillMs` writes are about one object; a record
 * past that resolves without a write (a dropped repeat is added to its series' next count).
 */
export class KubeEventRecorder {
  readonly #client: KubeClient;
  readonly #instance: string;
  readonly #windowMs: number;
  readonly #maxTracked: number;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #series = new Map<string, Series>();
  readonly #pending = new Map<string, Promise<void>>();
  /** The writes on the wire and waiting, shared by namespace in turns (see {@link TurnGate}). */
  readonly #gate: TurnGate;
  readonly #spamBurst: number;
  readonly #spamRefillMs: number;
  /**
   * Per object, in the order of last write (the least recently written is forgotten first), its
   * bucket as one number: when it is full again, in ms from {@link #origin} (see {@link #allow}).
   * A small integer, held in the map itself: no object and no boxed times for each of 4,096
   * objects.
   */
  readonly #allowances = new Map<string, number>();
  readonly #origin: number;
  /**
   * The next look for what an idle recorder still tracks in vain (see {@link #prune}): set once
   * anything is tracked, gone once nothing is.
   */
  #pruning: CancelTimer | undefined;

  constructor(options: KubeEventRecorderOptions) {
    this.#client = options.client;
    this.#instance = options.reportingInstance;
    this.#windowMs = options.dedupeWindowMs ?? 10 * 60_000;
    this.#maxTracked = options.maxTracked ?? 4096;
    this.#clock = options.clock ?? systemClock;
    this.#origin = this.#clock.now();
    this.#log = options.logger ?? pino({ enabled: false });
    this.#spamBurst = options.spamBurst ?? 25;
    this.#spamRefillMs = options.spamRefillMs ?? 5 * 60_000;
    this.#gate = new TurnGate(EVENT_WRITES_AT_ONCE, EVENT_WRITES_WAITING);
  }

  record(regarding: EventRegarding, event: EventInput): Promise<void> {
    const input = { ...event, note: truncateNote(printableNote(event.note)) };
    const key = seriesKey(regarding, input);
    const previous = this.#pending.get(key) ?? Promise.resolve();
    const next = previous.then(async () => {
      const written = await this.#gate.run(regarding.namespace, async () => {
        await this.#write(key, regarding, input);
        return true;
      });
      if (written === undefined)
        this.#log.debug(
          { reason: input.reason, namespace: regarding.namespace, name: regarding.name },
          "event dropped: too many events wait to be written",
        );
    });
    this.#pending.set(key, next);
    return next.finally(() => {
      if (this.#pending.get(key) === next) this.#pending.delete(key);
    });
  }

  async #write(key: string, regarding: EventRegarding, event: EventInput): Promise<void> {
    const now = this.#clock.now();
    const series = this.#series.get(key);
    if (!this.#allow(regarding, now)) {
      if (series && now - series.lastObservedMs <= this.#windowMs) series.dropped += 1;
      this.#log.debug(
        { reason: event.reason, namespace: regarding.namespace, name: regarding.name },
        "event dropped: the object's event budget is spent",
      );
      return;
    }
    try {
      if (series && now - series.lastObservedMs <= this.#windowMs) {
        const updated = await this.#patchSeries(series, now);
        if (updated) {
          // Kept in the order of last occurrence (see #forgetOlderThan).
          this.#series.delete(key);
          this.#series.set(key, series);
          return;
        }
      }
      this.#series.delete(key);
      this.#series.set(key, await this.#create(regarding, event, now));
    } catch (err) {
      this.#log.warn(
        { err, reason: event.reason, namespace: regarding.namespace, name: regarding.name },
        "failed to record an event",
      );
    } finally {
      this.#forgetOlderThan(now - this.#windowMs);
      this.#pruning ??= this.#clock.setTimer(this.#windowMs + 1, () => this.#prune());
    }
  }

  /** What is tracked: series, and objects with a bucket not full. */
  get tracked(): { series: number; objects: number } {
    return { series: this.#series.size, objects: this.#allowances.size };
  }

  /**
   * Forgets, once a window passed since the last look (a repeat exactly a window on still joins
   * its series), the series past the window and the objects whose bucket is full again: neither
   * changes what a later record writes (a repeat past the window creates an Event; an object not
   * tracked has a full bucket), and without a write to forget them (see {@link #write}), an
   * operator idle after a burst kept up to `maxTracked` of each for as long as it stayed idle.
   * Looks again a window later while anything is tracked.
   */
  #prune(): void {
    this.#pruning = undefined;
    const now = this.#clock.now();
    this.#forgetOlderThan(now - this.#windowMs);
    const at = now - this.#origin;
    for (const [key, fullAt] of this.#allowances) if (fullAt <= at) this.#allowances.delete(key);
    if (this.#series.size > 0 || this.#allowances.size > 0)
      this.#pruning = this.#clock.setTimer(this.#windowMs + 1, () => this.#prune());
  }

  /** Patches the series; false when the Event is gone (expired) and must be created again. */
  async #patchSeries(series: Series, now: number): Promise<boolean> {
    try {
      await this.#client.request({
        method: "PATCH",
        path: itemPath(EVENTS, series),
        contentType: PatchType.Merge,
        body: {
          series: { count: series.count + 1 + series.dropped, lastObservedTime: toMicroTime(new Date(now)) },
        },
        timeoutMs: EVENT_WRITE_TIMEOUT_MS,
        discardAnswer: true,
      });
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
    series.count += 1 + series.dropped;
    series.dropped = 0;
    series.lastObservedMs = now;
    return true;
  }

  async #create(regarding: EventRegarding, event: EventInput, now: number): Promise<Series> {
    const namespace = regarding.namespace || "default";
    // client-go's naming: the object's name and a hexadecimal "nanosecond" suffix; the random low
    // digits keep two instances (a leader hand-over) from colliding within one millisecond.
    const suffix = (BigInt(now) * 1_000_000n + BigInt(randomInt(1_000_000))).toString(16);
    const name = `${regarding.name.slice(0, 200)}.${suffix}`;
    await this.#client.request({
      method: "POST",
      path: collectionPath(EVENTS, namespace),
      body: {
        apiVersion: "events.k8s.io/v1",
        kind: "Event",
        metadata: { name, namespace },
        eventTime: toMicroTime(new Date(now)),
        reportingController: REPORTING_CONTROLLER,
        reportingInstance: this.#instance,
        action: event.action,
        reason: event.reason,
        note: event.note,
        type: event.type,
        regarding: {
          apiVersion: regarding.apiVersion,
          kind: regarding.kind,
          name: regarding.name,
          ...(regarding.namespace ? { namespace: regarding.namespace } : {}),
          ...(regarding.uid ? { uid: regarding.uid } : {}),
          ...(regarding.resourceVersion ? { resourceVersion: regarding.resourceVersion } : {}),
        },
      },
      timeoutMs: EVENT_WRITE_TIMEOUT_MS,
      discardAnswer: true,
    });
    return { namespace, name, count: 1, lastObservedMs: now, dropped: 0 };
  }

  /**
   * Takes one write from the object's bucket (client-go's spam filter: keyed by the object and
   * the source, which is this recorder), refilled one per `spamRefillMs` up to `spamBurst`.
   * At most `maxTracked` objects are tracked; a forgotten one starts again with a full burst, as
   * in client-go's LRU.
   */
  #allow(regarding: EventRegarding, now: number): boolean {
    // The object's uid names it alone, and is the cached object's own string: a bucket for each
    // of 4,096 objects then holds no key of its own (the JSON of the five fields was ~120 bytes).
    const key =
      regarding.uid ||
      JSON.stringify([regarding.apiVersion, regarding.kind, regarding.namespace, regarding.name, ""]);
    // A bucket of `spamBurst` writes refilled one per `spamRefillMs` holds, at `now`,
    // spamBurst − (fullAt − now) / spamRefillMs writes while not full: a write is allowed while
    // fullAt − now ≤ (spamBurst − 1) × spamRefillMs, and takes one by moving fullAt one refill
    // later. An object not tracked has a full bucket (fullAt in the past).
    const at = now - this.#origin;
    const fullAt = Math.max(this.#allowances.get(key) ?? at, at);
    const allowed = fullAt - at <= (this.#spamBurst - 1) * this.#spamRefillMs;
    this.#allowances.delete(key);
    this.#allowances.set(key, allowed ? fullAt + this.#spamRefillMs : fullAt);
    for (const oldest of this.#allowances.keys()) {
      if (this.#allowances.size <= this.#maxTracked) break;
      this.#allowances.delete(oldest);
    }
    return allowed;
  }

  /**
   * Forgets the series last seen before `cutoffMs`, and the least recently seen beyond
   * `maxTracked`.
   * The map is in the order of last occurrence, so this stops at the first series it keeps: a
   * write costs no walk through every series tracked.
   */
  #forgetOlderThan(cutoffMs: number): void {
    for (const [key, series] of this.#series) {
      if (series.lastObservedMs >= cutoffMs && this.#series.size <= this.#maxTracked) return;
      this.#series.delete(key);
    }
  }
}

/**
 * What makes two records one series: the object and everything the Event says. Held as a digest
 * (a note alone may be 1 KiB, and thousands of series are tracked); one record's inputs are the
 * same JSON text whenever they are equal.
 */
function seriesKey(regarding: EventRegarding, input: EventInput): string {
  const text = JSON.stringify([
    regarding.namespace,
    regarding.kind,
    regarding.name,
    regarding.uid ?? "",
    input.type,
    input.reason,
    input.action,
    input.note,
  ]);
  return createHash("sha256").update(text).digest("base64");
}

/** Events about Deployment resources; recording never blocks or fails a reconcile. */
export function eventsPort(recorder: Pick<KubeEventRecorder, "record">): EventsPort {
  return { record: (obj, event) => void recorder.record(regardingOf(obj, "Deployment"), event) };
}

/** What an event about one of the operator's own objects is regarding (`kind` when it has none). */
export function regardingOf(obj: KubeObject, kind: string): EventRegarding {
  return {
    apiVersion: obj.apiVersion ?? "dms.dev/v1alpha1",
    kind: obj.kind ?? kind,
    namespace: obj.metadata.namespace ?? "",
    name: obj.metadata.name,
    ...(obj.metadata.uid ? { uid: obj.metadata.uid } : {}),
    resourceVersion: obj.metadata.resourceVersion,
  };
}
