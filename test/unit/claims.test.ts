// Who may claim a service name, and who may be called about: a resource refused its connection
// claims no name and makes no call through it, unless it already owns a deployment there.
import { describe, expect, it } from "vitest";
import { DEFAULT_CONNECTION } from "../../src/crd/conventions.ts";
import { decodeDeployment } from "../../src/kube/object.ts";
import {
  claimOf,
  claimOn,
  claimOnTheWire,
  connectionIndexer,
  holdsClaim,
  olderClaimant,
  reachableDeployment,
  refusalAware,
} from "../../src/reconcile/inputs.ts";
import type { StoredResource } from "../../src/reconcile/ports.ts";
import { SPEC } from "../support/agent-fixture.ts";

function resource(namespace: string, name: string, created: string, deploymentId?: string): StoredResource {
  return {
    apiVersion: "dms.dev/v1alpha1",
    kind: "Deployment",
    metadata: { namespace, name, creationTimestamp: created, generation: 1, resourceVersion: "1" },
    spec: { name: "shop", source: "github" },
    ...(deploymentId ? { status: { deploymentId } } : {}),
  } as unknown as StoredResource;
}

const refusedIn =
  (...namespaces: string[]) =>
  (o: StoredResource) =>
    namespaces.includes(o.metadata.namespace ?? "");

describe("a refused resource claims no name", () => {
  const hostile = resource("team-x", "shop", "2026-01-01T00:00:00Z");
  const owner = resource("team-x", "kept", "2026-01-01T00:00:00Z", "d-1");
  const rival = resource("team-a", "shop", "2026-02-01T00:00:00Z");

  it.each([
    { case: "allowed, owning nothing", obj: rival, holds: true },
    { case: "refused, owning nothing", obj: hostile, holds: false },
    { case: "refused, owning a deployment", obj: owner, holds: true },
  ])("$case: holds its claim $holds", ({ obj, holds }) => {
    expect(holdsClaim(obj, refusedIn("team-x"))).toBe(holds);
  });

  it("the older but refused resource does not hold the name against an allowed one", () => {
    const all = [hostile, rival];
    const ports = { claimants: (_claim: string) => all };
    expect(olderClaimant(rival, ports.claimants("shop"))).toBe(hostile);
    const aware = refusalAware(ports, refusedIn("team-x"));
    expect(aware.claimants("shop")).toEqual([rival]);
    expect(olderClaimant(rival, aware.claimants("shop"))).toBeUndefined();
  });
});

describe("a refused resource makes no call through its connection", () => {
  it.each([
    { case: "allowed, with a deployment", obj: resource("a", "x", "t", "d-1"), id: "d-1" },
    { case: "allowed, without one", obj: resource("a", "x", "t"), id: undefined },
    { case: "refused, with a deployment", obj: resource("team-x", "x", "t", "d-2"), id: undefined },
  ])("$case: reaches $id", ({ obj, id }) => {
    expect(reachableDeployment(obj, refusedIn("team-x"))).toBe(id);
  });
});

describe("a claim's key", () => {
  it.each<{ connection: string; name: string; key: string }>([
    { connection: DEFAULT_CONNECTION, name: "web", key: "web" },
    { connection: "ServiceConnection/team-a/prod", name: "web", key: "ServiceConnection/team-a/prod\nweb" },
    { connection: DEFAULT_CONNECTION, name: "", key: "" },
  ])("($connection, $name) → $key: the bare name on the default connection", ({ connection, name, key }) => {
    expect(claimOn(connection, name)).toBe(key);
  });

  it("joins with a newline, so a claim on another connection is never a bare name", () => {
    expect(claimOn("ServiceConnection/ns/prod", "web")).not.toBe(
      claimOn(DEFAULT_CONNECTION, "ServiceConnection/ns/prod/web"),
    );
  });
});

describe("a claim a tenant's names cannot forge", () => {
  const on = (namespace: string, name: string, extra: Record<string, unknown>) => ({
    metadata: { name, namespace },
    spec: { ...SPEC, ...extra },
  });
  const shared = { kind: "ClusterServiceConnection", name: "shared" } as const;
  const victim = on("team-a", "web", { connectionRef: shared });

  it("a default-connection resource whose spec.name spells a shared connection's claim claims something else", () => {
    const forger = on("team-x", "forger", { name: "ClusterServiceConnection/shared\nweb" });
    expect(claimOf(forger)).not.toBe(claimOf(victim));
    expect(olderClaimant(victim, [victim, forger])).toBeUndefined();
  });

  it("a connectionRef name holding a newline claims something else than a name holding the rest", () => {
    const forger = on("team-x", "web", {
      connectionRef: { kind: "ClusterServiceConnection", name: "shared\nfoo" },
    });
    const named = on("team-a", "x", { connectionRef: shared, name: "foo\nweb" });
    expect(claimOf(forger)).not.toBe(claimOf(named));
  });

  it("keeps the plain forms of the names without a newline (the sharder places resources by them)", () => {
    expect(claimOf(victim)).toBe("ClusterServiceConnection/shared\nweb");
    expect(claimOf(on("team-a", "web", {}))).toBe("web");
    expect(claimOn(DEFAULT_CONNECTION, "a\nb")).toBe(claimOn(DEFAULT_CONNECTION, "a\nb"));
  });
});

describe("the connection index", () => {
  it("holds a resource under its connection's key; the default connection's users are not indexed", () => {
    const on = (connectionRef?: { kind: "ServiceConnection"; name: string }) => ({
      metadata: { name: "agent", namespace: "team-a" },
      spec: { ...SPEC, ...(connectionRef ? { connectionRef } : {}) },
    });
    expect(connectionIndexer(on())).toEqual([]);
    expect(connectionIndexer(on({ kind: "ServiceConnection", name: "prod" }))).toEqual([
      "ServiceConnection/team-a/prod",
    ]);
  });
});

describe("a claim read on the wire, before the decode", () => {
  const wire = (spec: unknown, metadata: Record<string, unknown> = { namespace: "team-a", name: "web" }) => ({
    apiVersion: "dms.dev/v1alpha1",
    kind: "Deployment",
    metadata: { uid: "u", resourceVersion: "1", ...metadata },
    spec,
  });

  it.each<{ case: string; raw: ReturnType<typeof wire> }>([
    { case: "the default connection, the resource's name", raw: wire({ source: "github" }) },
    { case: "spec.name", raw: wire({ name: "shop", source: "github" }) },
    {
      case: "a ServiceConnection",
      raw: wire({
        name: "shop",
        source: "github",
        connectionRef: { kind: "ServiceConnection", name: "prod" },
      }),
    },
    {
      case: "a ClusterServiceConnection",
      raw: wire({ source: "github", connectionRef: { kind: "ClusterServiceConnection", name: "shared" } }),
    },
    { case: "no namespace", raw: wire({ name: "shop" }, { name: "web" }) },
  ])("is the decoded resource's claim: $case", ({ raw }) => {
    const decoded = decodeDeployment(raw);
    if (!decoded) throw new Error("decodable");
    expect(claimOnTheWire(raw)).toBe(claimOf(decoded));
  });

  it.each<{ case: string; raw: unknown }>([
    { case: "not an object", raw: "x" },
    { case: "no spec", raw: { metadata: { name: "web" } } },
    { case: "a name that is not a string", raw: wire({}, { name: 7 }) },
    { case: "a namespace that is not a string", raw: wire({}, { name: "web", namespace: ["a"] }) },
  ])("is undefined when the wire cannot say: $case (the decode decides)", ({ raw }) => {
    expect(claimOnTheWire(raw)).toBeUndefined();
  });
});
