// The connections' rules at unit speed: which connection a resource may use and why not, what a
// connection's probe makes of each answer, when it probes again and rebuilds its client, and how
// a deletion in use is held. The cluster test (controller-connections) runs the same code against
// a real API server and two simulators.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { ServiceError } from "../../src/api/errors.ts";
import { type ServiceConfig, serviceConfigFrom } from "../../src/config.ts";
import {
  type ConnectionService,
  type ConnectionStore,
  Connections,
  idOf,
} from "../../src/connection/controller.ts";
import { type ConnectionId, connectionKey } from "../../src/connection/settings.ts";
import type { ConnectionStatus } from "../../src/crd/connection-schema.ts";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import type { ConnectionObject } from "../../src/kube/connections.ts";
import { claimOf } from "../../src/reconcile/claims.ts";
import type { StoredResource } from "../../src/reconcile/ports.ts";
import { ServiceSession } from "../../src/reconcile/session.ts";
import { objectKey } from "../../src/runtime/keys.ts";
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

function world() {
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
    /** What the next probe answers: a number of providers, or an error. */
    answer: 2 as number | Error,
    probes: 0,
    /** The settings of each client built, in order. */
    built: [] as ServiceConfig[],
    changed: [] as string[],
    events: [] as string[],
    users: 0,
    defaultSession: session(new SimulatedService({ now })),
    connections: undefined as unknown as Connections,
    reconcile: (id: ConnectionId) => w.connections.reconcile(connectionKey(id), signal),
    status: (id: ConnectionId) => store.get(id)?.status,
    ready: (id: ConnectionId) => store.get(id)?.status?.conditions?.find((c) => c.type === "Ready"),
    condition: (id: ConnectionId, type: string) =>
      store.get(id)?.status?.conditions?.find((c) => c.type === type),
  };
  w.connections = new Connections({
    connections: store,
    defaultSession: w.defaultSession,
    defaults: DEFAULTS,
    connect: (config): ConnectionService => {
      w.built.push(config);
      return {
        port: new SimulatedService({ now }),
        probe: async () => {
          w.probes += 1;
          if (w.answer instanceof Error) throw w.answer;
          return w.answer;
        },
      };
    },
    session,
    secrets,
    usage: () => w.users,
    onChange: (key) => w.changed.push(key),
    event: (obj, type, reason) => w.events.push(`${type}/${reason}/${obj.metadata.name}`),
    isConflict: (error) => error instanceof ResourceConflict,
    clock,
    logger,
    probeIntervalMs: 300_000,
  });
  return w;
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

    w.answer = 4;
    expect(await w.reconcile(A)).toEqual({ kind: "done" });
    expect(w.ready(A)?.reason).toBe("Connected");
    expect(w.condition(A, "Reconciling")).toBeUndefined();
    expect(w.status(A)?.providers).toBe(4);
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
    w.answer = new ServiceError({
      kind: "rate_limited",
      method: "GET",
      route: "/v2/auth/providers",
      status: 429,
      detail: "Too Many Requests",
      retryable: true,
      retryAfterSeconds: 30,
    });
    expect(await w.reconcile(A)).toEqual({ kind: "requeueAfter", ms: 30_000 });
    expect(w.ready(A)?.reason).toBe("Connected");
    expect(w.status(A)?.lastProbeTime).toBe("2030-01-01T00:00:00Z");
    expect(w.connections.lookup(resource("team-a", ref)).kind).toBe("ready");
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
