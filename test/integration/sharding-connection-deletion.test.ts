// A ServiceConnection's deletion waits until no Deployment resource uses it (its finalizer,
// src/connection/controller.ts): the resources may still need it to delete their deployments.
// Under `run --sharded` every replica runs the connection check, but each replica's cache holds
// its own share only: the leader alone, which counts every resource, writes the connection's
// status and finalizer, so the replica that owns none of the users cannot let it go.
import { afterAll, describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { OWNER_LABEL } from "../../src/sharding/labels.ts";
import { kubectlOk, waitFor } from "../support/cluster.ts";
import { TEST_API_KEY } from "../support/operator.ts";
import { ClusterUser, hasCondition } from "../support/resources.ts";
import { type ShardedWorld, shardedWorld } from "../support/sharded-replicas.ts";

const spec: DeploymentSpec = {
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: "registry.example.com/conn:1" },
  connectionRef: { kind: "ServiceConnection", name: "tenant" },
};

describe("sharding: deleting a connection in use", () => {
  const user = new ClusterUser();
  let world: ShardedWorld | undefined;
  afterAll(async () => world?.stop());

  // Its own timeout: longer than its waits together, so a wait that times out names what it missed.
  it("holds the deletion while a resource owned by any replica uses it", { timeout: 180_000 }, async () => {
    const w = await shardedWorld("cd", 2);
    world = w;
    const { namespace, ring: r } = w;
    await user.createTenantConnection(namespace, w.simulator.url, TEST_API_KEY);
    await user.create(namespace, "shop", spec);
    await waitFor(
      async () => {
        const [o] = await r.list(user);
        return o?.metadata.labels?.[OWNER_LABEL] !== undefined && hasCondition(o, "Ready", "True")
          ? true
          : undefined;
      },
      { timeoutMs: 45_000, intervalMs: 1_000, description: "the resource owned and ready" },
    );
    const connection = () => user.connection("ServiceConnection", "tenant", namespace);
    // One writer of the status (the leader, counting every replica's resources): the count is the
    // cluster's, not the share of whichever replica wrote last.
    await waitFor(async () => ((await connection())?.status?.deployments === 1 ? true : undefined), {
      timeoutMs: 30_000,
      intervalMs: 500,
      description: "the connection's status counting its one user",
    });
    await kubectlOk(["delete", "serviceconnection", "tenant", "-n", namespace, "--wait=false"]);
    // The writer (the leader) has checked the deletion once its status is of the deletion's
    // generation (setting deletionTimestamp bumps it) and says why the connection is held. A
    // connection let go instead ends the wait at once.
    const held = await waitFor(
      async () => {
        const c = await connection();
        if (c === undefined) return "gone" as const;
        const generation = c.metadata.generation;
        const inUse = c.status?.conditions?.find((x) => x.reason === "InUse");
        return c.metadata.deletionTimestamp !== undefined &&
          c.status?.observedGeneration === generation &&
          inUse?.observedGeneration === generation
          ? c
          : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200, description: "the status holding the deletion (InUse)" },
    );
    expect(held, "the connection still exists while shop uses it").not.toBe("gone");
    if (held === "gone") return;
    expect(held.status?.deployments, JSON.stringify(held.status)).toBe(1);
    // Once its last user is gone, the leader lets it go.
    await user.delete(namespace, "shop");
    await waitFor(async () => ((await connection()) === undefined ? true : undefined), {
      timeoutMs: 60_000,
      intervalMs: 1_000,
      description: "the connection gone once no resource uses it",
    });
  });
});
