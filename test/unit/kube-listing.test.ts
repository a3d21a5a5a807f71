import { describe, expect, it, vi } from "vitest";
import { KubeApiError } from "../../src/kube/errors.ts";
import { initialEventsEnd, isIgnored, refusesWatchList } from "../../src/kube/listing.ts";
import { isKubeObject, type KubeObject } from "../../src/kube/object.ts";
import { Reflector } from "../../src/kube/reflector.ts";
import { initialEvents, kubeStub, thingsReflector as reflector } from "../support/kube-stub.ts";
import { capturingLogger } from "../support/logs.ts";
import { ManualClock } from "../support/manual-clock.ts";

const item = (name: string) => ({ metadata: { namespace: "ns", name, resourceVersion: "5" } });
const items = [item("a"), item("b"), item("c")];

/** A server whose watch lists `answer` decides; lists answer `items` in pages of one; the URLs it was asked for. */
async function apiServer(
  answerWatchList: (res: import("node:http").ServerResponse, timeoutSeconds: number) => void,
) {
  const asked: URL[] = [];
  const { client } = await kubeStub((req, res) => {
    const url = new URL(req.url ?? "/", "http://api");
    asked.push(url);
    res.writeHead(200, { "content-type": "application/json" });
    if (url.searchParams.get("watch") !== "true") {
      const at = Number(url.searchParams.get("continue") ?? "0");
      const next = at + 1 < items.length ? { continue: String(at + 1) } : {};
      res.end(JSON.stringify({ metadata: { resourceVersion: "9", ...next }, items: [items[at]] }));
    } else if (url.searchParams.get("sendInitialEvents") === "true") {
      answerWatchList(res, Number(url.searchParams.get("timeoutSeconds")));
    } else res.write("");
  });
  return { client, asked };
}

const added = (object: unknown) => `${JSON.stringify({ type: "ADDED", object })}\n`;

/** A watch's ERROR event of a resourceVersion compacted away (410): the reflector lists again. */
const gone = `${JSON.stringify({ type: "ERROR", object: { kind: "Status", code: 410, reason: "Expired" } })}\n`;

/**
 * How a scripted server answers a watch list: `silent`, one object and then nothing (a stalled
 * network or proxy); `whole`, the initial events and their end; `ignored`, every object, then the
 * stream ended once `clock` passed the watch's whole timeout (a server that ignores the parameter).
 */
type WatchListAnswer = "silent" | "whole" | "ignored";

/**
 * A server answering the reflector's watch lists by `script` in turn, its lists by pages, and its
 * watches (and a whole watch list, on its own stream) with a 410 while `gones` last, then staying
 * open. `asked()` is what it was asked, in order: `L` a watch list, `P` a list's first page, `W` a
 * watch from a resourceVersion (one resumed after it went idle not noted again).
 */
async function scriptedServer(script: WatchListAnswer[], gones: number, clock: ManualClock) {
  const asked: string[] = [];
  let left = gones;
  const relist = () => {
    if (left === 0) return "";
    left -= 1;
    return gone;
  };
  const { client } = await kubeStub((req, res) => {
    const url = new URL(req.url ?? "/", "http://api");
    res.writeHead(200, { "content-type": "application/json" });
    if (url.searchParams.get("watch") !== "true") {
      const at = Number(url.searchParams.get("continue") ?? "0");
      if (at === 0) asked.push("P");
      const next = at + 1 < items.length ? { continue: String(at + 1) } : {};
      res.end(JSON.stringify({ metadata: { resourceVersion: "9", ...next }, items: [items[at]] }));
      return;
    }
    if (url.searchParams.get("sendInitialEvents") !== "true") {
      if (asked.at(-1) !== "W") asked.push("W");
      res.write(relist());
      return;
    }
    asked.push("L");
    const answer = script.shift();
    if (answer === "silent") res.write(added(items[0]));
    else if (answer === "whole") res.write(initialEvents(items, "12") + relist());
    else {
      res.write(items.map(added).join(""));
      clock.advance(Number(url.searchParams.get("timeoutSeconds")) * 1000);
      res.end();
    }
  });
  return { client, asked: () => asked.join(" ") };
}

describe("a reflector's list", () => {
  it("fills from a watch list's initial events and resumes from its bookmark", async () => {
    const api = await apiServer((res) => res.write(initialEvents(items, "12")));
    const { cache } = reflector(api.client);
    const stop = new AbortController();
    const running = cache.run(stop.signal);
    await cache.synced;
    expect(cache.list().map((o) => o.metadata.name)).toEqual(["a", "b", "c"]);
    expect(cache.resourceVersion).toBe("12");
    expect(api.asked.filter((u) => u.searchParams.get("watch") !== "true")).toEqual([]);
    stop.abort();
    await running;
  });

  it("asks for the watch list again (not for pages) when one is cut before its initial events end", async () => {
    let answered = 0;
    const api = await apiServer((res) => {
      answered += 1;
      // The first is cut after one object (the server restarting); the second is whole.
      res.end(answered === 1 ? added(items[0]) : initialEvents(items, "12"));
    });
    const { cache, messages } = reflector(api.client);
    const stop = new AbortController();
    const running = cache.run(stop.signal);
    await cache.synced;
    expect(answered).toBe(2);
    expect(cache.list()).toHaveLength(3);
    expect(messages()).toContain("list/watch failed; retrying with backoff");
    expect(messages()).not.toContain("the API server offers no watch list; listing by pages");
    expect(api.asked.filter((u) => u.searchParams.get("watch") !== "true")).toEqual([]);
    stop.abort();
    await running;
  });
});

describe("a reflector's list after a watch list that did not end its initial events", () => {
  const thisList = "the watch list went silent before its initial events ended; listing by pages this time";
  const forGood = "the API server offers no watch list; listing by pages";
  const silentForGood =
    "3 watch lists in a row went silent before their initial events ended; listing by pages from now on";

  it("lists by pages once where a watch list went silent, and by a watch list again at the next list", async () => {
    const clock = new ManualClock({ sleepsInstantly: true });
    const api = await scriptedServer(["silent", "whole"], 1, clock);
    const { cache, messages } = reflector(api.client, { watchIdleMs: 50, clock });
    const stop = new AbortController();
    const running = cache.run(stop.signal);
    await cache.synced;
    // The first list by pages; its watch expired (410); the list after it a watch list, whole.
    await vi.waitFor(() => expect(cache.resourceVersion).toBe("12"));
    expect(api.asked()).toMatch(/^L P W L( W)?$/);
    expect(cache.list().map((o) => o.metadata.name)).toEqual(["a", "b", "c"]);
    expect(messages().filter((m) => m === thisList)).toHaveLength(1);
    expect(messages()).not.toContain(forGood);
    stop.abort();
    await running;
  });

  it("lists by pages for good after three silent watch lists in a row (a server that ignores the parameter and sends no bookmarks); a whole one starts the count again", async () => {
    const clock = new ManualClock({ sleepsInstantly: true });
    const api = await scriptedServer(["silent", "whole", "silent", "silent", "silent"], 5, clock);
    const { cache, messages } = reflector(api.client, { watchIdleMs: 50, clock });
    const stop = new AbortController();
    const running = cache.run(stop.signal);
    // Each list followed by its watch, expired (410) until the last, which stays open.
    await vi.waitFor(() => expect(api.asked()).toBe("L P W L L P W L P W L P W P W"), { timeout: 4_000 });
    expect(messages().filter((m) => m === thisList)).toHaveLength(3);
    expect(messages().filter((m) => m === silentForGood)).toHaveLength(1);
    expect(cache.list()).toHaveLength(3);
    stop.abort();
    await running;
  });

  it("lists by pages for good, at the next list too, where the server kept a watch list its whole timeout without ending it (the parameter ignored)", async () => {
    const clock = new ManualClock({ sleepsInstantly: true });
    const api = await scriptedServer(["ignored"], 1, clock);
    const { cache, messages } = reflector(api.client, { clock });
    const stop = new AbortController();
    const running = cache.run(stop.signal);
    await cache.synced;
    await vi.waitFor(() => expect(api.asked()).toBe("L P W P W"));
    expect(cache.list().map((o) => o.metadata.name)).toEqual(["a", "b", "c"]);
    expect(messages().filter((m) => m === forGood)).toHaveLength(1);
    expect(messages()).not.toContain(thisList);
    stop.abort();
    await running;
  });
});

describe("a reflector of a kind the API server does not serve", () => {
  /** A reflector of `resource` against a server answering every request as the API server does a path it does not serve. */
  async function notServed(resource: { group: string; version: string; plural: string }) {
    const { client } = await kubeStub((_req, res) => {
      res.writeHead(404, { "content-type": "text/plain" });
      res.end("404 page not found\n");
    });
    const { logger, messages } = capturingLogger();
    const cache = new Reflector<KubeObject>({
      client,
      resource,
      decode: (raw) => (isKubeObject(raw) ? raw : undefined),
      backoff: { baseMs: 10, maxMs: 20 },
      logger,
    });
    const stop = new AbortController();
    const running = cache.run(stop.signal);
    cache.synced.catch(() => {});
    const failures = () => messages().filter((m) => m.startsWith("list/watch failed"));
    await vi.waitFor(() => expect(failures().length).toBeGreaterThan(1));
    stop.abort();
    await running;
    return failures();
  }

  it("names the kind not served and asks whether its CRD is installed, at every retry", async () => {
    const logged = await notServed({ group: "dms.dev", version: "v1alpha1", plural: "deployments" });
    for (const message of logged)
      expect(message).toBe(
        "list/watch failed: the API server does not serve deployments.dms.dev; is its CRD installed? (kubectl get crd deployments.dms.dev; install with kubectl apply -k manifests/crd, the release's crds.yaml, or the Helm chart); retrying with backoff",
      );
  });

  it("says nothing of a CRD for a kind of the core API", async () => {
    const logged = await notServed({ group: "", version: "v1", plural: "things" });
    expect(new Set(logged)).toEqual(new Set(["list/watch failed; retrying with backoff"]));
  });

  it("says nothing of a CRD for a kind Kubernetes serves itself (the shards' Leases)", async () => {
    const logged = await notServed({ group: "coordination.k8s.io", version: "v1", plural: "leases" });
    expect(new Set(logged)).toEqual(new Set(["list/watch failed; retrying with backoff"]));
  });
});

describe("watch list helpers", () => {
  it("knows the bookmark that ends the initial events, and no other event", () => {
    const end = {
      type: "BOOKMARK",
      object: { metadata: { resourceVersion: "7", annotations: { "k8s.io/initial-events-end": "true" } } },
    };
    expect(initialEventsEnd(end)).toBe("7");
    expect(
      initialEventsEnd({ type: "BOOKMARK", object: { metadata: { resourceVersion: "7" } } }),
    ).toBeUndefined();
    expect(initialEventsEnd({ ...end, type: "ADDED" })).toBeUndefined();
    expect(
      initialEventsEnd({
        type: "BOOKMARK",
        object: { metadata: { annotations: { "k8s.io/initial-events-end": "true" } } },
      }),
    ).toBeUndefined();
    expect(initialEventsEnd("BOOKMARK")).toBeUndefined();
  });

  it("reads a refusal of the parameters (400, 422) as no watch list, and nothing else", () => {
    expect(refusesWatchList(new KubeApiError(422, "Invalid", "sendInitialEvents is forbidden"))).toBe(true);
    expect(refusesWatchList(new KubeApiError(400, "BadRequest", "bad"))).toBe(true);
    for (const status of [403, 410, 429, 500, 503]) {
      expect(refusesWatchList(new KubeApiError(status, "", "x"))).toBe(false);
    }
    expect(refusesWatchList(new Error("x"))).toBe(false);
    expect(isIgnored(undefined)).toBe(false);
  });
});
