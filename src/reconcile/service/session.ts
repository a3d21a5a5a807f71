/**
 * The service as one connection reaches it: the session over the reconciler's port (the client's
 * adapter, `deploymentsPort` in deployments-port.ts) — the snapshot of its deployments, its forge
 * repository listings and its revision tracking. One per connection (the default one
 * included), so that each tenant has its own listing, resync cost and cached answers.
 *
 * Its writes keep their own books: what a create, a PATCH or a redeploy answered is remembered in
 * the snapshot, and a write answered 404 forgets the deployment, so the next reconcile sees what the
 * service said without the caller recording it.
 */
import type { Logger } from "pino";
import type { Clock } from "../../runtime/clock.ts";
import type {
  DeploymentLookups,
  DeploymentsPort,
  DeploymentWrites,
  RevisionRedeploys,
  StoredResource,
} from "../ports.ts";
import { RepoListings } from "../repo-listings.ts";
import type { InheritedWindows } from "../rollout-gate.ts";
import { CreatePace } from "./create-pace.ts";
import { writingThrough } from "./deployments-port.ts";
import { Rebuilder } from "./rebuilder.ts";
import { RevisionRedeployer } from "./redeployer.ts";
import { RevisionLogReader } from "./revision-log-reader.ts";
import { RevisionTracker } from "./revisions.ts";
import { RemoteSnapshot, type RemoteSnapshotOptions } from "./snapshot.ts";
import { UnansweredWrites } from "./unanswered-writes.ts";

/**
 * Options of {@link ServiceSession}: its snapshot's (the listing's deadline, which names it holds,
 * a sharded replica's share), and its own.
 */
export interface ServiceSessionOptions
  extends Pick<RemoteSnapshotOptions, "listingDeadlineMs" | "wanted" | "share" | "unrecorded"> {
  clock: Clock;
  logger: Logger;
  /** How long a listing answers for the service outside a resync pass (the resync period). */
  listingMaxAgeMs: number;
  /** Read the latest revision while a rollout is in progress. Default true. */
  revisionTracking?: boolean;
}

/** One connection's view of the service (see the module comment). */
export class ServiceSession {
  /**
   * What the reconciler asks the service itself: lookups of one deployment, and the writes, which
   * update {@link snapshot} themselves (see {@link writingThrough}). The batch reads, forge
   * listings and revision reads go through the members below.
   */
  readonly service: DeploymentLookups & DeploymentWrites;
  readonly snapshot: RemoteSnapshot;
  readonly repos: RepoListings;
  readonly revisions: RevisionTracker;
  /** The tails of failed or slow revisions' logs (remembers a service without the route). */
  readonly logs: RevisionLogReader;
  /** Redeploys of earlier revisions (remembers a service without the route or the listing). */
  readonly redeploys: RevisionRedeployer;
  /** Rebuilds on demand (remembers a service without the route). */
  readonly rebuilds: Rebuilder;
  /** Where this connection's creates spend their time (logged once a minute while they run). */
  readonly pace: CreatePace;
  /** PATCHes and redeploys whose answer was lost: the revision each made is the operator's. */
  readonly unanswered = new UnansweredWrites();

  constructor(service: DeploymentsPort, options: ServiceSessionOptions) {
    this.pace = new CreatePace(options.clock, options.logger);
    this.snapshot = new RemoteSnapshot(service, options.clock, {
      maxAgeMs: options.listingMaxAgeMs,
      ...(options.listingDeadlineMs === undefined ? {} : { listingDeadlineMs: options.listingDeadlineMs }),
      ...(options.wanted ? { wanted: options.wanted } : {}),
      ...(options.share ? { share: options.share } : {}),
      ...(options.unrecorded ? { unrecorded: options.unrecorded } : {}),
    });
    // Sharded, a lookup by id with room in its call reads ahead what the snapshot lacks of the share.
    service.readAheadFrom?.(this.snapshot.readAhead());
    this.service = writingThrough(service, this.snapshot, this.pace);
    this.repos = new RepoListings(service, options.clock, 5 * 60_000);
    this.revisions = new RevisionTracker(service, options.logger, options.revisionTracking ?? true);
    this.logs = new RevisionLogReader(service, options.logger);
    this.redeploys = new RevisionRedeployer(redeployingThrough(service, this.snapshot), options.logger);
    this.rebuilds = new Rebuilder(service, options.logger);
  }
}

/**
 * `port` whose redeploys update `snapshot` as {@link writingThrough}'s writes do: the deployment a
 * redeploy answered is remembered; one answered 404 (no such deployment or revision) forgets the
 * deployment, so that the next reconcile looks it up rather than trusting what was listed.
 */
function redeployingThrough(port: RevisionRedeploys, snapshot: RemoteSnapshot): RevisionRedeploys {
  return {
    recentRevisions: (deploymentId, signal) => port.recentRevisions(deploymentId, signal),
    redeploy: async (deploymentId, revisionId, signal) => {
      const answered = await port.redeploy(deploymentId, revisionId, signal);
      if (answered) snapshot.remember(answered);
      else snapshot.forget(deploymentId);
      return answered;
    },
  };
}

/**
 * Whether a resource's connection can be used now:
 * - `ready`: through `session`; `rolloutWindows`: the connection's `spec.rolloutWindows`, the
 *   default of a resource that sets none;
 * - `unavailable`: missing, not Ready, or another namespace's; `message` names it and the fix;
 * - `refused`: the resource's namespace may not use it (a ClusterServiceConnection's
 *   `spec.namespaceSelector`, or the default connection's selector); `message` names the
 *   connection, the selector and the labels the namespace lacks. Such a resource makes no service
 *   call at all, not even to clean up when it is deleted: it owns nothing through that connection;
 * - `pending`: it exists but has not been checked since the operator started (its check
 *   enqueues the resources using it), or the resource's namespace has not been seen yet.
 */
export type SessionLookup =
  | { kind: "ready"; session: ServiceSession; rolloutWindows?: InheritedWindows }
  /** `retrying`: the connection retries on its own (a transient failure, its `Reconciling`): not stalled. */
  | { kind: "unavailable"; message: string; retrying?: boolean }
  | { kind: "refused"; message: string }
  | { kind: "pending" };

/** The connections the reconciler reaches the service through. */
export interface Sessions {
  lookup(obj: StoredResource): SessionLookup;
}
