/**
 * The time budget of a redaction: a deadline on the event loop's own CPU time (`workMs`: a
 * machine busy elsewhere does not cut an ordinary search short), {@link REDACT_BUDGET_MS} and
 * {@link REDACT_MS_PER_MIB} per MiB of text searched, looked at every few thousand steps of the
 * search. Past it the text is not shown ({@link RedactionBudgetError}, {@link UNSEARCHED}), never
 * shown unsearched.
 */
import { workMs } from "../../runtime/clock.ts";

/** Time (the thread's CPU time) one redaction may take before the text is withheld, besides {@link REDACT_MS_PER_MIB}. */
export const REDACT_BUDGET_MS = 250;
/**
 * Time allowed per MiB of text searched, on top of {@link REDACT_BUDGET_MS}: the search
 * is linear in the text for ordinary values, so a large text (an 8 MiB error body) gets time in
 * proportion, and only a crafted one (many values sharing their start in a text of it) runs out.
 */
export const REDACT_MS_PER_MIB = 1000;
/** What a caller shows instead of a text whose search ran out of time. */
export const UNSEARCHED = "(not shown: it could not be searched for secret values within its time budget)";

/** A budget for searching `chars` characters. */
export function budgetFor(chars: number): RedactionBudget {
  return new RedactionBudget(REDACT_BUDGET_MS + (chars / (1 << 20)) * REDACT_MS_PER_MIB);
}

/** The search ran past its time budget: the text must not be shown. */
export class RedactionBudgetError extends Error {
  override readonly name = "RedactionBudgetError";
}

/**
 * A deadline on `counter` (default the thread's CPU time, `workMs`), looked at every few thousand
 * steps of a search.
 */
export class RedactionBudget {
  readonly #deadline: number;
  readonly #counter: () => number;
  #steps = 0;
  constructor(ms = REDACT_BUDGET_MS, counter: () => number = workMs) {
    this.#counter = counter;
    this.#deadline = counter() + ms;
  }
  /** Counts `n` steps; throws {@link RedactionBudgetError} once the deadline has passed. */
  step(n = 1): void {
    this.#steps += n;
    if (this.#steps < 4096) return;
    this.#steps = 0;
    if (this.#counter() > this.#deadline)
      throw new RedactionBudgetError("redaction ran past its time budget");
  }
}
