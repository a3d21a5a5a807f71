/**
 * Kubernetes Events (`events.k8s.io/v1`) about Deployment resources, deduplicated as client-go's
 * events broadcaster does (a repeat updates the Event's `series`, no new object for `kubectl
 * describe` to scroll through), limited per object with client-go's spam filter numbers (a burst
 * of 25 writes, then one every 5 minutes) and written in turns by namespace ({@link TurnGate}):
 * whatever a tenant makes its resources do, its Events cost the API server and etcd that much.
 */
import { createHash, randomInt } from "node:crypto";
import pino, { type Logger } from "pino";
import { cutToBytes, printableNote } from "../api/printable.ts";
import type { EventNote, EventsPort } from "../reconcile/ports.ts";
import { type CancelTimer, type Clock, systemClock } from "../runtime/clock.ts";
import { type KubeClient, PatchType, toMicroTime } from "./client.ts";
import { isNotFound } from "./errors.ts";
import { collectionPath, itemPath, type KubeObject, type ResourceType } from "./object.ts";

/** Event writes on the wire at once, of the client's 16 sockets, which status writes need too. */
export const EVENT_WRITES_AT_ONCE = 4;
/** Event writes waiting in all, in turns by namespace; past it a record is dropped (said at debug). */
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
 * What happened (`reason`, `action`: CamelCase words); `note`, for humans, comes redacted: the
 * recorder cuts it to {@link NOTE_LIMIT_BYTES}, and a value cut in two would escape a later redaction.
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
const EVENTS: ResourceType = { group: "events.k8s.io", version: "v1", plural: "events" };
/** The `reportingController` of every Event the operator writes. */
const REPORTING_CONTROLLER = "dms.dev/operator";

/**
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
   * Per object, least recently written first, its bucket as one number held in the map itself
   * (when it is full again, in ms from {@link #origin}: see {@link #allow}): no object each.
   */
  readonly #allowances = new Map<string, number>();
  readonly #origin: number;
  /** The next look for what an idle recorder still tracks in vain (see {@link #prune}), if any. */
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
        this.#log.debug(logged(regarding, input), "event dropped: too many events wait to be written");
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
      this.#log.debug(logged(regarding, event), "event dropped: the object's event budget is spent");
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
      this.#log.warn({ err, ...logged(regarding, event) }, "failed to record an event");
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
   * Forgets, a window after the last look (+1 ms: a repeat exactly a window on joins its series),
   * the series past the window and the objects whose bucket is full again, which changes nothing
   * a later record writes: with no write ({@link #write}) to forget them, an operator idle after
   * a burst kept up to `maxTracked` of each. Looks again a window later while any is tracked.
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
   * Takes one write from the object's bucket (client-go's spam filter, keyed by the object and this
   * recorder), refilled one per `spamRefillMs` up to `spamBurst`. At most `maxTracked` objects
   * are tracked; a forgotten one starts again with a full burst, as in client-go's LRU.
   */
  #allow(regarding: EventRegarding, now: number): boolean {
    // The uid names the object alone and is the cached object's own string: no key of its own.
    const key =
      regarding.uid ||
      JSON.stringify([regarding.apiVersion, regarding.kind, regarding.namespace, regarding.name, ""]);
    // The bucket holds spamBurst − (fullAt − now) / spamRefillMs writes while not full: a write is
    // allowed while fullAt − now ≤ (spamBurst − 1) × spamRefillMs, and takes one by moving fullAt
    // one refill later. An object not tracked has a full bucket (fullAt in the past).
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
   * Forgets the series last seen before `cutoffMs`, and the least recently seen beyond `maxTracked`;
   * stops at the first it keeps (in the order of last occurrence): no walk through every series.
   */
  #forgetOlderThan(cutoffMs: number): void {
    for (const [key, series] of this.#series) {
      if (series.lastObservedMs >= cutoffMs && this.#series.size <= this.#maxTracked) return;
      this.#series.delete(key);
    }
  }
}

/**
 * What makes two records one series: the object and everything the Event says, as a digest (a
 * note alone may be 1 KiB, and thousands of series are tracked).
 */
function seriesKey(regarding: EventRegarding, input: EventInput): string {
  const { namespace, kind, name } = regarding;
  const { type, reason, action, note } = input;
  const text = JSON.stringify([namespace, kind, name, regarding.uid ?? "", type, reason, action, note]);
  return createHash("sha256").update(text).digest("base64");
}

/** Events about Deployment resources; recording never blocks or fails a reconcile. */
export function eventsPort(recorder: Pick<KubeEventRecorder, "record">): EventsPort {
  return { record: (obj, event) => void recorder.record(regardingOf(obj, "Deployment"), event) };
}

/** The fields a log line about a record names. */
const logged = (r: EventRegarding, e: EventNote) => ({
  reason: e.reason,
  namespace: r.namespace,
  name: r.name,
});

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

/**
 * Event writes, beside the fair work queue (holding no worker), shared in time by the namespaces:
 * at most `atOnce` on the wire together, the waiting ones lined up by group (a namespace) and
 * started in turns, so a namespace with a thousand waiting delays another's by one turn; at most
 * `maxWaiting` waiting in all. Full, a write of a group whose line is shorter than the longest by
 * two or more takes the place of that line's newest write, which is not made; any other is not
 * made (their callers say so): a namespace's backlog fills the room only while no one else needs
 * it. (client-go's recorder has the same bounds, dropping what overflows; this adds the turns.)
 */
export class TurnGate {
  readonly #atOnce: number;
  readonly #maxWaiting: number;
  #running = 0;
  #waiting = 0;
  /** The waiting writes by group (started in their turn, or dropped for another group's), the first next. */
  readonly #lines = new Map<string, Waiting[]>();

  constructor(atOnce: number, maxWaiting: number) {
    this.#atOnce = Math.max(1, atOnce);
    this.#maxWaiting = maxWaiting;
  }

  /**
   * Runs `task` in `group`'s turn: resolves with its result, or `undefined` without running it
   * when full and no longer line gives up its place (at once), or when it gave up its own place.
   */
  run<T>(group: string, task: () => Promise<T>): Promise<T | undefined> {
    if (this.#running < this.#atOnce && this.#waiting === 0) return this.#start(task);
    if (this.#waiting >= this.#maxWaiting && !this.#makeRoom(group)) return Promise.resolve(undefined);
    this.#waiting += 1;
    return new Promise<T | undefined>((resolve, reject) => {
      const line = this.#lines.get(group) ?? [];
      const drop = () => resolve(undefined);
      line.push({ start: () => void this.#start(task).then(resolve, reject), drop });
      this.#lines.set(group, line);
    });
  }

  /**
   * Full: drops the newest waiting write of the longest line if it is longer by two or more than
   * `group`'s (which, one longer, stays no longer than it); false when none is. ≤ `maxWaiting` looks.
   */
  #makeRoom(group: string): boolean {
    const own = this.#lines.get(group)?.length ?? 0;
    let longest: [string, Waiting[]] | undefined;
    for (const entry of this.#lines) if (!longest || entry[1].length > longest[1].length) longest = entry;
    if (longest === undefined || longest[1].length < own + 2) return false;
    longest[1].pop()?.drop();
    if (longest[1].length === 0) this.#lines.delete(longest[0]);
    this.#waiting -= 1;
    return true;
  }

  /** Writes running and waiting now. */
  get load(): { running: number; waiting: number } {
    return { running: this.#running, waiting: this.#waiting };
  }

  async #start<T>(task: () => Promise<T>): Promise<T> {
    this.#running += 1;
    try {
      return await task();
    } finally {
      this.#running -= 1;
      this.#next();
    }
  }

  /** Starts the first group's first waiting write; that group goes to the back of the turns. */
  #next(): void {
    const first = this.#lines.entries().next();
    if (first.done) return;
    const [group, line] = first.value;
    const waiting = line.shift();
    this.#lines.delete(group);
    if (line.length > 0) this.#lines.set(group, line);
    this.#waiting -= 1;
    waiting?.start();
  }
}

type Waiting = { start(): void; drop(): void };
