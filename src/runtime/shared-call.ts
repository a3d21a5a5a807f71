/**
 * One call shared by every caller that asks for it while it runs (a listing, say), where each
 * caller waits only as long as its own AbortSignal allows.
 */

/** A call in flight and the callers waiting for it. */
interface Flight<T> {
  done: Promise<T>;
  /** Aborts the call: done once every caller waiting for it has given up. */
  abort: AbortController;
  waiting: number;
  settled: boolean;
}

/**
 * Shares one run of `call` among concurrent callers.
 *
 * Contract: `run(signal)` joins the call in flight or starts one. It resolves or rejects with the
 * call's outcome; when `signal` aborts first it rejects with the signal's reason for that caller
 * alone. The call itself runs under a signal of its own, aborted only once every caller waiting
 * for it has given up, and a new caller then starts a fresh call. A settled call is not reused:
 * the next `run` starts another (callers that want to keep a result keep it themselves).
 */
export class SharedCall<T> {
  readonly #call: (signal: AbortSignal) => Promise<T>;
  #flight: Flight<T> | undefined;

  constructor(call: (signal: AbortSignal) => Promise<T>) {
    this.#call = call;
  }

  /** True while a call is in flight. */
  get running(): boolean {
    return this.#flight !== undefined;
  }

  /** Joins the call in flight, or starts one; see the class contract. */
  run(signal: AbortSignal): Promise<T> {
    if (signal.aborted) return Promise.reject(signal.reason);
    const flight = this.#flight ?? this.#start();
    flight.waiting += 1;
    return new Promise<T>((resolve, reject) => {
      let waiting = true;
      const leave = () => {
        if (!waiting) return false;
        waiting = false;
        signal.removeEventListener("abort", onAbort);
        flight.waiting -= 1;
        return true;
      };
      const onAbort = () => {
        if (!leave()) return;
        if (flight.waiting === 0 && !flight.settled) {
          // Nobody waits for it any more: a new caller starts a call of its own.
          if (this.#flight === flight) this.#flight = undefined;
          flight.abort.abort(signal.reason);
        }
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      flight.done.then(
        (value) => {
          if (leave()) resolve(value);
        },
        (error: unknown) => {
          if (leave()) reject(error);
        },
      );
    });
  }

  #start(): Flight<T> {
    const abort = new AbortController();
    const flight: Flight<T> = { abort, waiting: 0, settled: false, done: Promise.resolve() as Promise<T> };
    // Set before the call starts: its settlement must see it, however soon that comes.
    this.#flight = flight;
    let call: Promise<T>;
    try {
      call = this.#call(abort.signal);
    } catch (error) {
      call = Promise.reject(error);
    }
    flight.done = call.finally(() => {
      flight.settled = true;
      if (this.#flight === flight) this.#flight = undefined;
    });
    flight.done.catch(() => {});
    return flight;
  }
}
