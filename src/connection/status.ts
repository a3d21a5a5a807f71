/**
 * A connection's status, computed from its last verdict. Pure. Its conditions are the kstatus
 * trio of `src/crd/conventions.ts`, built as the Deployment resource's are: `Ready` from the
 * verdict once there is one, `Reconciling` while a transient failure is retried or a deletion is
 * held, `Stalled` when a failure waits for a change of the spec or a Secret. Every string passes
 * the status sink the Deployment resource's passes (`statusSink`, `reconcile/status.ts`), with its
 * own table {@link CONNECTION_STATUS_STRINGS}.
 */
import { truncate } from "../api/errors.ts";
import {
  CONNECTION_STATUS_FIELDS,
  type ConnectionStatus,
  ConnectionStatusSchema,
} from "../crd/connection-schema.ts";
import {
  type ConditionValue,
  type Failure,
  formatTime,
  KSTATUS,
  kstatusOf,
  MAX_MESSAGE_LENGTH,
  putConditions,
  unknownFieldsOf,
  type Verdict,
} from "../crd/conventions.ts";
import { statusSink } from "../reconcile/status.ts";
import { CONDITION_STRINGS, type Declarations, operator } from "../reconcile/status-fields.ts";

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
  /**
   * The base URL's host is, or resolves to, an address the operator does not connect to (a
   * link-local or metadata address; loopback and private ones under
   * `--connection-address-policy=public-only`). Retried: a name may resolve elsewhere later.
   */
  AddressNotAllowed: "AddressNotAllowed",
  /**
   * The connection's namespace has more connections than `--max-connections-per-namespace`: the
   * newest ones get no client until older ones go.
   */
  TooManyConnections: "TooManyConnections",
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

/**
 * The condition a ClusterServiceConnection without `spec.namespaceSelector` carries: it serves the
 * Deployment resources of every namespace, and says so where its readers look. An explicit
 * `namespaceSelector: {}` is the same choice made visibly, and carries none.
 */
export const OPEN_TO_ALL_NAMESPACES = {
  type: "OpenToAllNamespaces",
  reason: "NoNamespaceSelector",
  message:
    "this ClusterServiceConnection has no spec.namespaceSelector, so the Deployment resources of every namespace may use its tenant and credentials; set spec.namespaceSelector to the namespaces meant to use it (e.g. matchLabels: {dms.dev/tenant: platform}), or to {} to share it with every namespace on purpose",
} as const;

/**
 * Every condition type the operator sets on a connection: the kstatus trio and
 * {@link OPEN_TO_ALL_NAMESPACES}. A status read may hold another (a newer release's, before a
 * rollback, or one another writer added): it is not kept, because this version cannot keep it
 * current, and a stale signal is worse than none.
 */
export const CONNECTION_CONDITION_TYPES: ReadonlySet<string> = new Set([
  ...Object.values(KSTATUS),
  OPEN_TO_ALL_NAMESPACES.type,
]);

/**
 * Every string field of a connection's status, by its path in the schema, with its treatment:
 * the conditions' (a message quotes the service's answer to the probe and the spec's base URL),
 * and the probe's time. test/unit/status-sink.test.ts walks the schema against it.
 */
export const CONNECTION_STATUS_STRINGS: Declarations = {
  ...CONDITION_STRINGS,
  lastProbeTime: operator,
};

const SINK = statusSink<ConnectionStatus>(ConnectionStatusSchema, CONNECTION_STATUS_STRINGS);

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
  /** A ClusterServiceConnection without a namespace selector: {@link OPEN_TO_ALL_NAMESPACES}. */
  openToAll?: boolean;
  now: Date;
}

/**
 * The status to write: conditions from the verdict (messages cut to {@link MAX_MESSAGE_LENGTH}),
 * the counts, and the providers and probe time of the last probe (kept from `previous` while the
 * connection cannot be probed), through the status sink. Of `previous`, a field this version does
 * not know is kept as it is (the same value: it never causes a write), a condition of a type it
 * does not set ({@link CONNECTION_CONDITION_TYPES}) is not.
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
    (previous.conditions ?? []).filter((c) => CONNECTION_CONDITION_TYPES.has(c.type)),
    [
      ...(said ? [{ type: KSTATUS.Ready, value: said.ready }] : []),
      { type: KSTATUS.Reconciling, value: held ?? said?.reconciling },
      // A held deletion is progress, not a stall: its resources are cleaning up.
      { type: KSTATUS.Stalled, value: holding ? undefined : said?.stalled },
      {
        type: OPEN_TO_ALL_NAMESPACES.type,
        value: input.openToAll
          ? { status: "True", reason: OPEN_TO_ALL_NAMESPACES.reason, message: OPEN_TO_ALL_NAMESPACES.message }
          : undefined,
      },
    ],
    {
      now: input.now,
      observedGeneration: generation,
      message: (text) => truncate(text, MAX_MESSAGE_LENGTH),
    },
  );
  const status: ConnectionStatus = {
    ...unknownFieldsOf(previous, CONNECTION_STATUS_FIELDS),
    observedGeneration: generation,
    conditions,
    deployments: input.counts.users,
    refused: input.counts.refused,
  };
  const providers = verdict?.ok ? verdict.providers : previous.providers;
  if (providers !== undefined) status.providers = providers;
  if (input.probedAt !== undefined) status.lastProbeTime = formatTime(new Date(input.probedAt));
  else if (previous.lastProbeTime) status.lastProbeTime = previous.lastProbeTime;
  // No field of it is a value tools compare: a text is escaped, the operator's own kept (or, a
  // condition kept from before holding a character of the rule where only the operator writes, dropped).
  return SINK.keepPrintable(status).status;
}
