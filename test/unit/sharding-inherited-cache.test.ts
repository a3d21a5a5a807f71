// A sharded replica's cache with an inherited share, against an API server on loopback: its own
// watch (`owner=a`) and a second one of a dead replica's resources (`owner=d`) keeping the heir's,
// seen by readers as one cache; a resource labelled for the heir passes from one watch to the
// other as an update, never a delete (the second watch's word may come first: the resource is then
// in transit, a claimant of its name but not reconciled); so is what the second watch held when it
// ends, until a watch lists it again (the watch restarted by a new ring) or the transit is over.
import type { ServerResponse } from "node:http";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import type { KubeClient } from "../../src/kube/client.ts";
import { ShareDeployments } from "../../src/kube/inherited-deployments.ts";
import type { DeploymentObject } from "../../src/kube/object.ts";
import { CLAIM_INDEX, claimIndexer } from "../../src/reconcile/inputs.ts";
import { OWNER_LABEL } from "../../src/sharding/labels.ts";
import { initialEvents, kubeStub } from "../support/kube-stub.ts";

const resource = (name: string, owner: string, resourceVersion: string) => ({
  apiVersion: "dms.dev/v1alpha1",
  kind: "Deployment",
  metadata: { namespace: "ns", name, uid: `uid-${name}`, resourceVersion, labels: { [OWNER_LABEL]: owner } },
  spec: { source: "internal_docker", name },
});

/** A resource `name` naming the service deployment `of` (a rival of the resource `of`). */
const rivalOf = (name: string, of: string, owner: string, rv: string) => {
  const r = resource(name, owner, rv);
  return { ...r, spec: { ...r.spec, name: of } };
};

/** Lists, watch lists and watches of Deployment resources by owner label; `push` sends an event to one owner's watches. */
async function apiServer(items: ReturnType<typeof resource>[], holdEndOf?: string) {
  const watches = new Map<string, ServerResponse[]>();
  const waiting = new Map<string, () => void>();
  const ends = new Map<string, () => void>();
  const { client } = await kubeStub((req, res) => {
    const url = new URL(req.url ?? "/", "http://api");
    const owner = (url.searchParams.get("labelSelector") ?? "").split("=")[1] ?? "";
    res.writeHead(200, { "content-type": "application/json" });
    const listed = items.filter((o) => o.metadata.labels[OWNER_LABEL] === owner);
    if (url.searchParams.get("watch") === "true") {
      watches.set(owner, [...(watches.get(owner) ?? []), res]);
      // A watch list (what the reflector lists by) sends the items first, then the bookmark that ends them.
      const initial = url.searchParams.get("sendInitialEvents") === "true" ? initialEvents(listed, "10") : "";
      // `holdEndOf`'s watch list: its items now, the bookmark that ends them on `endList`.
      const cut = owner === holdEndOf ? initial.lastIndexOf("\n", initial.length - 2) + 1 : initial.length;
      res.write(initial.slice(0, cut));
      if (cut < initial.length) ends.set(owner, () => res.write(initial.slice(cut)));
      waiting.get(owner)?.();
      return;
    }
    res.end(JSON.stringify({ kind: "List", metadata: { resourceVersion: "10" }, items: listed }));
  });
  const push = (owner: string, type: string, object: unknown) => {
    for (const w of watches.get(owner) ?? []) w.write(`${JSON.stringify({ type, object })}\n`);
  };
  /** Resolves once a watch of `owner`'s resources is open. */
  const watching = (owner: string) =>
    (watches.get(owner)?.length ?? 0) > 0
      ? Promise.resolve()
      : new Promise<void>((resolve) => waiting.set(owner, resolve));
  /** How many watches of `owner`'s resources were opened. */
  const opened = (owner: string) => watches.get(owner)?.length ?? 0;
  /** Sends the end of `owner`'s held watch list. */
  const endList = (owner: string) => ends.get(owner)?.();
  return { client, push, watching, opened, endList };
}

/** Resolves once `test` holds, checked on each event of `cache` (and at once). */
function until(cache: ShareDeployments, test: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (!test()) return;
      stop();
      resolve();
    };
    const stop = cache.subscribe({ onAdd: check, onUpdate: check, onDelete: check });
    check();
  });
}

/** Runs `cache` until synced, recording its events (`add d1`, `update d1@20`, `delete d1`). */
async function started(cache: ShareDeployments) {
  const events: string[] = [];
  cache.subscribe({
    onAdd: (o) => void events.push(`add ${o.metadata.name}`),
    onUpdate: (_old, o) => void events.push(`update ${o.metadata.name}@${o.metadata.resourceVersion}`),
    onDelete: (o) => void events.push(`delete ${o.metadata.name}`),
  });
  const run = new AbortController();
  const running = cache.run(run.signal);
  await cache.synced;
  return { events, run, running };
}

/**
 * A cache of replica `a`, claims indexed, inheriting every resource of the dead replica `d`;
 * a resource in transit for `transitMs`.
 */
async function inheritingAll(client: KubeClient, transitMs: number) {
  const cache = new ShareDeployments({
    client,
    scope: { namespaces: ["ns"], labelSelector: `${OWNER_LABEL}=a` },
    inheritedSelector: (owner) => `${OWNER_LABEL}=${owner}`,
    indexers: { [CLAIM_INDEX]: claimIndexer },
    transitMs,
  });
  const running = await started(cache);
  const inheritance = new AbortController();
  const inherited = cache.inherit("d", () => true, inheritance.signal);
  return { cache, ...running, inheritance, inherited };
}

const names = (objects: readonly DeploymentObject[]) => objects.map((o) => o.metadata.name).sort();

describe("a replica's cache with an inherited share", () => {
  it("shows the heir's part of a dead replica's resources beside its own, as one cache", async () => {
    const api = await apiServer([
      resource("a1", "a", "1"),
      resource("d1", "d", "2"),
      resource("d2", "d", "3"),
      resource("d3", "d", "4"),
    ]);
    const cache = new ShareDeployments({
      client: api.client,
      scope: { namespaces: ["ns"], labelSelector: `${OWNER_LABEL}=a` },
      inheritedSelector: (owner) => `${OWNER_LABEL}=${owner}`,
      indexers: { [CLAIM_INDEX]: claimIndexer },
      transitMs: 100,
    });
    const { events, run, running } = await started(cache);
    expect(names(cache.list())).toEqual(["a1"]);

    const inheritance = new AbortController();
    const inherited = cache.inherit("d", (claim) => claim !== "d2", inheritance.signal);
    await until(cache, () => cache.size === 3);
    expect(names(cache.list())).toEqual(["a1", "d1", "d3"]);
    expect(cache.get({ namespace: "ns", name: "d1" })?.metadata.labels?.[OWNER_LABEL]).toBe("d");
    expect(cache.get({ namespace: "ns", name: "d2" })).toBeUndefined();
    expect(cache.inheriting()).toEqual(["d"]);
    expect(events.sort()).toEqual(["add a1", "add d1", "add d3"]);
    events.length = 0;

    // The sharder labels d1 for this replica: its own watch adds it, the second one drops it.
    await Promise.all([api.watching("a"), api.watching("d")]);
    api.push("a", "ADDED", resource("d1", "a", "20"));
    await until(cache, () => events.length === 1);
    api.push("d", "DELETED", resource("d1", "a", "20"));
    api.push("d", "MODIFIED", resource("d3", "d", "21"));
    await until(cache, () => events.length === 2);
    expect(events).toEqual(["update d1@20", "update d3@21"]);
    expect(cache.get({ namespace: "ns", name: "d1" })?.metadata.resourceVersion).toBe("20");
    expect(cache.size).toBe(3);

    // The dead replica's Lease is deleted: what only the second watch held goes, in transit first
    // (a claimant, not reconciled here), then out once no watch lists it again.
    inheritance.abort();
    await inherited;
    expect(names(cache.list())).toEqual(["a1", "d1"]);
    expect(names(cache.byIndex(CLAIM_INDEX, "d3"))).toEqual(["d3"]);
    expect(cache.inheriting()).toEqual([]);
    await until(cache, () => events.length === 3);
    expect(events).toEqual(["update d1@20", "update d3@21", "delete d3"]);
    expect(cache.byIndex(CLAIM_INDEX, "d3")).toEqual([]);
    run.abort();
    await running;
  });

  it("keeps a resource the second watch let go as a claimant, not reconciled, until the own watch adds it", async () => {
    const api = await apiServer([
      resource("d1", "d", "2"),
      rivalOf("x1", "d1", "d", "3"),
      resource("d2", "d", "4"),
    ]);
    const { cache, events, run, running, inheritance, inherited } = await inheritingAll(api.client, 200);
    await until(cache, () => cache.size === 3);
    await Promise.all([api.watching("a"), api.watching("d")]);
    events.length = 0;
    // A second reader hears the same: the add that ends a transit is an update for every reader.
    const second: string[] = [];
    cache.subscribe({
      onAdd: (o) => void second.push(`add ${o.metadata.name}`),
      onUpdate: (_old, o) => void second.push(`update ${o.metadata.name}@${o.metadata.resourceVersion}`),
    });
    const claimants = () => names(cache.byIndex(CLAIM_INDEX, "d1"));
    expect(claimants()).toEqual(["d1", "x1"]);

    // The second watch hears of d1's new label before the own watch does: d1 still holds its
    // name here (x1, younger, must not take it), and is not reconciled here meanwhile.
    api.push("d", "DELETED", resource("d1", "d", "20"));
    api.push("d", "MODIFIED", resource("d2", "d", "21"));
    await until(cache, () => events.length === 1);
    expect(events).toEqual(["update d2@21"]);
    expect(claimants()).toEqual(["d1", "x1"]);
    expect(cache.get({ namespace: "ns", name: "d1" })).toBeUndefined();
    expect(cache.inTransit({ namespace: "ns", name: "d1" })).toBe(true);
    expect(names(cache.list())).toEqual(["d2", "x1"]);
    // The own watch adds it: an update, as if it never left.
    api.push("a", "ADDED", resource("d1", "a", "20"));
    await until(cache, () => events.length === 2);
    expect(events).toEqual(["update d2@21", "update d1@20"]);
    expect(second).toEqual(events);
    expect(cache.inTransit({ namespace: "ns", name: "d1" })).toBe(false);
    expect(cache.get({ namespace: "ns", name: "d1" })?.metadata.labels?.[OWNER_LABEL]).toBe("a");

    // One let go that the own watch never adds (labelled for another replica) leaves once the
    // transit is over; one deleted leaves at once.
    api.push("d", "DELETED", rivalOf("x1", "d1", "d", "22"));
    const deleted = resource("d2", "d", "23");
    api.push("d", "DELETED", {
      ...deleted,
      metadata: { ...deleted.metadata, deletionTimestamp: "2026-12-02T10:00:00Z" },
    });
    await until(cache, () => events.length === 3);
    expect(events.at(-1)).toBe("delete d2");
    expect(claimants()).toEqual(["d1", "x1"]);
    await until(cache, () => events.length === 4);
    expect(events.at(-1)).toBe("delete x1");
    expect(claimants()).toEqual(["d1"]);
    inheritance.abort();
    await inherited;
    run.abort();
    await running;
  });

  it("reads a resource the second watch let go and then shows again as updated, never deleted", async () => {
    const api = await apiServer([resource("d1", "d", "2"), resource("m1", "d", "3")]);
    const { cache, events, run, running, inheritance, inherited } = await inheritingAll(api.client, 100);
    await until(cache, () => cache.size === 2);
    await api.watching("d");
    events.length = 0;
    api.push("d", "DELETED", resource("d1", "d", "20"));
    api.push("d", "ADDED", resource("d1", "d", "21"));
    await until(cache, () => events.length === 1);
    expect(events).toEqual(["update d1@21"]);
    // Its transit ended with it: no delete once the transit time is over. A marker let go after
    // it, never added again, leaves when its own transit (as long, begun later) is over.
    api.push("d", "DELETED", resource("m1", "d", "22"));
    await until(cache, () => events.includes("delete m1"));
    expect(events).toEqual(["update d1@21", "delete m1"]);
    expect(names(cache.byIndex(CLAIM_INDEX, "d1"))).toEqual(["d1"]);
    inheritance.abort();
    await inherited;
    run.abort();
    await running;
  });

  it("keeps what a second watch held as claimants while it starts again by a new ring: a younger rival here never finds the name free", async () => {
    // d1 inherited from d; x1, younger, naming d1's deployment, already labelled for this replica.
    const api = await apiServer([resource("d1", "d", "2"), rivalOf("x1", "d1", "a", "3")]);
    const { cache, events, run, running, inheritance, inherited } = await inheritingAll(api.client, 60_000);
    await until(cache, () => cache.size === 2);
    events.length = 0;
    const claimants = () => names(cache.byIndex(CLAIM_INDEX, "d1"));
    expect(claimants()).toEqual(["d1", "x1"]);

    // The ring d's share is kept by changed (an heir died): its watch stops and starts again.
    inheritance.abort();
    await inherited;
    // Between the two watches d1 is in neither: still the claimant it was, not reconciled here.
    expect(claimants()).toEqual(["d1", "x1"]);
    expect(cache.get({ namespace: "ns", name: "d1" })).toBeUndefined();
    expect(events).toEqual([]);
    const again = new AbortController();
    const restarted = cache.inherit("d", () => true, again.signal);
    // Listed again: an update, never a delete then an add.
    await until(cache, () => events.length === 1);
    expect(events).toEqual(["update d1@2"]);
    expect(cache.get({ namespace: "ns", name: "d1" })?.metadata.labels?.[OWNER_LABEL]).toBe("d");
    expect(claimants()).toEqual(["d1", "x1"]);
    again.abort();
    await restarted;
    run.abort();
    await running;
  });

  it("keeps them so for as long as the watch started again is listing, then lets go of what its list no longer holds", async () => {
    const items = [resource("d1", "d", "2"), resource("d2", "d", "3"), rivalOf("x2", "d2", "a", "4")];
    // Every watch list of d's resources holds its end until `endList`.
    const api = await apiServer(items, "d");
    const { cache, events, run, running, inheritance, inherited } = await inheritingAll(api.client, 50);
    await api.watching("d");
    api.endList("d");
    await until(cache, () => cache.size === 3);
    events.length = 0;
    inheritance.abort();
    await inherited;
    // Meanwhile d2 was labelled for another replica: the next list no longer holds it.
    items.splice(1, 1);
    const again = new AbortController();
    const restarted = cache.inherit("d", () => true, again.signal);
    while (api.opened("d") < 2) await new Promise((resolve) => setTimeout(resolve, 5));
    // Four transits long, the list not ended: both still claimants, neither reported deleted.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(names(cache.byIndex(CLAIM_INDEX, "d1"))).toEqual(["d1"]);
    expect(names(cache.byIndex(CLAIM_INDEX, "d2"))).toEqual(["d2", "x2"]);
    expect(events).toEqual([]);
    api.endList("d");
    await until(cache, () => events.includes("update d1@2") && events.includes("delete d2"));
    expect(events).toEqual(["update d1@2", "delete d2"]);
    expect(names(cache.byIndex(CLAIM_INDEX, "d2"))).toEqual(["x2"]);
    again.abort();
    await restarted;
    run.abort();
    await running;
  });

  describe("a silent replica's share listed ahead of a take", () => {
    const items = () => [
      resource("a1", "a", "1"),
      resource("d1", "d", "2"),
      resource("d2", "d", "3"),
      resource("d3", "d", "4"),
    ];
    const notD2 = (claim: string) => claim !== "d2";
    const own = (client: KubeClient) =>
      new ShareDeployments({
        client,
        scope: { namespaces: ["ns"], labelSelector: `${OWNER_LABEL}=a` },
        inheritedSelector: (owner) => `${OWNER_LABEL}=${owner}`,
        transitMs: 50,
      });

    it("shows nothing of it until the inherited watch adopts the list, then only the heir's part, by one watch", async () => {
      const api = await apiServer(items());
      const cache = own(api.client);
      const { events, run, running } = await started(cache);
      await cache.prefetch("d", new AbortController().signal);
      expect(names(cache.list())).toEqual(["a1"]);
      expect(cache.get({ namespace: "ns", name: "d1" })).toBeUndefined();
      expect(events).toEqual(["add a1"]);

      const inheritance = new AbortController();
      const inherited = cache.inherit("d", notD2, inheritance.signal);
      // Listed already: the heir's part is in the cache at once, as a list's adds.
      expect(names(cache.list())).toEqual(["a1", "d1", "d3"]);
      expect(events).toEqual(["add a1", "add d1", "add d3"]);
      expect(api.opened("d")).toBe(1);
      // The watch goes on, keeping by the record's rule: another heir's resource stays out.
      api.push("d", "MODIFIED", resource("d2", "d", "20"));
      api.push("d", "MODIFIED", resource("d1", "d", "21"));
      await until(cache, () => events.includes("update d1@21"));
      expect(names(cache.list())).toEqual(["a1", "d1", "d3"]);

      inheritance.abort();
      await inherited;
      expect(names(cache.list())).toEqual(["a1"]);
      // Out of the cache in transit; reported deleted once no watch lists them again.
      await until(cache, () => events.includes("delete d1") && events.includes("delete d3"));
      expect(events.slice(-2).sort()).toEqual(["delete d1", "delete d3"]);
      run.abort();
      await running;
    });

    it("adopts a list still under way, keeping the heir's part once it is complete", async () => {
      // d's watch list sends its items, the last one invalid, and holds its end: once the invalid
      // one is logged, every item before it was read (kept whole, the heir's rule not known yet).
      const bad = { ...resource("d9", "d", "5"), spec: 5 };
      const api = await apiServer([...items(), bad as unknown as ReturnType<typeof resource>], "d");
      let read = () => {};
      const allRead = new Promise<void>((resolve) => {
        read = resolve;
      });
      const logger = pino(
        { level: "warn" },
        { write: (line: string) => void (line.includes("d9") && read()) },
      );
      const cache = new ShareDeployments({
        client: api.client,
        scope: { namespaces: ["ns"], labelSelector: `${OWNER_LABEL}=a` },
        inheritedSelector: (owner) => `${OWNER_LABEL}=${owner}`,
        logger,
      });
      const { events, run, running } = await started(cache);
      void cache.prefetch("d", new AbortController().signal);
      await allRead;
      const inheritance = new AbortController();
      const inherited = cache.inherit("d", notD2, inheritance.signal);
      expect(names(cache.list())).toEqual(["a1"]);
      api.endList("d");
      await until(cache, () => cache.size === 3);
      expect(names(cache.list())).toEqual(["a1", "d1", "d3"]);
      expect(cache.get({ namespace: "ns", name: "d2" })).toBeUndefined();
      expect(events).toEqual(["add a1", "add d1", "add d3"]);
      expect(api.opened("d")).toBe(1);
      inheritance.abort();
      await inherited;
      run.abort();
      await running;
    });

    it("lists again at the take when the early list was stopped (the replica renewed)", async () => {
      const api = await apiServer(items());
      const cache = own(api.client);
      const { run, running } = await started(cache);
      const early = new AbortController();
      await cache.prefetch("d", early.signal);
      early.abort();
      const inheritance = new AbortController();
      const inherited = cache.inherit("d", notD2, inheritance.signal);
      await until(cache, () => cache.size === 3);
      expect(names(cache.list())).toEqual(["a1", "d1", "d3"]);
      expect(api.opened("d")).toBe(2);
      inheritance.abort();
      await inherited;
      run.abort();
      await running;
    });
  });
});
