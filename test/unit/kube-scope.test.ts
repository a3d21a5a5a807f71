// The cache of a watch scope (src/kube/scope.ts): one namespace, or all, is the reflector itself,
// read with no layer between; several are the union of one reflector each. What a reader asks of
// either (get by namespace and name, a namespace's objects) answers the same. The union over a
// real API server is test/integration/kube-adapters.test.ts ("watches only its namespaces").
import { describe, expect, it } from "vitest";
import { isKubeObject, type KubeObject } from "../../src/kube/object.ts";
import { Reflector } from "../../src/kube/reflector.ts";
import { ScopedReflectors, scopedCache } from "../../src/kube/scope.ts";
import { initialEvents, kubeStub } from "../support/kube-stub.ts";

const thing = (namespace: string | undefined, name: string) => ({
  metadata: { ...(namespace === undefined ? {} : { namespace }), name, resourceVersion: "5" },
});

/** A server whose watch list sends `items` in whichever namespace is asked (all of them for all). */
async function apiServer(items: ReturnType<typeof thing>[]) {
  const { client } = await kubeStub((req, res) => {
    const url = new URL(req.url ?? "/", "http://api");
    const namespace = url.pathname.match(/\/namespaces\/([^/]+)\//)?.[1];
    res.writeHead(200, { "content-type": "application/json" });
    if (url.searchParams.get("sendInitialEvents") === "true") {
      const mine = items.filter((o) => namespace === undefined || o.metadata.namespace === namespace);
      res.write(initialEvents(mine, "12"));
    } else res.write("");
  });
  return client;
}

async function cacheOf(namespaces: string[] | undefined, items: ReturnType<typeof thing>[]) {
  const client = await apiServer(items);
  const made: (string | undefined)[] = [];
  const cache = scopedCache<KubeObject>(namespaces, (namespace) => {
    made.push(namespace);
    return new Reflector<KubeObject>({
      client,
      resource: { group: "", version: "v1", plural: "things" },
      ...(namespace === undefined ? {} : { namespace }),
      decode: (raw) => (isKubeObject(raw) ? raw : undefined),
      minWatchTimeoutSeconds: 1,
    });
  });
  const stop = new AbortController();
  const running = cache.run(stop.signal);
  await cache.synced;
  return {
    cache,
    made,
    stop: async () => {
      stop.abort();
      await running;
    },
  };
}

const names = (objects: KubeObject[]) => objects.map((o) => o.metadata.name).sort();

describe("a watch scope's cache", () => {
  it("is the one reflector for all namespaces, for one, and for one named twice", async () => {
    for (const namespaces of [undefined, [], ["a"], ["a", "a"]]) {
      const { cache, made, stop } = await cacheOf(namespaces, [thing("a", "x")]);
      expect(cache, JSON.stringify(namespaces)).toBeInstanceOf(Reflector);
      expect(made).toEqual([namespaces?.[0]]);
      await stop();
    }
  });

  it("reads all namespaces' objects by namespace and name", async () => {
    const { cache, stop } = await cacheOf(undefined, [thing("a", "x"), thing("b", "x"), thing("b", "y")]);
    expect(cache.get("a", "x")?.metadata.namespace).toBe("a");
    expect(cache.get("b", "x")?.metadata.namespace).toBe("b");
    expect(cache.get("c", "x")).toBeUndefined();
    await stop();
  });

  it("reads a cluster-scoped kind's object by its name, with the namespace empty", async () => {
    const { cache, stop } = await cacheOf(undefined, [thing(undefined, "team-a")]);
    expect(cache.get("", "team-a")?.metadata.name).toBe("team-a");
    expect(cache.get("team-a", "team-a")).toBeUndefined();
    await stop();
  });

  it("answers one namespace's reflector as the union of several would, for namespaces out of its scope", async () => {
    const { cache, stop } = await cacheOf(["a"], [thing("a", "x"), thing("b", "x")]);
    expect(names(cache.list())).toEqual(["x"]);
    expect(cache.get("b", "x")).toBeUndefined();
    await stop();
  });

  it("is the union of one reflector a namespace for several", async () => {
    const { cache, made, stop } = await cacheOf(
      ["a", "b", "a"],
      [thing("a", "x"), thing("b", "y"), thing("c", "z")],
    );
    expect(cache).toBeInstanceOf(ScopedReflectors);
    expect(made).toEqual(["a", "b"]);
    expect(names(cache.list())).toEqual(["x", "y"]);
    expect(cache.get("b", "y")?.metadata.name).toBe("y");
    expect(cache.get("a", "y")).toBeUndefined();
    expect(cache.get("c", "z")).toBeUndefined();
    expect(cache.size).toBe(2);
    await stop();
  });
});
