/**
 * A create of the service's deployment, from its write to what it settles: its intent recorded
 * first, the POST, the display name a create does not take sent at once by a PATCH, the first
 * revision recorded in `status.revisionHistory` with the digests of its config and secrets
 * ({@link createdHistory}), and what the answered create makes of the decision
 * ({@link settleCreated}: its intent fulfilled in the same status write). Entered only when
 * `decide` planned a create; `execute.ts` and `settle` (conclude.ts) hand it that case.
 */
import { formatTime } from "../crd/conventions.ts";
import type { DeploymentSpec } from "../crd/schema.ts";
import { createdNote } from "./notes.ts";
import type { CreatePlan } from "./plan.ts";
import type { StoredResource } from "./ports.ts";
import {
  configAfterPatch,
  type RevisionHistoryEntry,
  recordCreated,
  revisionConfigHash,
  vouchedSecretsHash,
} from "./revision-history.ts";
import type { Connected, Decided, DecidedEvent, Executed, ReconcileDeps } from "./run.ts";
import type { Deployment } from "./service-types.ts";

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
 * (`pendingCreateSince`, decide.ts); the `Created` event first, then the decision's `after`.
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
