// The apply arm's decisions as a table, without fakes: each row is (spec, observation, status,
// now) → decision, and `settle` joins a decision with what its write came to. What needs ports
// (a 409 on a stale resourceVersion, the finalizer, the reads a reconcile makes) stays in
// reconciler.test.ts.
import { describe, expect, it } from "vitest";
import type { Deployment, Revision } from "../../src/api/wire.ts";
import { InvalidSpecError } from "../../src/crd/errors.ts";
import { desiredFromSpec } from "../../src/crd/mapping.ts";
import type { RolloutWindowSpec } from "../../src/crd/rollout-windows-schema.ts";
import {
  ANNOTATION_REBUILD_REQUESTED_AT,
  ANNOTATION_RECONCILE_INTERVAL,
  ANNOTATION_ROLLOUT_NOW,
  type DeploymentResourceStatus,
  type DeploymentSpec,
} from "../../src/crd/schema.ts";
import { conclude, settle } from "../../src/reconcile/conclude.ts";
import { cleansUpOnDelete, type DecideSettings, decide } from "../../src/reconcile/decide.ts";
import { reconcileInterval } from "../../src/reconcile/inputs.ts";
import type { StoredResource } from "../../src/reconcile/ports.ts";
import { configAfterPatch, revisionConfigHash } from "../../src/reconcile/revision-history.ts";
import type {
  ApplyPatchResult,
  DecideSpec,
  Decision,
  Executed,
  Observation,
} from "../../src/reconcile/run.ts";
import { hashSecrets, keyedSecretDigest } from "../../src/reconcile/secret-hash.ts";
import { BODY, SPEC } from "../support/agent-fixture.ts";
import { applyCreate } from "./plan-fixtures.ts";

const NOW = Date.parse("2030-01-01T00:00:00Z");
const GRACE_MS = 60_000;
const SETTINGS = { createGraceMs: GRACE_MS, counter: () => 0 };
const ALWAYS_DENY: RolloutWindowSpec = { kind: "deny", schedule: "0 0 * * *", duration: "24h" };
/** The service's deployment of {@link SPEC}, as its create made it. */
const DEPLOYED: Deployment = applyCreate(BODY, "plain");
/** {@link DEPLOYED} as the service returns it, with its type (the service's default). */
const PROD: Deployment = {
  ...DEPLOYED,
  source_config: { ...DEPLOYED.source_config, deployment_type: "prod" },
};
const IMAGE_2: Partial<DeploymentSpec> = { sourceRevisionConfig: { imageUri: "repo/agent:2" } };

/** The resource `default/agent` with `spec` over {@link SPEC}. */
function resource(spec: Partial<DeploymentSpec> = {}, annotations: Record<string, string> = {}): DecideSpec {
  return {
    metadata: { name: "agent", namespace: "default", resourceVersion: "1", generation: 1, annotations },
    spec: { ...SPEC, ...spec },
  };
}

/** What observe would see for `spec`: the deployment `deployment` (null: none). */
function seen(
  spec: DecideSpec,
  deployment: Deployment | null,
  found: Partial<Observation["found"]> = {},
  more: Partial<Observation> = {},
): Observation {
  return {
    desired: desiredFromSpec(spec.spec, spec.metadata.name, { secretData: {} }),
    record: {},
    found: { deployment, adopted: false, listed: deployment !== null, ...found },
    versions: undefined,
    secretsUnread: false,
    at: NOW,
    ...more,
  };
}

interface Row {
  name: string;
  spec: DecideSpec;
  observation: Observation;
  status: DeploymentResourceStatus;
  now?: number;
  /** The decision, as far as it is stated (`toMatchObject`). */
  decision: Partial<Record<keyof Decision, unknown>>;
  /** The write, exactly: its kind, or none. */
  write: "create" | "send" | undefined;
}

/** Whether the decision asks for a rebuild: exactly when `decision` states one. */
const rebuilds = (row: Row) => row.decision.rebuild !== undefined;

const OURS: DeploymentResourceStatus = { deploymentId: DEPLOYED.id, observedGeneration: 1 };
const held = resource({ ...IMAGE_2, rolloutWindows: [ALWAYS_DENY] });
/** A ClusterServiceConnection's freeze, as its policy makes it: a default, or binding. */
const ADVISORY_FREEZE = { windows: [ALWAYS_DENY], from: "ClusterServiceConnection freeze" };
const BINDING_FREEZE = { ...ADVISORY_FREEZE, binding: { liftedBy: "cluster admins" } };
const HELD_MESSAGE = decide(held, seen(held, DEPLOYED), OURS, NOW, SETTINGS).outcome;
const ASKED = "2030-01-01T00:00:00Z";
const REBUILD = { [ANNOTATION_REBUILD_REQUESTED_AT]: ASKED };
/** A resource asking for a rebuild, with `spec` over {@link SPEC}. */
const rebuilding = (spec: Partial<DeploymentSpec> = {}, more: Record<string, string> = {}) =>
  resource(spec, { ...REBUILD, ...more });
const REVISION_2: Revision = { id: "22222222-2222-4222-8222-222222222222", status: "QUEUED" };
const NO_ROUTE = "the service has no rebuild route (POST /v2/deployments/{deployment_id}/revisions)";

const ROWS: Row[] = [
  {
    name: "no deployment: create, its secrets' hash recorded as applied once it succeeds",
    spec: resource(),
    observation: seen(resource(), null),
    status: {},
    decision: { outcome: { kind: "synced" }, events: [], after: [], record: { appliedSecretsHash: null } },
    write: "create",
  },
  {
    name: "a create requested within the grace and not listed yet: wait, no second create",
    spec: resource(),
    observation: seen(resource(), null),
    status: { createRequestedAt: "2029-12-31T23:59:30Z" },
    decision: {
      outcome: { kind: "synced", message: "waiting for the created deployment to be listed" },
      observed: { kind: "createdUnlisted" },
      log: { fields: { requestedAt: "2029-12-31T23:59:30Z" }, message: expect.stringContaining("waiting") },
    },
    write: undefined,
  },
  {
    name: "a create requested past the grace and still not listed: create again",
    spec: resource(),
    observation: seen(resource(), null),
    status: { createRequestedAt: "2029-12-31T23:58:00Z" },
    decision: { outcome: { kind: "synced" } },
    write: "create",
  },
  {
    name: "a create answered within the grace (its id and createdAt recorded) and not listed yet: wait",
    spec: resource(),
    observation: seen(resource(), null),
    status: { deploymentId: DEPLOYED.id, createdAt: "2029-12-31T23:59:30Z" },
    decision: {
      outcome: { kind: "synced", message: "waiting for the created deployment to be listed" },
      observed: { kind: "createdUnlisted" },
      log: { fields: { requestedAt: "2029-12-31T23:59:30Z" }, message: expect.stringContaining("waiting") },
    },
    write: undefined,
  },
  {
    name: "a create answered past the grace and still not listed: create again",
    spec: resource(),
    observation: seen(resource(), null),
    status: { deploymentId: DEPLOYED.id, createdAt: "2029-12-31T23:58:00Z" },
    decision: { outcome: { kind: "synced" } },
    write: "create",
  },
  {
    name: "a createdAt without the id it came with holds nothing back: create",
    spec: resource(),
    observation: seen(resource(), null),
    status: { createdAt: "2029-12-31T23:59:30Z" },
    decision: { outcome: { kind: "synced" } },
    write: "create",
  },
  {
    name: "found by name, in line: adopted, nothing to send",
    spec: resource(),
    observation: seen(resource(), DEPLOYED, { adopted: true }),
    status: {},
    decision: {
      outcome: { kind: "synced" },
      observed: { kind: "found", deployment: DEPLOYED },
      events: [
        { type: "Normal", reason: "Adopted", note: `adopted the service's deployment ${DEPLOYED.id}` },
      ],
    },
    write: undefined,
  },
  {
    name: "found by name while a create of ours was pending: it is that create, and the intent is fulfilled",
    spec: resource(),
    observation: seen(resource(), DEPLOYED, { adopted: true }),
    status: { createRequestedAt: "2029-12-31T23:59:30Z" },
    decision: {
      events: [{ type: "Normal", reason: "Created", note: expect.stringContaining("created") }],
      record: { createRequestedAt: null },
    },
    write: undefined,
  },
  {
    name: "a create's answer, not yet listed: the intent stays",
    spec: resource(),
    observation: seen(resource(), DEPLOYED, { listed: false }),
    status: { ...OURS, createRequestedAt: "2029-12-31T23:59:30Z" },
    decision: { record: {}, outcome: { kind: "synced" } },
    write: undefined,
  },
  {
    name: "a new image: one PATCH making a revision",
    spec: resource(IMAGE_2),
    observation: seen(resource(IMAGE_2), DEPLOYED),
    status: OURS,
    decision: { outcome: { kind: "synced" }, events: [], after: [] },
    write: "send",
  },
  {
    name: "ObserveOnly with drift: reported, never written",
    spec: resource({ ...IMAGE_2, managementPolicy: "ObserveOnly" }),
    observation: seen(resource(IMAGE_2), DEPLOYED),
    status: OURS,
    decision: { outcome: { kind: "observed", drift: [expect.stringContaining("repo/agent:2")] } },
    write: undefined,
  },
  {
    name: "ObserveOnly without a deployment: reported, never created",
    spec: resource({ managementPolicy: "ObserveOnly" }),
    observation: seen(resource(), null),
    status: {},
    decision: {
      outcome: {
        kind: "observed",
        drift: ['the service has no deployment named "agent" (ObserveOnly never creates one)'],
      },
      observed: { kind: "none" },
    },
    write: undefined,
  },
  {
    name: "a deployment found by name with another source: blocked, and not recorded as ours",
    spec: resource(),
    observation: seen(resource(), { ...DEPLOYED, source: "github" }, { adopted: true }),
    status: {},
    decision: { outcome: { kind: "failed", reason: "Immutable", stalled: true }, observed: undefined },
    write: undefined,
  },
  {
    name: "a deployment found by name of another type than the spec sets: refused, not adopted, nothing written",
    spec: resource({ sourceConfig: { ...SPEC.sourceConfig, deploymentType: "dev" } }),
    observation: seen(resource({ sourceConfig: { ...SPEC.sourceConfig, deploymentType: "dev" } }), PROD, {
      adopted: true,
    }),
    status: {},
    decision: {
      outcome: {
        kind: "failed",
        reason: "DeploymentTypeMismatch",
        stalled: true,
        message: expect.stringMatching(
          /spec\.sourceConfig\.deploymentType is dev .*prod.*a new type means a new deployment/,
        ),
      },
      observed: undefined,
      events: [],
    },
    write: undefined,
  },
  {
    name: "our deployment, whose type differs from the one the spec now sets: refused, never PATCHed, even with other changes",
    spec: resource({ ...IMAGE_2, sourceConfig: { ...SPEC.sourceConfig, deploymentType: "dev" } }),
    observation: seen(
      resource({ ...IMAGE_2, sourceConfig: { ...SPEC.sourceConfig, deploymentType: "dev" } }),
      PROD,
    ),
    status: OURS,
    decision: {
      outcome: { kind: "failed", reason: "DeploymentTypeMismatch", stalled: true },
      observed: { kind: "found", deployment: PROD },
    },
    write: undefined,
  },
  {
    name: "a spec without a type accepts the service's: in line, nothing to send",
    spec: resource(),
    observation: seen(resource(), PROD),
    status: OURS,
    decision: { outcome: { kind: "synced" } },
    write: undefined,
  },
  {
    name: "a rebuild asked for: one revision through the rebuild route, after no other write; handled once it is made",
    spec: rebuilding(),
    observation: seen(rebuilding(), DEPLOYED),
    status: OURS,
    decision: {
      rebuild: { deploymentId: DEPLOYED.id, requestedAt: ASKED },
      outcome: { kind: "synced" },
      record: expect.not.objectContaining({ lastHandledRebuildAt: expect.anything() }),
    },
    write: undefined,
  },
  {
    name: "a rebuild already handled: nothing",
    spec: rebuilding(),
    observation: seen(rebuilding(), DEPLOYED),
    status: { ...OURS, lastHandledRebuildAt: ASKED },
    decision: { outcome: { kind: "synced" } },
    write: undefined,
  },
  {
    name: "a rebuild asked for with a change that makes a revision: that revision is the one asked for, built (never reused), no second build",
    spec: rebuilding(IMAGE_2),
    observation: seen(rebuilding(IMAGE_2), DEPLOYED),
    status: OURS,
    decision: { record: { lastHandledRebuildAt: ASKED }, write: { kind: "send", build: true } },
    write: "send",
  },
  {
    name: "a rebuild asked for with a change that makes none: the PATCH, then the rebuild",
    spec: rebuilding({ sourceConfig: { ...SPEC.sourceConfig, resourceSpec: { minScale: 3 } } }),
    observation: seen(
      rebuilding({ sourceConfig: { ...SPEC.sourceConfig, resourceSpec: { minScale: 3 } } }),
      DEPLOYED,
    ),
    status: OURS,
    decision: { rebuild: { deploymentId: DEPLOYED.id, requestedAt: ASKED } },
    write: "send",
  },
  {
    name: "a rebuild outside the rollout windows: held like any revision, not handled, looked at again",
    spec: rebuilding({ rolloutWindows: [ALWAYS_DENY] }),
    observation: seen(rebuilding({ rolloutWindows: [ALWAYS_DENY] }), DEPLOYED),
    status: OURS,
    decision: {
      outcome: {
        kind: "held",
        message: expect.stringContaining(`rebuild asked by ${ANNOTATION_REBUILD_REQUESTED_AT}`),
      },
      wakeAt: expect.any(Number),
      after: [{ type: "Normal", reason: "OutsideRolloutWindow", note: expect.any(String) }],
      record: expect.not.objectContaining({ lastHandledRebuildAt: expect.anything() }),
    },
    write: undefined,
  },
  {
    name: "a rebuild outside the rollout windows with dms.dev/rollout-now: sent",
    spec: rebuilding({ rolloutWindows: [ALWAYS_DENY] }, { [ANNOTATION_ROLLOUT_NOW]: "now" }),
    observation: seen(rebuilding({ rolloutWindows: [ALWAYS_DENY] }), DEPLOYED),
    status: OURS,
    decision: { rebuild: { deploymentId: DEPLOYED.id, requestedAt: ASKED }, log: expect.anything() },
    write: undefined,
  },
  {
    name: "a rebuild on a connection whose service has no rebuild route: refused, said once, no write, not handled",
    spec: rebuilding(),
    observation: seen(rebuilding(), DEPLOYED, {}, { rebuildMissing: NO_ROUTE }),
    status: OURS,
    decision: {
      outcome: {
        kind: "failed",
        reason: "RebuildRouteMissing",
        stalled: true,
        message: expect.stringContaining(
          `${ANNOTATION_REBUILD_REQUESTED_AT} asks for a new revision, but ${NO_ROUTE}`,
        ),
      },
      after: [{ type: "Warning", reason: "RebuildRouteMissing", note: expect.stringContaining(NO_ROUTE) }],
      record: expect.not.objectContaining({ lastHandledRebuildAt: expect.anything() }),
    },
    write: undefined,
  },
  {
    name: "a rebuild asked for when a create of its own, its answer lost, is found by name: that create built it, handled",
    spec: rebuilding(),
    observation: seen(rebuilding(), DEPLOYED, { adopted: true }),
    status: { createRequestedAt: "2029-12-31T23:59:30Z" },
    decision: { record: { createRequestedAt: null, lastHandledRebuildAt: ASKED } },
    write: undefined,
  },
  {
    name: "a rebuild with no deployment yet: the create builds it, handled",
    spec: rebuilding(),
    observation: seen(rebuilding(), null),
    status: {},
    decision: { record: { lastHandledRebuildAt: ASKED } },
    write: "create",
  },
  {
    name: "a new image outside the rollout windows: held, looked at again when one opens, said once",
    spec: held,
    observation: seen(held, DEPLOYED),
    status: OURS,
    decision: {
      outcome: { kind: "held", message: expect.stringContaining("outside the rollout windows") },
      wakeAt: expect.any(Number),
      after: [{ type: "Normal", reason: "OutsideRolloutWindow", note: expect.any(String) }],
    },
    write: undefined,
  },
  {
    name: "the same held change again: no second OutsideRolloutWindow event",
    spec: held,
    observation: seen(held, DEPLOYED),
    status: {
      ...OURS,
      conditions: [
        {
          type: "Synced",
          status: "False",
          reason: "OutsideRolloutWindow",
          message: (HELD_MESSAGE as { message: string }).message,
          lastTransitionTime: "2029-12-31T00:00:00Z",
        },
      ],
    },
    decision: { outcome: { kind: "held" }, after: [] },
    write: undefined,
  },
  {
    name: "dms.dev/rollout-now lets a held change go, and the log says so",
    spec: resource({ ...IMAGE_2, rolloutWindows: [ALWAYS_DENY] }, { [ANNOTATION_ROLLOUT_NOW]: "now-1" }),
    observation: seen(held, DEPLOYED),
    status: OURS,
    decision: {
      outcome: { kind: "synced" },
      log: { message: "rolling out outside the rollout windows: dms.dev/rollout-now" },
    },
    write: "send",
  },
  {
    name: "a connection's binding freeze holds a new image: the resource's empty list does not lift it",
    spec: resource({ ...IMAGE_2, rolloutWindows: [] }),
    observation: seen(resource(IMAGE_2), DEPLOYED, {}, { inheritedWindows: BINDING_FREEZE }),
    status: OURS,
    decision: {
      outcome: {
        kind: "held",
        message: expect.stringContaining("binding: spec.rolloutWindowsPolicy Binding"),
      },
      after: [
        { type: "Normal", reason: "OutsideRolloutWindow", note: expect.stringContaining("cluster admins") },
      ],
    },
    write: undefined,
  },
  {
    name: "a connection's binding freeze is not lifted by dms.dev/rollout-now, and the message says who can",
    spec: resource({ ...IMAGE_2, rolloutWindows: [] }, { [ANNOTATION_ROLLOUT_NOW]: "now-1" }),
    observation: seen(resource(IMAGE_2), DEPLOYED, {}, { inheritedWindows: BINDING_FREEZE }),
    status: OURS,
    decision: {
      outcome: {
        kind: "held",
        message: expect.stringContaining(
          "dms.dev/rollout-now lifts this resource's own windows only: the windows of ClusterServiceConnection freeze are binding",
        ),
      },
    },
    write: undefined,
  },
  {
    name: "the same freeze, Advisory: the resource's empty list replaces it",
    spec: resource({ ...IMAGE_2, rolloutWindows: [] }),
    observation: seen(resource(IMAGE_2), DEPLOYED, {}, { inheritedWindows: ADVISORY_FREEZE }),
    status: OURS,
    decision: { outcome: { kind: "synced" }, after: [] },
    write: "send",
  },
  {
    name: "the same freeze, Advisory: dms.dev/rollout-now lifts it where the resource sets no windows",
    spec: resource(IMAGE_2, { [ANNOTATION_ROLLOUT_NOW]: "now-1" }),
    observation: seen(resource(IMAGE_2), DEPLOYED, {}, { inheritedWindows: ADVISORY_FREEZE }),
    status: OURS,
    decision: {
      outcome: { kind: "synced" },
      log: { message: "rolling out outside the rollout windows: dms.dev/rollout-now" },
    },
    write: "send",
  },
  {
    name: "no window rules the resource: a new image goes at once, and dms.dev/rollout-now, asked, is said to let it out",
    spec: resource(IMAGE_2, { [ANNOTATION_ROLLOUT_NOW]: "now-1" }),
    observation: seen(resource(IMAGE_2), DEPLOYED),
    status: OURS,
    decision: {
      outcome: { kind: "synced" },
      after: [],
      log: { message: "rolling out outside the rollout windows: dms.dev/rollout-now" },
    },
    write: "send",
  },
  {
    name: "a rotated secret held outside the rollout windows: its hash stays the last applied one, its versions cleared",
    spec: resource({
      secrets: [{ name: "API_KEY", value: "v2-secret-value" }],
      rolloutWindows: [ALWAYS_DENY],
    }),
    observation: seen(
      resource({ secrets: [{ name: "API_KEY", value: "v2-secret-value" }] }),
      { ...DEPLOYED, secrets: [{ name: "API_KEY" }] },
      {},
      { versions: "v2" },
    ),
    status: { ...OURS, appliedSecretsHash: "old", appliedSecretVersions: "v1" },
    decision: {
      outcome: { kind: "held", message: expect.stringContaining("(secrets) is held") },
      record: { appliedSecretsHash: "old", appliedSecretVersions: null },
    },
    write: undefined,
  },
  {
    name: "Secrets left unread: their versions are not rewritten",
    spec: resource(IMAGE_2),
    observation: seen(resource(IMAGE_2), DEPLOYED, {}, { secretsUnread: true, versions: "v1" }),
    status: { ...OURS, appliedSecretVersions: "v1", appliedSecretsHash: "h" },
    decision: { record: { appliedSecretsHash: "h" } },
    write: "send",
  },
];

describe("decide", () => {
  it("no window rules the resource and dms.dev/rollout-now was handled already: the new image goes, no log line", () => {
    const spec = resource(IMAGE_2, { [ANNOTATION_ROLLOUT_NOW]: "now-1" });
    const status = { ...OURS, lastHandledRolloutNow: "now-1" };
    const decision = decide(spec, seen(resource(IMAGE_2), DEPLOYED), status, NOW, SETTINGS);
    expect(decision.write?.kind).toBe("send");
    expect(decision.outcome).toEqual({ kind: "synced" });
    expect(decision.log).toBeUndefined();
  });

  it.each(ROWS)("$name", (row) => {
    const decision = decide(row.spec, row.observation, row.status, row.now ?? NOW, SETTINGS);
    expect(decision).toMatchObject(row.decision);
    expect(decision.write?.kind).toBe(row.write);
    expect(decision.rebuild !== undefined).toBe(rebuilds(row));
  });

  it("rollout windows that cannot be read stall the resource before any write, its events kept", () => {
    const bad = resource({ rolloutWindows: [{ kind: "allow", schedule: "not a schedule", duration: "1h" }] });
    const decision = decide(bad, seen(bad, DEPLOYED, { adopted: true }), {}, NOW, SETTINGS);
    expect(decision.failed?.error).toBeInstanceOf(InvalidSpecError);
    expect(decision.write).toBeUndefined();
    expect(decision.events.map((e) => e.reason)).toEqual(["Adopted"]);
  });

  it("is a function of its inputs: the same rows give the same decisions", () => {
    for (const row of ROWS)
      expect(decide(row.spec, row.observation, row.status, NOW, SETTINGS)).toEqual(
        decide(row.spec, row.observation, row.status, NOW, SETTINGS),
      );
  });
});

describe("settle", () => {
  const spec = resource(IMAGE_2);
  const sending = decide(spec, seen(spec, DEPLOYED), OURS, NOW, SETTINGS);
  const patched = { ...DEPLOYED, latest_revision_id: "22222222-2222-4222-8222-222222222222" };

  it("a decision without a write concludes as decided, with its events", () => {
    const row = ROWS.find((r) => r.name.startsWith("a new image outside"));
    if (!row) throw new Error("no such row");
    const decision = decide(row.spec, row.observation, row.status, NOW, SETTINGS);
    const { decided, events } = settle(row.spec, row.status, decision, undefined);
    expect(decided.outcome.kind).toBe("held");
    expect(events.map((e) => e.reason)).toEqual(["OutsideRolloutWindow"]);
  });

  it("a create: Created, the deployment it answered observed, its first revision in the history", () => {
    const create = decide(resource(), seen(resource(), null), {}, NOW, SETTINGS);
    const history = [{ id: DEPLOYED.latest_revision_id ?? "", configHash: "c" }];
    const written = { ...resource(), status: { createRequestedAt: ASKED } } as StoredResource;
    const executed: Executed = { kind: "created", deployment: DEPLOYED, history, written };
    const { decided, events } = settle(resource(), {}, create, executed);
    expect(events).toEqual([
      { type: "Normal", reason: "Created", note: expect.stringContaining(DEPLOYED.id) },
    ]);
    expect(decided).toMatchObject({ outcome: { kind: "synced" }, observed: { kind: "found" }, history });
    // The answer fulfils the intent in the same write; its time stays as createdAt.
    expect(decided.record).toMatchObject({ createRequestedAt: null, createdAt: ASKED });
  });

  it("a rebuild made: Rebuilt naming the revision, recorded as handled, the deployment read after it observed", () => {
    const spec = rebuilding();
    const decision = decide(spec, seen(spec, DEPLOYED), OURS, NOW, SETTINGS);
    const after = { ...DEPLOYED, latest_revision_id: "22222222-2222-4222-8222-222222222222" };
    const executed: Executed = {
      kind: "none",
      rebuilt: { outcome: { kind: "rebuilt", revision: REVISION_2 }, deployment: after },
    };
    const { decided, events } = settle(spec, OURS, decision, executed);
    expect(events).toEqual([
      { type: "Normal", reason: "Rebuilt", note: expect.stringContaining(REVISION_2.id) },
    ]);
    expect(decided.record).toMatchObject({ lastHandledRebuildAt: ASKED });
    expect(decided.observed).toEqual({ kind: "found", deployment: after });
  });

  it("a rebuild route found missing: refused with RebuildRouteMissing and its event, not handled", () => {
    const spec = rebuilding();
    const decision = decide(spec, seen(spec, DEPLOYED), OURS, NOW, SETTINGS);
    const executed: Executed = { kind: "none", rebuilt: { outcome: { kind: "missing", why: NO_ROUTE } } };
    const { decided, events } = settle(spec, OURS, decision, executed);
    expect(events.map((e) => `${e.type}/${e.reason}`)).toEqual(["Warning/RebuildRouteMissing"]);
    expect(decided.outcome).toMatchObject({ kind: "failed", reason: "RebuildRouteMissing", stalled: true });
    expect(decided.record?.lastHandledRebuildAt).toBeUndefined();
  });

  it("a rebuild whose answer was lost: recorded as handled, never built twice, said in a Warning", () => {
    const spec = rebuilding();
    const decision = decide(spec, seen(spec, DEPLOYED), OURS, NOW, SETTINGS);
    const executed: Executed = {
      kind: "none",
      rebuilt: { outcome: { kind: "unconfirmed", error: "the request timed out" } },
    };
    const { decided, events } = settle(spec, OURS, decision, executed);
    expect(events).toEqual([
      { type: "Warning", reason: "RebuildUnconfirmed", note: expect.stringContaining("may or may not") },
    ]);
    expect(decided.record).toMatchObject({ lastHandledRebuildAt: ASKED });
    expect(decided.outcome).toEqual({ kind: "synced" });
  });

  it("a PATCH: Updated, the deployment it answered observed", () => {
    const executed: Executed = {
      kind: "sent",
      sent: { deployment: patched, revision: { kind: "patched" }, history: undefined },
    };
    const { decided, events } = settle(spec, OURS, sending, executed);
    expect(events.map((e) => `${e.type}/${e.reason}`)).toEqual(["Normal/Updated"]);
    expect(decided.observed).toEqual({ kind: "found", deployment: patched });
    expect(decided.outcome).toEqual({ kind: "synced" });
  });

  it("a PATCH of a generation already applied: DriftCorrected", () => {
    const applied: DeploymentResourceStatus = {
      ...OURS,
      conditions: [
        {
          type: "Synced",
          status: "True",
          reason: "ReconcileSuccess",
          message: "",
          observedGeneration: 1,
          lastTransitionTime: "2029-12-31T00:00:00Z",
        },
      ],
    };
    const executed: Executed = {
      kind: "sent",
      sent: { deployment: patched, revision: { kind: "patched" }, history: undefined },
    };
    const { events } = settle(spec, applied, sending, executed);
    expect(events.map((e) => e.reason)).toEqual(["DriftCorrected"]);
  });

  it("a redeploy instead of a build: Redeployed, said in Synced's message, the history it made kept", () => {
    const history = [
      { id: "33333333-3333-4333-8333-333333333333", configHash: "c", redeployedAt: "2030-01-01T00:00:00Z" },
    ];
    const executed: Executed = {
      kind: "sent",
      sent: {
        deployment: DEPLOYED,
        revision: {
          kind: "redeployed",
          revisionId: "33333333-3333-4333-8333-333333333333",
          reason: "the same config and secrets",
          behaviour: "switch-active",
          live: "33333333-3333-4333-8333-333333333333",
        },
        history,
      },
    };
    const { decided, events } = settle(spec, OURS, sending, executed);
    expect(events.map((e) => e.reason)).toEqual(["Redeployed"]);
    expect(decided.outcome).toEqual({
      kind: "synced",
      message:
        "redeployed revision 33333333-3333-4333-8333-333333333333 (no build): the same config and secrets",
    });
    expect(decided.history).toBe(history);
  });

  it("a redeploy sent before and still pending sends nothing for it again: no event", () => {
    const executed: Executed = {
      kind: "sent",
      sent: { deployment: DEPLOYED, revision: { kind: "pending", revisionId: "r" }, history: undefined },
    };
    expect(settle(spec, OURS, sending, executed).events).toEqual([]);
  });
});

/**
 * A decision's whole arm without ports: decide, `executed` (what execute would return: the
 * deployment its write answered), settle and conclude, seen as a user reads the resource.
 */
function applied(
  spec: DecideSpec,
  observation: Observation,
  status: DeploymentResourceStatus,
  executed?: Executed,
  settings: DecideSettings = SETTINGS,
) {
  const decision = decide(spec, observation, status, NOW, settings);
  const { decided, events } = settle(spec, status, decision, executed);
  const { status: next, next: action } = conclude({
    obj: { ...spec, status } as StoredResource,
    decided,
    evidence: {},
    now: new Date(NOW),
    secretValues: [],
    pollMs: 5_000,
  });
  return {
    decision,
    events: events.map((e) => `${e.type}/${e.reason}`),
    conditions: Object.fromEntries((next.conditions ?? []).map((c) => [c.type, `${c.status}/${c.reason}`])),
    status: next,
    next: action,
  };
}

describe("the reconciler's table, as rows of decide, settle and conclude (no port needed)", () => {
  /** A condition True for `reason` since the day before {@link NOW}. */
  const trueFor = (type: string, reason: string) => ({
    type,
    status: "True" as const,
    reason,
    message: "",
    lastTransitionTime: "2029-12-31T00:00:00Z",
  });
  /** A settled resource's status: its deployment READY and Synced for generation 1. */
  const SETTLED: DeploymentResourceStatus = {
    ...OURS,
    conditions: [
      trueFor("Ready", "Available"),
      { ...trueFor("Synced", "ReconcileSuccess"), observedGeneration: 1 },
    ],
  };
  /** `spec` over {@link SPEC} as generation 2 of the resource (an edit). */
  const edited = (spec: Partial<DeploymentSpec>): DecideSpec => {
    const r = resource(spec);
    return { ...r, metadata: { ...r.metadata, generation: 2 } };
  };

  it("a spec change outside the revision config is one PATCH without a new revision: Ready stays True", () => {
    const spec = edited({ sourceConfig: { customUrl: "https://agent-2.example" } });
    const answered = {
      ...DEPLOYED,
      source_config: { ...DEPLOYED.source_config, custom_url: "https://agent-2.example" },
    };
    const executed: Executed = {
      kind: "sent",
      sent: { deployment: answered, revision: { kind: "patched" }, history: undefined },
    };
    const { decision, events, conditions, status, next } = applied(
      spec,
      seen(spec, DEPLOYED),
      SETTLED,
      executed,
    );
    expect(decision.write).toMatchObject({ kind: "send", plan: { newRevision: false } });
    expect(decision.write?.kind === "send" && decision.write.plan.body).toEqual({
      source_config: { custom_url: "https://agent-2.example" },
    });
    expect(events).toEqual(["Normal/Updated"]);
    expect(conditions).toEqual({ Ready: "True/Available", Synced: "True/ReconcileSuccess" });
    expect(status.observedGeneration).toBe(2);
    expect(next).toEqual({ kind: "done" });
  });

  it("ObserveOnly reports the drift it sees, writes nothing, and never deletes (no finalizer)", () => {
    const spec = resource({ managementPolicy: "ObserveOnly", deletionPolicy: "Delete" });
    const drifted = {
      ...DEPLOYED,
      source_config: { ...DEPLOYED.source_config, custom_url: "https://elsewhere.example" },
    };
    const { decision, events, conditions, status } = applied(
      spec,
      seen(spec, drifted, { adopted: true }),
      {},
    );
    expect(decision.write).toBeUndefined();
    expect(events).toEqual([]);
    expect(conditions).toEqual({ Ready: "True/Available", Synced: "False/Drifted" });
    expect(status.conditions?.find((c) => c.type === "Synced")?.message).toContain(
      "https://elsewhere.example → https://agent.example",
    );
    // The finalizer rule (the reconciler keeps the finalizer exactly while it holds).
    expect(cleansUpOnDelete(spec)).toBe(false);
  });

  it("a reconcile-interval annotation sets this resource's own resync", () => {
    const spec = resource({}, { [ANNOTATION_RECONCILE_INTERVAL]: "2m" });
    const { decision, events, conditions, next } = applied(spec, seen(spec, DEPLOYED), SETTLED);
    expect(decision.write).toBeUndefined();
    expect(events).toEqual([]);
    expect(conditions).toEqual({ Ready: "True/Available", Synced: "True/ReconcileSuccess" });
    expect(next).toEqual({ kind: "done", intervalMs: 120_000 });
  });

  it.each([
    ["1ms", 10_000],
    ["0s", undefined],
    ["9s", 10_000],
    ["45s", 45_000],
    ["soon", undefined],
    ["", undefined],
  ])("a reconcile-interval of %j: no shorter than 10 s, a malformed or zero one ignored", (value, ms) => {
    const spec = resource({}, { [ANNOTATION_RECONCILE_INTERVAL]: value });
    expect(reconcileInterval(spec)).toBe(ms);
  });

  /** A secret read from the Secret `agent-keys`, and the values it held before and after a rotation. */
  const API_KEY_FROM_SECRET = {
    name: "API_KEY",
    valueFrom: { secretKeyRef: { name: "agent-keys", key: "api" } },
  };
  const OLD_KEY = "sk-old-0123456789";
  const NEW_KEY = "sk-new-9876543210";
  const withSecret = resource({ secrets: [API_KEY_FROM_SECRET] });
  /** What observe sees of `spec` once the Secret holds `value`: the deployment `deployment`. */
  const seenWithSecret = (spec: DecideSpec, value: string, deployment: Deployment): Observation => ({
    ...seen(resource(), deployment),
    desired: desiredFromSpec(spec.spec, "agent", { secretData: { "agent-keys": { api: value } } }),
  });
  const OLD_HASH = hashSecrets([{ name: "API_KEY", value: OLD_KEY }]);
  /** The secrets' digests keyed with an install key. */
  const KEYED = keyedSecretDigest(Buffer.alloc(32, 5));
  /** {@link withSecret} edited to a new image. */
  const editedWithSecret = edited({ secrets: [API_KEY_FROM_SECRET], ...IMAGE_2 });
  /** The deployment holding the secret `API_KEY` (the service shows names, never values). */
  const WITH_KEY: Deployment = { ...DEPLOYED, secrets: [{ name: "API_KEY" }] };
  const R2 = "22222222-2222-4222-8222-222222222222";
  const R1 = DEPLOYED.latest_revision_id ?? "";
  const R9 = "99999999-9999-4999-8999-999999999999";
  /** {@link WITH_KEY} after someone removed its secret: the service made revision R9 of it. */
  const LOST: Deployment = { ...DEPLOYED, secrets: [], latest_revision_id: R9, active_revision_id: R9 };
  /** The conditions of a resource whose new revision is rolling out. */
  const ROLLING_OUT = {
    Ready: "False/RolloutInProgress",
    Synced: "True/ReconcileSuccess",
    Reconciling: "True/RolloutInProgress",
  };
  /** What a PATCH making a revision answered: its new revision latest, not active yet. */
  const rolling = (deployment: Deployment): Executed => ({
    kind: "sent",
    sent: {
      deployment: { ...deployment, latest_revision_id: R2 },
      revision: { kind: "patched" },
      history: undefined,
    },
  });
  const drifted: Deployment = {
    ...DEPLOYED,
    source_config: { ...DEPLOYED.source_config, custom_url: "https://elsewhere.example" },
  };

  /** What a PATCH making a revision comes to: Updated, rolling out, looked at after the poll period. */
  const ROLLING_OUT_AFTER_PATCH = {
    events: ["Normal/Updated"],
    conditions: ROLLING_OUT,
    next: { kind: "requeueAfter", ms: 5_000 },
  };

  interface ArmRow {
    name: string;
    spec: DecideSpec;
    observation: Observation;
    status: DeploymentResourceStatus;
    /** The operator's settings, when not {@link SETTINGS}. */
    settings?: DecideSettings;
    /** What execute returned for the decision's write (none: nothing written). */
    executed?: Executed;
    /** The body the decision sends, exactly (none: nothing sent). */
    body: unknown;
    events: string[];
    conditions: Record<string, string>;
    /** The status concluded, as far as stated. */
    concluded: Partial<DeploymentResourceStatus>;
    /** Fields the concluded status leaves out. */
    absent?: (keyof DeploymentResourceStatus)[];
    next: unknown;
  }
  const ARM: ArmRow[] = [
    {
      name: "a deployment the listing shows by name is adopted: recorded as ours, nothing sent, no create intent",
      spec: resource(),
      observation: seen(resource(), DEPLOYED, { adopted: true }),
      status: {},
      body: undefined,
      events: ["Normal/Adopted"],
      conditions: { Ready: "True/Available", Synced: "True/ReconcileSuccess" },
      concluded: { deploymentId: DEPLOYED.id },
      absent: ["createRequestedAt"],
      next: { kind: "done" },
    },
    {
      name: "someone changed the service after the spec was applied: one PATCH puts the spec's value back, DriftCorrected",
      spec: resource(),
      observation: seen(resource(), drifted),
      status: SETTLED,
      executed: {
        kind: "sent",
        sent: { deployment: DEPLOYED, revision: { kind: "patched" }, history: undefined },
      },
      body: { source_config: { custom_url: "https://agent.example" } },
      events: ["Normal/DriftCorrected"],
      conditions: { Ready: "True/Available", Synced: "True/ReconcileSuccess" },
      concluded: { deploymentId: DEPLOYED.id },
      next: { kind: "done" },
    },
    {
      name: "a new image is one PATCH making a revision: rolling out, looked at again after the poll period",
      spec: edited(IMAGE_2),
      observation: seen(edited(IMAGE_2), DEPLOYED),
      status: SETTLED,
      executed: rolling(DEPLOYED),
      body: { source_revision_config: { image_uri: "repo/agent:2" } },
      ...ROLLING_OUT_AFTER_PATCH,
      concluded: { observedGeneration: 2, appliedGeneration: 2 },
    },
    {
      name: "an edited spec whose Secrets are in line sends only what changed: no secrets in the PATCH",
      spec: editedWithSecret,
      observation: seenWithSecret(editedWithSecret, OLD_KEY, WITH_KEY),
      status: { ...SETTLED, appliedSecretsHash: OLD_HASH },
      executed: rolling(WITH_KEY),
      body: { source_revision_config: { image_uri: "repo/agent:2" } },
      ...ROLLING_OUT_AFTER_PATCH,
      concluded: { appliedSecretsHash: OLD_HASH },
    },
    {
      name: "a plain digest recorded before the install key, the values unchanged: nothing sent, the keyed digest recorded",
      spec: withSecret,
      observation: seenWithSecret(withSecret, OLD_KEY, WITH_KEY),
      status: { ...SETTLED, appliedSecretsHash: OLD_HASH },
      settings: { ...SETTINGS, secretDigest: KEYED },
      body: undefined,
      events: [],
      conditions: { Ready: "True/Available", Synced: "True/ReconcileSuccess" },
      concluded: { appliedSecretsHash: KEYED.digest([{ name: "API_KEY", value: OLD_KEY }]) },
      next: { kind: "done" },
    },
    {
      name: "the service lost a secret (a revision someone else made): named once, and the secrets sent again",
      spec: withSecret,
      observation: seenWithSecret(withSecret, OLD_KEY, LOST),
      status: {
        ...SETTLED,
        appliedSecretsHash: OLD_HASH,
        appliedGeneration: 1,
        latestRevisionId: R1,
        revisionHistory: [{ id: R1 }],
      },
      executed: rolling(LOST),
      body: { secrets: [{ name: "API_KEY", value: OLD_KEY }] },
      ...ROLLING_OUT_AFTER_PATCH,
      events: ["Warning/ExternalRevision", "Normal/Updated"],
      concluded: {
        appliedSecretsHash: OLD_HASH,
        externalRevision: { id: R9, seenAt: "2030-01-01T00:00:00Z" },
      },
    },
    {
      name: "a rotated Secret value is sent in one PATCH and recorded as a hash, never as a value",
      spec: withSecret,
      observation: seenWithSecret(withSecret, NEW_KEY, WITH_KEY),
      status: { ...SETTLED, appliedSecretsHash: OLD_HASH },
      executed: rolling(WITH_KEY),
      body: { secrets: [{ name: "API_KEY", value: NEW_KEY }] },
      ...ROLLING_OUT_AFTER_PATCH,
      concluded: { appliedSecretsHash: hashSecrets([{ name: "API_KEY", value: NEW_KEY }]) },
    },
  ];

  it.each(ARM)("$name", (row) => {
    const { decision, events, conditions, status, next } = applied(
      row.spec,
      row.observation,
      row.status,
      row.executed,
      row.settings,
    );
    expect(decision.write?.kind === "send" ? decision.write.plan.body : decision.write?.kind).toEqual(
      row.body,
    );
    // Recorded in order: the decision's events before the write, then what the write came to.
    expect([...decision.events.map((e) => `${e.type}/${e.reason}`), ...events]).toEqual(row.events);
    expect(conditions).toEqual(row.conditions);
    expect(status).toMatchObject(row.concluded);
    for (const field of row.absent ?? []) expect(status[field]).toBeUndefined();
    expect(next).toEqual(row.next);
    // Values are never shown: neither the status nor the events carry a secret's value.
    const shown = JSON.stringify([status, decision.events, decision.after]);
    for (const value of [OLD_KEY, NEW_KEY]) expect(shown).not.toContain(value);
  });
});

/**
 * The conditions a decision without a write concludes (no evidence: nothing rolling out), as
 * `Type: Status/Reason`, and the status: decide, settle and conclude are pure together.
 */
function concluded(spec: DecideSpec, observation: Observation, status: DeploymentResourceStatus) {
  const decision = decide(spec, observation, status, NOW, SETTINGS);
  expect(decision.write).toBeUndefined();
  const { decided } = settle(spec, status, decision, undefined);
  const obj = { ...spec, status } as StoredResource;
  const { status: next } = conclude({
    obj,
    decided,
    evidence: {},
    now: new Date(NOW),
    secretValues: [],
    pollMs: 5_000,
  });
  const conditions = Object.fromEntries(
    (next.conditions ?? []).map((c) => [c.type, `${c.status}/${c.reason}`]),
  );
  return {
    conditions,
    status: next,
    message: (type: string) => next.conditions?.find((c) => c.type === type)?.message,
    events: decision.events,
  };
}

describe("decide, then the conclusion (moved from the reconciler's table: no port needed)", () => {
  it("ObserveOnly without a deployment on the service reports it and never creates one", () => {
    const spec = resource({ managementPolicy: "ObserveOnly" });
    expect(concluded(spec, seen(spec, null), {}).conditions).toEqual({
      Ready: "False/NotFound",
      Synced: "False/Drifted",
    });
  });

  it("a deployment with the name but another source is blocked: stalled, and not recorded as ours", () => {
    const spec = resource({ deletionPolicy: "Delete" });
    const found = seen(spec, { ...DEPLOYED, source: "internal_docker" }, { adopted: true });
    const { conditions, status, message, events } = concluded(spec, found, {});
    expect(events).toEqual([]);
    // Ready stays unknown: the deployment found is not this resource's to report on.
    expect(conditions).toEqual({
      Ready: "Unknown/Unknown",
      Synced: "False/Immutable",
      Stalled: "True/Immutable",
    });
    // Recording its id would make deletionPolicy Delete delete someone else's deployment.
    expect(status.deploymentId).toBeUndefined();
    expect(message("Stalled")).toContain("source");
  });
});

describe("changes made outside this resource: named, counted, corrected or reported", () => {
  const R1 = DEPLOYED.latest_revision_id ?? "";
  const R9 = "99999999-9999-4999-8999-999999999999";
  /** Applied at generation 1: its first revision, R1, is its own. */
  const APPLIED: DeploymentResourceStatus = {
    ...OURS,
    latestRevisionId: R1,
    revisionHistory: [{ id: R1 }],
    appliedGeneration: 1,
  };
  /** Someone made revision R9 of another image (the service's UI, langgraph deploy). */
  const HOTFIX: Deployment = {
    ...DEPLOYED,
    latest_revision_id: R9,
    active_revision_id: R9,
    source_revision_config: { image_uri: "repo/agent:hotfix" },
  };
  /** Someone made revision R9 of the same config (a redeploy in the service's UI). */
  const AGAIN: Deployment = { ...DEPLOYED, latest_revision_id: R9, active_revision_id: R9 };
  const decided = (
    spec: DecideSpec,
    deployment: Deployment,
    status: DeploymentResourceStatus,
    adopted = false,
  ) => decide(spec, seen(spec, deployment, { adopted }), status, NOW, SETTINGS);

  it("a revision this operator did not create: recorded with what it deployed, an ExternalRevision event, counted", () => {
    const decision = decided(resource(), HOTFIX, APPLIED);
    expect(decision.externalRevision).toEqual({
      id: R9,
      seenAt: "2030-01-01T00:00:00Z",
      imageUri: "repo/agent:hotfix",
    });
    expect(decision.externalChanges).toEqual(["revision"]);
    expect(decision.events).toEqual([
      {
        type: "Warning",
        reason: "ExternalRevision",
        note: expect.stringMatching(
          new RegExp(
            `revision ${R9} .*not created by this operator.*image repo/agent:hotfix.*driftPolicy is Correct`,
          ),
        ),
      },
    ]);
    // Under Correct (the default) the spec's image goes back: a PATCH, whose revision part
    // applyPatch redeploys when spec.revisionReuse allows (reconciler-redeploy.test.ts).
    expect(decision.write).toMatchObject({
      kind: "send",
      plan: { body: { source_revision_config: { image_uri: "repo/agent:1" } } },
    });
    expect(decision.record.appliedGeneration).toBe(1);
  });

  it("said once: the same revision, already recorded, is not named again", () => {
    const status = {
      ...APPLIED,
      latestRevisionId: R9,
      externalRevision: { id: R9, seenAt: "2029-12-31T00:00:00Z" },
    };
    const decision = decided(resource(), AGAIN, status);
    expect(decision.externalRevision).toBeUndefined();
    expect(decision.externalChanges).toBeUndefined();
    expect(decision.events).toEqual([]);
  });

  it("not external: the revision this process's own last write answered, its status write lost since", () => {
    // A PATCH made R9, then the status write recording it failed (a conflict): the next reconcile
    // sees R9 as the latest, in no history; the connection's snapshot still holds what the write answered.
    const own = seen(resource(), HOTFIX, {}, { ownLatest: R9 });
    const decision = decide(resource(), own, APPLIED, NOW, SETTINGS);
    expect(decision.externalRevision).toBeUndefined();
    expect(decision.externalChanges).toBeUndefined();
    expect(decision.events?.some((e) => e.reason === "ExternalRevision")).toBe(false);
    // Another revision than the one its write answered is still named.
    const other = seen(resource(), HOTFIX, {}, { ownLatest: R1 });
    expect(decide(resource(), other, APPLIED, NOW, SETTINGS).externalRevision?.id).toBe(R9);
  });

  it("not external: a revision of its own history, the first look, an adopted deployment, a build on push of the spec's branch", () => {
    const own = { ...APPLIED, revisionHistory: [{ id: R9 }, { id: R1 }] };
    expect(decided(resource(), AGAIN, own).externalRevision).toBeUndefined();
    const { latestRevisionId: _first, ...firstLook } = APPLIED;
    expect(decided(resource(), AGAIN, firstLook).externalRevision).toBeUndefined();
    expect(decided(resource(), AGAIN, APPLIED, true).externalRevision).toBeUndefined();
    const tracking = resource({
      sourceConfig: { customUrl: "https://agent.example", buildOnPush: true },
      sourceRevisionConfig: { repoRef: "main" },
    });
    const pushed = (ref: string): Deployment => ({
      ...AGAIN,
      source_config: { ...AGAIN.source_config, build_on_push: true },
      source_revision_config: { repo_ref: ref, repo_commit_sha: "c".repeat(40) },
    });
    expect(decided(tracking, pushed("main"), APPLIED).externalRevision).toBeUndefined();
    // Another branch than the spec's is someone's deploy, not the push the team asked for.
    expect(decided(tracking, pushed("hotfix"), APPLIED).externalRevision).toMatchObject({
      id: R9,
      repoRef: "hotfix",
      repoCommitSha: "c".repeat(40),
    });
  });

  it("ObserveOnly records one too, and writes nothing", () => {
    const decision = decided(resource({ managementPolicy: "ObserveOnly" }), HOTFIX, APPLIED);
    expect(decision.externalRevision?.id).toBe(R9);
    expect(decision.events.map((e) => e.note)).toEqual([expect.stringContaining("ObserveOnly")]);
    expect(decision.write).toBeUndefined();
  });

  it("driftPolicy Report: nothing written; Synced=False Drifted names the fields, never the values, and the policy", () => {
    const spec = resource({ driftPolicy: "Report" });
    const drifted: Deployment = { ...DEPLOYED, source_config: { custom_url: "https://elsewhere.example" } };
    const decision = decided(spec, drifted, APPLIED);
    expect(decision.write).toBeUndefined();
    expect(decision.outcome).toEqual({
      kind: "drifted",
      message: expect.stringMatching(
        /^spec\.driftPolicy is Report: .* in sourceConfig\.customUrl .*nothing is written/,
      ),
    });
    expect(JSON.stringify(decision.outcome)).not.toContain("elsewhere");
    expect(decision.externalChanges).toEqual(["fields"]);
    // Said already: not counted again.
    const said = decided(
      spec,
      drifted,
      withSynced(APPLIED, "False", "Drifted", (decision.outcome as { message: string }).message),
    );
    expect(said.externalChanges).toBeUndefined();
    expect(said.write).toBeUndefined();
    // An edit of the spec (a new generation) is applied, the drifted field with it.
    const edited = { ...spec, metadata: { ...spec.metadata, generation: 2 } };
    expect(decided(edited, drifted, APPLIED).write?.kind).toBe("send");
    // An external revision under Report: recorded, and its image left as it is.
    const hotfix = decided(spec, HOTFIX, APPLIED);
    expect(hotfix.write).toBeUndefined();
    expect(hotfix.externalChanges).toEqual(["revision", "fields"]);
    expect(hotfix.events[0]?.note).toContain("driftPolicy is Report");
  });

  it("driftPolicy Report beside a rebuild the connection knows it cannot make: Synced names both, the drift counted once", () => {
    const spec = resource({ driftPolicy: "Report" });
    const asking = rebuilding({ driftPolicy: "Report" });
    const drifted: Deployment = { ...DEPLOYED, source_config: { custom_url: "https://elsewhere.example" } };
    const report = decided(spec, drifted, APPLIED).outcome as { message: string };
    const reported = withSynced(APPLIED, "False", "Drifted", report.message);
    const refuse = (status: DeploymentResourceStatus) =>
      decide(asking, seen(asking, drifted, {}, { rebuildMissing: NO_ROUTE }), status, NOW, SETTINGS);
    const first = refuse(reported);
    expect(first.write).toBeUndefined();
    expect(first.outcome).toEqual({
      kind: "failed",
      reason: "RebuildRouteMissing",
      stalled: true,
      message: expect.stringMatching(/^dms\.dev\/rebuild-requested-at asks for a new revision, but /),
    });
    const { message } = first.outcome as { message: string };
    // Soft: the drift's report kept and its count once are checked apart.
    expect.soft(message).toContain(report.message);
    expect(first.after.map((e) => `${e.type}/${e.reason}`)).toEqual(["Warning/RebuildRouteMissing"]);
    expect(first.after[0]?.note).not.toContain(report.message);
    expect(first.externalChanges).toBeUndefined();
    // The same state again: said already, so neither counted nor warned again.
    const refused = withSynced(APPLIED, "False", "RebuildRouteMissing", message);
    const again = refuse(refused);
    expect.soft(again.externalChanges).toBeUndefined();
    expect(again.outcome).toEqual(first.outcome);
    expect(again.after).toEqual([]);
    // Withdrawn, the refusal leaves the drift said alone, not counted again.
    expect(decided(spec, drifted, refused)).toMatchObject({ outcome: report });
    expect(decided(spec, drifted, refused).externalChanges).toBeUndefined();
    // A drift first seen beside the refusal: counted then, once.
    expect(refuse(APPLIED).externalChanges).toEqual(["fields"]);
  });

  it("driftPolicy Report sends a rotated Secret: the team's change, not drift", () => {
    const spec = resource({ driftPolicy: "Report", secrets: [{ name: "API_KEY", value: "new" }] });
    const status = { ...APPLIED, appliedSecretsHash: "0".repeat(64) };
    expect(decided(spec, DEPLOYED, status).write?.kind).toBe("send");
  });

  it("a PATCH of a spec already applied: DriftCorrected names the fields, never the values, and is counted", () => {
    const drifted: Deployment = { ...DEPLOYED, source_config: { custom_url: "https://elsewhere.example" } };
    const decision = decided(resource(), drifted, APPLIED);
    const executed: Executed = {
      kind: "sent",
      sent: { deployment: DEPLOYED, revision: { kind: "patched" }, history: undefined },
    };
    const { decided: settled, events } = settle(resource(), APPLIED, decision, executed);
    expect(events).toEqual([
      {
        type: "Normal",
        reason: "DriftCorrected",
        note: "put back a change made outside this resource: sourceConfig.customUrl differed from the spec; the spec's values sent",
      },
    ]);
    expect(settled.externalChanges).toEqual(["fields"]);
  });

  it("an external revision put back by a redeploy of the operator's own: DriftCorrected naming the revision", () => {
    const decision = decided(resource(), HOTFIX, APPLIED);
    const executed: Executed = {
      kind: "sent",
      sent: {
        deployment: HOTFIX,
        revision: {
          kind: "redeployed",
          revisionId: R1,
          reason: "pinned",
          behaviour: "switch-active",
          live: R1,
        },
        history: [{ id: R1, redeployedAt: "2030-01-01T00:00:00Z" }],
      },
    };
    const { decided: settled, events } = settle(resource(), APPLIED, decision, executed);
    expect(events).toEqual([
      {
        type: "Normal",
        reason: "DriftCorrected",
        note: `put back a change made outside this resource: sourceRevisionConfig.imageUri differed from the spec; redeployed revision ${R1}, its own, instead of building one (no build)`,
      },
    ]);
    expect(settled.externalChanges).toEqual(["revision", "fields"]);
    expect(settled.externalRevision?.id).toBe(R9);
  });

  it("a rebuild's revision joins status.revisionHistory, as the operator's own", () => {
    const spec = rebuilding();
    const decision = decide(spec, seen(spec, DEPLOYED), APPLIED, NOW, SETTINGS);
    const executed: Executed = {
      kind: "none",
      rebuilt: { outcome: { kind: "rebuilt", revision: REVISION_2 }, deployment: DEPLOYED },
    };
    const { decided: settled } = settle(spec, APPLIED, decision, executed);
    expect(settled.history?.map((e) => e.id)).toEqual([REVISION_2.id, R1]);
    expect(settled.history?.[0]?.configHash).toMatch(/^[0-9a-f]{64}$/);
  });

  it("an empty secrets list the service kept: CannotClearSecrets, said at once with the fix", () => {
    const spec = resource({ secrets: [] });
    const withSecret: Deployment = { ...DEPLOYED, secrets: [{ name: "API_KEY", value: "********" }] };
    const decision = decided(spec, withSecret, { ...OURS, latestRevisionId: R1 });
    expect(decision.write).toMatchObject({ kind: "send", plan: { body: { secrets: [] } } });
    const executed: Executed = {
      kind: "sent",
      sent: { deployment: withSecret, revision: { kind: "patched" }, history: undefined },
    };
    const { decided: settled, events } = settle(spec, OURS, decision, executed);
    expect(settled.outcome).toMatchObject({ kind: "failed", reason: "CannotClearSecrets", stalled: true });
    expect(events.map((e) => `${e.type}/${e.reason}`)).toEqual([
      "Normal/Updated",
      "Warning/CannotClearSecrets",
    ]);
    expect(events[1]?.note).toMatch(/API_KEY.*"unchanged".*remove them on the service/);
    // The next reconcile, the empty list's digest applied: not sent again.
    const next = decided(spec, withSecret, {
      ...OURS,
      appliedSecretsHash: settled.record?.appliedSecretsHash ?? "",
    });
    expect(next.write).toBeUndefined();
    expect(next.outcome).toMatchObject({ kind: "failed", reason: "CannotClearSecrets" });
  });

  it("the conclusion writes status.externalRevision and status.appliedGeneration, and keeps the record", () => {
    const decision = decided(resource(), AGAIN, APPLIED);
    const { decided: settled } = settle(resource(), APPLIED, decision, undefined);
    const obj = { ...resource(), status: APPLIED } as StoredResource;
    const input = {
      obj,
      decided: settled,
      evidence: {},
      now: new Date(NOW),
      secretValues: [],
      pollMs: 5_000,
    };
    const { status } = conclude(input);
    expect(status.externalRevision).toEqual({
      id: R9,
      seenAt: "2030-01-01T00:00:00Z",
      imageUri: "repo/agent:1",
    });
    expect(status.appliedGeneration).toBe(1);
    const later = conclude({
      ...input,
      obj: { ...obj, status },
      decided: { ...settled, externalRevision: undefined },
    });
    expect(later.status.externalRevision).toEqual(status.externalRevision);
  });
});

/** `status` with a Synced condition `status`/`reason`/`message` at generation 1. */
function withSynced(
  status: DeploymentResourceStatus,
  value: "True" | "False",
  reason: string,
  message: string,
): DeploymentResourceStatus {
  const synced = {
    type: "Synced",
    status: value,
    reason,
    message,
    observedGeneration: 1,
    lastTransitionTime: "2029-12-31T00:00:00Z",
  };
  return { ...status, conditions: [synced] };
}

describe("a rebuild whose answer was lost: remembered until the next new revision says what it made", () => {
  const R1 = DEPLOYED.latest_revision_id ?? "";
  const R9 = "99999999-9999-4999-8999-999999999999";
  /** What the rebuild would have built: the deployment's configuration when it was sent. */
  const BUILT = revisionConfigHash(configAfterPatch(DEPLOYED.source_revision_config, {}), DEPLOYED.source);
  const SENT = { requestedAt: ASKED, afterRevisionId: R1, configHash: BUILT };
  /** The answer lost: the request handled, R1 the latest revision when it was sent. */
  const UNCONFIRMED: DeploymentResourceStatus = {
    ...OURS,
    latestRevisionId: R1,
    revisionHistory: [{ id: R1, deployed: true }],
    appliedGeneration: 1,
    lastHandledRebuildAt: ASKED,
    unconfirmedRebuild: SENT,
  };
  /** The revision the rebuild made after all, of the same configuration, rolling out. */
  const REBUILT: Deployment = { ...DEPLOYED, latest_revision_id: R9 };
  /** Someone else's revision of another image. */
  const HOTFIX: Deployment = {
    ...DEPLOYED,
    latest_revision_id: R9,
    active_revision_id: R9,
    source_revision_config: { image_uri: "repo/agent:hotfix" },
  };
  const spec = rebuilding();
  const at = (deployment: Deployment, status = UNCONFIRMED, found = {}, more = {}) =>
    decide(spec, seen(spec, deployment, found, more), status, NOW, SETTINGS);
  const lost: Executed = {
    kind: "none",
    rebuilt: { outcome: { kind: "unconfirmed", error: "the request timed out" } },
  };

  it("the lost answer is remembered: the latest revision it was sent after, what it would have built, the request", () => {
    const decision = decide(spec, seen(spec, DEPLOYED), OURS, NOW, SETTINGS);
    expect(settle(spec, OURS, decision, lost).decided.record?.unconfirmedRebuild).toEqual(SENT);
    // Within the bounds of the ids beside it: a longer request's value is left out.
    const long = resource({}, { [ANNOTATION_REBUILD_REQUESTED_AT]: "x".repeat(65) });
    const asked = decide(long, seen(long, DEPLOYED), OURS, NOW, SETTINGS);
    expect(settle(long, OURS, asked, lost).decided.record?.unconfirmedRebuild).toEqual({
      afterRevisionId: R1,
      configHash: BUILT,
    });
    // A latest revision it could not record (past the bound): no later one could be told from it.
    const odd = { ...DEPLOYED, latest_revision_id: "r".repeat(65) };
    const unrecorded = decide(spec, seen(spec, odd), OURS, NOW, SETTINGS);
    expect(settle(spec, OURS, unrecorded, lost).decided.record?.unconfirmedRebuild).toBeNull();
  });

  it("the first new revision of what it would have built is its own: in the history, a Normal Rebuilt, never an ExternalRevision", () => {
    const { decision, events, status } = applied(spec, seen(spec, REBUILT), UNCONFIRMED);
    expect(decision.externalRevision).toBeUndefined();
    expect(decision.externalChanges).toBeUndefined();
    expect(decision.write).toBeUndefined();
    expect(events).toEqual(["Normal/Rebuilt"]);
    expect(decision.after).toEqual([
      {
        type: "Normal",
        reason: "Rebuilt",
        note: expect.stringContaining(`(${ASKED}), whose answer was lost, made revision ${R9}`),
      },
    ]);
    // Its config's digest, not its secrets' (the answer never came): never redeployed.
    expect(status.revisionHistory).toEqual([
      { id: R9, configHash: BUILT },
      { id: R1, deployed: true },
    ]);
    expect(status.externalRevision).toBeUndefined();
    expect(status.unconfirmedRebuild).toBeUndefined();
    expect(status.latestRevisionId).toBe(R9);
  });

  it("any other new revision is named as ever (ExternalRevision), and the record is cleared", () => {
    const { decision, events, status } = applied(spec, seen(spec, HOTFIX), UNCONFIRMED);
    expect(decision.externalRevision?.id).toBe(R9);
    expect(events).not.toContain("Normal/Rebuilt");
    expect(decision.events.map((e) => e.reason)).toEqual(["ExternalRevision"]);
    expect(status.revisionHistory?.map((e) => e.id)).not.toContain(R9);
    expect(status.unconfirmedRebuild).toBeUndefined();
  });

  it("its revision, of the configuration of a spec Git has left since (a revert): the spec applied again as the operator's own change, never a drift, whatever driftPolicy", () => {
    for (const driftPolicy of ["Correct", "Report"] as const) {
      const reverted = resource({ ...IMAGE_2, driftPolicy });
      const decision = decide(reverted, seen(reverted, REBUILT), UNCONFIRMED, NOW, SETTINGS);
      expect(decision.outcome).toEqual({ kind: "synced" });
      expect(decision.write).toMatchObject({ kind: "send", reapplied: true });
      expect(decision.externalRevision).toBeUndefined();
      const patched: Executed = {
        kind: "sent",
        sent: { deployment: REBUILT, revision: { kind: "patched" }, history: [{ id: R9 }] },
      };
      const { decided, events } = settle(reverted, UNCONFIRMED, decision, patched);
      expect(events.map((e) => `${e.type}/${e.reason}`)).toEqual(["Normal/Updated", "Normal/Rebuilt"]);
      expect(decided.externalChanges).toBeUndefined();
      expect(decided.record?.appliedGeneration).toBe(1);
    }
    // Held by a rollout window: the spec is recorded as not applied, so the held part is no drift later.
    const closed = resource({ ...IMAGE_2, rolloutWindows: [ALWAYS_DENY] });
    const held = decide(closed, seen(closed, REBUILT), UNCONFIRMED, NOW, SETTINGS);
    expect(held.outcome.kind).toBe("held");
    expect(held.record.appliedGeneration).toBeNull();
    // Of the configuration the spec still asks: nothing to apply again, the spec stays applied.
    const same = decide(spec, seen(spec, REBUILT), UNCONFIRMED, NOW, SETTINGS);
    expect(same.write).toBeUndefined();
    expect(same.record.appliedGeneration).toBe(1);
  });

  it("nothing new yet (the service may still be at it, a listing may lag): the record stays, nothing said", () => {
    const { decision, events, status } = applied(spec, seen(spec, DEPLOYED), UNCONFIRMED);
    expect(decision.record.unconfirmedRebuild).toBeUndefined();
    expect(events).toEqual([]);
    expect(status.unconfirmedRebuild).toEqual(SENT);
    expect(status.revisionHistory).toEqual(UNCONFIRMED.revisionHistory);
  });

  it("a new revision of its own writes, or of a deployment taken over by name or gone: cleared, nothing said", () => {
    const cleared = { record: { unconfirmedRebuild: null }, after: [] };
    const own = { ...UNCONFIRMED, revisionHistory: [{ id: R9 }, { id: R1 }] };
    expect(at(REBUILT, own)).toMatchObject(cleared);
    expect(at(REBUILT, UNCONFIRMED, {}, { ownLatest: R9 })).toMatchObject(cleared);
    expect(at(REBUILT, UNCONFIRMED, { adopted: true })).toMatchObject(cleared);
    expect(decide(spec, seen(spec, null), UNCONFIRMED, NOW, SETTINGS).record.unconfirmedRebuild).toBeNull();
    for (const decision of [at(REBUILT, own), at(REBUILT, UNCONFIRMED, {}, { ownLatest: R9 })])
      expect(decision.history).toBeUndefined();
  });

  it("a decision that fails before any write leaves it all to the retry", () => {
    const bad = rebuilding({
      rolloutWindows: [{ kind: "allow", schedule: "not a schedule", duration: "1h" }],
    });
    const decision = decide(bad, seen(bad, REBUILT), UNCONFIRMED, NOW, SETTINGS);
    expect(decision.failed?.error).toBeInstanceOf(InvalidSpecError);
    expect(decision.record.unconfirmedRebuild).toBeUndefined();
    expect(decision.events.map((e) => e.reason)).not.toContain("ExternalRevision");
  });

  it("a later write that made a revision of its own clears the record; one that made none keeps it", () => {
    const edited = resource(IMAGE_2);
    const decision = decide(edited, seen(edited, DEPLOYED), UNCONFIRMED, NOW, SETTINGS);
    const patched = (history: ApplyPatchResult["history"]): Executed => ({
      kind: "sent",
      sent: { deployment: REBUILT, revision: { kind: "patched" }, history },
    });
    const made = settle(edited, UNCONFIRMED, decision, patched([{ id: R9 }, { id: R1 }]));
    expect(made.decided.record?.unconfirmedRebuild).toBeNull();
    const none = settle(edited, UNCONFIRMED, decision, patched(undefined));
    expect(none.decided.record?.unconfirmedRebuild).toBeUndefined();
    // A switch of the active revision back records it in the history, and makes no revision.
    const switched: Executed = {
      kind: "sent",
      sent: {
        deployment: DEPLOYED,
        revision: { kind: "redeployed", revisionId: R1, reason: "", behaviour: "switch-active", live: R1 },
        history: [{ id: R1, deployed: true, redeployedAt: ASKED }],
      },
    };
    expect(
      settle(edited, UNCONFIRMED, decision, switched).decided.record?.unconfirmedRebuild,
    ).toBeUndefined();
    // A rebuild asked again: answered, it clears the record; its answer lost too, it replaces it.
    const again = resource({}, { [ANNOTATION_REBUILD_REQUESTED_AT]: "again" });
    const asked = decide(again, seen(again, DEPLOYED), UNCONFIRMED, NOW, SETTINGS);
    const rebuilt: Executed = {
      kind: "none",
      rebuilt: { outcome: { kind: "rebuilt", revision: REVISION_2 } },
    };
    expect(settle(again, UNCONFIRMED, asked, rebuilt).decided.record?.unconfirmedRebuild).toBeNull();
    expect(settle(again, UNCONFIRMED, asked, lost).decided.record?.unconfirmedRebuild).toEqual({
      ...SENT,
      requestedAt: "again",
    });
  });
});

describe("a rebuild on a service known to lack the route, in a reconcile that PATCHes", () => {
  const MIN_SCALE = { sourceConfig: { ...SPEC.sourceConfig, resourceSpec: { minScale: 3 } } };
  const spec = rebuilding(MIN_SCALE);
  const missing = seen(spec, DEPLOYED, {}, { rebuildMissing: NO_ROUTE });
  const R2 = "22222222-2222-4222-8222-222222222222";
  const sent = (latest: string | null): Executed => ({
    kind: "sent",
    sent: {
      deployment: { ...DEPLOYED, latest_revision_id: latest },
      revision: { kind: "patched" },
      history: undefined,
    },
  });

  it("waits for the PATCH's answer: its revision, if it names one, is the one asked for (handled, nothing refused)", () => {
    const decision = decide(spec, missing, OURS, NOW, SETTINGS);
    expect(decision).toMatchObject({
      outcome: { kind: "synced" },
      after: [],
      write: { kind: "send" },
      rebuild: { deploymentId: DEPLOYED.id, requestedAt: ASKED },
    });
    const written: Executed = { ...sent(R2), rebuilt: { outcome: { kind: "written", revisionId: R2 } } };
    const { decided, events } = settle(spec, OURS, decision, written);
    expect(decided.outcome).toEqual({ kind: "synced" });
    expect(decided.record).toMatchObject({ lastHandledRebuildAt: ASKED });
    expect(events.map((e) => e.reason)).not.toContain("RebuildRouteMissing");
  });

  it("a PATCH that made none: refused as before, said once", () => {
    const decision = decide(spec, missing, OURS, NOW, SETTINGS);
    const refused: Executed = {
      ...sent(DEPLOYED.latest_revision_id),
      rebuilt: { outcome: { kind: "missing", why: NO_ROUTE } },
    };
    const first = settle(spec, OURS, decision, refused);
    expect(first.decided.outcome).toMatchObject({
      kind: "failed",
      reason: "RebuildRouteMissing",
      stalled: true,
    });
    expect(first.decided.record?.lastHandledRebuildAt).toBeUndefined();
    expect(first.events.map((e) => `${e.type}/${e.reason}`)).toEqual([
      "Normal/Updated",
      "Warning/RebuildRouteMissing",
    ]);
    const outcome = first.decided.outcome as { reason: string; message: string };
    const said = withSynced(OURS, "False", outcome.reason, outcome.message);
    const again = settle(spec, said, decide(spec, missing, said, NOW, SETTINGS), refused);
    expect(again.events.map((e) => e.reason)).not.toContain("RebuildRouteMissing");
  });
});

describe("a rebuild held by the rollout windows beside an edit sent now", () => {
  const URL_2 = "https://agent-2.example";
  const spec = rebuilding({
    sourceConfig: { customUrl: URL_2 },
    driftPolicy: "Report",
    rolloutWindows: [ALWAYS_DENY],
  });
  const edited = { ...spec, metadata: { ...spec.metadata, generation: 2 } };
  const applied1 = { ...OURS, latestRevisionId: DEPLOYED.latest_revision_id ?? "", appliedGeneration: 1 };

  it("the spec is applied in full: a later change outside it is drift, reported under Report, not overwritten", () => {
    const first = decide(edited, seen(edited, DEPLOYED), applied1, NOW, SETTINGS);
    expect(first.write?.kind).toBe("send");
    expect(first.outcome.kind).toBe("held");
    expect(first.record.appliedGeneration).toBe(2);
    // The PATCH went out; then someone changes the URL on the service, the rebuild still held.
    const status = { ...applied1, ...first.record } as DeploymentResourceStatus;
    const drifted: Deployment = { ...DEPLOYED, source_config: { custom_url: "https://elsewhere.example" } };
    const next = decide(edited, seen(edited, drifted), status, NOW, SETTINGS);
    expect(next.write).toBeUndefined();
    expect(next.externalChanges).toEqual(["fields"]);
  });

  it("a drift reported while the rebuild is held: Synced names both, the drift counted once", () => {
    const first = decide(edited, seen(edited, DEPLOYED), applied1, NOW, SETTINGS);
    const waiting = (first.outcome as { message: string }).message;
    const applied2 = { ...applied1, ...first.record } as DeploymentResourceStatus;
    const status = withSynced(applied2, "False", "OutsideRolloutWindow", waiting);
    const drifted: Deployment = { ...DEPLOYED, source_config: { custom_url: "https://elsewhere.example" } };
    const next = decide(edited, seen(edited, drifted), status, NOW, SETTINGS);
    expect(next.outcome).toEqual({ kind: "held", message: expect.stringMatching(/^the change that makes/) });
    const { message } = next.outcome as { message: string };
    // Soft: the drift's report kept and its count once are checked apart.
    expect
      .soft(message)
      .toMatch(/^the change .*\. Also: spec\.driftPolicy is Report: .* sourceConfig\.customUrl /);
    expect(next.after).toEqual([]);
    expect(next.externalChanges).toEqual(["fields"]);
    // The same state again: said already, so neither counted nor said again.
    const said = withSynced(status, "False", "OutsideRolloutWindow", message);
    const again = decide(edited, seen(edited, drifted), said, NOW, SETTINGS);
    expect.soft(again.externalChanges).toBeUndefined();
    expect(again.outcome).toEqual(next.outcome);
    expect(again.after).toEqual([]);
  });
});
