import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { bearerToken, MAX_TOKEN_LENGTH } from "../../src/serving/bearer-token.ts";
import {
  MetricsAuthenticator,
  type MetricsAuthenticatorOptions,
  type NonResourceAttributes,
  type ReviewedUser,
  type ReviewPort,
  ReviewRefusedError,
} from "../../src/serving/metrics-auth.ts";
import { ManualClock } from "../support/manual-clock.ts";

const METRICS: NonResourceAttributes = { path: "/metrics", verb: "get" };
const PROMETHEUS: ReviewedUser = {
  username: "system:serviceaccount:monitoring:prometheus",
  uid: "5b0c7f0e-0000-4000-8000-000000000001",
  groups: ["system:serviceaccounts", "system:serviceaccounts:monitoring", "system:authenticated"],
  extra: { "authentication.kubernetes.io/pod-name": ["prometheus-0"] },
};

/** An API server in memory: tokens it knows, users it allows; every review recorded. */
class FakeReviews implements ReviewPort {
  readonly users = new Map<string, ReviewedUser>([["good", PROMETHEUS]]);
  readonly allowed = new Set<string>([PROMETHEUS.username]);
  readonly tokenReviews: string[] = [];
  readonly accessReviews: Array<{ user: ReviewedUser; attributes: NonResourceAttributes }> = [];
  /** Thrown by the next reviews while set. */
  failure: Error | undefined;
  /** While set, token reviews wait for it. */
  gate: Promise<void> | undefined;
  inFlight = 0;
  mostInFlight = 0;

  async authenticate(token: string, signal: AbortSignal): Promise<ReviewedUser | undefined> {
    this.tokenReviews.push(token);
    this.inFlight++;
    this.mostInFlight = Math.max(this.mostInFlight, this.inFlight);
    try {
      if (this.gate) await this.gate;
      signal.throwIfAborted();
      if (this.failure) throw this.failure;
      return this.users.get(token);
    } finally {
      this.inFlight--;
    }
  }

  async authorize(user: ReviewedUser, attributes: NonResourceAttributes) {
    this.accessReviews.push({ user, attributes });
    if (this.failure) throw this.failure;
    return { allowed: this.allowed.has(user.username) };
  }
}

function setup(options: Partial<MetricsAuthenticatorOptions> = {}) {
  const reviews = new FakeReviews();
  const clock = new ManualClock({ start: 1_000_000 });
  const auth = new MetricsAuthenticator({ reviews, clock, ...options });
  return { reviews, clock, auth };
}

/** Lets the promises started so far run (the fake's awaits), without moving the clock. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

describe("MetricsAuthenticator", () => {
  it("allows a token whose user may get /metrics, asking the access review about that very user", async () => {
    const { reviews, auth } = setup();
    expect(await auth.check("Bearer good", METRICS)).toEqual({ status: 200, message: "OK" });
    expect(reviews.tokenReviews).toEqual(["good"]);
    expect(reviews.accessReviews).toEqual([{ user: PROMETHEUS, attributes: METRICS }]);
  });

  it("answers 403 naming the user when the access review denies it", async () => {
    const { reviews, auth } = setup();
    reviews.allowed.clear();
    expect(await auth.check("Bearer good", METRICS)).toEqual({
      status: 403,
      message: "Forbidden (user=system:serviceaccount:monitoring:prometheus, verb=get, path=/metrics)",
    });
  });

  it.each([
    { reason: "no header", header: undefined },
    { reason: "an empty header", header: "" },
    { reason: "another scheme", header: "Basic dXNlcjpwYXNz" },
    { reason: "a scheme without a token", header: "Bearer " },
    { reason: "two tokens", header: "Bearer one two" },
    { reason: "a token longer than any real one", header: `Bearer ${"x".repeat(MAX_TOKEN_LENGTH + 1)}` },
  ])("answers 401 to $reason without asking the API server", async ({ header }) => {
    const { reviews, auth } = setup();
    expect((await auth.check(header, METRICS)).status).toBe(401);
    expect(reviews.tokenReviews).toEqual([]);
  });

  it("answers 401 to a token the API server does not authenticate, and asks no access review", async () => {
    const { reviews, auth } = setup();
    expect(await auth.check("Bearer forged", METRICS)).toEqual({ status: 401, message: "Unauthorized" });
    expect(reviews.tokenReviews).toEqual(["forged"]);
    expect(reviews.accessReviews).toEqual([]);
  });

  it("reuses allowed, denied and unauthenticated answers for the cache period, then asks again", async () => {
    const { reviews, clock, auth } = setup({ cacheTtlMs: 10_000 });
    reviews.users.set("denied", { ...PROMETHEUS, username: "someone" });
    const round = async () => [
      (await auth.check("Bearer good", METRICS)).status,
      (await auth.check("Bearer denied", METRICS)).status,
      (await auth.check("Bearer forged", METRICS)).status,
    ];
    expect(await round()).toEqual([200, 403, 401]);
    // The scheme's case does not make another entry.
    expect((await auth.check("bearer good", METRICS)).status).toBe(200);
    clock.advance(4_000);
    expect(await round()).toEqual([200, 403, 401]);
    clock.advance(5_999);
    expect(await round()).toEqual([200, 403, 401]);
    expect(reviews.tokenReviews).toEqual(["good", "denied", "forged"]);
    clock.advance(1);
    // 10 s after the first reviews: every answer has expired.
    expect(await round()).toEqual([200, 403, 401]);
    expect(reviews.tokenReviews).toEqual(["good", "denied", "forged", "good", "denied", "forged"]);
  });

  it("keeps at most cacheSize answers, forgetting the least recently used", async () => {
    const { reviews, auth } = setup({ cacheSize: 2 });
    for (const token of ["a", "b", "c", "d", "e"]) reviews.users.set(token, PROMETHEUS);
    await auth.check("Bearer a", METRICS);
    await auth.check("Bearer b", METRICS);
    await auth.check("Bearer a", METRICS); // a is now the most recent
    await auth.check("Bearer c", METRICS); // pushes b out
    expect(auth.cached).toBe(2);
    await auth.check("Bearer a", METRICS);
    expect(reviews.tokenReviews).toEqual(["a", "b", "c"]);
    await auth.check("Bearer b", METRICS);
    expect(reviews.tokenReviews).toEqual(["a", "b", "c", "b"]);
    for (const token of ["d", "e"]) await auth.check(`Bearer ${token}`, METRICS);
    expect(auth.cached).toBe(2);
  });

  it("answers 503 while the API server fails, caches nothing, and allows again once it answers", async () => {
    const { reviews, auth } = setup();
    reviews.failure = new Error("POST /apis/authentication.k8s.io/v1/tokenreviews: HTTP 503");
    expect((await auth.check("Bearer good", METRICS)).status).toBe(503);
    expect((await auth.check("Bearer good", METRICS)).status).toBe(503);
    expect(reviews.tokenReviews).toHaveLength(2);
    reviews.failure = undefined;
    expect((await auth.check("Bearer good", METRICS)).status).toBe(200);
  });

  it("answers 500 when the operator may not review tokens: a missing permission, not an outage", async () => {
    const { reviews, auth } = setup();
    reviews.failure = new ReviewRefusedError("HTTP 403 Forbidden: cannot create resource tokenreviews");
    expect(await auth.check("Bearer good", METRICS)).toEqual({
      status: 500,
      message: "Internal Server Error: the operator may not review tokens (see its log)",
    });
  });

  it("answers 503 once the reviews take longer than the review timeout, even if the port never answers", async () => {
    const { reviews, clock, auth } = setup({ reviewTimeoutMs: 5_000 });
    reviews.gate = new Promise(() => {});
    const scrape = auth.check("Bearer good", METRICS);
    await settle();
    clock.advance(4_999);
    await settle();
    let answered = false;
    void scrape.then(() => {
      answered = true;
    });
    await settle();
    expect(answered).toBe(false);
    clock.advance(1);
    expect((await scrape).status).toBe(503);
  });

  it("shares one review among concurrent scrapes with the same token", async () => {
    const { reviews, auth } = setup();
    let open = () => {};
    reviews.gate = new Promise((resolve) => {
      open = resolve;
    });
    const scrapes = [auth.check("Bearer good", METRICS), auth.check("Bearer good", METRICS)];
    await settle();
    open();
    expect((await Promise.all(scrapes)).map((d) => d.status)).toEqual([200, 200]);
    expect(reviews.tokenReviews).toEqual(["good"]);
  });

  it("runs at most maxConcurrent reviews and answers 503 at once past maxWaiting", async () => {
    const { reviews, auth } = setup({ maxConcurrent: 2, maxWaiting: 1 });
    for (const token of ["a", "b", "c", "d"]) reviews.users.set(token, PROMETHEUS);
    let open = () => {};
    reviews.gate = new Promise((resolve) => {
      open = resolve;
    });
    const first = ["a", "b", "c"].map((t) => auth.check(`Bearer ${t}`, METRICS));
    await settle();
    expect(reviews.tokenReviews).toEqual(["a", "b"]); // c waits for a slot
    expect(await auth.check("Bearer d", METRICS)).toEqual({
      status: 503,
      message: "Service Unavailable: too many scrapes under review",
    });
    open();
    expect((await Promise.all(first)).map((d) => d.status)).toEqual([200, 200, 200]);
    expect(reviews.mostInFlight).toBe(2);
    expect((await auth.check("Bearer d", METRICS)).status).toBe(200);
  });

  it("gives a waiting scrape's slot up when its timeout passes, so later scrapes still get one", async () => {
    const { reviews, clock, auth } = setup({ maxConcurrent: 1, reviewTimeoutMs: 5_000 });
    reviews.users.set("other", PROMETHEUS);
    reviews.gate = new Promise(() => {});
    const stuck = auth.check("Bearer good", METRICS);
    const waiting = auth.check("Bearer other", METRICS);
    await settle();
    clock.advance(5_000);
    expect((await stuck).status).toBe(503);
    expect((await waiting).status).toBe(503);
    reviews.gate = undefined;
    expect((await auth.check("Bearer other", METRICS)).status).toBe(200);
  });
});

describe("the review budget", () => {
  it("reviews at most burst + rate·t new tokens: 2,000 random tokens in 10 s make 60 reviews, the rest 429", async () => {
    const { reviews, clock, auth } = setup({ reviewsPerSecond: 5, reviewBurst: 10 });
    const statuses = new Map<number, number>();
    let retryAfter = 0;
    for (let i = 0; i < 2_000; i++) {
      if (i % 200 === 0 && i > 0) clock.advance(1_000);
      const decision = await auth.check(`Bearer ${randomBytes(24).toString("base64url")}`, METRICS);
      statuses.set(decision.status, (statuses.get(decision.status) ?? 0) + 1);
      if (decision.status === 429) retryAfter = Math.max(retryAfter, decision.retryAfterSeconds ?? 0);
    }
    // 10 at once, then 5 in each of the 9 seconds the clock moved.
    expect(reviews.tokenReviews).toHaveLength(10 + 5 * 9);
    expect(statuses.get(401)).toBe(55);
    expect(statuses.get(429)).toBe(2_000 - 55);
    expect(retryAfter).toBe(1);
  });

  it("keeps serving the scraper's token through a flood: a token allowed lately is renewed outside the budget", async () => {
    const { reviews, clock, auth } = setup({ reviewsPerSecond: 1, reviewBurst: 1, cacheTtlMs: 10_000 });
    expect((await auth.check("Bearer good", METRICS)).status).toBe(200);
    for (let second = 0; second < 60; second++) {
      clock.advance(1_000);
      for (let i = 0; i < 20; i++) await auth.check(`Bearer flood-${second}-${i}`, METRICS);
      expect((await auth.check("Bearer good", METRICS)).status).toBe(200);
    }
    // One review of "good" per cache period, one stranger per second.
    expect(reviews.tokenReviews.filter((t) => t === "good")).toHaveLength(7);
    expect(reviews.tokenReviews.filter((t) => t !== "good")).toHaveLength(60);
    // A token the API server stops authenticating goes back under the budget.
    reviews.users.delete("good");
    clock.advance(10_000);
    expect((await auth.check("Bearer good", METRICS)).status).toBe(401);
    clock.advance(10_000);
    await auth.check("Bearer another", METRICS);
    expect((await auth.check("Bearer good", METRICS)).status).toBe(429);
  });

  it("remembers at most knownTokens authenticated tokens, each for knownTtlMs", async () => {
    const { reviews, clock, auth } = setup({
      reviewsPerSecond: 0.001,
      reviewBurst: 3,
      cacheTtlMs: 1_000,
      knownTokens: 2,
      knownTtlMs: 60_000,
    });
    for (const token of ["a", "b", "c"]) reviews.users.set(token, PROMETHEUS);
    for (const token of ["a", "b", "c"])
      expect((await auth.check(`Bearer ${token}`, METRICS)).status).toBe(200);
    clock.advance(1_000);
    // "a" was pushed out by "c"; the budget is spent.
    expect((await auth.check("Bearer a", METRICS)).status).toBe(429);
    expect((await auth.check("Bearer b", METRICS)).status).toBe(200);
    expect((await auth.check("Bearer c", METRICS)).status).toBe(200);
    clock.advance(60_000);
    expect((await auth.check("Bearer b", METRICS)).status).toBe(429);
  });

  it("renews outside the budget only a token allowed to read: any pod's token is authenticated, and tenants mint them", async () => {
    const { reviews, clock, auth } = setup({ reviewsPerSecond: 0.001, reviewBurst: 2, cacheTtlMs: 1_000 });
    reviews.users.set("tenant-pod", { ...PROMETHEUS, username: "system:serviceaccount:team-a:default" });
    expect((await auth.check("Bearer tenant-pod", METRICS)).status).toBe(403);
    expect((await auth.check("Bearer good", METRICS)).status).toBe(200);
    clock.advance(1_000);
    expect((await auth.check("Bearer tenant-pod", METRICS)).status).toBe(429);
    expect((await auth.check("Bearer good", METRICS)).status).toBe(200);
  });

  it("answers a repeated unknown token from the cache: no review and no budget", async () => {
    const { reviews, auth } = setup({ reviewsPerSecond: 0.001, reviewBurst: 2 });
    for (let i = 0; i < 50; i++) expect((await auth.check("Bearer forged", METRICS)).status).toBe(401);
    expect(reviews.tokenReviews).toEqual(["forged"]);
    expect((await auth.check("Bearer good", METRICS)).status).toBe(200);
  });

  it("refuses without a review, and without spending the budget, what cannot be a token", async () => {
    const { reviews, auth } = setup({ reviewsPerSecond: 0.001, reviewBurst: 1 });
    for (const header of [
      `Bearer ${"a".repeat(MAX_TOKEN_LENGTH + 1)}`,
      "Bearer abc\u0001def",
      "Bearer abc\u007f",
      "Bearer \u00e4", // one Latin-1 byte 0xE4: not UTF-8
      "Bearer \u20ac", // not one character per byte: no header Node parsed
      "Bearer a b",
    ])
      expect((await auth.check(header, METRICS)).status).toBe(401);
    expect(reviews.tokenReviews).toEqual([]);
    expect((await auth.check("Bearer good", METRICS)).status).toBe(200);
  });
});

describe("bearerToken", () => {
  it.each([
    ["Bearer abc.def-ghi", "abc.def-ghi"],
    ["bearer abc", "abc"],
    ["BEARER  abc ", "abc"],
    ["Bearerabc", undefined],
    ["Token abc", undefined],
    // Any token kind the API server may accept: JWTs, bootstrap tokens, webhook and static tokens.
    ["Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"],
    ["Bearer abcdef.0123456789abcdef", "abcdef.0123456789abcdef"],
    ["Bearer sha256~Zm9vYmFy", "sha256~Zm9vYmFy"],
    ["Bearer k8s-aws-v1.aHR0cHM6Ly9zdHM", "k8s-aws-v1.aHR0cHM6Ly9zdHM"],
    ["Bearer pass!@#$%^&*()[]{}<>,;:'\"|", "pass!@#$%^&*()[]{}<>,;:'\"|"],
    // UTF-8 bytes as Node reads them (Latin-1): decoded as the API server holds them.
    [`Bearer p${Buffer.from("äss", "utf8").toString("latin1")}`, "päss"],
  ])("reads %j as %j", (header, token) => {
    expect(bearerToken(header)).toBe(token);
  });
});
