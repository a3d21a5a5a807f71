// Deleting a resource: Orphan leaves the service's deployment alone and needs no finalizer;
// Delete calls DELETE, waits until the service no longer has the deployment, and only then
// removes its finalizer, never anyone else's; a deployment already gone is fine; and Delete
// never deletes a deployment the resource does not own (a name it lost, a foreign source, an id
// another resource's deployment has that someone wrote into its status). A service that keeps a
// deleted deployment's tracing project refuses its name again (NameReserved) unless the resource
// asked for `spec.deleteTracingProject`; the `-o wide` LIVE column shows the revision that runs.
// A deletion the service holds (its DELETE refused, or never confirmed) says so on the resource,
// with the command that ends it on purpose: `deletionPolicy: Orphan`, which leaves the deployment.
import { describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { PatchType } from "../../src/kube/client.ts";
import { kubectl, kubectlOk } from "../support/cluster.ts";
import { conditionOf, hasCondition } from "../support/resources.ts";
import { type Scenario, useScenarios } from "../support/scenario.ts";

const FINALIZER = "dms.dev/finalizer";

const spec = (deletionPolicy: "Orphan" | "Delete"): DeploymentSpec => ({
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
  deletionPolicy,
});

const deletes = (s: Scenario) => s.sim.counters()["DELETE /v2/deployments/{deployment_id}"] ?? {};

/** The LIVE cell of `kubectl get dmsd <name> -o wide`, as the API server's table renders it. */
async function liveColumn(namespace: string, name: string): Promise<string> {
  const [header = "", row = ""] = (await kubectlOk(["get", "dmsd", name, "-n", namespace, "-o", "wide"]))
    .trimEnd()
    .split("\n");
  const start = header.indexOf("LIVE");
  expect(start, `a LIVE column in: ${header}`).toBeGreaterThan(0);
  return row.slice(start).split(/\s+/)[0] ?? "";
}

describe("controller: deletion", () => {
  const scenarios = useScenarios();

  it("Orphan: no finalizer, and the service's deployment stays", async () => {
    const s = await scenarios.start("ctl-orphan");
    await s.user.create(s.namespace, "orphaned", spec("Orphan"));
    const ready = await s.user.waitReady(s.namespace, "orphaned");
    expect(ready.metadata.finalizers ?? []).not.toContain(FINALIZER);

    await s.user.delete(s.namespace, "orphaned");
    await s.user.waitFor(s.namespace, "orphaned", (o) => o === undefined, "gone");

    expect(s.sim.store.get(ready.status?.deploymentId ?? "")?.status).toBe("READY");
    expect(deletes(s)).toEqual({});
  });

  it("Delete: DELETE, wait until the service lets it go, then drop only our finalizer", async () => {
    // A slower delete on the service, so the wait is visible on the resource.
    const s = await scenarios.start("ctl-delete", { sim: { timing: { deleteAfterMs: 1_500 } } });
    await s.user.create(s.namespace, "deleted", spec("Delete"), { finalizers: ["example.com/keep"] });
    const ready = await s.user.waitReady(s.namespace, "deleted");
    const id = ready.status?.deploymentId ?? "";
    expect(ready.metadata.finalizers).toEqual(["example.com/keep", FINALIZER]);

    await s.user.delete(s.namespace, "deleted");

    const deleting = await s.user.waitFor(
      s.namespace,
      "deleted",
      (o) => o?.status?.remoteStatus === "AWAITING_DELETE",
      "the service deleting it",
    );
    expect(hasCondition(deleting, "Ready", "False", "Deleting")).toBe(true);
    expect(hasCondition(deleting, "Reconciling", "True", "Deleting")).toBe(true);
    expect(deleting.metadata.finalizers).toContain(FINALIZER);

    // Our finalizer goes only once the service has no such deployment; the user's one stays.
    const left = await s.user.waitFor(
      s.namespace,
      "deleted",
      (o) => !(o?.metadata.finalizers ?? []).includes(FINALIZER),
      "our finalizer removed",
    );
    expect(s.sim.store.get(id)).toBeUndefined();
    expect(left.metadata.finalizers).toEqual(["example.com/keep"]);
    expect(deletes(s)).toEqual({ "204": 1 });
    const reasons = (await s.user.events(s.namespace, "deleted")).map((e) => e.reason);
    expect(reasons).toEqual(["Created", "Deleting", "Deleted"]);

    await s.user.patch(s.namespace, "deleted", { metadata: { finalizers: null } });
    await s.user.waitFor(s.namespace, "deleted", (o) => o === undefined, "gone");
  });

  it("Delete: a deployment someone already deleted on the service is no obstacle", async () => {
    const s = await scenarios.start("ctl-gone");
    await s.user.create(s.namespace, "already-gone", spec("Delete"));
    const ready = await s.user.waitReady(s.namespace, "already-gone");
    const id = ready.status?.deploymentId ?? "";
    s.sim.store.delete(id);
    await s.user.waitFor(
      s.namespace,
      "already-gone",
      () => s.sim.store.get(id) === undefined,
      "gone on the service",
    );

    await s.user.delete(s.namespace, "already-gone");

    await s.user.waitFor(s.namespace, "already-gone", (o) => o === undefined, "gone");
    expect(deletes(s)).toEqual({});
  });

  it("Delete: the loser of a name conflict deletes nothing when it goes", async () => {
    const s = await scenarios.start("ctl-del-conflict");
    await s.user.create(s.namespace, "holder", { ...spec("Delete"), name: "contested" });
    const holder = await s.user.waitReady(s.namespace, "holder");
    await s.user.create(s.namespace, "loser", { ...spec("Delete"), name: "contested" });
    const lost = await s.user.waitFor(
      s.namespace,
      "loser",
      (o) => hasCondition(o, "Stalled", "True", "NameConflict"),
      "NameConflict",
    );
    expect(lost.metadata.finalizers ?? []).not.toContain(FINALIZER);

    await s.user.delete(s.namespace, "loser");
    await s.user.waitFor(s.namespace, "loser", (o) => o === undefined, "gone");

    expect(deletes(s)).toEqual({});
    expect(s.sim.store.get(holder.status?.deploymentId ?? "")?.status).toBe("READY");
  });

  it("Delete: a deployment of another source that carries the name is not adopted, nor deleted", async () => {
    const foreign = "3c2b1a09-8f7e-4d6c-9b5a-4e3f2a1b0c9d";
    const s = await scenarios.start("ctl-del-blocked", {
      sim: { seed: { deployments: [{ id: foreign, name: "foreign", source: "github" }] } },
    });
    await s.user.create(s.namespace, "foreign", spec("Delete"));
    const blocked = await s.user.waitFor(
      s.namespace,
      "foreign",
      (o) => hasCondition(o, "Stalled", "True", "Immutable"),
      "Immutable",
    );
    expect(conditionOf(blocked, "Synced")?.message).toContain("source");
    expect(blocked.status?.deploymentId).toBeUndefined();
    expect((await s.user.events(s.namespace, "foreign")).map((e) => e.reason)).not.toContain("Adopted");

    await s.user.delete(s.namespace, "foreign");
    await s.user.waitFor(s.namespace, "foreign", (o) => o === undefined, "gone");

    expect(deletes(s)).toEqual({});
    expect(s.sim.store.get(foreign)).toBeDefined();
  });

  it("Delete: a status.deploymentId forged to another resource's deployment deletes nothing", async () => {
    const s = await scenarios.start("ctl-del-forged");
    await s.user.create(s.namespace, "victim", spec("Orphan"));
    const victim = await s.user.waitReady(s.namespace, "victim");
    const victimId = victim.status?.deploymentId ?? "";
    await s.user.create(s.namespace, "forger", spec("Delete"));
    const forger = await s.user.waitReady(s.namespace, "forger");
    expect(forger.metadata.finalizers).toContain(FINALIZER);

    // Anyone who may write the status subresource in the namespace can do this.
    await s.user.client.request({
      method: "PATCH",
      path: `/apis/dms.dev/v1alpha1/namespaces/${s.namespace}/deployments/forger/status`,
      contentType: PatchType.Merge,
      body: { status: { deploymentId: victimId } },
    });
    await s.user.waitFor(s.namespace, "forger", (o) => o?.status?.deploymentId === victimId, "forged id");
    await s.user.delete(s.namespace, "forger");

    await s.user.waitFor(s.namespace, "forger", (o) => o === undefined, "gone");
    expect(s.sim.store.get(victimId)?.status).toBe("READY");
    expect(deletes(s)).toEqual({});
    const notOwned = await s.user.waitForEvent(s.namespace, "forger", "NotOwned");
    expect(notOwned.type).toBe("Warning");
    expect(notOwned.note).toContain(victimId);
    expect(notOwned.note).toContain('"victim"');
    expect(notOwned.note).toContain(`${s.namespace}/forger`);
  });

  it("NameReserved: deleted without deleteTracingProject, the name is refused again; with it, created again; LIVE shows the running revision", async () => {
    const s = await scenarios.start("ctl-name-reserved", { sim: { keepTracingProjects: true } });
    const deleteQueries = () =>
      s.sim.requests({ method: "DELETE" }).map((r) => new URL(r.url, s.sim.url).search);
    const deployOnce = async (name: string, extra: Partial<DeploymentSpec>) => {
      await s.user.create(s.namespace, name, { ...spec("Delete"), ...extra });
      const ready = await s.user.waitReady(s.namespace, name);
      const active = ready.status?.activeRevisionId ?? "";
      expect(ready.status?.liveRevision).toBe(`${active.slice(0, 8)}@1`);
      expect(await liveColumn(s.namespace, name)).toBe(ready.status?.liveRevision);
      await s.user.delete(s.namespace, name);
      await s.user.waitFor(s.namespace, name, (o) => o === undefined, `${name} gone`);
      return ready;
    };

    // Without deleteTracingProject: the tracing project stays, and the service refuses the name.
    await deployOnce("preview", {});
    expect(deleteQueries()).toEqual([""]);
    await s.user.create(s.namespace, "preview", spec("Delete"));
    const refused = await s.user.waitFor(
      s.namespace,
      "preview",
      (o) => hasCondition(o, "Stalled", "True", "NameReserved"),
      "Stalled NameReserved",
    );
    expect(hasCondition(refused, "Synced", "False", "NameReserved")).toBe(true);
    expect(refused.status?.conditions?.some((c) => c.type === "Reconciling")).toBe(false);
    expect(conditionOf(refused, "Stalled")?.message).toContain(
      'the service refused to create "preview": a tracing project of that name remains',
    );
    expect(conditionOf(refused, "Stalled")?.message).toContain("set spec.deleteTracingProject: true");
    expect(refused.status?.deploymentId).toBeUndefined();
    const posts = () => s.sim.counters()["POST /v2/deployments"] ?? {};
    // Refused, not created.
    expect(posts()["201"]).toBe(1);
    expect(posts()["409"]).toBe(1);

    // With it: DELETE asks for the tracing project too, and the name is created again.
    const first = await deployOnce("pr-7", { deleteTracingProject: true });
    expect(deleteQueries().at(-1)).toBe("?delete_tracing_project=true");
    await s.user.create(s.namespace, "pr-7", { ...spec("Delete"), deleteTracingProject: true });
    const again = await s.user.waitReady(s.namespace, "pr-7");
    expect(again.status?.deploymentId).not.toBe(first.status?.deploymentId);
    const live = again.status?.liveRevision ?? "";
    expect(live).toBe(`${again.status?.activeRevisionId?.slice(0, 8)}@1`);
    expect(live).not.toBe(first.status?.liveRevision);
    expect(await liveColumn(s.namespace, "pr-7")).toBe(live);
    expect(posts()["201"]).toBe(3);
    // Seconds later, the refused create was still sent once: the watch event of the finalizer's
    // own write brings no second attempt (no resync in this test's 60 s period).
    expect(posts()["409"]).toBe(1);
  });

  it("Delete: a deletion the service holds says how to end it, and deletionPolicy Orphan does, leaving the deployment", async () => {
    // A service that never confirms a delete, and one whose DELETE is refused.
    const s = await scenarios.start("ctl-held", { sim: { timing: { deleteAfterMs: 3_600_000 } } });
    const ids: Record<string, string> = {};
    for (const name of ["unconfirmed", "refused"]) {
      await s.user.create(s.namespace, name, spec("Delete"));
      ids[name] = (await s.user.waitReady(s.namespace, name)).status?.deploymentId ?? "";
    }
    const hint = (name: string) =>
      `the resource's deletion waits until the service's deployment is deleted: to leave that deployment on the service and let the resource go, set spec.deletionPolicy to Orphan: kubectl patch dmsd ${name} -n ${s.namespace} --type merge -p '{"spec":{"deletionPolicy":"Orphan"}}'`;
    /** Runs the command a message ends with, as a shell would split it. */
    const runGiven = async (message: string) => {
      const given = message.slice(message.lastIndexOf("Orphan: ") + "Orphan: ".length);
      const words = (given.match(/'[^']*'|\S+/g) ?? []).map((w) => w.replace(/^'(.*)'$/, "$1"));
      expect(words[0]).toBe("kubectl");
      const result = await kubectl(words.slice(1));
      expect(result.code, result.stderr).toBe(0);
    };

    await s.user.delete(s.namespace, "unconfirmed");
    const deleting = await s.user.waitFor(
      s.namespace,
      "unconfirmed",
      (o) => o?.status?.remoteStatus === "AWAITING_DELETE",
      "the service deleting it",
    );
    expect(hasCondition(deleting, "Reconciling", "True", "Deleting")).toBe(true);
    const waiting = conditionOf(deleting, "Synced")?.message ?? "";
    expect(waiting).toBe(`deleting the service's deployment ${ids.unconfirmed}; ${hint("unconfirmed")}`);

    s.sim.faults.set({ errors: [{ status: 401, rate: 1, route: "DELETE /v2/deployments/{deployment_id}" }] });
    await s.user.delete(s.namespace, "refused");
    const refused = await s.user.waitFor(
      s.namespace,
      "refused",
      (o) => hasCondition(o, "Synced", "False", "Unauthorized"),
      "the DELETE refused",
    );
    const message = conditionOf(refused, "Synced")?.message ?? "";
    expect(message).toContain("DELETE /v2/deployments/{deployment_id} answered 401");
    expect(message.endsWith(hint("refused")), message).toBe(true);
    expect(refused.metadata.finalizers).toEqual([FINALIZER]);
    const warning = await s.user.waitForEvent(s.namespace, "refused", "Unauthorized");
    expect(warning.note.endsWith(hint("refused")), warning.note).toBe(true);

    // The command each message gives lets the resource go; the service keeps its deployment.
    await runGiven(message);
    await runGiven(waiting);
    for (const name of ["refused", "unconfirmed"])
      await s.user.waitFor(s.namespace, name, (o) => o === undefined, "gone");
    expect(s.sim.store.get(ids.refused ?? "")?.status).toBe("READY");
    expect(s.sim.store.get(ids.unconfirmed ?? "")?.status).toBe("AWAITING_DELETE");
  });
});
