/**
 * The reconcile of one Deployment resource: observe the service, plan, act, write status.
 *
 * A linear sequence of guard clauses; every exit writes the status it concluded (only when it
 * changed) and returns what the controller should do next. Decisions are the pure planner's
 * (`plan.ts`, `status.ts`); this file only sequences I/O through the ports.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { LogType } from "../api/revision-logs.ts";
import { formatTime } from "../conditions/kstatus.ts";
import { type DesiredDeployment, desiredFromSpec, withSecrets } from "../crd/mapping.ts";
import {
  DEFAULT_ROLLOUT_TIMEOUT,
  type DeploymentResourceStatus,
  type DeploymentSpec,
  FINALIZER,
} from "../crd/schema.ts";
import { flagDuration } from "../duration.ts";
import { connectionLabel, connectionOf, describeConnection } from "../identity/connection.ts";
import type { Clock } from "../runtime/clock.ts";
import { Action, type ReconcileResult, ReconcileTimeoutError } from "../runtime/controller.ts";
import { objectKey, parseObjectKey } from "../runtime/keys.ts";
import { isPaused, reconcileInterval, reconcileRequestedAt, rolloutNow } from "./annotations.ts";
import { claimedName, claimOf, olderClaimant } from "./claims.ts";
import {
  evidenceDue,
  excerptOf,
  fitNote,
  formatTail,
  LOG_RETRY_MS,
  logTypeFor,
  readAgainPending,
  rolloutStart,
  rolloutTimedOut,
  rolloutTimeoutMs,
  TAIL_REDACTION_MS,
} from "./failure-evidence.ts";
import { failureOf } from "./failures.ts";
import { lookupTarget } from "./freshness.ts";
import { inlineSecrets, type ReadSecrets, readSecrets, secretVersions } from "./inputs.ts";
import { lastAppliedFor } from "./last-applied.ts";
import {
  adoptedNote,
  createdNote,
  nameConflictMessage,
  observedDrift,
  updateNote,
  updateReason,
} from "./notes.ts";
import { type LookupTarget, observe } from "./observe.ts";
import { type CreatePlan, type PatchPlan, plan } from "./plan.ts";
import type { EventNote, EventsPort, ResourcePort, SecretsPort, StoredResource } from "./ports.ts";
import type { ListingFailure } from "./remote.ts";
import {
  gateRollout,
  type InheritedWindows,
  type RolloutGate,
  splitPatch,
  type WindowsInEffect,
  windowsInEffect,
} from "./rollout-gate.ts";
import { DEFAULT_MAX_SECRET_BYTES } from "./secret-budget.ts";
import { type Deployment, isUuid } from "./service-types.ts";
import type { ServiceSession, Sessions } from "./session.ts";
import {
  CONDITION,
  isBeingDeleted,
  isFailedRevision,
  outcomeFromProblems,
  REASON,
  type RevisionObservation,
  type RolloutEvidence,
  type StatusRecord,
  type SyncOutcome,
  statusEqual,
  statusFrom,
} from "./status.ts";

/** Options of {@link DeploymentReconciler}. */
export interface ReconcilerOptions {
  resources: ResourcePort;
  /** The connections to the service: each resource reaches it through its own. */
  sessions: Sessions;
  secrets: SecretsPort;
  events: EventsPort;
  clock: Clock;
  logger: Logger;
  /** While rolling out, creating or deleting, look again after this long. Default 5 s. */
  pollMs?: number;
  /**
   * After a create was requested, how long a listing that does not show the deployment is blamed
   * on the listing lagging behind (no second create). Default 60 s.
   */
  createGraceMs?: number;
  /**
   * The most bytes of secret values one resource may send (`--max-secret-bytes`), counted as its
   * Secrets are read. Default 1 MiB.
   */
  maxSecretBytes?: number;
}

/**
 * What a reconcile saw of the service's deployment: found, known not to exist, or created by
 * this operator and not listed yet (the status keeps the id the create answered with).
 */
type Observed = { kind: "found"; deployment: Deployment } | { kind: "none" } | { kind: "createdUnlisted" };

/** What a reconcile decided: the status write and the requeue follow from it alone. */
interface Decided {
  outcome: SyncOutcome;
  /** What the service showed; absent when it was not looked at. */
  observed?: Observed | undefined;
  /** Controller bookkeeping to write alongside. */
  record?: StatusRecord;
  /** Look again no later than this instant (ms since the epoch): a held change's window opens. */
  wakeAt?: number;
  /**
   * The resource as the decision wrote it (a create's intent), when it did: the status is
   * written on that version.
   */
  written?: StoredResource;
}

/** What the service said of the observed deployment's latest revision and its rollout. */
interface Evidence {
  revision?: RevisionObservation | undefined;
  rollout?: RolloutEvidence | undefined;
  /** The revision's one event (with its log tail when one was read). */
  event?: EventNote | undefined;
}

/** `deployment` as an {@link Observed}: `null` is none, `undefined` not looked at. */
function observedAs(deployment: Deployment | null | undefined): Observed | undefined {
  if (deployment === undefined) return undefined;
  return deployment === null ? { kind: "none" } : { kind: "found", deployment };
}

/**
 * How often a rollout past its `spec.rolloutTimeout` is looked at again (at least the poll
 * interval): it is Stalled, so not polled, but it ends when the revision goes live or fails.
 */
const TIMED_OUT_LOOK_MS = 60_000;

/**
 * Longest requeue a held change asks for: a timer of 2^31 ms or more fires at once, and the
 * periodic pass brings the resource back meanwhile anyway.
 */
const MAX_WAKE_MS = 24 * 3_600_000;

/** How long the status write reporting a timed-out reconcile may take. */
const STATUS_AFTER_TIMEOUT_MS = 5_000;

/**
 * One reconcile's context: the object (as read, or as this reconcile last wrote it: a write
 * gives a new `Run`), its logger, the clock reading, what was seen of the Secrets, and the
 * connection's session once the connection was found usable.
 */
interface Run {
  readonly obj: StoredResource;
  readonly log: Logger;
  readonly now: Date;
  /** Shared by every `Run` of one reconcile: a failure's report is scrubbed of what was read. */
  readonly seen: SecretsSeen;
  readonly session?: ServiceSession;
  /** The connection's rollout windows, the default of a resource that sets none. */
  readonly inheritedWindows?: InheritedWindows | undefined;
}

/**
 * What one reconcile has of the referenced Secrets: the values read (or the spec's inline ones),
 * or `unread`: their values are known to be those last applied and were not read, so a report or
 * a log shown reads them first. The one state the steps of a reconcile share, for a failure may
 * come at any step and its report must not show a value.
 */
interface SecretsSeen {
  secrets: ReadSecrets;
  unread: boolean;
}

/** The Secrets before any was read: nothing to scrub. */
const NONE_READ: ReadSecrets = { data: {}, values: [] };

/**
 * A failure after this reconcile wrote its resource (the finalizer, a create's intent): reported
 * on `obj`, the version the write answered with, for a status written on the version read would
 * only conflict.
 */
class FailedAfterWrite extends Error {
  readonly obj: StoredResource;
  override readonly cause: unknown;

  constructor(obj: StoredResource, cause: unknown) {
    super("the reconcile failed after writing its resource", { cause });
    this.obj = obj;
    this.cause = cause;
  }
}

/** `error` as a failure reported on `obj`, unless it already names a later version. */
function failedOn(obj: StoredResource, error: unknown): FailedAfterWrite {
  return error instanceof FailedAfterWrite ? error : new FailedAfterWrite(obj, error);
}

/** A PATCH whose revision part waits for a rollout window (see `rollout-gate.ts`). */
interface HeldPatch {
  decision: PatchPlan;
  /** What goes now (no revision); undefined when all of it is held. */
  now: PatchPlan | undefined;
  held: PatchPlan;
  gate: RolloutGate & { kind: "held" };
}

/** Why a revision's log tail is not shown (`note`), and whether a later read may show it. */
interface LogGap {
  note: string;
  passing: boolean;
}

/** A run whose connection is usable. */
type Connected = Run & { readonly session: ServiceSession };

/** Whether `run`'s connection is usable. */
function isConnected(run: Run): run is Connected {
  return run.session !== undefined;
}

/** Reconciles Deployment resources against the service. */
export class DeploymentReconciler {
  readonly #o: Required<ReconcilerOptions>;
  /**
   * The recorded deployment id each resource was last warned about as not its own (by resource
   * key): the warning is given once, not at every reconcile while the status still shows the id.
   */
  readonly #disownedWarned = new Map<string, string>();

  constructor(options: ReconcilerOptions) {
    const maxSecretBytes = options.maxSecretBytes ?? DEFAULT_MAX_SECRET_BYTES;
    this.#o = { pollMs: 5_000, createGraceMs: 60_000, ...options, maxSecretBytes };
  }

  /**
   * The controller's entry point: `key` is `namespace/name`; the object is read from the watch
   * cache each time (writes carry its resourceVersion, so a stale read never acts twice).
   */
  readonly reconcile = async (key: string, signal: AbortSignal): Promise<ReconcileResult> => {
    const { namespace, name } = parseObjectKey(key);
    const obj = this.#o.resources.get({ namespace, name });
    if (!obj) {
      this.#disownedWarned.delete(key);
      return Action.gone();
    }
    const run: Run = {
      obj,
      now: new Date(this.#o.clock.now()),
      seen: { secrets: NONE_READ, unread: false },
      log: this.#o.logger.child({
        namespace,
        name,
        generation: obj.metadata.generation,
        reconcileId: randomUUID(),
      }),
    };
    try {
      return await this.#reconcile(run, signal);
    } catch (error) {
      return this.#fail(run, error, signal);
    }
  };

  async #reconcile(read: Run, signal: AbortSignal): Promise<ReconcileResult> {
    const connection = this.#o.sessions.lookup(read.obj);
    // Refused before anything else, paused or not: the trust boundary is reported as such.
    if (connection.kind === "refused") return this.#refused(read, connection.message, signal);
    // A paused resource needs no connection (it makes no call), unless it is being deleted.
    if (connection.kind !== "ready" && (!isPaused(read.obj) || read.obj.metadata.deletionTimestamp))
      // Pending: not checked since the start yet; its check enqueues this resource again.
      return connection.kind === "pending"
        ? Action.done()
        : this.#unavailable(read, connection.message, signal);
    const run: Run =
      connection.kind === "ready"
        ? { ...read, session: connection.session, inheritedWindows: connection.rolloutWindows }
        : read;
    if (run.obj.metadata.deletionTimestamp) return this.#finalize(run, signal);
    const holder = this.#holder(run.obj);
    // The loser of a name conflict owns nothing on the service: no finalizer, so that deleting it
    // can never delete the holder's deployment.
    const obj = holder ? run.obj : await this.#syncFinalizer(run.obj, signal);
    const current: Run = obj === run.obj ? run : { ...run, obj };
    try {
      if (isPaused(obj)) return await this.#conclude(current, { outcome: { kind: "paused" } }, signal);
      if (holder) {
        const message = nameConflictMessage(obj, holder);
        this.#event(current, "Warning", REASON.NameConflict, message);
        const conflict = { kind: "failed", reason: REASON.NameConflict, message, stalled: true } as const;
        return await this.#conclude(current, { outcome: conflict }, signal);
      }
      if (!isConnected(current))
        throw new Error("a reconcile went past the pause check without a connection");
      const decided = await this.#sync(current, signal);
      if (!decided.written) return await this.#conclude(current, decided, signal);
      // A create wrote its intent: the status goes on that version, and so does a failure's.
      const intended = { ...current, obj: decided.written };
      return await this.#conclude(intended, decided, signal).catch((error: unknown) => {
        throw failedOn(intended.obj, error);
      });
    } catch (error) {
      // Once the finalizer was written, a failure is reported on the version it answered with.
      throw obj === read.obj ? error : failedOn(obj, error);
    }
  }

  /** Keeps the service's deployment in line with the spec, through the resource's connection. */
  async #sync(run: Connected, signal: AbortSignal): Promise<Decided> {
    // A connection whose listing hung or failed would hold this worker as long with a lookup of
    // its own: report it, with no call, until the connection's next listing ends in time.
    // A listing that failed with an answer (a 401, a 503) is reported as a lookup's failure would
    // be, with its reason, retried with backoff, and no call either: the connection's own pass
    // lists it again soon, and its keys are enqueued once a listing is in.
    const missed = run.session.listingFailure();
    if (missed?.kind === "failed") {
      // The service's answer is reported: scrubbed of this resource's values, read for that.
      run.seen.unread = true;
      throw missed.error;
    }
    if (missed) return { outcome: listingMissed(run.obj, missed) };
    const status = run.obj.status ?? {};
    const versions = secretVersions(run.obj.spec, run.obj.metadata.namespace ?? "", this.#o.secrets);
    // The referenced Secrets are read only when their values may differ from those last applied:
    // a Secret changed (its resourceVersion), the spec changed, or the service's secret names
    // differ from the spec's (checked once the deployment is found). A steady resource costs no
    // Kubernetes request.
    const unread =
      versions !== undefined &&
      versions === status.appliedSecretVersions &&
      status.appliedSecretsHash !== undefined &&
      status.observedGeneration === run.obj.metadata.generation &&
      run.obj.spec.managementPolicy !== "ObserveOnly";
    run.seen.unread = unread;
    if (unread) run.seen.secrets = inlineSecrets(run.obj.spec);
    // Read before the mapping, which may fail: the values read are scrubbed from any report.
    const secrets = unread ? "unread" : await this.#readSecrets(run, signal);
    const mapped = await this.#desired(run, secrets, signal);
    const { service, snapshot } = run.session;
    const found = await observe(service, snapshot, this.#lookup(run, mapped.desired, mapped.record), signal);
    this.#warnDisowned(run, found.disowned);
    // Values left unread are needed after all when the service's secret names differ from the
    // spec's: then they are read, and the spec's secrets join what was mapped.
    const late =
      unread && !sameSecretNames(run.obj.spec, found.deployment)
        ? await this.#readSecrets(run, signal)
        : undefined;
    const desired = late
      ? withSecrets(mapped.desired, run.obj.spec, { secretData: late.data })
      : mapped.desired;
    // A recorded create intent holds until a lookup shows the deployment: the listing may lag.
    const fulfilled = found.listed && Boolean(status.createRequestedAt);
    const record: StatusRecord = fulfilled ? { ...mapped.record, createRequestedAt: null } : mapped.record;
    const observeOnly = run.obj.spec.managementPolicy === "ObserveOnly";
    const lastApplied = lastAppliedFor(run.obj.spec, desired, status.appliedSecretsHash);
    const decision = plan(desired, found.deployment ?? undefined, lastApplied);

    if (observeOnly) {
      const drift = observedDrift(desired.name, found.deployment, decision);
      return { outcome: { kind: "observed", drift }, observed: observedAs(found.deployment), record };
    }
    if (decision.action === "blocked") {
      // A deployment found by name that cannot become the spec's (another source) is someone
      // else's: recording its id would make it ours, and deletionPolicy Delete would delete it.
      const owned = found.adopted ? undefined : found.deployment;
      const blocked = outcomeFromProblems(decision.problems) ?? { kind: "synced" as const };
      return { outcome: blocked, observed: observedAs(owned), record };
    }
    if (found.adopted && found.deployment) {
      // Found by name while a create of ours was pending: it is that create (a restart or a lost
      // answer hid it), not someone else's deployment.
      if (status.createRequestedAt) this.#event(run, "Normal", "Created", createdNote(found.deployment));
      else this.#event(run, "Normal", "Adopted", adoptedNote(found.deployment));
    }
    // Read before any write: windows that cannot be read stall the resource (InvalidSpec).
    const windows = windowsInEffect(run.obj.spec.rolloutWindows, run.inheritedWindows, run.now.getTime());
    if (decision.action === "create") return this.#create(run, decision, record, versions, signal);
    const held = decision.action === "patch" ? this.#outsideWindows(run, decision, windows) : undefined;
    if (held) return this.#patchOutsideWindows(run, found, held, record, versions, signal);
    const outcome = outcomeFromProblems(decision.problems) ?? { kind: "synced" as const };
    const applied: StatusRecord = {
      ...record,
      appliedSecretsHash: decision.secretsHash ?? status.appliedSecretsHash ?? null,
      ...(run.seen.unread ? {} : { appliedSecretVersions: appliedVersions(decision.secretsHash, versions) }),
    };
    if (decision.action === "noop")
      return { outcome, observed: observedAs(found.deployment), record: applied };
    if (!found.deployment) throw new Error("a patch was planned without a deployment to patch");

    const updated = await service.patch(found.deployment.id, decision.body, signal);
    this.#event(run, "Normal", updateReason(run.obj, decision, found.adopted), updateNote(decision));
    return { outcome, observed: { kind: "found", deployment: updated }, record: applied };
  }

  /** What the lookup may take from the snapshot: freshness.ts's {@link lookupTarget} decides. */
  #lookup(run: Connected, desired: DesiredDeployment, record: StatusRecord): LookupTarget {
    const status = run.obj.status ?? {};
    const rule = lookupTarget({
      status,
      generation: run.obj.metadata.generation,
      requestedAt: record.lastHandledReconcileAt,
      intervalMs: reconcileInterval(run.obj),
      pollMs: this.#o.pollMs,
    });
    return { deploymentId: status.deploymentId, name: desired.name, ...rule };
  }

  /** The older resource holding `obj`'s service name, if any (read from the claim index). */
  #holder(obj: StoredResource): StoredResource | undefined {
    return olderClaimant(obj, this.#o.resources.claimants(claimOf(obj)));
  }

  /**
   * The resource's connection cannot be used (missing, not Ready, another namespace's): reported,
   * with no service call. The connection's own check enqueues this resource when that changes.
   * A resource being deleted keeps its finalizer meanwhile: its cleanup needs the connection.
   */
  #unavailable(run: Run, message: string, signal: AbortSignal): Promise<ReconcileResult> {
    const deleting = run.obj.metadata.deletionTimestamp !== undefined;
    // Nothing to clean up on the service: the deletion needs no connection.
    if (deleting && !cleansUpOnDelete(run.obj)) return this.#finalize(run, signal);
    const note = deleting
      ? `${message}; the service's deployment is deleted once the connection is usable (or remove the finalizer ${FINALIZER} to leave it)`
      : message;
    const outcome = {
      kind: "failed",
      reason: REASON.ConnectionNotReady,
      message: note,
      stalled: true,
    } as const;
    return this.#conclude(run, { outcome }, signal);
  }

  /**
   * The resource's namespace may not use its connection (a namespace selector refuses it):
   * reported, with no service call; the namespace's labels or the selector changing enqueue it
   * again. Being deleted, it lets its finalizer go without a call either: through a connection it
   * may not use it owns nothing, and deleting through it is exactly what the selector forbids.
   */
  async #refused(run: Run, message: string, signal: AbortSignal): Promise<ReconcileResult> {
    if (run.obj.metadata.deletionTimestamp) {
      if (!(run.obj.metadata.finalizers ?? []).includes(FINALIZER)) return Action.gone();
      const id = run.obj.status?.deploymentId;
      this.#event(
        run,
        "Warning",
        REASON.ConnectionNotAllowed,
        `${message}. Deleted without a call to the service: a resource refused its connection owns nothing there${id ? `, so the service's deployment ${id} is left in place` : ""}`,
      );
      await this.#o.resources.removeFinalizer(run.obj, FINALIZER, signal);
      return Action.gone();
    }
    // Logged when it starts, not on every resync that finds it still refused.
    const synced = run.obj.status?.conditions?.find((c) => c.type === CONDITION.Synced);
    if (synced?.reason !== REASON.ConnectionNotAllowed)
      run.log.warn({ reason: REASON.ConnectionNotAllowed }, message);
    const outcome = { kind: "failed", reason: REASON.ConnectionNotAllowed, message, stalled: true } as const;
    return this.#conclude(run, { outcome }, signal);
  }

  /**
   * Reads the values of the Secrets the spec references, within the secret budget, into what
   * `run` has seen (for every report to be scrubbed of them) and returns them. Once per
   * reconcile: a read that failed (or stopped at the budget) is not tried again for the
   * failure's report.
   */
  async #readSecrets(run: Run, signal: AbortSignal): Promise<ReadSecrets> {
    run.seen.unread = false;
    const namespace = run.obj.metadata.namespace ?? "";
    run.seen.secrets = await readSecrets(
      run.obj.spec,
      namespace,
      this.#o.secrets,
      signal,
      this.#o.maxSecretBytes,
    );
    return run.seen.secrets;
  }

  /**
   * The spec in wire terms, with the `secrets` read and its GitHub shorthand resolved. When the
   * Secrets were not read (`"unread"`), the secrets are left out: not managed by this mapping
   * (see {@link withSecrets} for when they turn out to be).
   */
  async #desired(
    run: Connected,
    secrets: ReadSecrets | "unread",
    signal: AbortSignal,
  ): Promise<{ desired: DesiredDeployment; record: StatusRecord }> {
    const { secrets: _unread, ...withoutSecrets } = run.obj.spec;
    const spec = secrets === "unread" ? withoutSecrets : run.obj.spec;
    const github = await run.session.repos.resolve(spec, signal);
    const desired = desiredFromSpec(spec, run.obj.metadata.name, {
      secretData: secrets === "unread" ? NONE_READ.data : secrets.data,
      ...(github ? { github } : {}),
    });
    const record: StatusRecord = {
      lastHandledReconcileAt: reconcileRequestedAt(run.obj) ?? null,
      lastHandledRolloutNow: rolloutNow(run.obj) ?? null,
      resolvedRepoUrl: github?.repoUrl ?? null,
      resolvedRepoRef: github && !spec.sourceRevisionConfig?.repoRef ? github.defaultBranch : null,
    };
    return { desired, record };
  }

  /**
   * The split of `decision` when its revision part must wait for a rollout window (see
   * `rollout-gate.ts`); undefined when all of it may go now.
   */
  #outsideWindows(run: Run, decision: PatchPlan, windows: WindowsInEffect): HeldPatch | undefined {
    const { now, held } = splitPatch(decision);
    if (!held) return undefined;
    const gate = gateRollout({
      windows,
      now: run.now.getTime(),
      rolloutNow: rolloutNow(run.obj),
      handledRolloutNow: run.obj.status?.lastHandledRolloutNow,
      held: held.changes,
      counter: () => this.#o.clock.now(),
    });
    if (gate.kind === "open") {
      if (gate.viaRolloutNow) run.log.info("rolling out outside the rollout windows: dms.dev/rollout-now");
      return undefined;
    }
    return { decision, now, held, gate };
  }

  /**
   * Sends what makes no revision and holds the rest: `Synced=False` (OutsideRolloutWindow),
   * Reconciling, and a look again when the window opens, where the held part goes out in one
   * PATCH. The secrets held are not applied yet: their hash stays the last applied one, and the
   * Secrets are read again then.
   */
  async #patchOutsideWindows(
    run: Connected,
    found: { deployment: Deployment | null; adopted: boolean },
    { decision, now, held, gate }: HeldPatch,
    record: StatusRecord,
    versions: string | undefined,
    signal: AbortSignal,
  ): Promise<Decided> {
    const status = run.obj.status ?? {};
    const secretsHeld = held.body.secrets !== undefined;
    const applied: StatusRecord = {
      ...record,
      appliedSecretsHash:
        (secretsHeld ? undefined : decision.secretsHash) ?? status.appliedSecretsHash ?? null,
      ...(run.seen.unread
        ? {}
        : { appliedSecretVersions: secretsHeld ? null : appliedVersions(decision.secretsHash, versions) }),
    };
    let observed = found.deployment;
    if (!observed) throw new Error("a patch was planned without a deployment to patch");
    if (now) {
      observed = await run.session.service.patch(observed.id, now.body, signal);
      this.#event(run, "Normal", updateReason(run.obj, now, found.adopted), updateNote(now));
    }
    const synced = status.conditions?.find((c) => c.type === CONDITION.Synced);
    if (synced?.reason !== REASON.OutsideRolloutWindow || synced.message !== gate.message)
      this.#event(run, "Normal", REASON.OutsideRolloutWindow, gate.message);
    const outcome = outcomeFromProblems(decision.problems) ?? {
      kind: "held" as const,
      message: gate.message,
    };
    return {
      outcome,
      observed: { kind: "found", deployment: observed },
      record: applied,
      wakeAt: gate.wakeAt,
    };
  }

  /**
   * Creates the deployment, recording the intent first so that a crash never creates two.
   * `versions`: of the Secrets this reconcile read (see {@link secretVersions}).
   */
  async #create(
    run: Connected,
    decision: CreatePlan,
    record: StatusRecord,
    versions: string | undefined,
    signal: AbortSignal,
  ): Promise<Decided> {
    const requestedAt = run.obj.status?.createRequestedAt;
    if (requestedAt && this.#o.clock.now() - Date.parse(requestedAt) < this.#o.createGraceMs) {
      // A create was requested and the listing does not show it yet: it may lag behind.
      run.log.info({ requestedAt }, "create requested earlier; waiting for the service to list it");
      const waiting = { kind: "synced", message: "waiting for the created deployment to be listed" } as const;
      // The id the create answered with stays known while the listing catches up.
      return { outcome: waiting, observed: { kind: "createdUnlisted" }, record };
    }
    // Written under the resourceVersion this reconcile read: a reconcile acting on a stale copy
    // (one that does not show an earlier intent) gets a conflict here, never a second POST.
    const intent = { ...run.obj.status, createRequestedAt: formatTime(run.now) };
    const written = await this.#o.resources.patchStatus(run.obj, intent, signal);
    const intended: Connected = { ...run, obj: written };
    const created = await run.session.service.create(decision.body, signal).catch((error: unknown) => {
      throw failedOn(written, error);
    });
    this.#event(intended, "Normal", "Created", createdNote(created));
    // The intent stays recorded until a lookup lists the deployment (see #reconcile).
    const applied: StatusRecord = {
      ...record,
      appliedSecretsHash: decision.secretsHash ?? null,
      appliedSecretVersions: appliedVersions(decision.secretsHash, versions),
    };
    const observed = { kind: "found", deployment: created } as const;
    return { outcome: { kind: "synced" }, observed, record: applied, written };
  }

  /**
   * Deletion: `Delete` removes the service's deployment this resource owns (the one its status
   * records, or the one its pending create made) and waits until it is gone. A deployment that
   * merely carries the name is never deleted: it may be another resource's or someone else's.
   * Nor is one the status records that is not this resource's: it carries another name, or an
   * older resource holds the name. Then nothing is deleted, a `NotOwned` warning says so, and
   * the resource is let go: a forged status must not be able to hold its deletion (and with it
   * its namespace's) for ever.
   */
  async #finalize(run: Run, signal: AbortSignal): Promise<ReconcileResult> {
    const { obj, session } = run;
    if (!(obj.metadata.finalizers ?? []).includes(FINALIZER)) return Action.gone();
    // Without a session only a resource that cleans nothing up gets here (see #unavailable).
    if (session && cleansUpOnDelete(obj)) {
      const holder = this.#holder(obj);
      const recorded = obj.status?.deploymentId;
      if (holder && recorded) {
        const message = `${describeResource(obj)} records the service's deployment ${recorded} in status.deploymentId, but the name "${claimedName(obj)}" on its connection is held by the older resource ${describeResource(holder)}: not deleting it, and letting ${describeResource(obj)} go`;
        this.#event(run, "Warning", REASON.NotOwned, message);
      } else if (!holder) {
        const missed = session.listingFailure();
        if (missed?.kind === "failed") {
          run.seen.unread = true;
          throw missed.error;
        }
        if (missed) {
          const outcome = listingMissed(obj, missed);
          const message = `${outcome.message}; the service's deployment is deleted once one does (or remove the finalizer ${FINALIZER} to leave it)`;
          return this.#conclude(run, { outcome: { ...outcome, message } }, signal);
        }
        const found = await this.#owned(session, obj, signal);
        if (found.disowned) {
          const letGo = found.deployment ? "" : `, and letting ${describeResource(obj)} go`;
          const note = notOwnedMessage(obj, found.disowned, `not deleting it${letGo}`);
          this.#event(run, "Warning", REASON.NotOwned, note);
        }
        if (found.deployment) {
          // Asked once: a deployment already being deleted is not asked again on every poll.
          if (!isBeingDeleted(found.deployment.status)) {
            await session.service.delete(found.deployment.id, signal, {
              deleteTracingProject: obj.spec.deleteTracingProject === true,
            });
            this.#event(
              run,
              "Normal",
              "Deleting",
              `deleting the service's deployment ${found.deployment.id}`,
            );
          }
          const observed = { kind: "found", deployment: found.deployment } as const;
          return this.#conclude(run, { outcome: { kind: "deleting" }, observed }, signal);
        }
        if (recorded && !found.disowned) {
          session.snapshot.forget(recorded);
          this.#event(run, "Normal", "Deleted", `the service's deployment ${recorded} is gone`);
        }
      }
    }
    await this.#o.resources.removeFinalizer(obj, FINALIZER, signal);
    return Action.gone();
  }

  /**
   * The deployment `obj` owns: by its recorded id, when that deployment carries the name `obj`
   * claims (else it is `disowned`), or by name while its create is pending. The caller has
   * checked that no older resource holds the name.
   */
  async #owned(
    session: ServiceSession,
    obj: StoredResource,
    signal: AbortSignal,
  ): Promise<{ deployment: Deployment | null; disowned?: Deployment }> {
    const id = obj.status?.deploymentId;
    const byId = id ? await session.service.getById(id, signal) : undefined;
    if (byId && byId.name === claimedName(obj)) return { deployment: byId };
    const disowned = byId ? { disowned: byId } : {};
    // Otherwise only a create of ours still pending (its answer lost, or not listed yet) can
    // have made the deployment that carries the name.
    if (!obj.status?.createRequestedAt) return { deployment: null, ...disowned };
    const target = { deploymentId: undefined, name: claimedName(obj), live: true, liveName: true };
    const found = await observe(session.service, session.snapshot, target, signal);
    return { deployment: found.deployment, ...disowned };
  }

  /**
   * Warns that the deployment the status records is not this resource's (the lookup ignored it),
   * once per recorded id: the status may keep showing it until a write replaces it.
   */
  #warnDisowned(run: Run, disowned: Deployment | undefined): void {
    const key = objectKey({ namespace: run.obj.metadata.namespace ?? "", name: run.obj.metadata.name });
    if (!disowned) {
      this.#disownedWarned.delete(key);
      return;
    }
    if (this.#disownedWarned.get(key) === disowned.id) return;
    this.#disownedWarned.set(key, disowned.id);
    const consequence = `ignoring it, and looking the deployment up by the name "${claimedName(run.obj)}"`;
    this.#event(run, "Warning", REASON.NotOwned, notOwnedMessage(run.obj, disowned, consequence));
  }

  /** The finalizer is present exactly while a delete must clean up the service. */
  async #syncFinalizer(obj: StoredResource, signal: AbortSignal): Promise<StoredResource> {
    const wanted = cleansUpOnDelete(obj);
    const has = (obj.metadata.finalizers ?? []).includes(FINALIZER);
    if (wanted && !has) return this.#o.resources.addFinalizer(obj, FINALIZER, signal);
    if (!wanted && has) return this.#o.resources.removeFinalizer(obj, FINALIZER, signal);
    return obj;
  }

  /**
   * Asks the service what a status needs besides what was decided (the latest revision, the
   * rollout's evidence), then writes the status.
   */
  async #conclude(run: Run, decided: Decided, signal: AbortSignal): Promise<ReconcileResult> {
    return this.#finish(run, decided, await this.#evidence(run, decided, signal), signal);
  }

  /**
   * The latest revision's status and the rollout's evidence of the deployment `decided` observed
   * (none while it is being deleted): the service calls a status write needs.
   */
  async #evidence(run: Run, { outcome, observed }: Decided, signal: AbortSignal): Promise<Evidence> {
    if (observed?.kind !== "found" || !isConnected(run) || outcome.kind === "deleting") return {};
    const { session } = run;
    const previous = run.obj.status;
    // Revision tracking: the latest revision's status, and a Warning the first time it failed.
    const requested = (reconcileRequestedAt(run.obj) ?? null) !== (previous?.lastHandledReconcileAt ?? null);
    const look = await session.revisions.look(observed.deployment, previous, requested, signal);
    const rollout = await this.#rolloutEvidence(run, observed.deployment, look.revision, signal);
    // The evidence's Warning, when it read a log, is the revision's one event (with its tail).
    return { revision: look.revision, rollout: rollout.status, event: rollout.event ?? look.event };
  }

  /**
   * Writes the status `decided` leads to, if it differs, and says when to look again. No call to
   * the service: what it said is in `decided` and `evidence`.
   */
  async #finish(
    run: Run,
    { outcome: sync, observed, record = {}, wakeAt }: Decided,
    evidence: Evidence,
    signal: AbortSignal,
  ): Promise<ReconcileResult> {
    const previous = run.obj.status;
    const { event } = evidence;
    if (event) this.#event(run, event.type, event.reason, event.note);
    const next = statusFrom({
      previous,
      generation: run.obj.metadata.generation ?? 0,
      observed: observed === undefined ? undefined : observed.kind === "found" ? observed.deployment : null,
      sync,
      now: run.now,
      record: { connection: connectionLabel(run.obj.spec.connectionRef), ...record },
      secretValues: run.seen.secrets.values,
      revision: evidence.revision,
      rollout: evidence.rollout,
    });
    // A create not listed yet: the id it answered with stays known while the listing catches up.
    if (observed?.kind === "createdUnlisted" && previous?.deploymentId)
      next.deploymentId = previous.deploymentId;
    if (!statusEqual(previous, next)) {
      await this.#o.resources.patchStatus(run.obj, next, signal);
      run.log.debug({ sync: sync.kind }, "status written");
    }
    // A timed-out rollout is Stalled, not Reconciling, and so not polled; it is looked at now and
    // then all the same, for it ends when the revision goes live or fails.
    if (evidence.rollout?.timedOutAfter !== undefined && sync.kind !== "failed")
      return Action.requeueAfter(Math.max(this.#o.pollMs, TIMED_OUT_LOOK_MS));
    // Work in progress, or a create the service has not listed yet (its intent still recorded):
    // look again after a poll interval; the rollout poller has read the deployment meanwhile.
    // A held change is in progress only by waiting: the service's own work is what is polled.
    const busy = sync.kind === "held" ? serviceBusy(next) : isReconciling(next) || next.createRequestedAt;
    const wake = wakeAt === undefined ? undefined : this.#heldWake(wakeAt - run.now.getTime());
    if (busy && sync.kind !== "failed")
      return Action.requeueAfter(Math.min(this.#o.pollMs, wake ?? Infinity));
    // A log read that failed for a reason that may pass is tried again (a few times at most).
    const reread = readAgainPending(evidence.rollout?.log)
      ? Math.max(this.#o.pollMs, LOG_RETRY_MS)
      : undefined;
    if (wake !== undefined || reread !== undefined)
      return Action.requeueAfter(
        Math.min(wake ?? Infinity, reread ?? Infinity, reconcileInterval(run.obj) ?? Infinity),
      );
    return Action.done(reconcileInterval(run.obj));
  }

  /**
   * How long a held change waits, `untilOpening` ms before its opening (or before where the
   * search stopped): never less than the poll interval, never more than {@link MAX_WAKE_MS}.
   * The floor keeps a resource whose windows leave no opening in sight, or whose clock reading
   * is already past it, from being requeued at once in a loop on the event loop every resource
   * shares; it costs a held change at most one poll interval of lateness, what a rollout's own
   * progress is seen with anyway (and `--poll-interval` is at least 1 s).
   */
  #heldWake(untilOpening: number): number {
    return Math.min(Math.max(untilOpening, this.#o.pollMs), MAX_WAKE_MS);
  }

  /**
   * The rollout's timing and failure evidence for the status, and the Warning to record when the
   * latest revision's log was read now: once per revision and reason (failed, or timed out), as
   * `status.failedRevisionLog` remembers (see failure-evidence.ts), and again, a minute apart and
   * three reads at most, when a read failed for a reason that may pass.
   */
  async #rolloutEvidence(
    run: Connected,
    observed: Deployment,
    revision: RevisionObservation | undefined,
    signal: AbortSignal,
  ): Promise<{ status: RolloutEvidence; event?: EventNote }> {
    const previous = run.obj.status ?? {};
    const latest = observed.latest_revision_id ?? undefined;
    const startedAt = rolloutStart(previous, observed, run.now);
    const revisionStatus = latest !== undefined && revision?.id === latest ? revision.status : undefined;
    const timeoutMs = rolloutTimeoutMs(run.obj.spec);
    const timedOut = rolloutTimedOut(observed, revisionStatus, startedAt, timeoutMs, run.now);
    const status: RolloutEvidence = {
      startedAt,
      // Kept for the revision it was read for while that one is not live; a live one needs none.
      log:
        startedAt !== undefined && previous.failedRevisionLog?.revisionId === latest
          ? previous.failedRevisionLog
          : undefined,
      timedOutAfter: timedOut ? (run.obj.spec.rolloutTimeout ?? DEFAULT_ROLLOUT_TIMEOUT) : undefined,
    };
    const failed = isFailedRevision(revisionStatus) && !isBeingDeleted(observed.status);
    const reason = failed ? REASON.RevisionFailed : timedOut ? REASON.RolloutTimeout : undefined;
    const recorded = previous.failedRevisionLog;
    const due = latest === undefined ? undefined : evidenceDue(recorded, latest, reason, run.now);
    // A revision id that is no uuid cannot be asked about (nor recorded within the status's bounds).
    if (due === undefined || latest === undefined || !isUuid(latest)) return { status };
    const type = logTypeFor(revisionStatus);
    // Reads of this revision's log for this reason that failed before, for a reason that may pass.
    const failedBefore =
      recorded?.revisionId === latest && recorded.reason === due ? (recorded.failedReads ?? 0) : 0;
    const lines = await this.#logTail(run, observed.id, latest, type, signal);
    const failedReads = Array.isArray(lines) || !lines.passing ? undefined : failedBefore + 1;
    status.log = {
      revisionId: latest,
      reason: due,
      type,
      ...(!Array.isArray(lines) || lines.length === 0 ? {} : { excerpt: excerptOf(lines) }),
      ...(failedReads === undefined ? {} : { failedReads, failedReadAt: formatTime(run.now) }),
    };
    // The revision's Warning comes with the first read, and again only with news: the tail a
    // later read got, or that it will not be shown after all. A read that failed between says nothing.
    const again = readAgainPending(status.log);
    if (failedBefore > 0 && again) return { status };
    const what =
      due === REASON.RevisionFailed
        ? `revision ${latest} of the service's deployment ${observed.id} ${revisionStatus}: it will not go live`
        : `revision ${latest} of the service's deployment ${observed.id} has not gone live within spec.rolloutTimeout ${status.timedOutAfter}${revisionStatus ? ` (${revisionStatus})` : ""}`;
    const tail = !Array.isArray(lines)
      ? again
        ? `; ${lines.note}; it is read again in a minute`
        : `; ${lines.note}${failedReads === undefined ? "" : `; ${failedReads} reads failed`}`
      : lines.length === 0
        ? `; its ${type} log is empty`
        : `; last ${type} log lines:`;
    const note = fitNote(`${what}${tail}`, Array.isArray(lines) ? lines : []);
    return { status, event: { type: "Warning", reason: due, action: "Rollout", note } };
  }

  /**
   * The last lines of a revision's `type` log, redacted of every secret value the resource sends
   * (its Secrets are read for that when this reconcile did not), or why there are none.
   */
  async #logTail(
    run: Connected,
    deploymentId: string,
    revisionId: string,
    type: LogType,
    signal: AbortSignal,
  ): Promise<string[] | LogGap> {
    const read = await run.session.logs.tail(deploymentId, revisionId, type, signal);
    if (read.kind === "missing") return { note: "the service has no logs route", passing: false };
    if (read.kind === "failed")
      return { note: `its ${type} log is not shown: ${read.why}`, passing: read.passing };
    if (read.entries.length === 0) return [];
    if (run.seen.unread) {
      try {
        await this.#readSecrets(run, signal);
      } catch (error) {
        if (signal.aborted) throw error;
        run.seen.unread = true;
        return {
          note: `its ${type} log is not shown: the Secrets whose values must be hidden from it could not be read`,
          passing: true,
        };
      }
    }
    return (
      formatTail(read.entries, run.seen.secrets.values) ?? {
        note: `its ${type} log is not shown: it could not be searched for secret values within ${TAIL_REDACTION_MS} ms`,
        passing: false,
      }
    );
  }

  /**
   * Turns a failure into a condition and an event, then tells the controller how to retry.
   * A halt (leadership lost, shutdown deadline) is not the resource's failure: it is rethrown
   * unreported, for the controller to abandon. A timeout is reported like any failure, its
   * status written under a short signal of its own (the reconcile's has already aborted).
   */
  async #fail(read: Run, thrown: unknown, signal: AbortSignal): Promise<ReconcileResult> {
    const error = thrown instanceof FailedAfterWrite ? thrown.cause : thrown;
    if (this.#o.resources.isConflict(error)) return Action.retry();
    if (signal.aborted && !(signal.reason instanceof ReconcileTimeoutError)) throw error;
    const run = thrown instanceof FailedAfterWrite ? { ...read, obj: thrown.obj } : read;
    // What the report must not show includes the values this reconcile did not read.
    if (run.seen.unread)
      await this.#readSecrets(run, AbortSignal.timeout(STATUS_AFTER_TIMEOUT_MS)).catch(() => undefined);
    const failure = failureOf(error, run.seen.secrets.values);
    this.#event(run, "Warning", failure.outcome.reason, failure.outcome.message);
    const record = failure.createRefused ? { createRequestedAt: null } : {};
    const writeWindow = new AbortController();
    const cancel = signal.aborted
      ? this.#o.clock.setTimer(STATUS_AFTER_TIMEOUT_MS, () => writeWindow.abort(signal.reason))
      : () => {};
    try {
      const decided = { outcome: failure.outcome, record };
      await this.#conclude(run, decided, signal.aborted ? writeWindow.signal : signal);
    } catch (statusError) {
      if (!this.#o.resources.isConflict(statusError))
        run.log.warn(
          { err: failureOf(statusError, run.seen.secrets.values).outcome.message },
          "could not write status",
        );
    } finally {
      cancel();
    }
    if (failure.rethrow) throw failure.rethrow;
    run.log.warn({ reason: failure.outcome.reason }, failure.outcome.message);
    return Action.done();
  }

  #event(run: Run, type: "Normal" | "Warning", reason: string, note: string): void {
    this.#o.events.record(run.obj, { type, reason, action: "Reconcile", note });
  }
}

/**
 * Whether the service's deployment has exactly the secret names of `spec` (false when it was not
 * found): then values known to be those last applied are all the plan needs.
 */
function sameSecretNames(spec: DeploymentSpec, deployment: Deployment | null | undefined): boolean {
  if (!deployment) return false;
  const wanted = [...new Set((spec.secrets ?? []).map((s) => s.name))].sort();
  const shown = [...new Set(deployment.secrets.map((s) => s.name))].sort();
  return wanted.length === shown.length && wanted.every((name, i) => name === shown[i]);
}

/**
 * `status.appliedSecretVersions` after a plan that read the Secrets: their versions when the
 * secrets are (or, once the write succeeds, will be) what the service has, else none.
 */
function appliedVersions(secretsHash: string | undefined, versions: string | undefined): string | null {
  return secretsHash !== undefined && versions !== undefined ? versions : null;
}

/**
 * The outcome of a resource whose connection's last listing missed its deadline: no call is made
 * for it until a listing ends in time (the connection's pass tries again within a minute).
 */
function listingMissed(obj: StoredResource, failure: ListingFailure): SyncOutcome & { kind: "failed" } {
  const id = connectionOf(obj.metadata.namespace ?? "", obj.spec.connectionRef);
  const connection = id ? describeConnection(id) : "the default connection (the operator's own settings)";
  return {
    kind: "failed",
    reason: REASON.ListingDeadlineExceeded,
    message: `the periodic listing of the service's deployments (GET /v2/deployments) through ${connection} did not end within the listing deadline of ${flagDuration(failure.deadlineMs)} (--listing-deadline); no call is made for this resource until a listing through that connection ends in time (it is tried again within a minute): fix the service, or raise --listing-deadline if it is only slow`,
    stalled: false,
  };
}

/** `namespace/name` of a resource, as events and messages name it. */
function describeResource(obj: StoredResource): string {
  return objectKey({ namespace: obj.metadata.namespace ?? "", name: obj.metadata.name });
}

/**
 * The `NotOwned` warning: `obj`'s status records `deployment`, which carries another name than
 * the one `obj` claims. `consequence`: what the operator does instead.
 */
function notOwnedMessage(obj: StoredResource, deployment: Deployment, consequence: string): string {
  return `${describeResource(obj)} records the service's deployment ${deployment.id} in status.deploymentId, but that deployment is named "${deployment.name}" and ${describeResource(obj)} claims "${claimedName(obj)}": it is not this resource's; ${consequence}`;
}

/** Whether deleting `obj` must delete its service deployment (and so it carries the finalizer). */
function cleansUpOnDelete(obj: StoredResource): boolean {
  return obj.spec.deletionPolicy === "Delete" && obj.spec.managementPolicy !== "ObserveOnly";
}

/** Whether the service is at work on the deployment (creating it, rolling a revision out). */
function serviceBusy(status: DeploymentResourceStatus): boolean {
  const ready = status.conditions?.find((c) => c.type === CONDITION.Ready);
  const working: readonly string[] = [REASON.Creating, REASON.RolloutInProgress, REASON.AwaitingDatabase];
  return ready?.status === "False" && working.includes(ready.reason);
}

/** Whether the status says work is in progress (creation, rollout, deletion, a retry). */
function isReconciling(status: DeploymentResourceStatus): boolean {
  return (status.conditions ?? []).some((c) => c.type === CONDITION.Reconciling && c.status === "True");
}
