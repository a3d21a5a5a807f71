/**
 * One reconcile's context, and the data its steps hand each other, read in the order they run:
 * the ports and settings (`ReconcileDeps`); the `Run` (the object, its log, the clock reading,
 * its connection's session, and what was seen of its Secrets: `SecretsSeen`, inputs.ts, the one
 * state the steps of a reconcile share); what `observe` saw (`Observation`, with the deployment
 * as the lookup `Found` it); what `decide` made of it (`Decision`: the write, the events, the
 * status record, as data); what `execute` wrote (`Executed`, or a failure after a write:
 * `Execution`); what the conclusion is drawn
 * from (`Decided`), and the status (`StatusInput`). Types only: each step's module imports them,
 * none imports another step's code for them.
 */
import type { DesiredDeployment } from "../crd/mapping.ts";
import type { DeploymentResourceStatus } from "../crd/schema.ts";
import type { ReconcileLog } from "../runtime/controller.ts";
import type { ExternalRevision } from "./external-revision.ts";
import type { SecretsSeen } from "./inputs.ts";
import type { RevisionObservation, RolloutEvidence } from "./live-revision.ts";
import type { CreatePlan, PatchPlan } from "./plan.ts";
import type {
  ConfigMapsPort,
  DeploymentWrites,
  EventsPort,
  ResourcePort,
  SecretsPort,
  StoredResource,
} from "./ports.ts";
import type { StatusRecord, SyncOutcome } from "./reasons.ts";
import type { PatchTarget, RevisionHistoryEntry } from "./revision-history.ts";
import type { InheritedWindows } from "./rollout-gate.ts";
import type { SecretDigest } from "./secret-hash.ts";
import type { RebuildOutcome } from "./service/rebuilder.ts";
import type { RevisionRedeployer } from "./service/redeployer.ts";
import type { ServiceSession } from "./service/session.ts";
import type { Deployment, SourceRevisionConfig } from "./service-types.ts";

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
  /** The secrets' digests, keyed with the install key (`secret-hash.ts`). */
  secretDigest: SecretDigest;
  /** The ConfigMaps of `spec.export` (`export.ts`); absent: an export is refused, saying so. */
  configMaps?: ConfigMapsPort | undefined;
  /** What the rollout windows' search is timed on; absent: the thread's CPU time (`workMs`). */
  searchCounter?: (() => number) | undefined;
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

/** A run whose connection is usable. */
export type Connected = Run & { readonly session: ServiceSession };

/**
 * What the lookup found (`lookUp`, observe.ts). `deployment` is null when the service has none
 * for this resource.
 */
export interface Found {
  deployment: Deployment | null;
  /** Found by name although the status did not point at it: the resource takes it over. */
  adopted: boolean;
  /**
   * A read of the service showed the deployment (not only the answer to this operator's create):
   * a recorded create intent is then fulfilled.
   */
  listed: boolean;
  /**
   * The deployment the status records, found carrying another name: not this resource's (a
   * forged or stale status), so it was ignored and the name looked up instead.
   */
  disowned?: Deployment;
}

/** The resource as a decision reads it: its spec and metadata (the status is passed apart). */
export type DecideSpec = Pick<StoredResource, "spec" | "metadata">;

/** What `observe` saw, all a decision needs of the outside world. */
export interface Observation {
  /** The spec in wire terms: its Secrets' values read (or left out when known unchanged). */
  desired: DesiredDeployment;
  /** The bookkeeping of reading the spec (handled annotations, the resolved repository). */
  record: StatusRecord;
  /** The service's deployment as the snapshot or a lookup sees it. */
  found: Found;
  /** The digest of the referenced Secrets' resourceVersions (`secretVersions` in inputs.ts). */
  versions: string | undefined;
  /** The Secrets' values were not read: known to be those last applied. */
  secretsUnread: boolean;
  /** The connection's rollout windows, the default of a resource that sets none. */
  inheritedWindows?: InheritedWindows | undefined;
  /** The clock when the observation ended (ms since the epoch): a create's grace runs on it. */
  at: number;
  /**
   * Why the connection's rebuild route is known missing (`session.rebuilds.missing`), if it is;
   * read only while a rebuild is asked for (`pendingRebuild`), the one case a decision weighs it.
   */
  rebuildMissing?: string | undefined;
  /**
   * The latest revision this process's own last write of the deployment answered, while the
   * connection's snapshot holds it: never taken for a revision made outside the resource.
   */
  ownLatest?: string | undefined;
}

/**
 * What a reconcile saw of the service's deployment: found, known not to exist, or created by
 * this operator and not listed yet (the status keeps the id the create answered with).
 */
export type Observed =
  | { kind: "found"; deployment: Deployment }
  | { kind: "none" }
  | { kind: "createdUnlisted" };

/** What the status write and the requeue follow from: a decision with what was executed. */
export interface Decided {
  outcome: SyncOutcome;
  /** What the service showed; absent when it was not looked at. */
  observed?: Observed | undefined;
  /** Controller bookkeeping to write alongside. */
  record?: StatusRecord;
  /** Look again no later than this instant (ms since the epoch): a held change's window opens. */
  wakeAt?: number;
  /** `status.revisionHistory` after the revisions this reconcile created or redeployed. */
  history?: RevisionHistoryEntry[];
  /** The config of the revision it redeployed, for `status.activeRevision`. */
  known?: { id: string; config: SourceRevisionConfig };
  /** A revision the operator did not create, seen now: `status.externalRevision`. */
  externalRevision?: ExternalRevision;
  /** Changes made outside this resource noticed now, each counted by `dms_external_changes_total`. */
  externalChanges?: ExternalChangeKind[];
}

/** What `dms_external_changes_total` counts: a revision, or fields that differed from the spec. */
export type ExternalChangeKind = "revision" | "fields";

/** Everything the status is computed from (`statusFrom`, status.ts). */
export interface StatusInput {
  previous?: DeploymentResourceStatus | undefined;
  /** `metadata.generation` of the object reconciled. */
  generation: number;
  /** The service's deployment: `null` when known not to exist, `undefined` when not looked at. */
  observed: Deployment | null | undefined;
  sync: SyncOutcome;
  now: Date;
  record?: StatusRecord;
  /** Secret values to scrub from every message (service error details may echo them). */
  secretValues?: readonly string[];
  /** The latest revision's status, when it was read or is known (see `revisions.ts`). */
  revision?: RevisionObservation | undefined;
  /** The rollout's timing and log evidence, when the deployment was observed (failure-evidence.ts). */
  rollout?: RolloutEvidence | undefined;
  /**
   * `status.revisionHistory` after this reconcile's writes (a revision created: `recordCreated`,
   * revision-reuse.ts); undefined: the previous one. Marked deployed here when seen active.
   */
  revisionHistory?: readonly RevisionHistoryEntry[] | undefined;
  /** The config of a revision this reconcile redeployed, for `status.activeRevision` once it is active. */
  knownRevision?: { id: string; config: SourceRevisionConfig } | undefined;
  /** A revision the operator did not create, seen now (`externalRevisionOf`, external-revision.ts). */
  externalRevision?: ExternalRevision | undefined;
  /**
   * `observed` is `null` for a create answered and not listed yet (`decideCreate`, create.ts): the deployment is
   * not gone, and what the operator recorded of it (its revisions, its active one) is kept.
   */
  createdUnlisted?: boolean | undefined;
}

/** An event to record on the resource, as data. */
export interface DecidedEvent {
  type: "Normal" | "Warning";
  reason: string;
  note: string;
}

/** The write a decision asks `execute` to make. */
export type Write =
  /** Record the intent, then POST. */
  | { kind: "create"; plan: CreatePlan }
  /**
   * PATCH `plan` (its revision part redeployed instead when `spec.revisionReuse` allows).
   * `back`: a switch back to the service's latest revision (no event of its own); `adopted`: the
   * deployment was found by name; `redeployMessage`: a redeploy is said in `Synced`'s message.
   */
  | {
      kind: "send";
      plan: PatchPlan;
      deployment: Deployment;
      back: boolean;
      adopted: boolean;
      redeployMessage: boolean;
      /** The revision it makes is a rebuild asked for: built, never an earlier one redeployed. */
      build?: true;
      /** It applies the spec again over the revision of a rebuild of an earlier one: an edit's, never a drift. */
      reapplied?: true;
    };

/** What a reconcile decided (see the module comment). */
export interface Decision extends Decided {
  record: StatusRecord;
  /** Recorded before the write, whatever it comes to. */
  events: DecidedEvent[];
  /** Recorded once the write succeeded (or when there is none), after the write's own. */
  after: DecidedEvent[];
  /** A line for the reconcile's log. */
  log?: { fields?: object; message: string };
  write?: Write;
  /**
   * One new revision to create through the rebuild route, after the write (if any):
   * `dms.dev/rebuild-requested-at` carries `requestedAt`, not acted on yet.
   */
  rebuild?: { deploymentId: string; requestedAt: string };
  /**
   * The spec cannot be decided on (rollout windows that cannot be read: an `InvalidSpecError`):
   * reported as the reconcile's failure once {@link events} are recorded; no write.
   */
  failed?: { error: unknown };
}

/**
 * What `execute` wrote, as `settle` needs it; `rebuilt`: what the decision's rebuild came to
 * (after the write, if any: `none` when there was none).
 */
export type Executed =
  /** The create: the deployment it answered, and the history of its first revision. */
  (
    | {
        kind: "created";
        deployment: Deployment;
        history?: RevisionHistoryEntry[] | undefined;
        /** The resource as the intent's write answered: the status goes on that version. */
        written: StoredResource;
      }
    /** The PATCH (or the redeploy then the PATCH): what `applyPatch` answered. */
    | { kind: "sent"; sent: ApplyPatchResult }
    /** No write: only the rebuild. */
    | { kind: "none" }
  ) & {
    rebuilt?: { outcome: RebuildOutcome | PatchedRevision; deployment?: Deployment | undefined };
    /** The resource as the rebuild's intent answered (`rebuildIntent`): the status goes on it. */
    written?: StoredResource;
  };

/**
 * What `execute` came to: what it wrote, or the failure that stopped it once something was
 * written (`written`: the resource's version a create's or a rebuild's intent answered with;
 * `record`: a rebuild's intent undone, the service having refused the call; `history`: what a
 * redeploy made before the PATCH of the rest failed). A failure before any write rejects.
 */
export type Execution =
  | Executed
  | {
      kind: "failed";
      error: unknown;
      written?: StoredResource;
      history?: RevisionHistoryEntry[] | undefined;
      /** What the failure's status records besides (a rebuild's intent undone). */
      record?: StatusRecord;
    };

/** The rebuild asked for was the revision the write's PATCH made: no second build. */
export interface PatchedRevision {
  kind: "written";
  revisionId: string;
}

/** How the revision part went out. */
export type RevisionSent =
  /** No revision part, or it was PATCHed (built): `why` says why no redeploy, when one was weighed. */
  | { kind: "patched"; why?: string }
  /** Redeployed: `live` is the revision that goes live (a new copy, or `revisionId` itself). */
  | {
      kind: "redeployed";
      revisionId: string;
      reason: string;
      behaviour: "new-revision" | "switch-active";
      live: string;
    }
  /** Redeployed before (the history's newest entry) and not live yet: nothing sent for it again. */
  | { kind: "pending"; revisionId: string };

/** What `applyPatch` (execute.ts) needs: the PATCH, its target, and the calls it may make. */
export interface ApplyPatchInput extends PatchTarget {
  service: Pick<DeploymentWrites, "patch">;
  redeployer: RevisionRedeployer;
  /** RFC 3339, for `redeployedAt`. */
  now: string;
  signal: AbortSignal;
  /** A rebuild was asked (`dms.dev/rebuild-requested-at`): the revision is built, never reused. */
  build?: true;
}

/** What was sent, and what the status must now remember. */
export interface ApplyPatchResult {
  /** The deployment as the last call answered it. */
  deployment: Deployment;
  revision: RevisionSent;
  /** `status.revisionHistory` after it (undefined: as before). */
  history: RevisionHistoryEntry[] | undefined;
  /** The config of the revision redeployed, for `status.activeRevision` once it is active. */
  known?: { id: string; config: SourceRevisionConfig };
  /**
   * The PATCH of the rest failed after the redeploy went out: the failure, reported with the
   * history the redeploy made, so that the retry knows the revision is redeployed and sends only
   * the rest, rather than reading the listing and redeploying again.
   */
  failed?: { error: unknown };
}
