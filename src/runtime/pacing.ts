/**
 * Time a piece of work spent waiting for this process's own rate limit, told to whoever runs it.
 *
 * A connection's periodic read has a deadline (`--listing-deadline`) against a service that hangs
 * or never ends its listing. The read's calls also wait for tokens of the connection's rate
 * limit, behind the reconciles of the same connection: at scale (a share of 10,000 resources, a
 * hundred calls, while thousands of creates hold the limit) that wait alone can pass the
 * deadline, and a missed deadline stops the connection's resources until a read succeeds. So the
 * read runs {@link whilePaced}, the transport tells {@link tellPaced} how long each call waited
 * for its token, and the deadline moves by that much: it bounds the service, not our own pacing.
 */
import { AsyncLocalStorage } from "node:async_hooks";

const ledger = new AsyncLocalStorage<(waitedMs: number) => void>();

/** Runs `work`, calling `onPaced` with each wait for a token of the rate limit made inside it. */
export function whilePaced<T>(onPaced: (waitedMs: number) => void, work: () => Promise<T>): Promise<T> {
  return ledger.run(onPaced, work);
}

/** Tells the work under way (if it runs {@link whilePaced}) that it waited `waitedMs` for a token. */
export function tellPaced(waitedMs: number): void {
  if (waitedMs > 0) ledger.getStore()?.(waitedMs);
}
