// The connections' rules at unit speed: which connection a resource may use and why not, what a
// connection's probe makes of each answer, when it probes again and rebuilds its client, and how
// a deletion in use is held. The cluster test (controller-connections) runs the same code against
// a real API server and two simulators.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { ServiceError } from "../../src/api/errors.ts";
import { type ServiceConfig, serviceConfigFrom } from "../../src/config.ts";
import { NamespaceAccess } from "../../src/connection/access.ts";
import {
  ConnectionReconciler,
  type ConnectionStore,
  failedProbeBackoffMs,
} from "../../src/connection/controller.ts";
import { NamespaceBound, NamespaceOrder } from "../../src/connection/namespace-bound.ts";
import { ConnectionRegistry, type ConnectionService } from "../../src/connection/registry.ts";
import { connectionSpecProblems } from "../../src/connection/settings.ts";
import type { ConnectionStatus } from "../../src/crd/connection-schema.ts";
import { type ConnectionId, connectionKey, idOf } from "../../src/crd/conventions.ts";
import { parseSelector, type Selector } from "../../src/crd/label-selector.ts";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import type { ConnectionObject } from "../../src/kube/connections.ts";
import { claimOf } from "../../src/reconcile/inputs.ts";
import type { StoredResource } from "../../src/reconcile/ports.ts";
import { ServiceSession } from "../../src/reconcile/service/session.ts";
import { objectKey } from "../../src/runtime/queue-records.ts";
import { SELF_SIGNED } from "../contract/client-tls-fixture.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { MemorySecrets, ResourceConflict, SimulatedService } from "../support/memory-ports.ts";

const START = Date.parse("2030-01-01T00:00:00Z");
const KEY = "tenant-a-key-0123456789";
const signal = new AbortController().signal;

/** The operator's own settings: its flags' defaults (SERVICE_SETTINGS) with a URL, key and tenant. */
const DEFAULTS: ServiceConfig = (() => {
  const parsed = serviceConfigFrom(
    {
      baseUrl: "https://default.example",
      apiKey: "default-key",
      tenantId: "6f1c1d2e-0000-4000-8000-0000000000dd",
    },
    {},
  );
  if (!parsed.ok) throw new Error(parsed.problems.join("; "));
  return parsed.config;
})();

const SPEC: DeploymentSpec = { source: "external_docker", sourceRevisionConfig: { imageUri: "repo/a:1" } };

/** Connection objects as the API server keeps them: resourceVersion checked on every write. */
class MemoryConnections implements ConnectionStore {
  readonly objects = new Map<string, ConnectionObject>();
  cluster = true;
  #version = 1;

  watches(kind: ConnectionId["kind"]): boolean {
    return kind === "ServiceConnection" || this.cluster;
  }
  get(id: ConnectionId): ConnectionObject | undefined {
    const obj = this.objects.get(connectionKey(id));
    return obj && structuredClone(obj);
  }
  put(id: ConnectionId, spec: ConnectionObject["spec"], generation = 1): void {
    const existing = this.objects.get(connectionKey(id));
    this.objects.set(connectionKey(id), {
      ...existing,
      metadata: {
        ...existing?.metadata,
        name: id.name,
        ...(id.namespace ? { namespace: id.namespace } : {}),
        generation,
        resourceVersion: String(++this.#version),
      },
      spec,
    });
  }
  /** `kubectl delete`: marked, and gone with its last finalizer. */
  delete(id: ConnectionId): void {
    const obj = this.objects.get(connectionKey(id));
    if (!obj) return;
    if ((obj.metadata.finalizers ?? []).length === 0) this.objects.delete(connectionKey(id));
    else obj.metadata.deletionTimestamp = new Date(START).toISOString();
  }
  #write(obj: ConnectionObject, change: (stored: ConnectionObject) => void): ConnectionObject {
    const key = connectionKey(idOf(obj));
    const stored = this.objects.get(key);
    if (!stored || stored.metadata.resourceVersion !== obj.metadata.resourceVersion)
      throw new ResourceConflict("stale");
    change(stored);
    stored.metadata.resourceVersion = String(++this.#version);
    if (stored.metadata.deletionTimestamp && (stored.metadata.finalizers ?? []).length === 0)
      this.objects.delete(key);
    return structuredClone(stored);
  }
  async patchStatus(obj: ConnectionObject, status: ConnectionStatus) {
    return this.#write(obj, (s) => {
      s.status = structuredClone(status);
    });
  }
  async addFinalizer(obj: ConnectionObject, finalizer: string) {
    if (obj.metadata.finalizers?.includes(finalizer)) return obj;
    return this.#write(obj, (s) => {
      s.metadata.finalizers = [...(s.metadata.finalizers ?? []), finalizer];
    });
  }
  async removeFinalizer(obj: ConnectionObject, finalizer: string) {
    return this.#write(obj, (s) => {
      s.metadata.finalizers = (s.metadata.finalizers ?? []).filter((f) => f !== finalizer);
    });
  }
}

const A: ConnectionId = { kind: "ServiceConnection", namespace: "team-a", name: "prod" };
const SHARED: ConnectionId = { kind: "ClusterServiceConnection", namespace: "", name: "shared" };
const specOf = (baseUrl = "https://a.example") => ({
  baseUrl,
  apiKeySecretRef: { name: "dms", key: "api-key" },
});

/** A Deployment resource of `namespace` using `connectionRef`. */
const resource = (namespace: string, connectionRef?: DeploymentSpec["connectionRef"]): StoredResource => ({
  metadata: { name: "agent", namespace, resourceVersion: "1" },
  spec: { ...SPEC, ...(connectionRef ? { connectionRef } : {}) },
});

/** Who may use what in a {@link world}: namespace labels, and the default connection's selector. */
interface AccessWorld {
  labels?: Record<string, Record<string, string>>;
  defaultSelector?: string;
  /** The namespace of each resource using a connection (the cache index in production). */
  userNamespaces?: string[];
}

function world(access?: AccessWorld, bound?: { maxPerNamespace: number }) {
  const clock = new ManualClock({ start: START });
  const now = () => clock.now();
  const store = new MemoryConnections();
  const secrets = new MemorySecrets();
  const logger = pino({ level: "silent" });
  const session = (port: SimulatedService) =>
    new ServiceSession(port, { clock, logger, listingMaxAgeMs: 60_000 });
  const w = {
    clock,
    store,
    secrets,
    /** What the next probe answers: a number of providers, an error, or nothing ever. */
    answer: 2 as number | Error | "never",
    probes: 0,
    /** The settings of each client built, in order. */
    built: [] as ServiceConfig[],
    /** The clients closed, as `<base URL> <key>: <why>`, in order. */
    closed: [] as string[],
    changed: [] as string[],
    /** Connections the reconciler enqueued for a reconcile of their own. */
    enqueued: [] as string[],
    events: [] as string[],
    users: 0,
    /** Whether this process writes the connections' finalizer and status (the leader, sharded). */
    writes: true,
    /** The namespaces' order of connections, as the watch events keep it in production. */
    order: new NamespaceOrder(),
    defaultSession: session(new SimulatedService({ now })),
    connections: undefined as unknown as ConnectionRegistry,
    reconciler: undefined as unknown as ConnectionReconciler,
    reconcile: (id: ConnectionId) => w.reconciler.reconcile(connectionKey(id), signal),
    status: (id: ConnectionId) => store.get(id)?.status,
    ready: (id: ConnectionId) => store.get(id)?.status?.conditions?.find((c) => c.type === "Ready"),
    condition: (id: ConnectionId, type: string) =>
      store.get(id)?.status?.conditions?.find((c) => c.type === type),
  };
  w.connections = new ConnectionRegistry({
    connections: store,
    defaultSession: w.defaultSession,
    connect: (config): ConnectionService => {
      w.built.push(config);
      return {
        port: new SimulatedService({ now }),
        close: (why) => w.closed.push(`${config.baseUrl} ${config.apiKey}: ${why}`),
        probe: async (probeSignal) => {
          w.probes += 1;
          if (w.answer === "never")
            return new Promise<number>((_, reject) => {
              probeSignal.addEventListener("abort", () => reject(probeSignal.reason), { once: true });
            });
          if (w.answer instanceof Error) throw w.answer;
          return w.answer;
        },
      };
    },
    session,
    ...(bound ? { bound: new NamespaceBound(bound.maxPerNamespace, w.order) } : {}),
    ...(access
      ? {
          access: new NamespaceAccess({
            labels: (namespace: string) => access.labels?.[namespace],
            ...(access.defaultSelector !== undefined
              ? {
                  defaultSelector: {
                    text: access.defaultSelector,
                    selector: selectorOf(access.defaultSelector),
                  },
                }
              : {}),
          }),
        }
      : {}),
  });
  w.reconciler = new ConnectionReconciler({
    registry: w.connections,
    connections: store,
    defaults: DEFAULTS,
    secrets,
    usage: () => w.users,
    writes: () => w.writes,
    ...(access ? { userNamespaces: () => access.userNamespaces ?? [] } : {}),
    onChange: (key) => w.changed.push(key),
    enqueue: (key) => w.enqueued.push(key),
    event: (obj, type, reason) => w.events.push(`${type}/${reason}/${obj.metadata.name}`),
    isConflict: (error) => error instanceof ResourceConflict,
    clock,
    logger,
    probeIntervalMs: 300_000,
  });
  return w;
}

function selectorOf(text: string): Selector {
  const parsed = parseSelector(text);
  if (!parsed.ok) throw new Error(parsed.problem);
  return parsed.selector;
}

const serviceError = (kind: "unauthorized" | "network" | "too_large", status?: number) =>
  new ServiceError({
    kind,
    method: "GET",
    route: "/v2/auth/providers",
    ...(status ? { status } : {}),
    detail:
      kind === "unauthorized"
        ? `invalid key ${KEY}`
        : kind === "too_large"
          ? "the answer was larger than 8388608 bytes (--max-response-bytes / DMS_MAX_RESPONSE_BYTES)"
          : "connect ECONNREFUSED",
    retryable: kind === "network",
  });

/** A 429 of the probe, asking to wait `seconds`. */
const rateLimited = (seconds: number) =>
  new ServiceError({
    kind: "rate_limited",
    method: "GET",
    route: "/v2/auth/providers",
    status: 429,
    detail: "Too Many Requests",
    retryable: true,
    retryAfterSeconds: seconds,
  });

describe("which connection a resource may use", () => {
  it("a resource without connectionRef uses the default connection", () => {
    const w = world();
    const found = w.connections.lookup(resource("team-a"));
    expect(found).toEqual({ kind: "ready", session: w.defaultSession });
  });

  it("a missing ServiceConnection is unavailable, and the message says only its own namespace counts", () => {
    const w = world();
    w.store.put(A, specOf());
    const found = w.connections.lookup(resource("team-b", { kind: "ServiceConnection", name: "prod" }));
    expect(found.kind).toBe("unavailable");
    expect(found.kind === "unavailable" && found.message).toContain(
      "ServiceConnection team-b/prod not found: a Deployment uses a ServiceConnection of its own namespace only",
    );
  });

  it("a ClusterServiceConnection under an install that does not watch them says why", () => {
    const w = world();
    w.store.cluster = false;
    const found = w.connections.lookup(
      resource("team-a", { kind: "ClusterServiceConnection", name: "shared" }),
    );
    expect(found.kind === "unavailable" && found.message).toContain("needs the cluster-wide install");
  });

  it("an existing connection not checked yet is pending: no status is concluded for its resources", () => {
    const w = world();
    w.store.put(A, specOf());
    expect(w.connections.lookup(resource("team-a", { kind: "ServiceConnection", name: "prod" }))).toEqual({
      kind: "pending",
    });
  });
});

describe("who may use a connection: namespace selectors", () => {
  const shared = { kind: "ClusterServiceConnection", name: "shared" } as const;
  const selecting = (namespaceSelector: NonNullable<ConnectionObject["spec"]["namespaceSelector"]>) => ({
    ...specOf(),
    apiKeySecretRef: { name: "dms", key: "api-key", namespace: "dms-system" },
    namespaceSelector,
  });
  const LABELS = { "team-a": { team: "a" }, "team-x": { team: "x", quarantine: "yes" } };

  /** A world whose ClusterServiceConnection `shared` selects `team=a` and is Ready. */
  async function sharedWorld(access: AccessWorld = {}) {
    const w = world({ labels: LABELS, ...access });
    w.store.put(SHARED, selecting({ matchLabels: { team: "a" } }));
    w.secrets.set("dms-system", "dms", { "api-key": KEY });
    await w.reconcile(SHARED);
    return w;
  }

  it("a namespace the selector selects uses the connection", async () => {
    const w = await sharedWorld();
    expect(w.connections.lookup(resource("team-a", shared)).kind).toBe("ready");
  });

  it("another namespace is refused, told the connection, the selector and the labels it lacks", async () => {
    const w = await sharedWorld();
    const found = w.connections.lookup(resource("team-x", shared));
    expect(found.kind).toBe("refused");
    const message = found.kind === "refused" ? found.message : "";
    expect(message).toContain(
      "ClusterServiceConnection shared may not be used from namespace team-x: its spec.namespaceSelector (team=a) does not select this namespace.",
    );
    expect(message).toContain("The namespace needs label team=a (it has team=x)");
    expect(message).toContain("kubectl label namespace team-x team=a");
  });

  it("refuses before saying whether the connection is Ready: a refused namespace learns nothing of it", () => {
    const w = world({ labels: LABELS });
    w.store.put(SHARED, selecting({ matchLabels: { team: "a" } }));
    // Not checked yet (pending for its own namespaces), and its Secret is missing: still refused.
    expect(w.connections.lookup(resource("team-x", shared)).kind).toBe("refused");
    expect(w.connections.lookup(resource("team-a", shared))).toEqual({ kind: "pending" });
  });

  it("matchExpressions too; {} selects every namespace; no selector, every namespace", async () => {
    const w = await sharedWorld();
    w.store.put(
      SHARED,
      selecting({ matchExpressions: [{ key: "quarantine", operator: "DoesNotExist" }] }),
      2,
    );
    expect(w.connections.lookup(resource("team-a", shared)).kind).toBe("ready");
    const refused = w.connections.lookup(resource("team-x", shared));
    expect(refused.kind === "refused" && refused.message).toContain(
      "needs no label quarantine (it has quarantine=yes): if this team is meant to use that tenant, a cluster admin labels it (kubectl label namespace team-x quarantine-)",
    );
    w.store.put(SHARED, selecting({}), 3);
    expect(w.connections.lookup(resource("team-x", shared)).kind).toBe("ready");
    w.store.put(
      SHARED,
      { ...specOf(), apiKeySecretRef: { name: "dms", key: "api-key", namespace: "dms-system" } },
      4,
    );
    expect(w.connections.lookup(resource("team-x", shared)).kind).toBe("ready");
  });

  it("a selector that bypassed the CRD's validation refuses every namespace, saying why", async () => {
    const w = await sharedWorld();
    w.store.put(
      SHARED,
      selecting({ matchExpressions: [{ key: "team", operator: "Gt" as "In", values: ["1"] }] }),
      2,
    );
    const found = w.connections.lookup(resource("team-a", shared));
    expect(found.kind === "refused" && found.message).toContain(
      'its spec.namespaceSelector is invalid (matchExpressions[0].operator "Gt" is not one of In, NotIn, Exists, DoesNotExist), so it refuses every namespace',
    );
  });

  it("a namespace not seen yet is pending, never allowed by default", async () => {
    const w = await sharedWorld();
    expect(w.connections.lookup(resource("new-team", shared))).toEqual({ kind: "pending" });
  });

  it("a ServiceConnection has no selector: its own namespace always uses it", async () => {
    const w = world({ labels: LABELS, defaultSelector: "team=a" });
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    await w.reconcile(A);
    expect(w.connections.lookup(resource("team-a", { kind: "ServiceConnection", name: "prod" })).kind).toBe(
      "ready",
    );
  });

  it("the default connection: only the namespaces --default-connection-namespace-selector selects", () => {
    const w = world({
      labels: { ...LABELS, platform: { "dms.dev/tenant": "platform" } },
      defaultSelector: "dms.dev/tenant=platform",
    });
    expect(w.connections.lookup(resource("platform"))).toEqual({ kind: "ready", session: w.defaultSession });
    const found = w.connections.lookup(resource("team-a"));
    expect(found.kind === "refused" && found.message).toContain(
      "the default connection (the operator's own credentials, for resources without spec.connectionRef) may not be used from namespace team-a: --default-connection-namespace-selector (dms.dev/tenant=platform) does not select this namespace. The namespace needs label dms.dev/tenant=platform",
    );
    expect(found.kind === "refused" && found.message).toContain("otherwise set spec.connectionRef");
    expect(world({ labels: LABELS }).connections.lookup(resource("team-x")).kind).toBe("ready");
  });

  it("counts the resources it refuses in status.refused, and they do not hold its deletion", async () => {
    const w = await sharedWorld({ userNamespaces: ["team-a", "team-x", "team-x"] });
    w.users = 3;
    await w.reconcile(SHARED);
    expect(w.status(SHARED)).toMatchObject({ deployments: 3, refused: 2 });
    w.store.delete(SHARED);
    await w.reconcile(SHARED);
    expect(w.condition(SHARED, "Reconciling")?.message).toContain("1 still does");
  });

  it("a ServiceConnection refuses no one: status.refused 0", async () => {
    const w = world({ labels: LABELS, userNamespaces: ["team-a"] });
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    w.users = 1;
    await w.reconcile(A);
    expect(w.status(A)).toMatchObject({ deployments: 1, refused: 0 });
  });

  it("a changed selector enqueues the connection's resources: they may now be allowed or refused", async () => {
    const w = await sharedWorld();
    w.changed.length = 0;
    await w.reconcile(SHARED);
    expect(w.changed).toEqual([]);
    w.store.put(SHARED, selecting({ matchLabels: { team: "x" } }), 2);
    await w.reconcile(SHARED);
    expect(w.changed).toEqual([connectionKey(SHARED)]);
  });

  it("refusals: per connection, the resources refused now (the dms_connection_refused gauge)", async () => {
    const w = await sharedWorld({ defaultSelector: "team=a" });
    const counts = w.connections.refusals([
      resource("team-a", shared),
      resource("team-x", shared),
      resource("team-x", shared),
      resource("team-x"),
      resource("team-a"),
      resource("team-x", { kind: "ClusterServiceConnection", name: "missing" }),
      resource("team-x", { kind: "ServiceConnection", name: "prod" }),
    ]);
    expect(Object.fromEntries(counts)).toEqual({ [connectionKey(SHARED)]: 2, default: 1 });
  });
});

/** A ServiceConnection of team-a probed Ready with its Secret's key, one resource using it. */
async function connectedInUse() {
  const w = world();
  w.store.put(A, specOf());
  w.secrets.set("team-a", "dms", { "api-key": KEY });
  await w.reconcile(A);
  w.users = 1;
  return w;
}

describe("a connection's reconcile", () => {
  const ref = { kind: "ServiceConnection", name: "prod" } as const;

  it("probes with the Secret's key over the operator's defaults; Ready Connected; its resources enqueued", async () => {
    const w = world();
    w.store.put(A, { ...specOf(), qps: 5 });
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    w.users = 3;
    expect(await w.reconcile(A)).toEqual({ kind: "done" });

    expect(w.built).toEqual([
      { ...DEFAULTS, baseUrl: "https://a.example", apiKey: KEY, tenantId: undefined, qps: 5 },
    ]);
    expect(w.ready(A)).toMatchObject({ status: "True", reason: "Connected", observedGeneration: 1 });
    expect(w.status(A)).toMatchObject({
      providers: 2,
      deployments: 3,
      lastProbeTime: "2030-01-01T00:00:00Z",
    });
    expect(w.store.get(A)?.metadata.finalizers).toEqual(["dms.dev/connection-in-use"]);
    expect(w.changed).toEqual([connectionKey(A)]);
    expect(w.events).toEqual(["Normal/Connected/prod"]);
    const found = w.connections.lookup(resource("team-a", ref));
    expect(found.kind === "ready" && found.session).not.toBe(w.defaultSession);
    expect(w.connections.sessions().map((s) => s.key)).toEqual(["default", connectionKey(A)]);
  });

  it("a Secret it may not read: SecretUnreadable on the connection and its resources, retried until readable", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    w.secrets.failing.set("team-a/dms", new Error('secrets "dms" is forbidden'));
    const result = await w.reconcile(A);
    expect(result).toEqual({ kind: "retry" });
    expect(w.ready(A)).toMatchObject({ status: "False", reason: "SecretUnreadable" });
    expect(w.ready(A)?.message).toContain(
      'cannot read Secret team-a/dms (spec.apiKeySecretRef): secrets "dms" is forbidden; the operator needs get on Secrets in namespace team-a',
    );
    expect(w.condition(A, "Reconciling")?.reason).toBe("SecretUnreadable");
    expect(w.condition(A, "Stalled")).toBeUndefined();
    expect(w.built).toEqual([]);
    const found = w.connections.lookup(resource("team-a", ref));
    expect(found.kind === "unavailable" && found.message).toContain(
      "ServiceConnection team-a/prod is not Ready (SecretUnreadable)",
    );
    expect(w.changed).toEqual([connectionKey(A)]);

    w.secrets.failing.clear();
    await w.reconcile(A);
    expect(w.ready(A)?.reason).toBe("Connected");
    expect(w.condition(A, "Reconciling")).toBeUndefined();
    expect(w.connections.lookup(resource("team-a", ref)).kind).toBe("ready");
  });

  it("a missing Secret or key: SecretMissing, Stalled, no client built; the Secret's arrival heals it", async () => {
    const w = world();
    w.store.put(A, specOf());
    await w.reconcile(A);
    expect(w.ready(A)).toMatchObject({ status: "False", reason: "SecretMissing" });
    expect(w.ready(A)?.message).toContain("Secret team-a/dms (spec.apiKeySecretRef) not found: create it");
    expect(w.condition(A, "Stalled")?.reason).toBe("SecretMissing");
    expect(w.built).toEqual([]);
    const found = w.connections.lookup(resource("team-a", ref));
    expect(found.kind === "unavailable" && found.message).toContain(
      "ServiceConnection team-a/prod is not Ready (SecretMissing)",
    );
    expect(found.kind === "unavailable" && found.retrying).toBeFalsy();

    w.secrets.set("team-a", "dms", { other: "x" });
    await w.reconcile(A);
    expect(w.ready(A)?.message).toContain("Secret team-a/dms (spec.apiKeySecretRef) has no key api-key");

    w.secrets.set("team-a", "dms", { "api-key": " \n" });
    await w.reconcile(A);
    expect(w.ready(A)?.message).toContain("key api-key is empty");

    w.secrets.set("team-a", "dms", { "api-key": `${KEY}\n` });
    await w.reconcile(A);
    expect(w.ready(A)?.reason).toBe("Connected");
    expect(w.built.map((c) => c.apiKey)).toEqual([KEY]);
    expect(w.condition(A, "Stalled")).toBeUndefined();
    // Its resources were told when it became unusable (they were waiting for its first check),
    // not again for the other missing key, and again when it became usable.
    expect(w.changed).toEqual([connectionKey(A), connectionKey(A)]);
  });

  it.each([
    ["a line break inside", `${KEY}\nsecond-line`, "a line break"],
    ["a file saved as UTF-16", `${KEY}`.split("").join("\u0000"), "a control character"],
    ["a character outside ASCII", `${KEY}\u00e9`, "a character outside printable ASCII"],
    ["a character outside Latin-1", `${KEY}\u043a`, "a character outside printable ASCII"],
  ])(
    "a key with %s no HTTP header can carry as written: SecretMissing, Stalled, no client, the key never shown",
    async (_, value, said) => {
      const w = world();
      w.store.put(A, specOf());
      w.secrets.set("team-a", "dms", { "api-key": value });
      expect(await w.reconcile(A)).toEqual({ kind: "done" });
      expect(w.ready(A)).toMatchObject({ status: "False", reason: "SecretMissing" });
      expect(w.ready(A)?.message).toContain(
        `Secret team-a/dms (spec.apiKeySecretRef) key api-key holds ${said}`,
      );
      expect(w.condition(A, "Stalled")?.reason).toBe("SecretMissing");
      expect([w.built.length, w.probes]).toEqual([0, 0]);
      expect(JSON.stringify(w.status(A))).not.toContain(KEY);
    },
  );

  it("a key longer than any API key: SecretMissing, no client built that would send it with every call", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": "k".repeat(1024 * 1024) });
    await w.reconcile(A);
    expect(w.ready(A)).toMatchObject({ status: "False", reason: "SecretMissing" });
    expect(w.ready(A)?.message).toContain(
      "key api-key holds 1048576 characters, more than the 8192 an API key may have",
    );
    expect([w.built.length, w.probes]).toEqual([0, 0]);
  });

  it("a refused key: Unauthorized and Stalled, never retried in a loop, and the key never in a message", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    w.answer = serviceError("unauthorized", 401);
    expect(await w.reconcile(A)).toEqual({ kind: "done" });
    expect(w.ready(A)).toMatchObject({ status: "False", reason: "Unauthorized" });
    expect(w.condition(A, "Stalled")?.reason).toBe("Unauthorized");
    expect(JSON.stringify(w.status(A))).not.toContain(KEY);
    expect(w.events).toEqual(["Warning/Unauthorized/prod"]);
    // Its resources, waiting for its first check, are told.
    expect(w.changed).toEqual([connectionKey(A)]);
    await w.reconcile(A);
    expect(w.changed).toEqual([connectionKey(A)]);
  });

  it("probes a refused or unreachable connection again only after its backoff, whatever brings it back; a new key at once", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    w.answer = serviceError("unauthorized", 401);
    expect(await w.reconcile(A)).toEqual({ kind: "done" });
    // A tenant creating resources (each counted), a namespace relabelled: the connection comes
    // back with each, and its service is not asked again before the backoff has passed.
    for (let i = 0; i < 5; i++) expect(await w.reconcile(A)).toEqual({ kind: "done" });
    expect(w.probes).toBe(1);
    w.clock.advance(1_000);
    await w.reconcile(A);
    expect(w.probes).toBe(2);
    w.clock.advance(1_999);
    await w.reconcile(A);
    expect(w.probes).toBe(2);
    w.clock.advance(1);
    await w.reconcile(A);
    expect(w.probes).toBe(3);
    // Unreachable: retried (the key's backoff), probed once the probe's own backoff has passed.
    w.answer = serviceError("network");
    w.clock.advance(4_000);
    expect(await w.reconcile(A)).toEqual({ kind: "retry" });
    expect([w.probes, w.ready(A)?.reason]).toEqual([4, "Unreachable"]);
    w.clock.advance(7_999);
    expect(await w.reconcile(A)).toEqual({ kind: "retry" });
    expect(w.probes).toBe(4);
    // At most 4 minutes apart: the periodic pass (every probe interval) always probes.
    for (let i = 0; i < 10; i++) {
      w.clock.advance(240_000);
      await w.reconcile(A);
    }
    expect(w.probes).toBe(14);
    // A new key is probed at once, and its verdict starts the count again.
    w.answer = 3;
    w.secrets.set("team-a", "dms", { "api-key": "rotated-key" });
    await w.reconcile(A);
    expect([w.probes, w.ready(A)?.reason]).toEqual([15, "Connected"]);
    // 1 s after a first failure, doubling with each, at most 0.8 × the probe interval.
    expect([1, 2, 3, 8, 9, 40].map((n) => failedProbeBackoffMs(n, 300_000))).toEqual([
      1_000, 2_000, 4_000, 128_000, 240_000, 240_000,
    ]);
  });

  it("an unreachable service: Unreachable with Reconciling, retried with backoff", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    w.answer = serviceError("network");
    expect(await w.reconcile(A)).toEqual({ kind: "retry" });
    expect(w.ready(A)).toMatchObject({ status: "False", reason: "Unreachable" });
    expect(w.condition(A, "Reconciling")?.message).toMatch(
      /^retrying: cannot reach the service at https:\/\/a.example/,
    );
    expect(w.condition(A, "Stalled")).toBeUndefined();
    // Its resources wait for it as it retries: not Stalled (a failure that waits for a change is).
    expect(w.connections.lookup(resource("team-a", ref))).toMatchObject({
      kind: "unavailable",
      retrying: true,
    });

    // Its retry, once the probe's backoff (1 s after a first failure) has passed.
    w.answer = 4;
    w.clock.advance(1_000);
    expect(await w.reconcile(A)).toEqual({ kind: "done" });
    expect(w.ready(A)?.reason).toBe("Connected");
    expect(w.condition(A, "Reconciling")).toBeUndefined();
    expect(w.status(A)?.providers).toBe(4);
  });

  it("a service that never answers: Unreachable at the probe's deadline, its worker free again", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    w.answer = "never";
    const check = w.reconcile(A);
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(w.probes).toBe(1);
    w.clock.advance(10_000);
    expect(await check).toEqual({ kind: "retry" });
    expect(w.ready(A)).toMatchObject({
      status: "False",
      reason: "Unreachable",
      message:
        "cannot reach the service at https://a.example: no answer to GET /v2/auth/providers within the probe's deadline of 10000 ms",
    });
  });

  it("a probe answered with more than the limit: ResponseTooLarge, retried with backoff", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    w.answer = serviceError("too_large");
    expect(await w.reconcile(A)).toEqual({ kind: "retry" });
    expect(w.ready(A)).toMatchObject({ status: "False", reason: "ResponseTooLarge" });
    expect(w.ready(A)?.message).toContain(
      "larger than 8388608 bytes (--max-response-bytes / DMS_MAX_RESPONSE_BYTES)",
    );
    expect(w.condition(A, "Reconciling")?.reason).toBe("ResponseTooLarge");
    expect(w.condition(A, "Stalled")).toBeUndefined();
    expect(w.events).toEqual(["Warning/ResponseTooLarge/prod"]);
  });

  it("a probe answered 429 keeps the last verdict and asks again after Retry-After", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    await w.reconcile(A);
    w.clock.advance(300_000);
    w.answer = rateLimited(30);
    expect(await w.reconcile(A)).toEqual({ kind: "requeueAfter", ms: 30_000 });
    expect(w.ready(A)?.reason).toBe("Connected");
    expect(w.status(A)?.lastProbeTime).toBe("2030-01-01T00:00:00Z");
    expect(w.connections.lookup(resource("team-a", ref)).kind).toBe("ready");
    // A resource counted meanwhile does not ask sooner.
    w.clock.advance(5_000);
    expect(await w.reconcile(A)).toEqual({ kind: "requeueAfter", ms: 25_000 });
    expect(w.probes).toBe(2);
  });

  it("a first probe answered 429 asks again after Retry-After, not sooner, whatever brings it back meanwhile", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    w.answer = rateLimited(30);
    expect(await w.reconcile(A)).toEqual({ kind: "requeueAfter", ms: 30_000 });
    expect(w.ready(A)?.reason).toBe("Unreachable");
    w.clock.advance(10_000);
    expect(await w.reconcile(A)).toEqual({ kind: "requeueAfter", ms: 20_000 }); // a resource counted
    expect(w.probes).toBe(1);
    w.clock.advance(20_000);
    w.answer = 2;
    expect(await w.reconcile(A)).toEqual({ kind: "done" });
    expect([w.probes, w.ready(A)?.reason]).toEqual([2, "Connected"]);
  });

  it("probes again only when the interval has passed, and rebuilds the client only when spec or key change", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    await w.reconcile(A);
    w.clock.advance(60_000);
    await w.reconcile(A); // a resource started using it: counted, not probed
    expect(w.probes).toBe(1);
    w.clock.advance(300_000);
    await w.reconcile(A);
    expect([w.probes, w.built.length]).toEqual([2, 1]);
    expect(w.status(A)?.lastProbeTime).toBe("2030-01-01T00:06:00Z");

    w.store.put(A, specOf("https://b.example"), 2);
    await w.reconcile(A);
    w.secrets.set("team-a", "dms", { "api-key": "rotated-key" });
    await w.reconcile(A);
    expect(w.built.map((c) => [c.baseUrl, c.apiKey])).toEqual([
      ["https://a.example", KEY],
      ["https://b.example", KEY],
      ["https://b.example", "rotated-key"],
    ]);
    expect(w.probes).toBe(4);
    expect(w.ready(A)?.observedGeneration).toBe(2);
  });

  it("closes the client it replaces (a changed spec, key or CA) or drops (a deleted connection): its calls stop", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    await w.reconcile(A);
    w.clock.advance(300_000);
    await w.reconcile(A);
    expect(w.closed).toEqual([]);

    w.store.put(A, specOf("https://b.example"), 2);
    await w.reconcile(A);
    w.secrets.set("team-a", "dms", { "api-key": "rotated-key" });
    await w.reconcile(A);
    const changed =
      "the connection's settings changed (its spec, API key or CA): its client was replaced, and a call is made again through the new one";
    expect(w.closed).toEqual([
      `https://a.example ${KEY}: ${changed}`,
      `https://b.example ${KEY}: ${changed}`,
    ]);

    w.store.objects.delete(connectionKey(A));
    await w.reconcile(A);
    expect(w.closed.slice(2)).toEqual(["https://b.example rotated-key: the connection was deleted"]);
  });

  it("its spec.rolloutWindows reach its resources at lookup; a change enqueues them without rebuilding the client", async () => {
    const w = world();
    const nights = { kind: "allow" as const, schedule: "0 22 * * 1-5", duration: "8h" };
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    await w.reconcile(A);
    const user = resource("team-a", { kind: "ServiceConnection", name: "prod" });
    expect(w.connections.lookup(user)).not.toHaveProperty("rolloutWindows");
    w.changed.length = 0;
    w.store.put(A, { ...specOf(), rolloutWindows: [nights] }, 2);
    await w.reconcile(A);
    expect(w.changed).toEqual([connectionKey(A)]);
    expect(w.connections.lookup(user)).toMatchObject({
      kind: "ready",
      rolloutWindows: { windows: [nights], from: "ServiceConnection team-a/prod" },
    });
    await w.reconcile(A);
    expect(w.changed).toEqual([connectionKey(A)]);
    expect(w.built).toHaveLength(1);
    // Binding: a change of the policy alone enqueues them too, and the lookup says who may lift them.
    w.store.put(A, { ...specOf(), rolloutWindows: [nights], rolloutWindowsPolicy: "Binding" }, 3);
    await w.reconcile(A);
    expect(w.changed).toEqual([connectionKey(A), connectionKey(A)]);
    expect(w.connections.lookup(user)).toMatchObject({
      rolloutWindows: {
        windows: [nights],
        binding: { liftedBy: "whoever may edit ServiceConnections in namespace team-a" },
      },
    });
    expect(w.built).toHaveLength(1);
  });

  it("a cluster connection reads its Secret in the namespace it names; insecureSkipTLSVerify warns", async () => {
    const w = world();
    w.store.put(SHARED, {
      ...specOf(),
      apiKeySecretRef: { name: "dms", key: "api-key", namespace: "dms-system" },
      insecureSkipTLSVerify: true,
    });
    w.secrets.set("dms-system", "dms", { "api-key": KEY });
    await w.reconcile(SHARED);
    expect(w.ready(SHARED)?.reason).toBe("Connected");
    expect(w.built[0]?.insecureSkipTlsVerify).toBe(true);
    expect(w.events).toContain("Warning/InsecureSkipTLSVerify/shared");
    const found = w.connections.lookup(
      resource("team-z", { kind: "ClusterServiceConnection", name: "shared" }),
    );
    expect(found.kind).toBe("ready");
  });

  it("a deletion waits while resources use the connection, which stays usable for their cleanup", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    await w.reconcile(A);
    w.users = 2;
    w.store.delete(A);
    expect(await w.reconcile(A)).toEqual({ kind: "done" });
    expect(w.condition(A, "Reconciling")).toMatchObject({
      reason: "InUse",
      message: "deletion waits until no Deployment resource uses this connection: 2 still do",
    });
    expect(w.connections.lookup(resource("team-a", ref)).kind).toBe("ready");

    w.users = 0;
    expect(await w.reconcile(A)).toEqual({ kind: "gone" });
    expect(w.store.get(A)).toBeUndefined();
    await w.reconcile(A);
    expect(w.connections.lookup(resource("team-a", ref)).kind).toBe("unavailable");
    expect(w.changed).toEqual([connectionKey(A), connectionKey(A)]);
  });

  it("a deletion in use whose Secret went with its namespace keeps the client built from it, for their cleanup", async () => {
    const w = await connectedInUse();
    // The namespace is being deleted: the Secret goes at once, the connection waits for its users.
    w.store.delete(A);
    w.secrets.remove("team-a", "dms");
    expect(await w.reconcile(A)).toEqual({ kind: "done" });
    expect(w.connections.lookup(resource("team-a", ref)).kind).toBe("ready");
    expect(w.condition(A, "Reconciling")?.reason).toBe("InUse");
    expect(w.built).toHaveLength(1);
    expect(w.closed).toEqual([]);
    // Once its users are gone it goes, as any deletion.
    w.users = 0;
    expect(await w.reconcile(A)).toEqual({ kind: "gone" });
  });

  it("a deletion in use after its Secret went (checked in between, SecretMissing): its client serves their cleanup again", async () => {
    const w = await connectedInUse();
    // The namespace's Secrets go first, and the connection is checked before its own deletion:
    // not being deleted, a connection without its Secret is not used.
    w.secrets.remove("team-a", "dms");
    await w.reconcile(A);
    expect(w.ready(A)?.reason).toBe("SecretMissing");
    expect(w.connections.lookup(resource("team-a", ref)).kind).toBe("unavailable");
    w.changed.length = 0;
    w.store.delete(A);
    expect(await w.reconcile(A)).toEqual({ kind: "done" });
    expect(w.connections.lookup(resource("team-a", ref)).kind).toBe("ready");
    expect(w.ready(A)?.reason).toBe("Connected");
    // Its resources are told, to clean up through it.
    expect(w.changed).toEqual([connectionKey(A)]);
    expect(w.built).toHaveLength(1);
  });

  it("sharded, a replica that does not write still probes and uses the connection, but writes neither its finalizer nor its status, nor lets it go", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    w.writes = false;
    await w.reconcile(A);
    expect(w.probes).toBe(1);
    expect(w.connections.lookup(resource("team-a", ref)).kind).toBe("ready");
    expect(w.store.get(A)?.metadata.finalizers ?? []).toEqual([]);
    expect(w.status(A)).toBeUndefined();
    // The leader (it counts every replica's resources) writes both.
    w.writes = true;
    w.users = 1;
    await w.reconcile(A);
    expect(w.store.get(A)?.metadata.finalizers).toEqual(["dms.dev/connection-in-use"]);
    expect(w.status(A)?.deployments).toBe(1);
    // Deleted: a replica that counts none of the users in its own share keeps it usable and held.
    w.store.delete(A);
    w.writes = false;
    w.users = 0;
    expect(await w.reconcile(A)).toEqual({ kind: "done" });
    expect(w.store.get(A)).toBeDefined();
    expect(w.connections.lookup(resource("team-a", ref)).kind).toBe("ready");
    expect(w.status(A)?.deployments).toBe(1);
  });

  it("a deletion in use found after a restart checks the connection, so its resources can clean up", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    const stored = w.store.objects.get(connectionKey(A));
    if (stored) stored.metadata.finalizers = ["dms.dev/connection-in-use"];
    w.store.delete(A);
    w.users = 1;
    expect(w.connections.lookup(resource("team-a", ref)).kind).toBe("pending");
    await w.reconcile(A);
    expect(w.connections.lookup(resource("team-a", ref)).kind).toBe("ready");
    expect(w.condition(A, "Reconciling")?.reason).toBe("InUse");
    expect(w.ready(A)?.reason).toBe("Connected");
    expect(w.changed).toEqual([connectionKey(A)]);
  });

  it("a spec the CRD now refuses, stored before its rules: InvalidSpec and Stalled, no client, no call, no Secret read; a fixed spec heals it", async () => {
    const w = world();
    w.store.put(A, {
      ...specOf("http://169.254.169.254/computeMetadata/v1/token#"),
      apiKeyHeader: "Host",
    });
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    expect(await w.reconcile(A)).toEqual({ kind: "done" });
    expect(w.ready(A)).toMatchObject({ status: "False", reason: "InvalidSpec" });
    expect(w.ready(A)?.message).toBe(
      'spec.baseUrl must not have a fragment (#…): the operator appends API paths such as /v2/deployments to it, and a fragment would cut them off; remove everything from the "#"; spec.baseUrl must not aim at a link-local address or a cloud metadata service: 169.254.169.254 is a link-local address (where cloud metadata services answer): the operator never connects to link-local or metadata addresses; spec.apiKeyHeader must not be Host: it frames or routes the request (the HTTP client sets it); choose a header of your own, e.g. X-Api-Key',
    );
    expect(w.condition(A, "Stalled")).toMatchObject({ status: "True", reason: "InvalidSpec" });
    expect(w.condition(A, "Reconciling")).toBeUndefined();
    expect([w.built, w.probes, w.secrets.reads]).toEqual([[], 0, []]);
    expect(w.events).toEqual(["Warning/InvalidSpec/prod"]);
    const found = w.connections.lookup(resource("team-a", ref));
    expect(found.kind === "unavailable" && found.message).toContain(
      "ServiceConnection team-a/prod is not Ready (InvalidSpec): spec.baseUrl must not have a fragment",
    );
    expect(w.connections.sessions().map((s) => s.key)).toEqual(["default"]);
    expect(w.changed).toEqual([connectionKey(A)]);

    w.store.put(A, specOf("http://a.example/computeMetadata"), 2);
    expect(await w.reconcile(A)).toEqual({ kind: "done" });
    expect(w.ready(A)).toMatchObject({ status: "True", reason: "Connected", observedGeneration: 2 });
    expect(w.condition(A, "Stalled")).toBeUndefined();
    expect(w.built.map((c) => c.baseUrl)).toEqual(["http://a.example/computeMetadata"]);
  });

  it("a connection that turns invalid stops being used, its client kept out of every listing", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    await w.reconcile(A);
    expect(w.connections.lookup(resource("team-a", ref)).kind).toBe("ready");
    w.store.put(A, { ...specOf(), tenantIdHeader: "content-length" }, 2);
    await w.reconcile(A);
    expect(w.ready(A)?.reason).toBe("InvalidSpec");
    expect(w.ready(A)?.message).toContain("spec.tenantIdHeader must not be content-length");
    expect(w.connections.lookup(resource("team-a", ref)).kind).toBe("unavailable");
    expect(w.connections.session(connectionKey(A))).toBeUndefined();
    expect(w.probes).toBe(1);
  });

  it("a status write that lost a race is retried quietly", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    const stale = w.store.get(A);
    w.store.put(A, specOf()); // someone else wrote meanwhile
    const store = w.store;
    const original = store.get.bind(store);
    store.get = (id) => (objectKey(id) === objectKey(A) ? stale : original(id));
    expect(await w.reconcile(A)).toEqual({ kind: "retry" });
  });
});

describe("a connection's status another writer added to", () => {
  const version = (w: ReturnType<typeof world>) =>
    w.store.objects.get(connectionKey(A))?.metadata.resourceVersion;

  it("keeps a field a newer release wrote (its CRD kept after a rollback) with no write of its own, through the probe's writes", async () => {
    /** A newer release's record of its own probe: valid under its CRD, unknown here. */
    const checked = { endpoint: "/v3/health", at: "2030-01-01T00:00:00Z" };
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    await w.reconcile(A);
    Object.assign(w.store.objects.get(connectionKey(A))?.status ?? {}, { healthCheck: checked });
    const before = version(w);
    await w.reconcile(A);
    expect(version(w)).toBe(before);
    // The next probe writes its time, and the field stays.
    w.clock.advance(300_000);
    await w.reconcile(A);
    expect(w.probes).toBe(2);
    expect(w.status(A)).toMatchObject({ lastProbeTime: "2030-01-01T00:05:00Z", healthCheck: checked });
  });

  it("drops a condition of a type it does not set in one write: it cannot keep it current", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    await w.reconcile(A);
    w.store.objects.get(connectionKey(A))?.status?.conditions?.push({
      type: "Degraded",
      status: "True",
      reason: "Lagging",
      message: "m",
      lastTransitionTime: "2030-01-01T00:00:00Z",
    });
    const written = version(w);
    await w.reconcile(A);
    await w.reconcile(A);
    expect(Number(version(w))).toBe(Number(written) + 1);
    expect(w.status(A)?.conditions?.map((c) => c.type)).toEqual(["Ready"]);
  });
});

describe("what a connection reflects, and what it is allowed", () => {
  it("a failed probe shows its status and at most 80 printable characters of the answer, the key redacted", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    // What a metadata service or a gateway could answer: a document with the key spread by
    // control characters, escape sequences and bidirectional overrides, far past 80 characters.
    const answer = `\u001b]0;pwned\u0007${KEY.slice(0, 4)}\u0000${KEY.slice(4)}\u202e ${"AccessKeyId=AKIA".repeat(40)}`;
    w.answer = new ServiceError({
      kind: "unauthorized",
      method: "GET",
      route: "/v2/auth/providers",
      status: 403,
      detail: answer,
      retryable: false,
    });
    await w.reconcile(A);
    const message = w.ready(A)?.message ?? "";
    expect(w.ready(A)?.reason).toBe("Unauthorized");
    const shown = /GET \/v2\/auth\/providers answered HTTP 403: ([^)]*)\)/.exec(message)?.[1] ?? "";
    expect(shown.length).toBeGreaterThan(0);
    expect(shown.length).toBeLessThanOrEqual(80);
    expect(message).not.toContain(KEY);
    expect(message).toContain("***");
    // Control (C0, C1) and format characters, bidirectional overrides among them.
    expect(message).not.toMatch(/[\p{Cc}\p{Cf}]/u);
    expect(JSON.stringify(w.status(A))).not.toContain(
      "AccessKeyId=AKIAAccessKeyId=AKIAAccessKeyId=AKIAAccessKeyId=AKIAAccessKeyId=AKIA",
    );
  });

  it("a base URL the address policy refuses at connect time: AddressNotAllowed, retried with backoff", async () => {
    const refusal =
      "dms.example.test resolves to 169.254.169.254, which is a link-local address (where cloud metadata services answer): the operator never connects to link-local or metadata addresses";
    const w = world();
    w.store.put(A, specOf("https://dms.example.test"));
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    w.answer = new ServiceError({
      kind: "network",
      method: "GET",
      route: "/v2/auth/providers",
      detail:
        "ERR_ADDRESS_REFUSED: dms.example.test resolves to 169.254.169.254, which is a link-local address",
      retryable: true,
      cause: Object.assign(new Error(refusal), { code: "ERR_ADDRESS_REFUSED" }),
    });
    expect(await w.reconcile(A)).toEqual({ kind: "retry" });
    expect(w.ready(A)).toMatchObject({
      status: "False",
      reason: "AddressNotAllowed",
      message: `the operator does not connect to the service at https://dms.example.test: ${refusal}; point spec.baseUrl at the service's own address`,
    });
  });

  it("past --max-connections-per-namespace the newest get TooManyConnections: no Secret read, no client; a deletion makes room", async () => {
    const w = world(undefined, { maxPerNamespace: 2 });
    const ids = ["c", "a", "b"].map((name): ConnectionId => ({ ...A, name }));
    const created = ["2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z", "2026-01-01T00:00:02Z"];
    ids.forEach((id, i) => {
      w.store.put(id, specOf());
      const stored = w.store.objects.get(connectionKey(id));
      if (stored) stored.metadata.creationTimestamp = created[i];
      if (stored) w.order.upsert(stored);
    });
    // Elsewhere, a namespace's count is its own.
    const z = { ...A, namespace: "team-b", name: "z" };
    w.store.put(z, specOf());
    w.order.upsert(w.store.objects.get(connectionKey(z)) as ConnectionObject);
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    for (const id of ids) await w.reconcile(id);
    // Oldest first, then by name: c (second 1), a (second 2); b is the third.
    const [c, a, b] = ids as [ConnectionId, ConnectionId, ConnectionId];
    expect([w.ready(c)?.reason, w.ready(a)?.reason]).toEqual(["Connected", "Connected"]);
    expect(w.ready(b)).toMatchObject({ status: "False", reason: "TooManyConnections" });
    expect(w.ready(b)?.message).toContain(
      "namespace team-a has 3 ServiceConnections, more than the 2 per namespace the operator serves (--max-connections-per-namespace)",
    );
    expect(w.condition(b, "Stalled")?.reason).toBe("TooManyConnections");
    expect(w.built).toHaveLength(2);
    expect(w.secrets.reads.filter((r) => r.includes("team-a"))).toHaveLength(2);
    const found = w.connections.lookup(resource("team-a", { kind: "ServiceConnection", name: "b" }));
    expect(found.kind === "unavailable" && found.message).toContain("is not Ready (TooManyConnections)");
    // The excess one is written nothing but its status: no finalizer.
    expect(w.store.objects.get(connectionKey(b))?.metadata.finalizers ?? []).toEqual([]);
    expect(w.store.objects.get(connectionKey(a))?.metadata.finalizers).toEqual(["dms.dev/connection-in-use"]);
    const version = w.store.objects.get(connectionKey(b))?.metadata.resourceVersion;
    await w.reconcile(b);
    expect(w.store.objects.get(connectionKey(b))?.metadata.resourceVersion).toBe(version);

    w.order.remove(w.store.objects.get(connectionKey(c)) as ConnectionObject);
    w.store.objects.delete(connectionKey(c));
    await w.reconcile(c);
    expect(w.enqueued).toEqual([connectionKey(b)]);
    await w.reconcile(b);
    expect(w.ready(b)?.reason).toBe("Connected");
    expect(w.built).toHaveLength(3);
    expect(w.store.objects.get(connectionKey(b))?.metadata.finalizers).toEqual(["dms.dev/connection-in-use"]);
  });

  it("the namespaces' order answers each connection's place as a scan of its namespace would", () => {
    const order = new NamespaceOrder();
    const live = new Map<string, ConnectionObject>();
    let seed = 7;
    const next = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    const object = (namespace: string, name: string, created: string): ConnectionObject =>
      ({
        metadata: { namespace, name, creationTimestamp: created, resourceVersion: "1" },
        spec: {},
      }) as ConnectionObject;
    for (let step = 0; step < 2_000; step++) {
      const namespace = `ns-${next(3)}`;
      const name = `c-${next(40)}`;
      const key = `${namespace}/${name}`;
      const known = live.get(key);
      if (known && next(3) === 0) {
        order.remove(known);
        live.delete(key);
      } else if (!known) {
        const obj = object(namespace, name, `2026-01-01T00:00:0${next(4)}Z`);
        order.upsert(obj);
        live.set(key, obj);
      } else order.upsert(known);
    }
    const precedes = (x: ConnectionObject, y: ConnectionObject) => {
      const [p, q] = [x.metadata.creationTimestamp ?? "", y.metadata.creationTimestamp ?? ""];
      return p !== q ? p < q : x.metadata.name < y.metadata.name;
    };
    for (const obj of live.values()) {
      const namespace = obj.metadata.namespace ?? "";
      const peers = [...live.values()].filter((o) => o.metadata.namespace === namespace);
      expect(order.count(namespace)).toBe(peers.length);
      expect(order.rank(namespace, obj.metadata.name)).toBe(peers.filter((o) => precedes(o, obj)).length);
    }
    expect(order.rank("ns-9", "none")).toBeUndefined();
  });

  it("a ClusterServiceConnection without namespaceSelector says it serves every namespace; {} or a selector does not", async () => {
    const w = world({ labels: { "team-a": { team: "a" } } });
    w.store.put(SHARED, {
      ...specOf(),
      apiKeySecretRef: { name: "dms", key: "api-key", namespace: "dms-system" },
    });
    w.secrets.set("dms-system", "dms", { "api-key": KEY });
    await w.reconcile(SHARED);
    expect(w.condition(SHARED, "OpenToAllNamespaces")).toMatchObject({
      status: "True",
      reason: "NoNamespaceSelector",
      message: expect.stringContaining("the Deployment resources of every namespace may use its tenant"),
    });
    expect(w.events).toContain("Warning/NoNamespaceSelector/shared");
    await w.reconcile(SHARED);
    expect(w.events.filter((e) => e.includes("NoNamespaceSelector"))).toHaveLength(1);

    for (const namespaceSelector of [{}, { matchLabels: { team: "a" } }]) {
      w.store.put(
        SHARED,
        {
          ...w.store.get(SHARED)?.spec,
          ...specOf(),
          apiKeySecretRef: { name: "dms", key: "api-key", namespace: "dms-system" },
          namespaceSelector,
        },
        2,
      );
      await w.reconcile(SHARED);
      expect(w.condition(SHARED, "OpenToAllNamespaces")).toBeUndefined();
    }
    // A ServiceConnection is its own namespace's only: no such condition.
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    await w.reconcile(A);
    expect(w.condition(A, "OpenToAllNamespaces")).toBeUndefined();
  });
});

describe("a connection behind a private CA", () => {
  // A certificate, parsed for real: which one does not matter to the reconcile.
  const PEM = SELF_SIGNED.cert;
  const untrusted = (code: string) =>
    new ServiceError({
      kind: "tls",
      method: "GET",
      route: "/v2/auth/providers",
      detail: `TLS verification failed (${code})`,
      retryable: false,
      tlsCode: code,
    });

  it("reads its CA Secret (key ca.crt by default) and rebuilds the client when it changes", async () => {
    const w = world();
    w.store.put(A, { ...specOf(), caSecretRef: { name: "corp-ca" } });
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    w.secrets.set("team-a", "corp-ca", { "ca.crt": PEM });
    await w.reconcile(A);
    expect(w.ready(A)?.reason).toBe("Connected");
    expect(w.secrets.reads).toContain("team-a/corp-ca/ca.crt");
    expect(w.built.map((c) => c.caBundle)).toEqual([PEM]);
    await w.reconcile(A);
    expect(w.built).toHaveLength(1);
    w.secrets.set("team-a", "corp-ca", { "ca.crt": `# rotated\n${PEM}` });
    await w.reconcile(A);
    expect(w.built.map((c) => c.caBundle)).toEqual([PEM, `# rotated\n${PEM}`]);
  });

  it("a missing CA Secret: SecretMissing; one without certificates: InvalidCABundle; both Stalled, no client", async () => {
    const w = world();
    w.store.put(A, { ...specOf(), caSecretRef: { name: "corp-ca", key: "root.pem" } });
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    await w.reconcile(A);
    expect(w.ready(A)).toMatchObject({ status: "False", reason: "SecretMissing" });
    expect(w.ready(A)?.message).toContain(
      "Secret team-a/corp-ca (spec.caSecretRef) not found: create it with the CA's PEM certificates under key root.pem",
    );
    w.secrets.set("team-a", "corp-ca", { "root.pem": "not a certificate" });
    await w.reconcile(A);
    expect(w.ready(A)).toMatchObject({ status: "False", reason: "InvalidCABundle" });
    expect(w.ready(A)?.message).toContain(
      "Secret team-a/corp-ca (spec.caSecretRef) key root.pem holds no PEM certificate",
    );
    expect(w.condition(A, "Stalled")?.reason).toBe("InvalidCABundle");
    expect(w.built).toEqual([]);
    const found = w.connections.lookup(resource("team-a", { kind: "ServiceConnection", name: "prod" }));
    expect(found.kind === "unavailable" && found.message).toContain("is not Ready (InvalidCABundle)");
  });

  it("a certificate it cannot trust: CertificateNotTrusted and Stalled, the cause and the fix named", async () => {
    const w = world();
    w.store.put(A, specOf());
    w.secrets.set("team-a", "dms", { "api-key": KEY });
    w.answer = untrusted("UNABLE_TO_GET_ISSUER_CERT_LOCALLY");
    expect(await w.reconcile(A)).toEqual({ kind: "done" });
    expect(w.ready(A)).toMatchObject({ status: "False", reason: "CertificateNotTrusted" });
    expect(w.ready(A)?.message).toBe(
      "the service at https://a.example is not trusted: TLS verification failed: the service's certificate is signed by an authority that is not trusted (unknown authority) (UNABLE_TO_GET_ISSUER_CERT_LOCALLY); set spec.caBundle or spec.caSecretRef to the CA that signed it",
    );
    expect(w.condition(A, "Stalled")?.reason).toBe("CertificateNotTrusted");
    expect(w.events).toEqual(["Warning/CertificateNotTrusted/prod"]);

    w.store.put(A, { ...specOf(), caBundle: PEM }, 2);
    await w.reconcile(A);
    expect(w.built.map((c) => c.caBundle)).toEqual([undefined, PEM]);
    expect(w.ready(A)?.message).toContain("the CA in spec.caBundle or spec.caSecretRef does not sign it");
    // The service's certificate changed (no change of the connection): seen at the next probe,
    // once the failed one's backoff has passed.
    w.answer = untrusted("CERT_HAS_EXPIRED");
    w.clock.advance(1_000);
    await w.reconcile(A);
    expect(w.ready(A)?.message).toContain("has expired (CERT_HAS_EXPIRED); renew the service's certificate");
  });

  it("a cluster connection reads its CA Secret in the namespace it names", async () => {
    const w = world();
    w.store.put(SHARED, {
      ...specOf(),
      apiKeySecretRef: { name: "dms", key: "api-key", namespace: "dms-system" },
      caSecretRef: { name: "corp-ca", namespace: "pki" },
    });
    w.secrets.set("dms-system", "dms", { "api-key": KEY });
    w.secrets.set("pki", "corp-ca", { "ca.crt": PEM });
    await w.reconcile(SHARED);
    expect(w.ready(SHARED)?.reason).toBe("Connected");
    expect(w.built[0]?.caBundle).toBe(PEM);
  });
});

describe("connectionSpecProblems", () => {
  const base = { baseUrl: "https://api.example.com" };
  it.each([
    { reason: "a plain URL", spec: base, problems: [] },
    { reason: "a port and a path", spec: { baseUrl: "http://dms.internal:8080/api/" }, problems: [] },
    {
      reason: "Authorization as the key's header",
      spec: { ...base, apiKeyHeader: "Authorization" },
      problems: [],
    },
    {
      reason: "an empty fragment (the URL parser sees none)",
      spec: { baseUrl: "http://169.254.169.254/computeMetadata/v1/token#" },
      problems: [
        expect.stringMatching(/^spec\.baseUrl must not have a fragment \(#…\)/),
        expect.stringMatching(
          /^spec\.baseUrl must not aim at a link-local address or a cloud metadata service: 169\.254\.169\.254 is a link-local address/,
        ),
      ],
    },
    {
      reason: "a query",
      spec: { baseUrl: "http://169.254.169.254/x?y=" },
      problems: [
        expect.stringMatching(/^spec\.baseUrl must not have a query \(\?…\)/),
        expect.stringMatching(
          /^spec\.baseUrl must not aim at a link-local address or a cloud metadata service: 169\.254\.169\.254 is a link-local address/,
        ),
      ],
    },
    {
      reason: "a link-local address written as one hexadecimal number",
      spec: { baseUrl: "http://0xa9fea9fe/latest/meta-data" },
      problems: [
        expect.stringMatching(
          /^spec\.baseUrl must not aim at a link-local address or a cloud metadata service: 169\.254\.169\.254 is a link-local address/,
        ),
      ],
    },
    {
      reason: "an IPv4-mapped link-local address",
      spec: { baseUrl: "http://[::ffff:169.254.169.254]" },
      problems: [
        expect.stringMatching(
          /^spec\.baseUrl must not aim at a link-local address .*::ffff:a9fe:a9fe is a link-local address/,
        ),
      ],
    },
    {
      reason: "an IPv6 link-local address",
      spec: { baseUrl: "http://[fe80::a9fe:a9fe]:80" },
      problems: [expect.stringMatching(/fe80::a9fe:a9fe is a link-local address/)],
    },
    {
      reason: "a metadata service's name, in any case, with a final dot",
      spec: { baseUrl: "http://Metadata.Google.Internal./computeMetadata/v1" },
      problems: [
        "spec.baseUrl must not aim at a link-local address or a cloud metadata service: metadata.google.internal is the name of a cloud metadata service, which the operator never connects to",
      ],
    },
    {
      reason: "a host written with full-width digits and ideographic dots",
      spec: { baseUrl: "http://１６９。２５４。１６９．２５４｡/" },
      problems: [
        expect.stringMatching(
          /^spec\.baseUrl must write its host in ASCII: .*write them as 0-9, a-z and '\.'/,
        ),
        expect.stringMatching(/^spec\.baseUrl must not aim at a link-local address .*169\.254\.169\.254/),
      ],
    },
    {
      reason: "a name written with full-width letters",
      spec: { baseUrl: "https://ａｐｉ.example.com" },
      problems: [expect.stringMatching(/^spec\.baseUrl must write its host in ASCII/)],
    },
    {
      reason: "full-width characters in the path only (not the host)",
      spec: { baseUrl: "https://api.example.com/ｖ２" },
      problems: [],
    },
    {
      reason: "a loopback or private address (allowed: self-hosted services live there)",
      spec: { baseUrl: "http://10.96.0.10:8080" },
      problems: [],
    },
    {
      reason: "a metadata service's header as the key's",
      spec: { ...base, apiKeyHeader: "metadata-FLAVOR" },
      problems: [
        "spec.apiKeyHeader must not be metadata-FLAVOR: a cloud metadata service requires it of its callers; choose a header of your own, e.g. X-Api-Key",
      ],
    },
    {
      reason: "AWS's token header as the key's",
      spec: { ...base, apiKeyHeader: "X-aws-ec2-metadata-token" },
      problems: [expect.stringMatching(/a cloud metadata service requires it/)],
    },
    {
      reason: "user-info",
      spec: { baseUrl: "https://user:pw@host" },
      problems: [
        "spec.baseUrl must not carry user-info (user:password@host): put the API key in the Secret named by spec.apiKeySecretRef",
      ],
    },
    {
      // WHATWG reads host evil.com, Go's parser reads user "evil.com\" at good.com: refused either way.
      reason: "an authority the two URL parsers read differently",
      spec: { baseUrl: "http://evil.com\\@good.com/" },
      problems: [expect.stringContaining("spec.baseUrl must not carry user-info")],
    },
    {
      reason: "another scheme",
      spec: { baseUrl: "file:///etc/passwd" },
      problems: ["spec.baseUrl must start with https:// or http://, got file:"],
    },
    {
      reason: "not a URL",
      spec: { baseUrl: "api.example.com" },
      problems: ['spec.baseUrl "api.example.com" is not a URL, e.g. https://api.example.com'],
    },
    ...[
      "Host",
      "CONTENT-LENGTH",
      "Transfer-Encoding",
      "Connection",
      "Cookie",
      "Keep-Alive",
      "TE",
      "Upgrade",
      "Proxy-Authorization",
      "Accept-Encoding",
      "X-HTTP-Method-Override",
    ].map((header) => ({
      reason: `the header ${header}`,
      spec: { ...base, apiKeyHeader: header },
      problems: [
        expect.stringMatching(
          new RegExp(
            `^spec\\.apiKeyHeader must not be ${header}: .*; choose a header of your own, e\\.g\\. X-Api-Key$`,
          ),
        ),
      ],
    })),
    {
      reason: "a header name that is not a token",
      spec: { ...base, tenantIdHeader: "X Tenant" },
      problems: [expect.stringMatching(/^spec\.tenantIdHeader "X Tenant" is not a valid header name/)],
    },
    {
      reason: "every problem at once",
      spec: { baseUrl: "https://u@h/?q#f", apiKeyHeader: "host", tenantIdHeader: "cookie" },
      problems: [
        expect.stringContaining("spec.baseUrl must not carry user-info"),
        expect.stringContaining("spec.baseUrl must not have a query"),
        expect.stringContaining("spec.baseUrl must not have a fragment"),
        expect.stringContaining("spec.apiKeyHeader must not be host"),
        expect.stringContaining("spec.tenantIdHeader must not be cookie"),
      ],
    },
  ])("$reason", ({ spec, problems }) => {
    expect(connectionSpecProblems(spec)).toEqual(problems);
  });
});

describe("claimOf", () => {
  const claimant = (namespace: string, name: string, spec: Partial<DeploymentSpec> = {}) => ({
    metadata: { namespace, name },
    spec: { source: "internal_docker", ...spec } as DeploymentSpec,
  });

  it("on the default connection is the service name itself; on another, the connection names it too", () => {
    expect(claimOf(claimant("a", "web"))).toBe("web");
    expect(claimOf(claimant("b", "x", { name: "web" }))).toBe("web");
    const ref = { kind: "ServiceConnection", name: "prod" } as const;
    expect(claimOf(claimant("a", "web", { connectionRef: ref }))).toBe("ServiceConnection/a/prod\nweb");
    // The same connection name in two namespaces is two connections: two claims.
    expect(claimOf(claimant("b", "web", { connectionRef: ref }))).not.toBe(
      claimOf(claimant("a", "web", { connectionRef: ref })),
    );
    // No claim on a named connection equals a default one: service names hold no newline.
    expect(claimOf(claimant("a", "web", { connectionRef: ref })).includes("\n")).toBe(true);
  });
});
