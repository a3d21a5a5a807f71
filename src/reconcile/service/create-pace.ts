/**
 * Where a connection's creates spend their time ({@link CreatePace}): kept by the session's
 * writes (`writingThrough`, deployments-port.ts) and the create intent's status write.
 */
import type { Logger } from "pino";
import type { Clock } from "../../runtime/clock.ts";
import { whilePaced } from "../../runtime/clock.ts";
import { outsideReconcile } from "../../runtime/log.ts";

/** A part of a create whose time {@link CreatePace} keeps. */
export type CreatePart = "lookup" | "post" | "intent";

/**
 * Where a connection's creates spend their time: per part (the lookup by name before a create,
 * the create intent's status write, the POST), how many and how long, and of the service calls'
 * time how much was the wait for a token of the connection's rate limit (`--qps`). Said once a
 * minute at info while creates run, so that a team creating thousands of resources sees whether
 * the rate limit, the service or the API server sets their pace; nothing is kept per resource.
 */
export class CreatePace {
  readonly #clock: Clock;
  readonly #logger: Logger;
  #since: number;
  #parts = newParts();

  constructor(clock: Clock, logger: Logger) {
    this.#clock = clock;
    this.#logger = logger;
    this.#since = clock.now();
  }

  /** Runs `work` as the part `part` of a create, its time and its waits for a token counted. */
  async timed<T>(part: CreatePart, work: () => Promise<T>): Promise<T> {
    const started = this.#clock.now();
    let waitedMs = 0;
    try {
      return await whilePaced((ms) => {
        waitedMs += ms;
      }, work);
    } finally {
      const kept = this.#parts[part];
      kept.count += 1;
      kept.ms += this.#clock.now() - started;
      kept.waitedMs += waitedMs;
      this.#sayIfDue();
    }
  }

  /** Says what the last minute's creates spent, if a minute has passed and any POST was made. */
  #sayIfDue(): void {
    const now = this.#clock.now();
    if (now - this.#since < 60_000) return;
    const parts = this.#parts;
    const seconds = Math.round((now - this.#since) / 1000);
    this.#since = now;
    this.#parts = newParts();
    if (parts.post.count === 0) return;
    const mean = (ms: number, count: number) => (count === 0 ? 0 : Math.round(ms / count));
    const each = Object.fromEntries(
      Object.entries(parts).map(([part, p]) => [
        part,
        { count: p.count, meanMs: mean(p.ms, p.count), meanRateLimitWaitMs: mean(p.waitedMs, p.count) },
      ]),
    );
    // The connection's line, not the resource's whose create ended the minute.
    outsideReconcile(() =>
      this.#logger.info({ creates: each, seconds }, "creates through this connection: where their time went"),
    );
  }
}

function newParts(): Record<CreatePart, { count: number; ms: number; waitedMs: number }> {
  return {
    lookup: { count: 0, ms: 0, waitedMs: 0 },
    intent: { count: 0, ms: 0, waitedMs: 0 },
    post: { count: 0, ms: 0, waitedMs: 0 },
  };
}
