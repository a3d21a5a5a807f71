/**
 * One reconcile's context, shared by the reconciler and its arms: the ports and settings
 * (`ReconcileDeps`), and the `Run`: the object, its log, the clock reading, its connection's
 * session, and what was seen of its Secrets (`SecretsSeen`, inputs.ts), the one state the steps
 * of a reconcile share. Types only.
 */
import type { ReconcileLog } from "../runtime/log.ts";
import type { SecretsSeen } from "./inputs.ts";
import type { ConfigMapsPort, EventsPort, ResourcePort, SecretsPort, StoredResource } from "./ports.ts";
import type { InheritedWindows } from "./rollout-gate.ts";
import type { SecretDigest } from "./secret-hash.ts";
import type { ServiceSession } from "./service/session.ts";

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
