/**
 * A create of the service's deployment, from its write to what it settles: its intent recorded
 * first, the POST, the display name a create does not take sent at once by a PATCH, the first
 * revision recorded in `status.revisionHistory` with the digests of its config and secrets
 * ({@link createdHistory}), and what the answered create makes of the decision
 * ({@link settleCreated}: its intent fulfilled in the same status write); before all that, what
 * the decision makes of a create planned ({@link decideCreate}: held while an earlier create may
 * not be listed yet, {@link pendingCreateSince}). Entered only when `decide` planned a create
 * (`decide`, `execute.ts` and `settle`, conclude.ts, hand it that case), and at a deletion that
 * finds no deployment: `cleanup.ts` asks {@link pendingCreateSince} whether a create of its own
 * may not be listed yet.
 */
import { formatTime } from "../crd/conventions.ts";
import type { DeploymentSpec } from "../crd/schema.ts";
import { pendingRebuild, rebuildRequestedAt } from "./inputs.ts";
import { createdNote } from "./notes.ts";
import { appliedAt, appliedVersions, type CreatePlan } from "./plan.ts";
import type { StoredResource } from "./ports.ts";
import type { StatusRecord } from "./reasons.ts";
import {
  configAfterPatch,
  type RevisionHistoryEntry,
  recordCreated,
  revisionConfigHash,
  vouchedSecretsHash,
} from "./revision-history.ts";
import type {
  Connected,
  Decided,
  DecidedEvent,
  DecideSpec,
  Decision,
  Executed,
  Observation,
  ReconcileDeps,
} from "./run.ts";
import type { Deployment } from "./service-types.ts";

/** The status as a reconcile reads it. */
type Status = NonNullable<StoredResource["status"]>;

/**
 * Since when a create of this resource may be missing from the service's listing: its intent
 * while one is recorded (the POST's answer may have been lost), else the time of the create whose
 * answer `status.deploymentId` records (`createdAt`: the intent, kept when the answer came and the
 * intent was cleared). Undefined: no create of its own is that recent to the status.
 */
export function pendingCreateSince(status: Status): string | undefined {
  return status.createRequestedAt ?? (status.deploymentId ? status.createdAt : undefined);
}

/**
 * What `decide` makes of `planned`, once the rollout windows were read (`said`: the events and
 * the record it decided before): nothing sent while a create of its own may still be missing from
 * the listing (within `createGraceMs` of {@link pendingCreateSince}), else the create, with the
 * secrets and the generation it applies recorded for when it succeeds.
 */
export function decideCreate(
  planned: CreatePlan,
  spec: DecideSpec,
  observation: Observation,
  status: Status,
  said: { events: DecidedEvent[]; record: StatusRecord; createGraceMs: number },
): Decision {
  const { events, record } = said;
  const requestedAt = pendingCreateSince(status);
  if (requestedAt && observation.at - Date.parse(requestedAt) < said.createGraceMs) {
    // A create was requested and the listing does not show it yet: it may lag behind.
    const waiting = { kind: "synced", message: "waiting for the created deployment to be listed" } as const;
    return {
      events,
      after: [],
      // The id the create answered with stays known while the listing catches up.
      outcome: waiting,
      observed: { kind: "createdUnlisted" },
      record,
      log: {
        fields: { requestedAt },
        message: "create requested earlier; waiting for the service to list it",
      },
    };
  }
  // The intent stays recorded until a lookup lists the deployment (decide.ts).
  const applied: StatusRecord = {
    ...record,
    appliedSecretsHash: planned.secretsHash ?? null,
    appliedSecretVersions: appliedVersions(planned.secretsHash, observation.versions),
    // The create builds the deployment's first revision: what a pending rebuild asks for.
    ...(pendingRebuild(spec, status) ? { lastHandledRebuildAt: rebuildRequestedAt(spec) } : {}),
    ...appliedAt(spec),
  };
  const write = { kind: "create", plan: planned } as const;
  return { events, after: [], outcome: { kind: "synced" }, record: applied, write };
}

/** What a create came to: what it wrote, or the failure that stopped it once its intent was written. */
type Created =
  | Extract<Executed, { kind: "created" }>
  | { kind: "failed"; error: unknown; written: StoredResource; history?: RevisionHistoryEntry[] };

/** Records the intent, then POSTs `plan` (and PATCHes the display name a create does not take). */
export async function create(
  deps: Pick<ReconcileDeps, "resources">,
  run: Connected,
  plan: CreatePlan,
  signal: AbortSignal,
): Promise<Created> {
  // Written under the resourceVersion this reconcile read: a reconcile acting on a stale copy
  // (one that does not show an earlier intent) gets a conflict here, never a second POST.
  const intent = { ...run.obj.status, createRequestedAt: formatTime(run.now) };
  const written = await run.session.pace.timed("intent", () =>
    deps.resources.patchStatus(run.obj, intent, signal),
  );
  let created: Deployment;
  try {
    created = await run.session.service.create(plan.body, signal);
  } catch (error) {
    return { kind: "failed", error, written };
  }
  // The first revision is the operator's: recorded with the digests of its config and secrets.
  const first = created.latest_revision_id;
  const history = first ? createdHistory(first, plan, run.obj.spec, created) : undefined;
  // A create does not take the display name: a PATCH sends it at once (its failure is
  // retried as a PATCH of the deployment the intent leads the next reconcile to).
  const displayName = plan.displayName;
  if (displayName !== undefined && created.display_name !== displayName) {
    try {
      created = await run.session.service.patch(created.id, { display_name: displayName }, signal);
    } catch (error) {
      return { kind: "failed", error, written, ...(history ? { history } : {}) };
    }
  }
  return { kind: "created", deployment: created, history, written };
}

/** `status.revisionHistory` after a create made `revisionId`, the deployment's first revision. */
export function createdHistory(
  revisionId: string,
  decision: CreatePlan,
  spec: Pick<DeploymentSpec, "secrets">,
  created: Deployment,
): RevisionHistoryEntry[] {
  const secretsHash = vouchedSecretsHash({
    managed: spec.secrets !== undefined,
    sentHash: decision.secretsHash,
    serviceSecretCount: created.secrets.length,
  });
  const config = configAfterPatch({}, decision.body.source_revision_config);
  const source = decision.body.source;
  return recordCreated(undefined, revisionId, secretsHash, revisionConfigHash(config, source));
}

/**
 * `decided` once the create answered with `executed`: its intent is fulfilled in this same write,
 * and its time kept as `createdAt`, which holds a second create back while the listing may lag
 * ({@link pendingCreateSince}); the `Created` event first, then the decision's `after`.
 */
export function settleCreated(
  decided: Decided,
  executed: Extract<Executed, { kind: "created" }>,
  after: readonly DecidedEvent[],
): { decided: Decided; events: DecidedEvent[] } {
  const created = { type: "Normal", reason: "Created", note: createdNote(executed.deployment) } as const;
  const history = executed.history ? { history: executed.history } : {};
  const intent = executed.written.status?.createRequestedAt;
  const record = { ...decided.record, createRequestedAt: null, ...(intent ? { createdAt: intent } : {}) };
  return {
    decided: { ...decided, record, observed: { kind: "found", deployment: executed.deployment }, ...history },
    events: [created, ...after],
  };
}
