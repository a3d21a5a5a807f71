// The rules of "may I trust this read" of what the service said (src/reconcile/service/freshness.ts),
// one table per rule, a reason per case.
import { describe, expect, it } from "vitest";
import type { DeploymentResourceStatus } from "../../src/crd/schema.ts";
import { type LookupFacts, type LookupRule, lookupTarget } from "../../src/reconcile/observe.ts";
import {
  type EntryState,
  entryAnswers,
  type ListingState,
  listingAnswers,
  startPass,
} from "../../src/reconcile/service/freshness.ts";

const NOW = 1_000_000;
const listing = (over: Partial<ListingState> = {}): ListingState => ({
  takenAt: NOW - 10_000,
  holds: 0,
  maxAgeMs: 60_000,
  ...over,
});

describe("listingAnswers", () => {
  it.each([
    { reason: "a listing younger than its maximum age answers", state: listing(), answers: true },
    {
      reason: "a listing exactly its maximum age old still answers",
      state: listing({ takenAt: NOW - 60_000 }),
      answers: true,
    },
    {
      reason: "a listing past its maximum age that nothing holds does not",
      state: listing({ takenAt: NOW - 60_001 }),
      answers: false,
    },
    {
      reason: "a listing a pass holds answers however old (the pass reads it however long it takes)",
      state: listing({ takenAt: NOW - 3_600_000, holds: 1 }),
      answers: true,
    },
    {
      reason: "no listing yet answers nothing",
      state: listing({ takenAt: Number.NEGATIVE_INFINITY }),
      answers: false,
    },
  ])("$reason", ({ state, answers }) => {
    expect(listingAnswers(state, NOW)).toBe(answers);
  });
});

describe("entryAnswers", () => {
  const entry = (over: Partial<EntryState> = {}): EntryState => ({
    pollUntaken: false,
    seenAt: undefined,
    ...over,
  });
  it.each([
    {
      reason: "without a bound, a fresh listing answers for its entry",
      state: listing(),
      entry: entry(),
      withinMs: undefined,
      answers: true,
    },
    {
      reason: "without a bound, a stale listing does not",
      state: listing({ takenAt: NOW - 120_000 }),
      entry: entry({ seenAt: NOW }),
      withinMs: undefined,
      answers: false,
    },
    {
      reason: "a rollout being polled takes an entry the service answered within the bound",
      state: listing({ takenAt: NOW - 120_000 }),
      entry: entry({ seenAt: NOW - 9_000 }),
      withinMs: 10_000,
      answers: true,
    },
    {
      reason: "a rollout being polled does not take an entry answered before the bound, fresh listing or not",
      state: listing({ holds: 1 }),
      entry: entry({ seenAt: NOW - 11_000 }),
      withinMs: 10_000,
      answers: false,
    },
    {
      reason: "an entry never answered for on its own is as old as the listing",
      state: listing({ takenAt: NOW - 5_000 }),
      entry: entry(),
      withinMs: 10_000,
      answers: true,
    },
    {
      reason: "a poll read no reconcile took answers however long the queue held the key",
      state: listing({ takenAt: NOW - 3_600_000 }),
      entry: entry({ pollUntaken: true, seenAt: NOW - 600_000 }),
      withinMs: 10_000,
      answers: true,
    },
  ])("$reason", ({ state, entry: e, withinMs, answers }) => {
    expect(entryAnswers(state, e, NOW, withinMs)).toBe(answers);
  });
});

describe("lookupTarget", () => {
  const reconciling = [
    { type: "Reconciling", status: "True", reason: "RolloutInProgress", message: "", lastTransitionTime: "" },
  ] as DeploymentResourceStatus["conditions"];
  const settled: DeploymentResourceStatus = { observedGeneration: 2, deploymentId: "d" };
  const facts = (over: Partial<LookupFacts> = {}): LookupFacts => ({
    status: settled,
    generation: 2,
    requestedAt: null,
    intervalMs: undefined,
    pollMs: 5_000,
    ...over,
  });
  it.each<{ reason: string; facts: LookupFacts; rule: LookupRule }>([
    {
      reason: "a settled resource reads the resync's listing: nothing live, no bound",
      facts: facts(),
      rule: { live: false, liveName: false },
    },
    {
      reason:
        "a new resource (no id recorded) finds its name in the listing: adoption and the check before a create cost no call",
      facts: facts({ status: {}, generation: 1 }),
      rule: { live: true, liveName: false },
    },
    {
      reason: "a changed spec asks the service about the recorded deployment",
      facts: facts({ generation: 3 }),
      rule: { live: true, liveName: false },
    },
    {
      reason: "a requested reconcile asks the service about both the id and the name",
      facts: facts({ requestedAt: "2026-01-01T00:00:00Z" }),
      rule: { live: true, liveName: true },
    },
    {
      reason: "a request already handled asks nothing live",
      facts: facts({
        requestedAt: "2026-01-01T00:00:00Z",
        status: { ...settled, lastHandledReconcileAt: "2026-01-01T00:00:00Z" },
      }),
      rule: { live: false, liveName: false },
    },
    {
      reason:
        "a pending create asks about the name (the listing may lag) and takes entries of two poll periods",
      facts: facts({ status: { ...settled, createRequestedAt: "2026-01-01T00:00:00Z" } }),
      rule: { live: false, liveName: true, withinMs: 10_000 },
    },
    {
      reason: "a rollout in progress takes the poller's entry of the last two poll periods",
      facts: facts({ status: { ...settled, conditions: reconciling } }),
      rule: { live: false, liveName: false, withinMs: 10_000 },
    },
    {
      reason:
        "a revision read DEPLOYED that the deployment did not show active: the look that decides reads the deployment anew",
      facts: facts({
        status: {
          ...settled,
          conditions: reconciling,
          latestRevisionId: "r2",
          latestRevisionStatus: "DEPLOYED",
          activeRevisionId: "r1",
        },
      }),
      rule: { live: true, liveName: false, withinMs: 10_000 },
    },
    {
      reason: "a resource with its own interval takes no entry older than half of it",
      facts: facts({ intervalMs: 60_000 }),
      rule: { live: false, liveName: false, withinMs: 30_000 },
    },
    {
      reason: "in progress with a short interval: the tighter bound wins",
      facts: facts({ intervalMs: 8_000, status: { ...settled, conditions: reconciling } }),
      rule: { live: false, liveName: false, withinMs: 4_000 },
    },
  ])("$reason", ({ facts: f, rule }) => {
    expect(lookupTarget(f)).toEqual(rule);
  });
});

describe("startPass", () => {
  /** A listing that records what the pass did with it. */
  function recorded(listedWithinMs: boolean) {
    const did: string[] = [];
    const listing = {
      listedWithin: () => listedWithinMs,
      refresh: async () => {
        did.push("refresh");
      },
      holdFresh: () => {
        did.push("hold");
        return () => did.push("release");
      },
    };
    return { listing, did };
  }
  it.each([
    {
      reason: "a pass lists its connection again, then holds the listing",
      recent: false,
      did: ["refresh", "hold"],
    },
    {
      reason: "a listing taken a moment ago (by the connection's check) is held, not taken again",
      recent: true,
      did: ["hold"],
    },
  ])("$reason", async ({ recent, did: expected }) => {
    const { listing, did } = recorded(recent);
    const release = await startPass(listing, 30_000, new AbortController().signal);
    expect(did).toEqual(expected);
    release();
    expect(did.at(-1)).toBe("release");
  });

  it("holds nothing when the listing failed: the resync reports it and passes the keys", async () => {
    const { listing, did } = recorded(false);
    listing.refresh = async () => {
      throw new Error("503");
    };
    await expect(startPass(listing, 30_000, new AbortController().signal)).rejects.toThrow("503");
    expect(did).toEqual([]);
  });
});
