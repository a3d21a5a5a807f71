/**
 * Time, and the work under way it bounds.
 *
 * Time as a port: everything in the runtime that waits or measures goes through a {@link Clock},
 * so unit tests drive time by hand (vitest fake timers or a manual clock) instead of sleeping.
 * The service's client takes the part it needs ({@link ApiClock}: it reads `now()` and waits with
 * `sleep`), so tests of the rate limit and retry back-off run on a manual clock too; any `Clock`
 * can be passed as one, and {@link systemApiClock} is its real, monotonic one.
 *
 * Work under way and what bounds it: the signal that stops it, the deadline it is told, and the
 * time it waited on this process's own pacing, which its deadline does not count.
 *
 * Signals: {@link untilAborted} waits on something until a signal says to stop; {@link
 * followSignal} gives work a signal of its own that follows its caller's (a reconcile's under the
 * controller's halt, a request's under its reconcile's). Both, and every `sleep`, wait on a signal
 * through {@link onAbort}: one listener on it however many wait.
 *
 * Deadline: the time a reconcile has left, told to whatever waits inside it. The controller runs each
 * reconcile {@link withinDeadline}; a wait that may be long and is this process's own (a token of
 * a connection's rate limit) asks {@link currentDeadline} first, and rather than hold the
 * reconcile's worker until the deadline it gives the worker back and has the key come again when
 * the wait would be over ({@link DeferredError}), holding what it waited for under the
 * deadline's `holder` (the reconcile's key) meanwhile.
 *
 * Pacing: time a piece of work spent waiting for this process's own rate limit, told to whoever
 * runs it. A connection's periodic read has a deadline (`--listing-deadline`) against a service
 * that hangs or never ends its listing. The read's calls also wait for tokens of the connection's
 * rate limit, behind the reconciles of the same connection: at scale (a share of 10,000
 * resources, a hundred calls, while thousands of creates hold the limit) that wait alone can pass
 * the deadline, and a missed deadline stops the connection's resources until a read succeeds. So
 * the read runs {@link whilePaced}, the transport tells {@link tellPaced} how long each call
 * waited for its token, and the deadline moves by that much: it bounds the service, not our own
 * pacing.
 */
// Node's module by `process.getBuiltinModule`, not `import` (docs/internals/architecture.md, "Node's
// own modules"): a command's start does without what its ES namespace would load.
const { AsyncLocalStorage } = process.getBuiltinModule("node:async_hooks");

/**
 * The longest a Node timer waits: a longer delay fires after 1 ms (with a TimeoutOverflowWarning).
 * A delay can come from a tenant (a `dms.dev/reconcile-interval` of `1000h`, a `Retry-After` of
 * years), so the real clocks wait at most this long (~24.8 days) and then run the timer: a key due
 * later comes back after this, not again and again at once.
 */
export const MAX_TIMER_MS = 2_147_483_647;

/** A delay as a Node timer can hold it: at least 0, at most {@link MAX_TIMER_MS}. */
const timerDelay = (ms: number): number => Math.min(Math.max(0, ms), MAX_TIMER_MS);

/** Cancels a timer started with {@link Clock.setTimer}; calling it twice, or after it fired, is harmless. */
export type CancelTimer = () => void;

/**
 * Source of time and timers.
 *
 * Contract: `now()` is milliseconds since the epoch and never goes backwards within one clock;
 * `setTimer` runs `fn` once, no earlier than `ms` from now (a real clock's timer: no earlier than
 * {@link MAX_TIMER_MS} when `ms` is longer), unless cancelled; `sleep` resolves after `ms` (the
 * same), or rejects with `signal.reason` as soon as `signal` aborts (at once if it already has).
 */
export interface Clock {
  now(): number;
  setTimer(ms: number, fn: () => void): CancelTimer;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/**
 * The real clock. It looks up `Date.now`/`setTimeout` on every call (never caches them), so
 * `vi.useFakeTimers()` drives it in tests. Timers are `unref`ed: a pending resync or backoff
 * timer must never keep a process alive that has otherwise finished.
 */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, fn) {
    const handle = setTimeout(fn, timerDelay(ms));
    handle.unref?.();
    return () => clearTimeout(handle);
  },
  sleep: (ms, signal) => sleepOn(systemClock, ms, signal),
};

/**
 * `sleep` built from `setTimer`: resolves after `ms` or rejects with `signal.reason` on abort.
 * Exported so other {@link Clock} implementations (test clocks) get identical abort semantics.
 * It waits on the signal through {@link onAbort}: thousands sleeping on one signal (a replica's
 * acknowledgements, retried every second while a release lasts) add no listener each.
 */
export function sleepOn(clock: Pick<Clock, "setTimer">, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal === undefined) {
      clock.setTimer(ms, resolve);
      return;
    }
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    let cancel: CancelTimer | undefined;
    const forget = onAbort(signal, () => {
      cancel?.();
      reject(signal.reason);
    });
    cancel = clock.setTimer(ms, () => {
      forget();
      resolve();
    });
  });
}

/**
 * The part of {@link Clock} the service's client uses, under the same contract, except that the client
 * reads only differences of `now()`: its own clock need not count from the epoch.
 */
export type ApiClock = Pick<Clock, "now" | "sleep">;

/** Node's timers, not `unref`ed: a CLI waiting out a `Retry-After` must stay alive until it can retry. */
const keptTimers: Pick<Clock, "setTimer"> = {
  setTimer(ms, fn) {
    const handle = setTimeout(fn, timerDelay(ms));
    return () => clearTimeout(handle);
  },
};

/** The client's real clock: monotonic (`performance.now()`, which no wall-clock step moves), kept timers. */
export const systemApiClock: ApiClock = {
  now: () => performance.now(),
  sleep: (ms, signal) => sleepOn(keptTimers, ms, signal),
};

/**
 * Milliseconds of CPU time the calling thread has used (`process.threadCpuUsage`; wall-clock
 * `performance.now()` where Node has no thread clock): what a budget of work done on the event
 * loop counts (a search of a tenant's text or schedules), so that a machine whose cores are busy
 * elsewhere, which stretches that work's wall-clock time, does not cut honest work short. On a
 * quiet machine the two agree.
 */
export const workMs: () => number =
  typeof process.threadCpuUsage === "function"
    ? () => {
        const { user, system } = process.threadCpuUsage();
        return (user + system) / 1000;
      }
    : () => performance.now();

/** Resolves when `promise` does or `signal` aborts, whichever comes first; rejects if `promise` does first. */
export function untilAborted(promise: Promise<unknown>, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal.aborted) return resolve();
    const forget = onAbort(signal, resolve);
    promise.then(
      () => {
        forget();
        resolve();
      },
      (error: unknown) => {
        forget();
        reject(error);
      },
    );
  });
}

/** A signal of its own that follows another; see {@link followSignal}. */
export interface FollowedSignal {
  readonly signal: AbortSignal;
  /** Aborts `signal` with `reason` (a timeout of the caller's); nothing once it is aborted. */
  abort(reason: unknown): void;
  /** Stops following the parent. Call it once the work ended. */
  release(): void;
}

/** What waits for a signal to abort, and the signal's one listener, kept on it (see {@link onAbort}). */
const WAITING = Symbol("dms.waiting");
interface Waiting {
  set: Set<() => void>;
  listener: () => void;
}
type Waited = AbortSignal & { [WAITING]?: Waiting };

/** How many wait on `signal` now through {@link onAbort} (its followers, its sleepers): for tests. */
export function followersOf(signal: AbortSignal): number {
  return (signal as Waited)[WAITING]?.set.size ?? 0;
}

/**
 * Runs `fn` once when `signal` aborts, unless the function returned is called first (which stops
 * it; calling it twice, or after `fn` ran, is harmless). `signal` must not have aborted yet (the
 * caller looks first): `fn` never runs for one that has.
 *
 * A signal carries one listener while anything waits on it, however much does (a reconcile's
 * requests, every watch under a manager's signal, thousands of sleeps under a replica's stop):
 * what waits is a set on the signal that this listener runs, in the order it began waiting, so
 * no listener count grows with it. Node's `addEventListener` and `removeEventListener` each look
 * through a signal's listeners, so one listener per waiter costs the square of their number: at
 * 7,500 sleepers each waking every second, about a third of every second on the event loop. The
 * last waiter to stop removes the listener, so a signal that never aborts is not kept alive by it.
 */
export function onAbort(signal: AbortSignal, fn: () => void): () => void {
  if (signal.aborted) return () => {};
  const waited = signal as Waited;
  let waiting = waited[WAITING];
  if (waiting === undefined) {
    const set = new Set<() => void>();
    // Unset by assigning undefined, not by delete, which would turn a long-lived signal's
    // object into a slow dictionary-mode one.
    const listener = () => {
      waited[WAITING] = undefined;
      for (const run of set) run();
      set.clear();
    };
    waiting = { set, listener };
    waited[WAITING] = waiting;
    signal.addEventListener("abort", listener, { once: true });
  }
  const current = waiting;
  // A wrapper of its own: the same `fn` given twice waits twice, and each stop ends its own.
  const run = () => fn();
  current.set.add(run);
  return () => {
    if (!current.set.delete(run) || current.set.size > 0) return;
    signal.removeEventListener("abort", current.listener);
    if (waited[WAITING] === current) waited[WAITING] = undefined;
  };
}

/**
 * A signal that aborts when `parent` does (with its reason) or when the caller aborts it; `release`
 * ends the link. The parent carries one listener however many follow it ({@link onAbort}); a
 * follower is aborted when the parent's listener runs, in the order of the parent's listeners
 * (`AbortSignal.any` marks its composites aborted before any listener runs).
 *
 * Not `AbortSignal.any`: a composite signal, once anything listens to it, registers itself with
 * each of its sources (a WeakRef in the source's set of dependants, and two FinalizationRegistry
 * entries), and these go only after a full collection found it dead. For a long-lived parent (the
 * controller's halt, a reconcile's signal under each of its requests) that is a few hundred bytes
 * per reconcile and per request, all of which outlive the young generation: about 4 % of what a
 * resync pass left for the old generation to collect, measured with `scale --profile`.
 */
export function followSignal(parent: AbortSignal | undefined): FollowedSignal {
  const own = new AbortController();
  const abort = (reason: unknown) => own.abort(reason);
  if (parent === undefined || parent.aborted) {
    if (parent?.aborted) own.abort(parent.reason);
    return { signal: own.signal, abort, release() {} };
  }
  const release = onAbort(parent, () => own.abort(parent.reason));
  return { signal: own.signal, abort, release };
}

/** A reconcile's deadline: how long it has left, and who it is for (its key). */
export interface Deadline {
  timeLeft(): number;
  holder: string;
  /**
   * Whether the reconcile has ended: work it started that outlives it (a connection's resync
   * loop, started by the connection's check) is then outside any deadline, not past this one.
   */
  ended?(): boolean;
}

const deadlines = new AsyncLocalStorage<Deadline>();

/**
 * A reconcile that gave its worker back before its work was done, because what it would wait for
 * comes later than its deadline (a token of its connection's rate limit): the key comes again
 * after `afterMs` as a follow-up, with no backoff and no failure counted. Throw it from a
 * reconciler ({@link currentDeadline} says how long a reconcile has left).
 */
export class DeferredError extends Error {
  override readonly name: string = "DeferredError";
  readonly afterMs: number;
  constructor(message: string, afterMs: number) {
    super(message);
    this.afterMs = afterMs;
  }
}

/** Runs `work` with `deadline` as the answer of {@link currentDeadline} inside it. */
export function withinDeadline<T>(deadline: Deadline, work: () => T): T {
  return deadlines.run(deadline, work);
}

/** The deadline of the work under way; undefined outside any (or once its reconcile ended). */
export function currentDeadline(): Deadline | undefined {
  const deadline = deadlines.getStore();
  return deadline?.ended?.() ? undefined : deadline;
}

const ledger = new AsyncLocalStorage<(waitedMs: number) => void>();

/** Runs `work`, calling `onPaced` with each wait for a token of the rate limit made inside it. */
export function whilePaced<T>(onPaced: (waitedMs: number) => void, work: () => Promise<T>): Promise<T> {
  return ledger.run(onPaced, work);
}

/** Tells the work under way (if it runs {@link whilePaced}) that it waited `waitedMs` for a token. */
export function tellPaced(waitedMs: number): void {
  if (waitedMs > 0) ledger.getStore()?.(waitedMs);
}
