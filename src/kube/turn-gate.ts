/**
 * Writes that run beside the fair work queue (an Event recorded by a reconcile is written after
 * it, holding no worker) shared in time by the namespaces that ask for them: at most `atOnce` on
 * the wire together, the waiting ones lined up by group (a namespace) and started in turns, one
 * group's next after each other group's, so a namespace with a thousand waiting delays another's
 * by one turn, not a thousand writes; at most `maxWaiting` waiting in all. Full, a write of a
 * group whose line is shorter than the longest by two or more takes the place of that line's
 * newest write, which is not made; any other is not made (their callers say so): a namespace's
 * backlog fills the room only while no one else needs it, never keeps another namespace out.
 * Kubernetes' own recorder writes one Event at a time from a queue that drops what overflows; this
 * one keeps the same bounds and adds the turns and the shares.
 */
export class TurnGate {
  readonly #atOnce: number;
  readonly #maxWaiting: number;
  #running = 0;
  #waiting = 0;
  /** The waiting writes by group, the groups in turn order (the first is next). */
  readonly #lines = new Map<string, Waiting[]>();

  constructor(atOnce: number, maxWaiting: number) {
    this.#atOnce = Math.max(1, atOnce);
    this.#maxWaiting = maxWaiting;
  }

  /**
   * Runs `task` in `group`'s turn: resolves with its result, or `undefined` without running it
   * when {@link TurnGate} holds `maxWaiting` waiting and no longer line gives up its place (at
   * once), or when it gave up its own place to another group's write.
   */
  run<T>(group: string, task: () => Promise<T>): Promise<T | undefined> {
    if (this.#running < this.#atOnce && this.#waiting === 0) return this.#start(task);
    if (this.#waiting >= this.#maxWaiting && !this.#makeRoom(group)) return Promise.resolve(undefined);
    this.#waiting += 1;
    return new Promise<T | undefined>((resolve, reject) => {
      const line = this.#lines.get(group) ?? [];
      line.push({
        start: () => void this.#start(task).then(resolve, reject),
        drop: () => resolve(undefined),
      });
      this.#lines.set(group, line);
    });
  }

  /**
   * Full: drops the newest waiting write of the longest line if it is longer by two or more than
   * `group`'s (so that `group`'s, one longer, stays shorter than or as long as it); false when
   * none is. One look at each group waiting: ≤ `maxWaiting`.
   */
  #makeRoom(group: string): boolean {
    const own = this.#lines.get(group)?.length ?? 0;
    let longest: Waiting[] | undefined;
    let longestGroup = "";
    for (const [name, line] of this.#lines)
      if (longest === undefined || line.length > longest.length) {
        longest = line;
        longestGroup = name;
      }
    if (longest === undefined || longest.length < own + 2) return false;
    longest.pop()?.drop();
    if (longest.length === 0) this.#lines.delete(longestGroup);
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

/** A write waiting its group's turn: started in it, or dropped to make room for another group's. */
interface Waiting {
  start(): void;
  drop(): void;
}
