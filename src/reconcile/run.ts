/**
 * One reconcile's context, shared by the reconciler and its arms: the ports and settings
 * (`ReconcileDeps`), and the `Run`: the object, its log, the clock reading, its connection's
 * session, and what was seen of its Secrets, the one state the steps of a reconcile share.
 */
import type { ReconcileLog } from "../runtime/log.ts";
import { type ReadSecrets, readSecrets } from "./inputs.ts";
import type { EventsPort, ResourcePort, SecretsPort, StoredResource } from "./ports.ts";
import type { InheritedWindows } from "./rollout/rollout-gate.ts";
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
  run: Pick<Run, "obj">,
  type: "Normal" | "Warning",
  reason: string,
  note: string,
): void {
  deps.events.record(run.obj, { type, reason, action: "Reconcile", note });
}
