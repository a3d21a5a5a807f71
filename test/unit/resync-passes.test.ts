// What a sharded replica's pass reads of each connection: the ids its own resources of that
// connection record, from one walk over them, and none of a resource refused the connection.
import { describe, expect, it } from "vitest";
import { ServiceError } from "../../src/api/errors.ts";
import { DEFAULT_CONNECTION } from "../../src/crd/conventions.ts";
import type { DeploymentObject } from "../../src/kube/object.ts";
import { connectionKeyOf } from "../../src/reconcile/inputs.ts";
import { CONNECTION_INDEX } from "../../src/wiring/indexes.ts";
import {
  deploymentPassScope,
  deploymentPassTiming,
  shareIds,
  shareUnrecorded,
} from "../../src/wiring/resync-passes.ts";

const keyOf = (o: DeploymentObject) => `${o.metadata.namespace}/${o.metadata.name}`;
const id = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;

function resource(
  name: string,
  deploymentId: string | undefined,
  connection?: string,
  namespace = "team",
): DeploymentObject {
  return {
    apiVersion: "dms.dev/v1alpha1",
    kind: "Deployment",
    metadata: { name, namespace, uid: name, resourceVersion: "1" },
    spec: {
      source: "external_docker",
      ...(connection ? { connectionRef: { kind: "ClusterServiceConnection", name: connection } } : {}),
    },
    ...(deploymentId ? { status: { deploymentId } } : {}),
  } as DeploymentObject;
}

describe("shareIds", () => {
  const objects = [
    resource("a", id(1)),
    resource("b", undefined),
    resource("c", id(3), "acme"),
    resource("d", id(4), "acme"),
    resource("refused", id(5), "acme", "outsider"),
    resource("refused-too", id(6), "acme", "outsider"),
  ];
  const walks = { list: 0, byIndex: 0, keysWhere: 0, keysByIndex: 0 };
  const cache = {
    list: () => {
      walks.list += 1;
      return objects;
    },
    byIndex: (index: string, key: string) => {
      walks.byIndex += 1;
      expect(index).toBe(CONNECTION_INDEX);
      return objects.filter((o) => connectionKeyOf(o) === key);
    },
    keysWhere: (test: (o: DeploymentObject) => boolean) => {
      walks.keysWhere += 1;
      return objects.filter(test).map(keyOf);
    },
    keysByIndex: (index: string, key: string) => {
      walks.keysByIndex += 1;
      expect(index).toBe(CONNECTION_INDEX);
      return objects.filter((o) => connectionKeyOf(o) === key).map(keyOf);
    },
  };
  let asked = 0;
  const share = shareIds(cache, (o) => {
    asked += 1;
    return o.metadata.namespace === "outsider";
  });

  it("gives each connection the ids its resources record, leaving out those refused it", () => {
    expect(share(DEFAULT_CONNECTION)()).toEqual([id(1)]);
    asked = 0;
    expect(share("ClusterServiceConnection/acme")()).toEqual([id(3), id(4)]);
    // Asked once per namespace of the walk, not once per resource.
    expect(asked).toBe(2);
    expect(share("ClusterServiceConnection/other")()).toEqual([]);
  });

  it("names each connection's resources that record no deployment id, leaving out those refused it", () => {
    const waiting = shareUnrecorded(cache, (o) => o.metadata.namespace === "outsider");
    expect(waiting(DEFAULT_CONNECTION)()).toEqual(["b"]);
    expect(waiting("ClusterServiceConnection/acme")()).toEqual([]);
    const more = [resource("e", undefined, "acme"), resource("f", undefined, "acme", "outsider")];
    objects.push(...more);
    try {
      expect(waiting("ClusterServiceConnection/acme")()).toEqual(["e"]);
    } finally {
      objects.splice(objects.length - more.length, more.length);
    }
  });

  it("names only the resources that will look a name up: not a claim's losers, paused or deleted ones", () => {
    const waiting = shareUnrecorded(cache, (o) => o.metadata.namespace === "outsider");
    const as = (o: DeploymentObject, change: (o: DeploymentObject) => void) => {
      change(o);
      return o;
    };
    // 5,000 rivals of one name: only the oldest (the holder) looks it up.
    const rivals = Array.from({ length: 5_000 }, (_, i) =>
      as(resource(`rival-${String(i).padStart(4, "0")}`, undefined, "acme"), (o) => {
        o.spec.name = "shared";
      }),
    );
    const more = [
      ...rivals,
      // Rivals of a name whose holder records its deployment: none looks it up.
      resource("held", id(7), "acme"),
      ...[1, 2].map((n) => as(resource(`held-${n}`, undefined, "acme"), (o) => (o.spec.name = "held"))),
      as(resource("paused", undefined, "acme"), (o) => {
        o.metadata.annotations = { "dms.dev/paused": "true" };
      }),
      as(resource("deleted", undefined, "acme"), (o) => {
        o.metadata.deletionTimestamp = "2030-01-01T00:00:00Z";
      }),
      // A resource refused the connection holds no claim: its younger rival looks the name up.
      as(resource("a-open", undefined, "acme", "outsider"), (o) => (o.spec.name = "open")),
      as(resource("z-open", undefined, "acme"), (o) => (o.spec.name = "open")),
      // ObserveOnly looks its deployment up by name too.
      as(resource("observed", undefined, "acme"), (o) => (o.spec.managementPolicy = "ObserveOnly")),
    ];
    objects.push(...more);
    try {
      expect(waiting("ClusterServiceConnection/acme")().sort()).toEqual(["observed", "open", "shared"]);
    } finally {
      objects.splice(objects.length - more.length, more.length);
    }
  });

  it("walks the connection's resources once per read, as the pass's keys do", () => {
    Object.assign(walks, { list: 0, byIndex: 0, keysWhere: 0, keysByIndex: 0 });
    share("ClusterServiceConnection/acme")();
    expect(walks).toEqual({ list: 0, byIndex: 1, keysWhere: 0, keysByIndex: 0 });
    share(DEFAULT_CONNECTION)();
    expect(walks).toEqual({ list: 1, byIndex: 1, keysWhere: 0, keysByIndex: 0 });
    const scope = deploymentPassScope(cache, { sessions: () => [] });
    Object.assign(walks, { list: 0, byIndex: 0, keysWhere: 0, keysByIndex: 0 });
    expect(scope.keys?.("ClusterServiceConnection/acme")).toEqual([
      "team/c",
      "team/d",
      "outsider/refused",
      "outsider/refused-too",
    ]);
    expect(scope.keys?.(DEFAULT_CONNECTION)).toEqual(["team/a", "team/b"]);
    // The keys come from the cache's keys: one walk each, no list of objects made.
    expect(walks).toEqual({ list: 0, byIndex: 0, keysWhere: 1, keysByIndex: 1 });
  });
});

describe("deploymentPassTiming's listing", () => {
  it("rejects a failed listing with what a log may carry: the call, its status and kind, not the service's text", async () => {
    const detail = "internal error rendering env API_KEY=sk-live-9f8e7d6c5b4a39281706";
    const failing = {
      listedWithin: () => false,
      refresh: async () => {
        throw new ServiceError({
          kind: "unavailable",
          method: "GET",
          route: "/v2/deployments",
          status: 500,
          detail,
          retryable: true,
        });
      },
      holdFresh: () => () => {},
    };
    const timing = deploymentPassTiming(60_000, { session: () => ({ snapshot: failing }) as never });
    const read = timing.prepare("ns/conn", new AbortController().signal);
    await expect(read).rejects.toThrow(/^GET \/v2\/deployments: 500 unavailable$/);
  });
});
