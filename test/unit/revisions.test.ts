/**
 * Revision outcomes and the service's looser answers, as the status, the event notes and the
 * failure table report them; the revision tracker's calls (none in steady state, one per
 * rolling look, none after the route turned out missing).
 */
import { describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { RevisionsRouteMissingError, ServiceError } from "../../src/api/errors.ts";
import type { Deployment, Revision } from "../../src/api/wire.ts";
import type { Condition, DeploymentResourceStatus } from "../../src/crd/schema.ts";
import { updateReason } from "../../src/reconcile/conclude.ts";
import { failureOf } from "../../src/reconcile/failures.ts";
import type { RevisionObservation } from "../../src/reconcile/live-revision.ts";
import type { PatchPlan } from "../../src/reconcile/plan.ts";
import type { RevisionLogReads, StoredResource } from "../../src/reconcile/ports.ts";
import { UnreadableDeploymentError } from "../../src/reconcile/service/lookup-errors.ts";
import { RevisionLogReader } from "../../src/reconcile/service/revision-log-reader.ts";
import { RevisionTracker } from "../../src/reconcile/service/revisions.ts";
import { statusFrom } from "../../src/reconcile/status.ts";
import { LogCapture } from "../support/logs.ts";
import { remote } from "./plan-fixtures.ts";

const T0 = new Date("2025-06-01T10:00:00Z");
const REV1 = "11111111-1111-4111-8111-111111111111";
const REV2 = "22222222-2222-4222-8222-222222222222";
/** The status of a resource whose previous poll already saw revision 2 rolling out. */
const seen = { latestRevisionId: REV2 };
const rolling = (status = "READY", overrides: Partial<Deployment> = {}) =>
  remote({ status, latest_revision_id: REV2, active_revision_id: REV1, ...overrides });

const summary = (status: ReturnType<typeof statusFrom>) =>
  Object.fromEntries((status.conditions ?? []).map((c) => [c.type, `${c.status}/${c.reason}`]));

describe("statusFrom: revision outcomes and statuses the spec does not list", () => {
  const cases: Array<{
    reason: string;
    observed: Deployment;
    revision?: RevisionObservation;
    previous?: DeploymentResourceStatus;
    expected: Record<string, string>;
    latestRevisionStatus?: string;
  }> = [
    ...(["CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED"] as const).map((status) => ({
      reason: `${status} stalls the rollout as RevisionFailed, not RolloutInProgress`,
      observed: rolling(),
      revision: { id: REV2, status },
      expected: {
        Ready: "False/RevisionFailed",
        Synced: "True/ReconcileSuccess",
        Stalled: "True/RevisionFailed",
      },
      latestRevisionStatus: status,
    })),
    {
      reason: "SKIPPED ends the rollout although the revision is not the active one",
      observed: rolling(),
      revision: { id: REV2, status: "SKIPPED" },
      expected: { Ready: "True/Available", Synced: "True/ReconcileSuccess" },
      latestRevisionStatus: "SKIPPED",
    },
    {
      reason: "DEPLOYED read after a deployment not yet showing it active: one more look",
      observed: rolling(),
      revision: { id: REV2, status: "DEPLOYED" },
      expected: {
        Ready: "False/RolloutInProgress",
        Synced: "True/ReconcileSuccess",
        Reconciling: "True/RolloutInProgress",
      },
      latestRevisionStatus: "DEPLOYED",
    },
    {
      reason: "DEPLOYED on a second look whose deployment still does not show it active: done",
      observed: rolling(),
      previous: { latestRevisionId: REV2, latestRevisionStatus: "DEPLOYED" },
      revision: { id: REV2, status: "DEPLOYED" },
      expected: { Ready: "True/Available", Synced: "True/ReconcileSuccess" },
      latestRevisionStatus: "DEPLOYED",
    },
    ...["INTERRUPTED", "UNKNOWN", "BUILDING", "SOMETHING_NEW"].map((status) => ({
      reason: `${status} is still in progress`,
      observed: rolling(),
      revision: { id: REV2, status },
      expected: {
        Ready: "False/RolloutInProgress",
        Synced: "True/ReconcileSuccess",
        Reconciling: "True/RolloutInProgress",
      },
      latestRevisionStatus: status,
    })),
    {
      reason: "no revision read (route missing, tracking off): in progress as before",
      observed: rolling(),
      expected: {
        Ready: "False/RolloutInProgress",
        Synced: "True/ReconcileSuccess",
        Reconciling: "True/RolloutInProgress",
      },
    },
    {
      reason: "a verdict about an older revision says nothing about the latest one",
      observed: rolling(),
      revision: { id: REV1, status: "BUILD_FAILED" },
      expected: {
        Ready: "False/RolloutInProgress",
        Synced: "True/ReconcileSuccess",
        Reconciling: "True/RolloutInProgress",
      },
    },
    {
      reason: "a failed revision while the database is provisioned still stalls",
      observed: rolling("AWAITING_DATABASE"),
      revision: { id: REV2, status: "CREATE_FAILED" },
      expected: {
        Ready: "False/RevisionFailed",
        Synced: "True/ReconcileSuccess",
        Stalled: "True/RevisionFailed",
      },
      latestRevisionStatus: "CREATE_FAILED",
    },
    {
      reason: "a deletion in progress outranks a failed revision",
      observed: rolling("AWAITING_DELETE"),
      revision: { id: REV2, status: "DEPLOY_FAILED" },
      expected: { Ready: "False/Deleting", Synced: "True/ReconcileSuccess" },
      latestRevisionStatus: "DEPLOY_FAILED",
    },
    {
      reason: "AWAITING_FINAL_DELETE (not in the spec) is not ready and not failed",
      observed: remote({ status: "AWAITING_FINAL_DELETE" }),
      expected: { Ready: "False/UnrecognizedStatus", Synced: "True/ReconcileSuccess" },
    },
  ];
  it.each(cases)("$reason", ({ observed, revision, previous, expected, latestRevisionStatus }) => {
    const status = statusFrom({
      generation: 2,
      observed,
      sync: { kind: "synced" },
      now: T0,
      revision,
      previous,
    });
    expect(summary(status)).toEqual(expected);
    expect(status.latestRevisionStatus).toBe(latestRevisionStatus);
    expect(status.remoteStatus).toBe(observed.status);
  });

  it("names the revision and its status in the message", () => {
    const status = statusFrom({
      generation: 2,
      observed: rolling(),
      sync: { kind: "synced" },
      now: T0,
      revision: { id: REV2, status: "BUILD_FAILED" },
    });
    const ready = status.conditions?.find((c) => c.type === "Ready");
    expect(ready?.message).toContain(`revision ${REV2} BUILD_FAILED`);
    expect(ready?.message).toContain(`revision ${REV1} stays active`);
  });
});

describe("failureOf: a deployment the operator cannot read", () => {
  it("is Synced=False UnreadableDeployment, stalled (no hot loop), with the error's message", () => {
    const message = `the service's deployment "a" cannot be read: id: required field is missing`;
    const failure = failureOf(new UnreadableDeploymentError(message), []);
    expect(failure.outcome).toEqual({
      kind: "failed",
      reason: "UnreadableDeployment",
      message,
      stalled: true,
      redacted: true,
    });
    expect(failure.rethrow).toBeUndefined();
    const status = statusFrom({ generation: 1, observed: undefined, sync: failure.outcome, now: T0 });
    expect(summary(status)).toMatchObject({
      Synced: "False/UnreadableDeployment",
      Stalled: "True/UnreadableDeployment",
    });
  });
});

describe("updateReason: Updated or DriftCorrected", () => {
  const patch = { changes: [{ group: "source_config", field: "x", line: "x" }] } as unknown as PatchPlan;
  const synced = (status: Condition["status"], observedGeneration: number): Condition => ({
    type: "Synced",
    status,
    reason: status === "True" ? "ReconcileSuccess" : "RateLimited",
    message: "",
    observedGeneration,
    lastTransitionTime: "2025-06-01T10:00:00Z",
  });
  const applied = (obj: StoredResource, appliedGeneration: number): StoredResource => ({
    ...obj,
    status: { ...obj.status, appliedGeneration },
  });
  const resource = (generation: number, conditions: Condition[]) =>
    ({
      metadata: { name: "a", resourceVersion: "1", generation },
      spec: {},
      status: { observedGeneration: generation, conditions },
    }) as unknown as StoredResource;
  const cases = [
    {
      reason: "the spec's generation was applied before: someone changed the service",
      obj: resource(4, [synced("True", 4)]),
      expected: "DriftCorrected",
    },
    {
      reason: "the edit's first PATCH failed (429): its retry applies the edit, Updated",
      obj: resource(4, [synced("False", 4)]),
      expected: "Updated",
    },
    {
      reason: "a new generation not yet applied",
      obj: resource(5, [synced("True", 4)]),
      expected: "Updated",
    },
    {
      reason: "status.appliedGeneration says the generation was applied, though a failure came between",
      obj: applied(resource(4, [synced("False", 4)]), 4),
      expected: "DriftCorrected",
    },
    {
      reason: "status.appliedGeneration of an older generation: the edit is not applied yet",
      obj: applied(resource(5, [synced("True", 5)]), 4),
      expected: "Updated",
    },
  ];
  it.each(cases)("$reason", ({ obj, expected }) => {
    expect(updateReason(obj, patch, false)).toBe(expected);
  });
});

/** A port whose getRevision answers from a script and counts its calls. */
function revisionPort(answer: (deploymentId: string, revisionId: string) => Revision | undefined | Error) {
  const calls: string[] = [];
  return {
    calls,
    port: {
      getRevision: async (deploymentId: string, revisionId: string) => {
        calls.push(revisionId);
        const result = answer(deploymentId, revisionId);
        if (result instanceof Error) throw result;
        return result;
      },
    },
  };
}
const revision = (id: string, status: string): Revision => ({ id, status });
const signal = new AbortController().signal;

describe("RevisionTracker", () => {
  it("makes no call in steady state; the active latest revision is DEPLOYED", async () => {
    const { port, calls } = revisionPort(() => revision(REV2, "DEPLOYED"));
    const tracker = new RevisionTracker(port, new LogCapture().logger);
    const steady = remote({ latest_revision_id: REV2, active_revision_id: REV2 });
    expect(await tracker.look(steady, undefined, false, signal)).toEqual({
      revision: { id: REV2, status: "DEPLOYED" },
    });
    expect(calls).toEqual([]);
  });

  it("reads the latest revision once per look while rolling out, from the poll after it appeared", async () => {
    const { port, calls } = revisionPort((_d, id) => revision(id, "BUILDING"));
    const tracker = new RevisionTracker(port, new LogCapture().logger);
    // The reconcile whose create or PATCH made the revision: no call (a create is one POST).
    expect(await tracker.look(rolling(), { latestRevisionId: REV1 }, false, signal)).toEqual({});
    expect(calls).toEqual([]);
    expect(await tracker.look(rolling(), seen, false, signal)).toEqual({
      revision: { id: REV2, status: "BUILDING" },
    });
    await tracker.look(rolling(), seen, false, signal);
    expect(calls).toEqual([REV2, REV2]);
  });

  it("a failed revision gives one Warning event; later looks reuse the verdict without a call", async () => {
    const { port, calls } = revisionPort((_d, id) => revision(id, "BUILD_FAILED"));
    const tracker = new RevisionTracker(port, new LogCapture().logger);
    const first = await tracker.look(rolling(), seen, false, signal);
    expect(first.event).toMatchObject({ type: "Warning", reason: "RevisionFailed" });
    expect(first.event?.note).toContain(`revision ${REV2}`);
    expect(first.event?.note).toContain("BUILD_FAILED");
    const previous = { latestRevisionId: REV2, latestRevisionStatus: "BUILD_FAILED" };
    const again = await tracker.look(rolling(), previous, false, signal);
    expect(again).toEqual({ revision: { id: REV2, status: "BUILD_FAILED" } });
    expect(calls).toEqual([REV2]);
    // A reconcile requested by annotation looks again, without a second event.
    const requested = await tracker.look(rolling(), previous, true, signal);
    expect(requested.event).toBeUndefined();
    expect(calls).toEqual([REV2, REV2]);
  });

  it("a service without the route: one log line, tracking off, no further probing", async () => {
    const missing = new RevisionsRouteMissingError(
      new ServiceError({
        kind: "not_found",
        method: "GET",
        route: "/r",
        status: 404,
        detail: "Not Found",
        retryable: false,
      }),
    );
    const { port, calls } = revisionPort(() => missing);
    const logs = new LogCapture();
    const tracker = new RevisionTracker(port, logs.logger);
    expect(await tracker.look(rolling(), seen, false, signal)).toEqual({});
    expect(await tracker.look(rolling(), seen, false, signal)).toEqual({});
    expect(calls).toHaveLength(1);
    expect(tracker.enabled).toBe(false);
    expect(logs.find("no revisions route")).toHaveLength(1);
  });

  it("--revision-tracking=off makes no call", async () => {
    const { port, calls } = revisionPort(() => revision(REV2, "BUILD_FAILED"));
    const tracker = new RevisionTracker(port, new LogCapture().logger, false);
    expect(await tracker.look(rolling(), undefined, false, signal)).toEqual({});
    expect(calls).toEqual([]);
  });

  it("another failure keeps what was known and never fails the reconcile", async () => {
    const { port } = revisionPort(
      () =>
        new ServiceError({
          kind: "unavailable",
          method: "GET",
          route: "/r",
          status: 503,
          detail: "x",
          retryable: true,
        }),
    );
    const tracker = new RevisionTracker(port, new LogCapture().logger);
    const previous = { latestRevisionId: REV2, latestRevisionStatus: "DEPLOYING" };
    expect(await tracker.look(rolling(), previous, false, signal)).toEqual({
      revision: { id: REV2, status: "DEPLOYING" },
    });
    expect(await tracker.look(rolling(), undefined, false, signal)).toEqual({});
  });
});

describe("the operator's log of a failed revision or log read", () => {
  // The service's text may quote anything, a secret among it: only the call, status and kind go.
  const leaky = () =>
    new ServiceError({
      kind: "unavailable",
      method: "GET",
      route: "/v2/deployments/{deployment_id}/revisions/{revision_id}",
      status: 503,
      detail: "backend down; DATABASE_URL=postgres://app:s3cr3t-Passw0rd@db/app",
      retryable: true,
    });

  it("RevisionTracker logs the kind and status, never the service's text", async () => {
    const logs = new LogCapture();
    const { port } = revisionPort(leaky);
    await new RevisionTracker(port, logs.logger).look(rolling(), seen, false, signal);
    const [line] = logs.find("could not read the latest revision");
    expect(line?.record.err).toBe(
      "GET /v2/deployments/{deployment_id}/revisions/{revision_id}: 503 unavailable",
    );
    expect(logs.text()).not.toContain("s3cr3t");
  });

  it("a deployment or revision id of the service's that is no uuid: no call, and its text never logged", async () => {
    // The ids are the service's answer: any string, of any length (a secret, or MiBs, each poll).
    const odd = `postgres://app:s3cr3t-Passw0rd@db/app${"x".repeat(5_000)}`;
    const client = new ServiceClient({ baseUrl: "http://127.0.0.1:9", apiKey: "k", retries: 0 });
    const logs = new LogCapture();
    // The session's ports (deployments-port.ts), over the client that checks the ids.
    const tracker = new RevisionTracker(
      { getRevision: (d, r, signal) => client.getRevision(d, r, { signal }) },
      logs.logger,
    );
    const reader = new RevisionLogReader(
      { getRevisionLogs: (d, r, query, signal) => client.getRevisionLogs(d, r, query, { signal }) },
      logs.logger,
    );
    for (const d of [rolling("READY", { id: odd }), rolling("READY", { latest_revision_id: odd })]) {
      const previous = { latestRevisionId: d.latest_revision_id ?? "", latestRevisionStatus: "BUILDING" };
      expect(await tracker.look(d, previous, false, signal)).toEqual({
        revision: { id: d.latest_revision_id, status: "BUILDING" },
      });
      expect(await reader.tail(d.id, d.latest_revision_id ?? "", "build", signal)).toMatchObject({
        kind: "failed",
        passing: false,
      });
    }
    expect(logs.text()).not.toContain("s3cr3t");
    expect(logs.text().length).toBeLessThan(2_000);
  });

  it("RevisionLogReader logs the kind and status, never the service's text", async () => {
    const logs = new LogCapture();
    const reader = new RevisionLogReader(
      { getRevisionLogs: () => Promise.reject(leaky()) } as unknown as RevisionLogReads,
      logs.logger,
    );
    expect(await reader.tail(REV1, REV2, "build", signal)).toMatchObject({ kind: "failed", passing: true });
    const [line] = logs.find("could not read the revision's log");
    expect(line?.record.err).toBe(
      "GET /v2/deployments/{deployment_id}/revisions/{revision_id}: 503 unavailable",
    );
    expect(logs.text()).not.toContain("s3cr3t");
  });
});
