/**
 * RepoListings shares one forge listing among concurrent callers; each caller's own AbortSignal
 * bounds only its own wait. The service is a small in-memory forge (`ForgeRepos`) whose listing
 * the test settles by hand.
 */
import { describe, expect, it } from "vitest";
import type { ForgeRepo } from "../../src/api/wire.ts";
import type { ForgeRepos } from "../../src/reconcile/ports.ts";
import { KEPT_REPOS, RepoListings } from "../../src/reconcile/repo-listings.ts";
import { systemClock } from "../../src/runtime/clock.ts";
import { ManualClock } from "../support/manual-clock.ts";

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

  it("keeps at most KEPT_REPOS repositories over its listings: the expired, then the oldest, go first", async () => {
    // The integration id is a tenant's, and its service may answer any id with a large listing.
    const clock = new ManualClock({ start: 0 });
    const asked: string[] = [];
    const sizes: Record<string, number> = {
      small: 10,
      half: KEPT_REPOS / 2,
      other: KEPT_REPOS / 2,
      huge: KEPT_REPOS + 1,
    };
    const service: ForgeRepos = {
      listRepos: async (id) => {
        asked.push(id);
        return Array.from({ length: sizes[id] ?? 0 }, (_, i) => ({ ...REPO, id: i, name: `r${i}` }));
      },
    };
    const listings = new RepoListings(service, clock, 60_000);
    const list = (id: string) => listings.list(id, new AbortController().signal);
    await list("small");
    clock.advance(61_000);
    // Expired: dropped when the next listing is kept (not only when asked for again).
    await list("half");
    await list("half");
    expect(asked).toEqual(["small", "half"]);
    // Two halves fit; a third listing drops the oldest kept.
    await list("other");
    await list("small");
    await list("other");
    await list("small");
    expect(asked).toEqual(["small", "half", "other", "small"]);
    await list("half");
    expect(asked.at(-1)).toBe("half");
    // One listing larger than the bound is used, never kept.
    await list("huge");
    await list("huge");
    expect(asked.filter((id) => id === "huge")).toHaveLength(2);
  });

  it("forgets each integration's call once it settled, or every caller gave up: a tenant may name any number", async () => {
    const { service, calls } = pendingService();
    const listings = new RepoListings(service, new ManualClock(), 60_000);
    const listed = Array.from({ length: 100 }, (_, i) =>
      listings.list(`i-${i}`, new AbortController().signal),
    );
    const given = new AbortController();
    const givenUp = listings.list("i-given-up", given.signal);
    expect(listings.listing).toBe(101);
    for (const call of calls.slice(0, 100)) call.settle([REPO]);
    await Promise.all(listed);
    given.abort(new Error("gone"));
    await expect(givenUp).rejects.toThrow("gone");
    expect(listings.listing).toBe(0);
  });
});
