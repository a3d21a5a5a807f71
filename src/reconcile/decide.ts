/**
 * What a reconcile does, decided without a call: `decide(spec, observation, status, now)` takes
 * the resource (its spec and annotations), what `observe` (observe.ts) saw of the service and of
 * the spec's inputs, the status as read and the time, and returns a `Decision` (run.ts): the plan
 * (`plan.ts`; a create planned is decided by `create.ts`), what the rollout gate lets go now (`rollout-gate.ts`), whether a redeploy is
 * pending (`revision-history.ts`) or undone (`revision-reuse.ts`), a rebuild asked for (`rebuild.ts`), the write
 * to make, the status it concludes and the events to record, all as data. `execute`
 * (execute.ts) performs the write and returns what it wrote; `settle` (conclude.ts, pure too) joins the
 * two into what the reconciler concludes. No port, no clock, no I/O here: the table of cases is
 * test/unit/decide.test.ts.
 */
import { formatTime } from "../crd/conventions.ts";
import { DEFAULT_DRIFT_POLICY } from "../crd/spec-policies.ts";
import { decideCreate } from "./create.ts";
import { externalRevisionOf } from "./external-revision.ts";
import { outcomeFromProblems } from "./failures.ts";
import { handledValue, pendingRebuild, rebuildRequestedAt, rolloutNow, rolloutNowAsked } from "./inputs.ts";
import {
  adoptedNote,
  bothSaid,
  createdNote,
  externalRevisionNote,
  observedDrift,
  reportDrift,
  reportedNoop,
  syncedSays,
} from "./notes.ts";
import { appliedAt, appliedVersions, lastAppliedFor, type PatchPlan, plan } from "./plan.ts";
import type { StoredResource } from "./ports.ts";
import { CONDITION, REASON, type StatusRecord } from "./reasons.ts";
import { decideRebuild } from "./rebuild.ts";
import { pendingRedeploy, splitForRedeploy } from "./revision-history.ts";
import { pendingSwitchBack, switchBackPlan, switchBackSuperseded } from "./revision-reuse.ts";
import type { Counter } from "./rollout/next-opening.ts";
import {
  type GatedPatch,
  gatePatch,
  REVISION_GROUPS,
  type WindowsInEffect,
  windowsInEffect,
} from "./rollout-gate.ts";
import type { Decided, DecidedEvent, DecideSpec, Decision, Observation, Observed, Write } from "./run.ts";
import { type SecretDigest, UNKEYED_SECRET_DIGEST } from "./secret-hash.ts";
import type { Deployment } from "./service-types.ts";
import { rebuildSeen, withRebuildSeen } from "./unconfirmed-rebuild.ts";

/**
 * Whether `obj`'s spec, at its generation, was already applied in full (`status.appliedGeneration`;
 * before that field, `Synced=True` for it): a difference the service shows now was made outside
 * this resource. An edit whose first attempt failed (a 429, a 5xx) was never applied, although the
 * failure's status write already carried the generation in `observedGeneration`.
 */
export function generationApplied(obj: Pick<StoredResource, "metadata" | "status">): boolean {
  const generation = obj.metadata.generation;
  const applied = obj.status?.appliedGeneration;
  if (applied !== undefined) return applied === generation;
  const synced = obj.status?.conditions?.find((c) => c.type === CONDITION.Synced);
  return synced?.status === "True" && synced.observedGeneration === generation;
}

/** `deployment` as an {@link Observed}: `null` is none, `undefined` not looked at. */
export function observedAs(deployment: Deployment | null | undefined): Observed | undefined {
  if (deployment === undefined) return undefined;
  return deployment === null ? { kind: "none" } : { kind: "found", deployment };
}

/** What decide needs besides its four inputs: the operator's settings. */
export interface DecideSettings {
  /** How long a create's intent waits for the listing to show the deployment. */
  createGraceMs: number;
  /** The counter the rollout windows' search is timed on (the thread's CPU time unless given). */
  counter?: Counter;
  /** How secrets' digests are made and compared (keyed with the install key); default unkeyed. */
  secretDigest?: SecretDigest;
}

/**
 * Decides what the apply arm does for `spec` (see the module comment). `now`: the reconcile's
 * clock reading (ms since the epoch). Rollout windows in effect that cannot be read are
 * `failed` (an `InvalidSpecError`). A rebuild whose answer was lost is settled first by the
 * deployment's new revision, if it shows one (`rebuildSeen`, unconfirmed-rebuild.ts): a revision of it that
 * undid the spec (Git moved on since it was sent) makes the spec one to apply again, not a drift.
 */
export function decide(
  spec: DecideSpec,
  observation: Observation,
  status: NonNullable<StoredResource["status"]>,
  now: number,
  settings: DecideSettings,
): Decision {
  // A revision made since a switch back replaced what it made live: no longer taken to be live.
  const moved =
    pendingRedeploy(status.revisionHistory) && switchBackSuperseded(status, observation.found.deployment);
  const base = moved ?? status;
  const seen = base.unconfirmedRebuild ? rebuildSeen(base, observation) : undefined;
  const decided = seen
    ? withRebuildSeen(decideApply(spec, observation, seen.status, now, settings, seen.reapply), seen)
    : decideApply(spec, observation, base, now, settings);
  return moved && !decided.history ? { ...decided, history: moved.revisionHistory ?? [] } : decided;
}

/** {@link decide}, the rebuild whose answer was lost aside (`reapply`: its revision undid the spec). */
function decideApply(...[spec, observation, status, now, settings, reapply]: ApplyArgs): Decision {
  const { found, desired, versions } = observation;
  // A recorded create intent holds until a lookup shows the deployment: the listing may lag.
  const fulfilled = found.listed && Boolean(status.createRequestedAt);
  const lastApplied = lastAppliedFor(
    spec.spec,
    desired,
    status.appliedSecretsHash,
    settings.secretDigest ?? UNKEYED_SECRET_DIGEST,
  );
  const planned = plan(desired, found.deployment ?? undefined, lastApplied);
  // That create found by name (its answer lost) built the first revision a pending rebuild asks for.
  const ownCreate = found.adopted && planned.action !== "blocked" && Boolean(status.createRequestedAt);
  const built = ownCreate && pendingRebuild(spec, status);
  const record: StatusRecord = {
    ...observation.record,
    ...(fulfilled ? { createRequestedAt: null } : {}),
    ...(built ? { lastHandledRebuildAt: rebuildRequestedAt(spec) } : {}),
  };
  const none = { events: [], after: [], record };
  const policy = spec.spec.driftPolicy ?? DEFAULT_DRIFT_POLICY;
  const specApplied = !reapply && generationApplied({ metadata: spec.metadata, status });
  // Drift: a PATCH of a spec already applied, which no rotated Secret asks for (that is the
  // team's change, as an edit is): someone changed the service since.
  const rotated =
    planned.action === "patch" &&
    planned.body.secrets !== undefined &&
    planned.secretsHash !== status.appliedSecretsHash;
  const drift = planned.action === "patch" && specApplied && !found.adopted && !rotated ? planned : undefined;
  const observeOnly = spec.spec.managementPolicy === "ObserveOnly";
  const external = seenExternal(observation, status, now, {
    follows: observeOnly
      ? "ObserveOnly: recorded in status.externalRevision, nothing is written"
      : policy === "Report"
        ? "spec.driftPolicy is Report: recorded in status.externalRevision, nothing is written for it"
        : planned.action === "patch" && planned.newRevision
          ? "spec.driftPolicy is Correct: the spec's revision is put back (by a redeploy of this operator's revision when spec.revisionReuse allows)"
          : "its revision-defining fields are the spec's: nothing to put back",
  });

  if (observeOnly) {
    const drifted = observedDrift(desired.name, found.deployment, planned);
    const observed = observedAs(found.deployment);
    return { ...none, ...external, outcome: { kind: "observed", drift: drifted }, observed };
  }
  if (planned.action === "blocked") {
    // A deployment found by name that cannot become the spec's (another source) is someone
    // else's: recording its id would make it ours, and deletionPolicy Delete would delete it.
    const owned = found.adopted ? undefined : found.deployment;
    const blocked = outcomeFromProblems(planned.problems) ?? { kind: "synced" as const };
    return { ...none, outcome: blocked, observed: observedAs(owned) };
  }
  const events: DecidedEvent[] = [...(external.events ?? [])];
  if (found.adopted && found.deployment) {
    // Found by name while a create of ours was pending: it is that create (a restart or a lost
    // answer hid it), not someone else's deployment.
    const created = Boolean(status.createRequestedAt);
    const note = created ? createdNote(found.deployment) : adoptedNote(found.deployment);
    events.push({ type: "Normal", reason: created ? "Created" : "Adopted", note });
  }
  // Read before any write: windows that cannot be read stall the resource (InvalidSpec), once
  // the events above are recorded. A resource no window rules (none of its own, none of its
  // connection's) has none to read, and nothing a gate would hold: the gate is not asked.
  const windowless = !spec.spec.rolloutWindows?.length && !observation.inheritedWindows?.windows.length;
  let windows: WindowsInEffect;
  try {
    windows = windowless
      ? NO_WINDOWS
      : windowsInEffect(spec.spec.rolloutWindows, observation.inheritedWindows, now);
  } catch (error) {
    return { ...none, ...external, events, outcome: { kind: "synced" }, failed: { error } };
  }
  if (planned.action === "create") {
    const said = { events, record, createGraceMs: settings.createGraceMs };
    return decideCreate(planned, spec, observation, status, said);
  }

  const deployment = found.deployment;
  if (planned.action === "patch" && !deployment)
    throw new Error("a patch was planned without a deployment to patch");
  // A revision part that a switch of the active revision already made live (the service's
  // config still names its newest revision) is nothing to roll out, nor a drift: no window holds
  // it, and applyPatch sends only the rest, if any. Not while a rebuild is asked: the rebuild route
  // builds the service's config (its newest revision's), so the spec's is built by the PATCH.
  // The failures' table (failures.ts) is entered only for a problem.
  const problems = planned.problems.length > 0 ? outcomeFromProblems(planned.problems) : undefined;
  const rebuildAsked = !problems && !built && pendingRebuild(spec, status);
  const switched = pendingRedeploy(status.revisionHistory);
  const switchedBack =
    switched && planned.action === "patch" && deployment && !rebuildAsked
      ? pendingSwitchBack({ deployment, decision: planned, spec: spec.spec, status })
      : undefined;
  // spec.driftPolicy Report: the drift is said (Synced=False, Drifted), nothing is written for it.
  const reported = drift && policy === "Report" ? reportDrift(drift, status, !!switchedBack) : undefined;
  const sendable: typeof planned = reported && drift ? reportedNoop(drift) : planned;
  // A revision redeployed earlier (by a switch of the active revision) is live where the spec
  // now asks for the service's latest one again: it is brought back, with what else is sent.
  const back =
    switched && (sendable.action === "noop" || !sendable.newRevision) && deployment && !reported
      ? switchBackPlan(switched, deployment, sendable.action === "patch" ? sendable : undefined)
      : undefined;
  const gating = back ?? sendable;
  // A PATCH whose revision part waits for a rollout window sends the rest now, and holds the
  // revision part: `Synced=False` (OutsideRolloutWindow), Reconciling, and a look again when
  // the window opens, where the held part goes out in one PATCH.
  const gated =
    gating.action !== "patch"
      ? {}
      : switchedBack
        ? splitForRedeploy(gating.body)?.rest
          ? { send: gating }
          : {}
        : windowless
          ? ungated(gating, rolloutNowAsked(spec, status))
          : gatePatch(gating, {
              windows,
              now,
              rolloutNow: rolloutNow(spec),
              handledRolloutNow: handledValue(status.lastHandledRolloutNow),
              ...(settings.counter ? { counter: settings.counter } : {}),
            });
  // The secrets held are not applied yet: their hash stays the last applied one, and the
  // Secrets are read again when the window opens.
  const secretsHeld =
    gated.held !== undefined && sendable.action === "patch" && sendable.body.secrets !== undefined;
  const applied: StatusRecord = {
    ...record,
    appliedSecretsHash: (secretsHeld ? undefined : sendable.secretsHash) ?? status.appliedSecretsHash ?? null,
    ...(observation.secretsUnread
      ? {}
      : { appliedSecretVersions: secretsHeld ? null : appliedVersions(sendable.secretsHash, versions) }),
  };
  const sending = gated.send;
  // A PATCH goes out besides the switch back, if any (which sends the service's own config).
  const patching = sending !== undefined && (back === undefined || sendable.action === "patch");
  // A rebuild asked for goes after the write, unless something holds it or the write makes a
  // revision itself (see decideRebuild): then that revision is built, never an earlier one reused.
  const rebuild =
    deployment && rebuildAsked && !gated.held
      ? decideRebuild(spec, status, observation, {
          deploymentId: deployment.id,
          windows,
          now,
          // A switch back sends the service's own config again, which makes no revision: the
          // rebuild goes out after it (a build of that config, now what the spec asks).
          newRevision: sending?.newRevision === true && back === undefined,
          patching,
          counter: settings.counter,
          reported: reported?.outcome,
        })
      : undefined;
  const write: Write | undefined =
    sending && deployment
      ? {
          kind: "send",
          plan: sending,
          deployment,
          back: back !== undefined && !patching,
          adopted: found.adopted,
          redeployMessage: !gated.held && !problems,
          ...(rebuild?.handled !== undefined ? { build: true } : {}),
        }
      : undefined;
  const viaRolloutNow = gated.viaRolloutNow || rebuild?.viaRolloutNow;
  const log = viaRolloutNow
    ? { log: { message: "rolling out outside the rollout windows: dms.dev/rollout-now" } }
    : {};
  const held = gated.held ?? rebuild?.held;
  const handled = rebuild?.handled ? { lastHandledRebuildAt: rebuild.handled } : {};
  const kinds = [...(external.externalChanges ?? []), ...(reported?.counted ? (["fields"] as const) : [])];
  const decided = {
    events,
    // Applied in full unless a rollout window holds part of it (a rebuild held is no part of it).
    record: { ...applied, ...handled, ...(gated.held ? {} : appliedAt(spec)) },
    observed: observedAs(deployment),
    ...log,
    ...(write ? { write } : {}),
    ...(rebuild?.send ? { rebuild: rebuild.send } : {}),
    ...(external.externalRevision ? { externalRevision: external.externalRevision } : {}),
    ...(kinds.length > 0 ? { externalChanges: kinds } : {}),
  };
  if (!held) {
    const refused = rebuild?.refused;
    const outcome = problems ?? reported?.outcome ?? { kind: "synced" as const };
    if (!refused) return { ...decided, after: [], outcome };
    return { ...decided, after: refused.events, outcome: refused.outcome };
  }
  const { wakeAt } = held;
  const after: DecidedEvent[] = syncedSays(status, REASON.OutsideRolloutWindow, held.message)
    ? []
    : [{ type: "Normal", reason: REASON.OutsideRolloutWindow, note: held.message }];
  // A drift reported beside the rebuild held is named after it, the hold's reason kept: as
  // beside a rebuild refused (rebuild.ts), it is said, and counted, once.
  const message = reported ? bothSaid(held.message, reported.outcome.message) : held.message;
  return { ...decided, after, outcome: problems ?? { kind: "held", message }, wakeAt };
}

/** {@link decide}'s arguments, and whether a lost rebuild's revision undid the spec (`RebuildSeen.reapply`). */
type ApplyArgs = [...Parameters<typeof decide>, reapply?: boolean];

/** The windows of a resource no window rules: what `windowsInEffect` gives it. */
const NO_WINDOWS: WindowsInEffect = { windows: [], source: "spec.rolloutWindows" };

/** `gatePatch`'s answer when no window rules the resource: all now, by rollout-now if `asked`. */
function ungated(plan: PatchPlan, asked: boolean): GatedPatch {
  const makesRevision = plan.changes.some((c) => REVISION_GROUPS.includes(c.group));
  return makesRevision && asked ? { send: plan, viaRolloutNow: true } : { send: plan };
}

/**
 * A revision of the deployment `observation` found that this operator did not create, seen now
 * for the first time (`externalRevisionOf`): its status record, the `ExternalRevision` event
 * (`follows`: what the operator does about it), and its count. Nothing otherwise.
 */
function seenExternal(
  observation: Observation,
  status: NonNullable<StoredResource["status"]>,
  now: number,
  say: { follows: string },
): Pick<Decided, "externalRevision" | "externalChanges"> & { events?: DecidedEvent[] } {
  const deployment = observation.found.deployment;
  // Only a latest revision other than the one the status recorded may be another's.
  const recorded = status.latestRevisionId;
  if (!deployment || recorded === undefined || recorded === deployment.latest_revision_id) return {};
  const { desired } = observation;
  const external = externalRevisionOf(deployment, {
    status,
    buildOnPush: desired.source_config?.build_on_push === true,
    repoRef: desired.source_revision_config?.repo_ref ?? undefined,
    adopted: observation.found.adopted,
    now: formatTime(new Date(now)),
    ownLatest: observation.ownLatest,
  });
  if (!external) return {};
  const note = externalRevisionNote(deployment.id, external, say.follows);
  return {
    externalRevision: external,
    externalChanges: ["revision"],
    events: [{ type: "Warning", reason: REASON.ExternalRevision, note }],
  };
}

/**
 * The finalizer rule: whether deleting `obj` must delete its service deployment, and so it
 * carries the finalizer (the reconciler keeps it exactly while this holds).
 */
export function cleansUpOnDelete(obj: DecideSpec): boolean {
  return obj.spec.deletionPolicy === "Delete" && obj.spec.managementPolicy !== "ObserveOnly";
}
