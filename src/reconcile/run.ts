/**
 * One reconcile's context, shared by its arms (`apply.ts`, `cleanup.ts`), the failure evidence
 * (`evidence.ts`) and the reconciler that sequences them: the object, what was seen of its
 * Secrets, its connection's session, and what an arm decided for the status write to conclude.
 */
import type { Logger } from "pino";
import { flagDuration } from "../duration.ts";
import { connectionOf, describeConnection } from "../naming/connection.ts";
import { objectKey } from "../runtime/keys.ts";
import { claimedName, claimOf, olderClaimant } from "./claims.ts";
import { type ReadSecrets, readSecrets } from "./inputs.ts";
import type { RevisionHistoryEntry } from "./plan/revision-reuse.ts";
import type { SecretDigest } from "./plan/secret-hash.ts";
import type { EventsPort, ResourcePort, SecretsPort, StoredResource } from "./ports.ts";
import type { InheritedWindows } from "./rollout/rollout-gate.ts";
import type { ServiceSession } from "./service/session.ts";
import type { ListingFailure } from "./service/snapshot.ts";
import type { Deployment, SourceRevisionConfig } from "./service-types.ts";
import { REASON, type StatusRecord, type SyncOutcome } from "./status/status.ts";

/**
 * What the arms of a reconcile use: the ports, the clock reading's source, and the settings the
 * reconciler was given (defaults applied).
 */
export interface ReconcileDeps {
  resources: ResourcePort;
  secrets: SecretsPort;
  events: EventsPort;
  /** The reconcile's clock (ms since the epoch), read again where time passed. */
  now: () => number;
  pollMs: number;
  createGraceMs: number;
  maxSecretBytes: number;
  /** The secrets' digests, keyed with the install key (`plan/secret-hash.ts`). */
  secretDigest: SecretDigest;
}

/**
 * One reconcile's context: the object (as read, or as this reconcile last wrote it: a write
 * gives a new `Run`), its logger, the clock reading, what was seen of the Secrets, and the
 * connection's session once the connection was found usable.
 */
export interface Run {
  readonly obj: StoredResource;
  readonly log: ReconcileLog;
  readonly now: Date;
  /** Shared by every `Run` of one reconcile: a failure's report is scrubbed of what was read. */
  readonly seen: SecretsSeen;
  readonly session?: ServiceSession;
  /** The connection's rollout windows, the default of a resource that sets none. */
  readonly inheritedWindows?: InheritedWindows | undefined;
}

/** What a reconcile logs through: its lines carry the resource and the reconcile's id. */
export interface ReconcileLog {
  isLevelEnabled(level: "debug" | "info" | "warn"): boolean;
  debug(fields: object, message: string): void;
  info(message: string): void;
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/**
 * A reconcile's logger, its child of `parent` made when a line is first written at a level
 * `parent` writes. Most reconciles write nothing (a resync pass runs 10,000 of them), and a pino
 * child serializes and redacts its bindings when it is made: garbage that lived as long as the
 * reconcile, long enough for V8 to move it to its old space. The same instance is shared by every
 * `Run` of one reconcile (they are copies of one another).
 */
export class LazyReconcileLog implements ReconcileLog {
  readonly #parent: Logger;
  readonly #bindings: () => Record<string, unknown>;
  #child: Logger | undefined;

  constructor(parent: Logger, bindings: () => Record<string, unknown>) {
    this.#parent = parent;
    this.#bindings = bindings;
  }

  isLevelEnabled(level: "debug" | "info" | "warn"): boolean {
    return this.#parent.isLevelEnabled(level);
  }

  debug(fields: object, message: string): void {
    if (this.#parent.isLevelEnabled("debug")) this.#log().debug(fields, message);
  }

  info(fieldsOrMessage: object | string, message?: string): void {
    if (!this.#parent.isLevelEnabled("info")) return;
    if (typeof fieldsOrMessage === "string") this.#log().info(fieldsOrMessage);
    else this.#log().info(fieldsOrMessage, message);
  }

  warn(fields: object, message: string): void {
    if (this.#parent.isLevelEnabled("warn")) this.#log().warn(fields, message);
  }

  #log(): Logger {
    this.#child ??= this.#parent.child(this.#bindings());
    return this.#child;
  }
}

/**
 * What one reconcile has of the referenced Secrets: the values read (or the spec's inline ones),
 * or `unread`: their values are known to be those last applied and were not read, so a report or
 * a log shown reads them first. The one state the steps of a reconcile share, for a failure may
 * come at any step and its report must not show a value.
 */
export interface SecretsSeen {
  secrets: ReadSecrets;
  unread: boolean;
}

/** The Secrets before any was read: nothing to scrub. */
export const NONE_READ: ReadSecrets = { data: {}, values: [] };

/** A run whose connection is usable. */
export type Connected = Run & { readonly session: ServiceSession };

/** Whether `run`'s connection is usable. */
export function isConnected(run: Run): run is Connected {
  return run.session !== undefined;
}

/**
 * What a reconcile saw of the service's deployment: found, known not to exist, or created by
 * this operator and not listed yet (the status keeps the id the create answered with).
 */
export type Observed =
  | { kind: "found"; deployment: Deployment }
  | { kind: "none" }
  | { kind: "createdUnlisted" };

/** `deployment` as an {@link Observed}: `null` is none, `undefined` not looked at. */
export function observedAs(deployment: Deployment | null | undefined): Observed | undefined {
  if (deployment === undefined) return undefined;
  return deployment === null ? { kind: "none" } : { kind: "found", deployment };
}

/** What a reconcile decided: the status write and the requeue follow from it alone. */
export interface Decided {
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
  /** `status.revisionHistory` after the revisions this decision created or redeployed (apply-reuse.ts). */
  history?: RevisionHistoryEntry[];
  /** The config of the revision it redeployed, for `status.activeRevision`. */
  known?: { id: string; config: SourceRevisionConfig };
}

/**
 * A failure after this reconcile wrote its resource (the finalizer, a create's intent): reported
 * on `obj`, the version the write answered with, for a status written on the version read would
 * only conflict.
 */
export class FailedAfterWrite extends Error {
  readonly obj: StoredResource;
  override readonly cause: unknown;

  constructor(obj: StoredResource, cause: unknown) {
    super("the reconcile failed after writing its resource", { cause });
    this.obj = obj;
    this.cause = cause;
  }
}

/**
 * A failure after a redeploy went out (the PATCH of what needs no revision failed): the history
 * the redeploy made is recorded with the failure, so that the retry knows the revision is
 * redeployed and sends only the rest, rather than reading the listing and redeploying again.
 */
export class FailedAfterRedeploy extends Error {
  readonly history: RevisionHistoryEntry[] | undefined;
  override readonly cause: unknown;

  constructor(history: RevisionHistoryEntry[] | undefined, cause: unknown) {
    super("the PATCH after a redeploy failed", { cause });
    this.history = history;
    this.cause = cause;
  }
}

/** `error` as a failure reported on `obj`, unless it already names a later version. */
export function failedOn(obj: StoredResource, error: unknown): FailedAfterWrite {
  return error instanceof FailedAfterWrite ? error : new FailedAfterWrite(obj, error);
}

/**
 * Reads the values of the Secrets the spec references, within the secret budget, into what
 * `run` has seen (for every report to be scrubbed of them) and returns them. Once per
 * reconcile: a read that failed (or stopped at the budget) is not tried again for the
 * failure's report.
 */
export async function readSecretsOf(
  deps: ReconcileDeps,
  run: Run,
  signal: AbortSignal,
): Promise<ReadSecrets> {
  run.seen.unread = false;
  const namespace = run.obj.metadata.namespace ?? "";
  run.seen.secrets = await readSecrets(run.obj.spec, namespace, deps.secrets, signal, deps.maxSecretBytes);
  return run.seen.secrets;
}

/** Records an event of the reconcile on `run`'s object. */
export function recordEvent(
  deps: Pick<ReconcileDeps, "events">,
  run: Run,
  type: "Normal" | "Warning",
  reason: string,
  note: string,
): void {
  deps.events.record(run.obj, { type, reason, action: "Reconcile", note });
}

/** `namespace/name` of a resource, as events and messages name it. */
export function describeResource(obj: StoredResource): string {
  return objectKey({ namespace: obj.metadata.namespace ?? "", name: obj.metadata.name });
}

/**
 * The `NotOwned` warning: `obj`'s status records `deployment`, which carries another name than
 * the one `obj` claims. `consequence`: what the operator does instead.
 */
export function notOwnedMessage(obj: StoredResource, deployment: Deployment, consequence: string): string {
  return `${describeResource(obj)} records the service's deployment ${deployment.id} in status.deploymentId, but that deployment is named "${deployment.name}" and ${describeResource(obj)} claims "${claimedName(obj)}": it is not this resource's; ${consequence}`;
}

/**
 * The guard every call through a connection passes first: when the connection's last listing
 * failed with an answer (a 401, a 503), that answer is thrown, reported as a lookup's failure
 * would be (scrubbed of this resource's values, read for that), retried with backoff; when it
 * missed its deadline, the outcome to report. Either way no call is made: the connection's own
 * pass lists it again soon, and its keys are enqueued once a listing is in.
 */
export function listingGuard(run: Connected): (SyncOutcome & { kind: "failed" }) | undefined {
  const missed = run.session.listingFailure();
  if (missed?.kind === "failed") {
    run.seen.unread = true;
    throw missed.error;
  }
  return missed ? listingMissed(run.obj, missed) : undefined;
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

/** Whether deleting `obj` must delete its service deployment (and so it carries the finalizer). */
export function cleansUpOnDelete(obj: StoredResource): boolean {
  return obj.spec.deletionPolicy === "Delete" && obj.spec.managementPolicy !== "ObserveOnly";
}

/** The older resource holding `obj`'s service name, if any (read from the claim index). */
export function holderOf(
  deps: Pick<ReconcileDeps, "resources">,
  obj: StoredResource,
): StoredResource | undefined {
  return olderClaimant(obj, deps.resources.claimants(claimOf(obj)));
}
