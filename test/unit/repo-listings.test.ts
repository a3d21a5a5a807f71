/**
 * RepoListings shares one forge listing among concurrent callers; each caller's own AbortSignal
 * bounds only its own wait. The service is a small in-memory forge (`ForgeRepos`) whose listing
 * the test settles by hand.
 */
import { describe, expect, it } from "vitest";
import type { ForgeRepo } from "../../src/api/wire.ts";
import { RepoListings } from "../../src/reconcile/inputs.ts";
import type { ForgeRepos } from "../../src/reconcile/ports.ts";
import { systemClock } from "../../src/runtime/clock.ts";

const REPO: ForgeRepo = {
  host_integration_id: "i-1",
  id: 1,
  owner: "acme",
  name: "agent",
  url: "https://github.com/acme/agent",
  default_branch: "main",
};

/** A service whose listings stay pending until the test settles them. */
function pendingService() {
  const calls: Array<{ signal: AbortSignal; settle: (repos: ForgeRepo[]) => void }> = [];
  const service: ForgeRepos = {
    listRepos: (_id, signal) =>
      new Promise((resolve, reject) => {
        calls.push({ signal, settle: resolve });
        signal.addEventListener("abort", () => reject(signal.reason), { once: true });
      }),
  };
  return { service, calls };
}

describe("RepoListings", () => {
  it("a caller that gives up does not fail the others waiting for the same listing", async () => {
    const { service, calls } = pendingService();
    const listings = new RepoListings(service, systemClock, 60_000);
    const first = new AbortController();
    const firstWait = listings.list("i-1", first.signal);
    const secondWait = listings.list("i-1", new AbortController().signal);
    const timedOut = new Error("first reconcile timed out");
    first.abort(timedOut);
    await expect(firstWait).rejects.toBe(timedOut);
    calls[0]?.settle([REPO]);
    await expect(secondWait).resolves.toEqual([REPO]);
    expect(calls).toHaveLength(1);
    // Kept for the TTL: a later caller costs no listing.
    await expect(listings.list("i-1", new AbortController().signal)).resolves.toEqual([REPO]);
    expect(calls).toHaveLength(1);
  });

  it("when every caller gives up, the listing is stopped and the next caller starts a new one", async () => {
    const { service, calls } = pendingService();
    const listings = new RepoListings(service, systemClock, 60_000);
    const a = new AbortController();
    const b = new AbortController();
    const waits = [listings.list("i-1", a.signal), listings.list("i-1", b.signal)];
    a.abort(new Error("a gave up"));
    expect(calls[0]?.signal.aborted).toBe(false);
    b.abort(new Error("b gave up"));
    await Promise.allSettled(waits);
    expect(calls[0]?.signal.aborted).toBe(true);
    const next = listings.list("i-1", new AbortController().signal);
    expect(calls).toHaveLength(2);
    calls[1]?.settle([REPO]);
    await expect(next).resolves.toEqual([REPO]);
  });
});
