/**
 * Writes that run beside the fair work queue (an Event recorded by a reconcile is written after
 * it, holding no worker) shared in time by the namespaces that ask for them: at most `atOnce` on
 * the wire together, the waiting ones lined up by group (a namespace) and started in turns, one
 * group's next after each other group's, so a namespace with a thousand waiting delays another's
 * by one turn, not a thousand writes; at most `maxWaiting` waiting in all, past which a write is
 * not made (its caller says so). Kubernetes' own recorder writes one Event at a time from a
 * queue that drops what overflows; this one keeps the same bounds and adds the turns.
 */
export class TurnGate {
  readonly #atOnce: number;
  readonly #maxWaiting: number;
  #running = 0;
  #waiting = 0;
  /** The waiting starts by group, the groups in turn order (the first is next). */
  readonly #lines = new Map<string, Array<() => void>>();

  constructor(atOnce: number, maxWaiting: number) {
    this.#atOnce = Math.max(1, atOnce);
    this.#maxWaiting = maxWaiting;
  }

  /**
   * Runs `task` in `group`'s turn: resolves with its result, or `undefined` at once, without
   * running it, when {@link TurnGate} already holds `maxWaiting` waiting.
   */
  run<T>(group: string, task: () => Promise<T>): Promise<T | undefined> {
    if (this.#running < this.#atOnce && this.#waiting === 0) return this.#start(task);
    if (this.#waiting >= this.#maxWaiting) return Promise.resolve(undefined);
    this.#waiting += 1;
    return new Promise<T>((resolve, reject) => {
      const line = this.#lines.get(group) ?? [];
      line.push(() => void this.#start(task).then(resolve, reject));
      this.#lines.set(group, line);
    });
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
    const start = line.shift();
    this.#lines.delete(group);
    if (line.length > 0) this.#lines.set(group, line);
    this.#waiting -= 1;
    start?.();
  }
}
