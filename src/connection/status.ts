/**
 * A connection's status, computed from its last verdict. Pure. Its conditions are the kstatus
 * trio of `src/conditions/kstatus.ts`, built as the Deployment resource's are: `Ready` from the
 * verdict once there is one, `Reconciling` while a transient failure is retried or a deletion is
 * held, `Stalled` when a failure waits for a change of the spec or a Secret.
 */
import { truncate } from "../api/errors.ts";
import {
  type ConditionValue,
  type Failure,
  formatTime,
  KSTATUS,
  kstatusOf,
  MAX_MESSAGE_LENGTH,
  putConditions,
  type Verdict,
} from "../conditions/kstatus.ts";
import type { ConnectionStatus } from "../crd/connection-schema.ts";

/** Reasons of a connection's `Ready` condition (and of its Reconciling/Stalled). */
export const CONNECTION_REASON = {
  Connected: "Connected",
  Unauthorized: "Unauthorized",
  Unreachable: "Unreachable",
  SecretMissing: "SecretMissing",
  /** The Secret could not be read (e.g. forbidden to the operator); retried with backoff. */
  SecretUnreadable: "SecretUnreadable",
  /** Deletion waits for the Deployment resources still using the connection. */
  InUse: "InUse",
  /** The spec holds what the operator refuses to send (a base URL or header it does not allow). */
  InvalidSpec: "InvalidSpec",
  /** The probe's answer was larger than the operator's limit. */
  ResponseTooLarge: "ResponseTooLarge",
  /**
   * The service's TLS certificate was not accepted (unknown authority, expired, not yet valid,
   * another host's); the message names the cause and the fix.
   */
  CertificateNotTrusted: "CertificateNotTrusted",
  /** The Secret named by `spec.caSecretRef` does not hold PEM certificates. */
  InvalidCABundle: "InvalidCABundle",
} as const;

/** What the last check of a connection said; a probe the service answered counts its providers. */
export type ConnectionVerdict = (Verdict & { ok: true; providers: number }) | Failure;

/** A deletion held while resources use the connection: Reconciling for its reason, never Stalled. */
export interface Holding {
  reason: string;
  message: string;
}

/** Everything {@link connectionStatusFrom} needs. */
export interface ConnectionStatusInput {
  previous: ConnectionStatus | undefined;
  /** `metadata.generation` of the connection object. */
  generation: number;
  /** The last verdict; none yet: `Ready` is left as it was. */
  verdict: ConnectionVerdict | undefined;
  holding: Holding | undefined;
  /** The Deployment resources using the connection, and those its namespace selector refuses. */
  counts: { users: number; refused: number };
  /** When the connection's client last probed the service (epoch ms), if it did. */
  probedAt: number | undefined;
  now: Date;
}

/**
 * The status to write: conditions from the verdict (messages cut to {@link MAX_MESSAGE_LENGTH}),
 * the counts, and the providers and probe time of the last probe (kept from `previous` while the
 * connection cannot be probed).
 */
export function connectionStatusFrom(input: ConnectionStatusInput): ConnectionStatus {
  const { previous = {}, verdict, holding, generation } = input;
  const said = verdict ? kstatusOf(verdict) : undefined;
  const held: ConditionValue | undefined = holding && {
    status: "True",
    reason: holding.reason,
    message: holding.message,
  };
  const conditions = putConditions(
    previous.conditions ?? [],
    [
      ...(said ? [{ type: KSTATUS.Ready, value: said.ready }] : []),
      { type: KSTATUS.Reconciling, value: held ?? said?.reconciling },
      // A held deletion is progress, not a stall: its resources are cleaning up.
      { type: KSTATUS.Stalled, value: holding ? undefined : said?.stalled },
    ],
    {
      now: input.now,
      observedGeneration: generation,
      message: (text) => truncate(text, MAX_MESSAGE_LENGTH),
    },
  );
  const status: ConnectionStatus = {
    observedGeneration: generation,
    conditions,
    deployments: input.counts.users,
    refused: input.counts.refused,
  };
  const providers = verdict?.ok ? verdict.providers : previous.providers;
  if (providers !== undefined) status.providers = providers;
  if (input.probedAt !== undefined) status.lastProbeTime = formatTime(new Date(input.probedAt));
  else if (previous.lastProbeTime) status.lastProbeTime = previous.lastProbeTime;
  return status;
}
