// The watch of exported ConfigMaps against an API server on loopback: metadata only (a tenant's
// 1 MiB ConfigMaps are never read by the watch), only the ConfigMaps a dms.dev Deployment controls
// kept, the operator's own writes known by version, and a 403 that stops the export alone, never
// the start of the workers or /readyz.
import type { ServerResponse } from "node:http";
import { pino } from "pino";
import { describe, expect, it, vi } from "vitest";
import { CONFIG_MAPS_FORBIDDEN, FORBIDDEN_RECHECK_MS, KubeConfigMaps } from "../../src/kube/config-maps.ts";
import { subscribeExportTriggers } from "../../src/kube/triggers.ts";
import { EXPORT_LABEL, exportDigest } from "../../src/reconcile/export.ts";
import { type Caches, cachesReadiness, cachesSynced } from "../../src/wiring/caches.ts";
import { initialEvents, kubeStub } from "../support/kube-stub.ts";
import { ManualClock } from "../support/manual-clock.ts";

interface Seen {
  method: string;
  url: string;
  accept: string;
}

const owner = (apiVersion: string, kind = "Deployment") => ({
  apiVersion,
  kind,
  name: "agent",
  uid: `uid-${apiVersion}`,
  controller: true,
});

/** A ConfigMap as a metadata-only answer carries it: no data. */
const meta = (name: string, resourceVersion: string, ref = owner("dms.dev/v1alpha1")) => ({
  apiVersion: "meta.k8s.io/v1",
  kind: "PartialObjectMetadata",
  metadata: {
    namespace: "default",
    name,
    uid: `cm-${name}`,
    resourceVersion,
    labels: { [EXPORT_LABEL]: "true" },
    ownerReferences: [ref],
  },
});

/**
 * An API server for ConfigMaps: lists and watch lists answer `items` (or 403 while `forbidden`),
 * watches stay open for `push`, a POST answers the object with resourceVersion "20".
 */
async function apiServer(items: unknown[]) {
  const seen: Seen[] = [];
  const watches: ServerResponse[] = [];
  const state = { forbidden: false, data: {} as Record<string, string> };
  const { client } = await kubeStub((req, res) => {
    seen.push({ method: req.method ?? "", url: req.url ?? "", accept: String(req.headers.accept) });
    let text = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => {
      text += chunk;
    });
    req.on("end", () => {
      if (state.forbidden) {
        res.writeHead(403, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            kind: "Status",
            code: 403,
            reason: "Forbidden",
            message: "configmaps is forbidden",
          }),
        );
        return;
      }
      res.writeHead(req.method === "POST" ? 201 : 200, { "content-type": "application/json" });
      const one = req.method === "GET" ? /\/configmaps\/([^/?]+)$/.exec(req.url ?? "") : null;
      if (one) {
        // A GET of one ConfigMap: the whole object, its data included.
        const found = items.find((i) => (i as { metadata: { name: string } }).metadata.name === one[1]);
        res.end(JSON.stringify({ ...(found as object), kind: "ConfigMap", data: state.data }));
      } else if (req.method === "POST") {
        const body = JSON.parse(text);
        res.end(
          JSON.stringify({ ...body, metadata: { ...body.metadata, uid: "cm-new", resourceVersion: "20" } }),
        );
      } else if (req.url?.includes("watch=true")) {
        // A watch list (what the reflector lists by) sends the items first, then the bookmark that ends them.
        if (req.url.includes("sendInitialEvents=true")) res.write(initialEvents(items, "10"));
        watches.push(res);
      } else res.end(JSON.stringify({ kind: "List", metadata: { resourceVersion: "10" }, items }));
    });
  });
  const push = (type: string, object: unknown) => {
    for (const w of watches) w.write(`${JSON.stringify({ type, object })}\n`);
  };
  return { client, seen, watches, state, push };
}

/** A logger whose error lines are collected. */
function collectingLogger() {
  const errors: string[] = [];
  const logger = pino(
    { level: "info" },
    {
      write: (line: string) => {
        const entry = JSON.parse(line) as { level: number; msg: string };
        if (entry.level >= 50) errors.push(entry.msg);
      },
    },
  );
  return { logger, errors };
}

type Owner = Parameters<Parameters<KubeConfigMaps["onOwnerChange"]>[0]>[0];

/** A KubeConfigMaps over `api`, running (until `stop` aborts) and synced; `owners` as `show` writes them. */
async function started(
  api: Awaited<ReturnType<typeof apiServer>>,
  show = (o: Owner) => `${o.namespace}/${o.name}`,
) {
  const configMaps = new KubeConfigMaps({ client: api.client, logger: pino({ level: "silent" }) });
  const owners: string[] = [];
  configMaps.onOwnerChange((o) => owners.push(show(o)));
  const stop = new AbortController();
  const running = configMaps.run(stop.signal);
  await configMaps.synced;
  return { configMaps, owners, stop, running };
}

describe("KubeConfigMaps: the watch of exported ConfigMaps", () => {
  it("a 403 is logged once, makes the export unavailable, and gates neither the workers nor /readyz", async () => {
    const api = await apiServer([]);
    api.state.forbidden = true;
    const clock = new ManualClock();
    const { logger, errors } = collectingLogger();
    const configMaps = new KubeConfigMaps({ client: api.client, clock, logger });
    const stop = new AbortController();
    const running = configMaps.run(stop.signal);
    await vi.waitFor(() => expect(configMaps.unavailable()).toBe(CONFIG_MAPS_FORBIDDEN));
    for (const probes of [2, 3]) {
      await vi.waitFor(() => expect(clock.pending).toBe(1));
      clock.advance(FORBIDDEN_RECHECK_MS);
      await vi.waitFor(() => expect(api.seen.length).toBe(probes));
    }
    expect(errors).toEqual([CONFIG_MAPS_FORBIDDEN]);
    expect(configMaps.hasSynced()).toBe(false);

    // Every other cache synced: the workers start and /readyz answers ready all the same.
    const synced = { synced: Promise.resolve(), hasSynced: () => true };
    const caches = {
      deployments: synced,
      secrets: synced,
      connections: synced,
      configMaps,
      namespaces: undefined,
    } as unknown as Caches;
    await cachesSynced(caches)();
    await expect(cachesReadiness(caches).check(new AbortController().signal)).resolves.toBeUndefined();

    // Granted later: the next check finds it, and the watch lists.
    api.state.forbidden = false;
    await vi.waitFor(() => expect(clock.pending).toBe(1));
    clock.advance(FORBIDDEN_RECHECK_MS);
    await configMaps.synced;
    expect(configMaps.unavailable()).toBeUndefined();
    stop.abort();
    await running;
  });

  it("lists and watches metadata only, keeps only what a dms.dev Deployment controls, knows its own writes", async () => {
    const api = await apiServer([
      meta("own", "5"),
      meta("apps", "6", owner("apps/v1")),
      meta("other-kind", "7", owner("dms.dev/v1alpha1", "ServiceConnection")),
    ]);
    const { configMaps, owners, stop, running } = await started(
      api,
      (o) => `${o.apiVersion} ${o.kind} ${o.namespace}/${o.name}`,
    );
    await vi.waitFor(() => expect(api.watches).toHaveLength(1));
    const reads = api.seen.filter((r) => r.method === "GET");
    // The permission probe, then the watch list the cache fills from and keeps watching on.
    expect(reads.length).toBeGreaterThanOrEqual(2);
    expect(reads.at(-1)?.url).toContain("sendInitialEvents=true");
    for (const r of reads) {
      expect(r.url).toContain("labelSelector=dms.dev%2Fexport%3Dtrue");
      expect(r.accept).toContain("as=PartialObjectMetadata");
    }

    const ref = (name: string) => ({ namespace: "default", name });
    expect(configMaps.cached(ref("own"))).toMatchObject({ resourceVersion: "5", labelled: true });
    expect(configMaps.cached(ref("own"))?.digest).toBeUndefined();
    expect(configMaps.cached(ref("apps"))).toBeUndefined();
    expect(configMaps.cached(ref("other-kind"))).toBeUndefined();

    // The operator's write: once the watch shows its version, the cache knows what it holds.
    const data = { deploymentId: "dep-1" };
    const write = { ...ref("new"), owner: owner("dms.dev/v1alpha1"), data };
    await configMaps.create(write, stop.signal);
    api.push("ADDED", { ...meta("new", "20"), metadata: { ...meta("new", "20").metadata, uid: "cm-new" } });
    await vi.waitFor(() => expect(configMaps.cached(ref("new"))?.digest).toBe(exportDigest(data)));
    expect(owners).toEqual([]);

    // Another hand's change: a new version, the digest unknown (read live), the owner enqueued.
    api.push("MODIFIED", meta("new", "21"));
    await vi.waitFor(() => expect(owners).toEqual(["dms.dev/v1alpha1 Deployment default/agent"]));
    expect(configMaps.cached(ref("new"))?.resourceVersion).toBe("21");
    expect(configMaps.cached(ref("new"))?.digest).toBeUndefined();

    // Another hand gives it another controller: out of the cache, and the former owner told.
    api.push("MODIFIED", meta("own", "22", owner("apps/v1")));
    await vi.waitFor(() => expect(configMaps.cached(ref("own"))).toBeUndefined());
    expect(owners).toHaveLength(2);
    stop.abort();
    await running;
  });
});

describe("KubeConfigMaps: what a read tells", () => {
  it("a ConfigMap read at the version the watch shows is not read again for the export step (after a restart)", async () => {
    const api = await apiServer([meta("own", "5")]);
    const { configMaps, stop, running } = await started(api);
    const ref = { namespace: "default", name: "own" };
    // A new process: the watch shows the ConfigMap, what it holds is not known yet.
    expect(configMaps.cached(ref)?.digest).toBeUndefined();
    api.state.data = { deploymentId: "dep-1" };
    const live = await configMaps.read(ref, stop.signal);
    expect(live?.resourceVersion).toBe("5");
    // Read once: while the watch shows that version, the cache says what it holds.
    expect(configMaps.cached(ref)).toMatchObject({
      resourceVersion: "5",
      digest: exportDigest(api.state.data),
    });
    // Another hand's change: a new version, read again.
    api.push("MODIFIED", meta("own", "6"));
    await vi.waitFor(() => expect(configMaps.cached(ref)?.resourceVersion).toBe("6"));
    expect(configMaps.cached(ref)?.digest).toBeUndefined();
    stop.abort();
    await running;
  });
});

describe("KubeConfigMaps: what enqueues a resource", () => {
  it("one appearing once listed that the operator did not create (its export label put back) enqueues its controller", async () => {
    const api = await apiServer([meta("listed", "5")]);
    const { configMaps, owners, stop, running } = await started(api);
    await vi.waitFor(() => expect(api.watches).toHaveLength(1));
    // What the start lists is no change: the start reconciles every resource anyway.
    expect(owners).toEqual([]);
    // The export label put back by hand on the resource's own ConfigMap (ExportConflict said so).
    api.push("ADDED", meta("relabelled", "7"));
    await vi.waitFor(() => expect(owners).toEqual(["default/agent"]));
    // The operator's own create is not a change to act on.
    const data = { deploymentId: "dep-1" };
    await configMaps.create(
      { namespace: "default", name: "new", owner: owner("dms.dev/v1alpha1"), data },
      stop.signal,
    );
    api.push("ADDED", { ...meta("new", "20"), metadata: { ...meta("new", "20").metadata, uid: "cm-new" } });
    await vi.waitFor(() => expect(configMaps.cached({ namespace: "default", name: "new" })).toBeDefined());
    expect(owners).toEqual(["default/agent"]);
    stop.abort();
    await running;
  });
});

describe("subscribeExportTriggers", () => {
  it("enqueues the dms.dev Deployment controlling a ConfigMap, never an apps/v1 Deployment of that name", () => {
    let listener: (o: { namespace: string; name: string; apiVersion: string; kind: string }) => void =
      () => {};
    const enqueued: string[] = [];
    subscribeExportTriggers(
      {
        onOwnerChange: (l) => {
          listener = l;
          return () => {};
        },
      },
      { enqueue: (key) => enqueued.push(key) },
    );
    listener({ namespace: "team-a", name: "web", apiVersion: "apps/v1", kind: "Deployment" });
    listener({ namespace: "team-a", name: "agent", apiVersion: "dms.dev/v1alpha1", kind: "Deployment" });
    expect(enqueued).toEqual(["team-a/agent"]);
  });
});
