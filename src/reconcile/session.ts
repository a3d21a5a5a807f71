/**
 * The service as one connection reaches it: its port, the snapshot of its deployments, its forge
 * repository listings and its revision tracking. One per connection (the default one included),
 * so that each tenant has its own listing, resync cost and cached answers.
 */
import type { Logger } from "pino";
import type { Clock } from "../runtime/clock.ts";
import { RepoListings } from "./inputs.ts";
import type { DeploymentLookups, DeploymentsPort, DeploymentWrites, StoredResource } from "./ports.ts";
import { RevisionRedeployer } from "./redeployer.ts";
import { type ListingFailure, RemoteSnapshot } from "./remote.ts";
import { RevisionLogReader } from "./revision-log-reader.ts";
import { RevisionTracker } from "./revisions.ts";
import type { InheritedWindows } from "./rollout-gate.ts";

/** Options of {@link ServiceSession}. */
export interface ServiceSessionOptions {
  clock: Clock;
  logger: Logger;
  /** How long a listing answers for the service outside a resync pass (the resync period). */
  listingMaxAgeMs: number;
  /**
   * How long one listing of this connection may take (`--listing-deadline`). Past it, or when a
   * listing fails, the session says so ({@link ServiceSession.listingFailure}) until one succeeds.
   * Default: no deadline.
   */
  listingDeadlineMs?: number;
  /**
   * Whether a resource of this connection claims the service name `name`: only those deployments
   * of a listing are held (see `RemoteSnapshotOptions.wanted`). Default: every name.
   */
  wanted?: (name: string) => boolean;
  /** How long a forge repository listing is reused. Default 5 min. */
  repoListingTtlMs?: number;
  /** Read the latest revision while a rollout is in progress. Default true. */
  revisionTracking?: boolean;
}

/** One connection's view of the service (see the module comment). */
export class ServiceSession {
  /**
   * What the reconciler asks the service itself: lookups of one deployment, and the writes. The
   * batch reads, forge listings and revision reads go through the members below.
   */
  readonly service: DeploymentLookups & DeploymentWrites;
  readonly snapshot: RemoteSnapshot;
  readonly repos: RepoListings;
  readonly revisions: RevisionTracker;
  /** The tails of failed or slow revisions' logs (remembers a service without the route). */
  readonly logs: RevisionLogReader;
  /** Redeploys of earlier revisions (remembers a service without the route or the listing). */
  readonly redeploys: RevisionRedeployer;

  constructor(service: DeploymentsPort, options: ServiceSessionOptions) {
    this.service = service;
    this.snapshot = new RemoteSnapshot(service, options.clock, {
      maxAgeMs: options.listingMaxAgeMs,
      ...(options.listingDeadlineMs === undefined ? {} : { listingDeadlineMs: options.listingDeadlineMs }),
      ...(options.wanted ? { wanted: options.wanted } : {}),
    });
    this.repos = new RepoListings(service, options.clock, options.repoListingTtlMs ?? 300_000);
    this.revisions = new RevisionTracker(service, options.logger, options.revisionTracking ?? true);
    this.logs = new RevisionLogReader(service, options.logger);
    this.redeploys = new RevisionRedeployer(service, options.logger);
  }

  /**
   * Why this connection's last listing missed its deadline or failed, until one succeeds: its
   * calls may hang as the listing did, so its resources make none meanwhile.
   */
  listingFailure(): ListingFailure | undefined {
    return this.snapshot.listingFailure();
  }
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
  | { kind: "unavailable"; message: string }
  | { kind: "refused"; message: string }
  | { kind: "pending" };

/** The connections the reconciler reaches the service through. */
export interface Sessions {
  lookup(obj: StoredResource): SessionLookup;
}

/** Every resource through one session: an operator (or a test) with only the default connection. */
export function oneSession(session: ServiceSession): Sessions {
  return { lookup: () => ({ kind: "ready", session }) };
}
