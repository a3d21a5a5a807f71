/**
 * The operator's conventions, one way for every kind: pure, and low in the module graph (it imports
 * only the printable-text leaf of `api/`, the connection kinds, the condition's type and the
 * queue's key and flow types), so that every folder above `api/` speaks them without a cycle and
 * without importing each other:
 *
 * - Conditions as kstatus reads them, on every kind the operator writes the status of (the
 *   Deployment resource and both connection kinds): a condition's `lastTransitionTime` moves only
 *   when its status moves, each carries the generation it was computed from, and `Reconciling`
 *   and `Stalled` are present only while True and never together. Messages arrive cleaned
 *   (redacted, cut) by the kind that wrote them, and leave as one printable line.
 * - A status field a version does not know (a newer release's, valid under its CRD) is kept as
 *   read by each status write ({@link unknownFieldsOf}).
 * - How connections are named and keyed: which connection a Deployment resource means by its
 *   `spec.connectionRef`, the key the connection controller's queue, the session registry and the
 *   claim index share, how `status.connection` and messages name one, and the flow (the tenant's
 *   share of the workers) a resource's or a connection's key is queued in (the connection's
 *   service settings are `connection/settings.ts`; who may use it, `connection/access.ts`).
 */
import { printableLine } from "../api/printable.ts";
import type { FlowOf, KeyFlow } from "../runtime/queue-flows.ts";
import { type ObjectRef, objectKey, parseObjectKey } from "../runtime/queue-records.ts";
import {
  CLUSTER_SERVICE_CONNECTION_KIND,
  CONNECTION_KINDS,
  type ConnectionKind,
  SERVICE_CONNECTION_KIND,
} from "./connection-schema.ts";
import type { Condition } from "./status-schema.ts";

/** The condition types kstatus reads on every kind. */
export const KSTATUS = {
  Ready: "Ready",
  Reconciling: "Reconciling",
  Stalled: "Stalled",
} as const;

/** Longest condition message written; longer ones are cut (the API allows 32768). */
export const MAX_MESSAGE_LENGTH = 4096;

/** What is said of one condition; its type, time and generation are added when it is set. */
export type ConditionValue = Pick<Condition, "status" | "reason" | "message">;

/** A failure, `transient` when it is retried on its own (Reconciling), stalled otherwise. */
export interface Failure {
  ok: false;
  reason: string;
  message: string;
  transient: boolean;
}

/**
 * What a reconcile concluded about an object: it is where it should be (`ok`, with the reason and
 * message its summary condition says), or a {@link Failure}.
 */
export type Verdict = { ok: true; reason: string; message: string } | Failure;

/**
 * The kstatus trio a verdict says: its summary condition (`ready`: True when ok, False with the
 * failure's reason otherwise), `reconciling` while a transient failure is retried (its message
 * says so), `stalled` when the failure waits for a change. A kind may write `ready` under another
 * type (the Deployment's reconcile outcome is its `Synced`).
 */
export function kstatusOf(verdict: Verdict): {
  ready: ConditionValue;
  reconciling?: ConditionValue;
  stalled?: ConditionValue;
} {
  const { reason, message } = verdict;
  if (verdict.ok) return { ready: { status: "True", reason, message } };
  const ready: ConditionValue = { status: "False", reason, message };
  return verdict.transient
    ? { ready, reconciling: { status: "True", reason, message: `retrying: ${message}` } }
    : { ready, stalled: { status: "True", reason, message } };
}

/** A time as metav1.Time serializes it (RFC 3339, whole seconds), so re-reads compare equal. */
export function formatTime(now: Date): string {
  return now.toISOString().replace(/\.\d{3}Z$/, "Z");
}

/**
 * `conditions` with `condition` set: replaced in place when one of its type exists (keeping its
 * lastTransitionTime when the status is unchanged), appended otherwise. Returns a new array.
 */
export function setCondition(
  conditions: readonly Condition[],
  condition: Omit<Condition, "lastTransitionTime">,
  now: Date,
): Condition[] {
  const index = conditions.findIndex((c) => c.type === condition.type);
  const existing = conditions[index];
  const lastTransitionTime =
    existing && existing.status === condition.status ? existing.lastTransitionTime : formatTime(now);
  const next: Condition = { ...condition, lastTransitionTime };
  if (!existing) return [...conditions, next];
  return conditions.map((c, i) => (i === index ? next : c));
}

/** When and from what generation conditions are set, and how their messages are cleaned. */
export interface ConditionContext {
  now: Date;
  /** `metadata.generation` of the object the conditions were computed from. */
  observedGeneration: number;
  /** Applied to each message set (redaction, a length limit). Default: as given. */
  message?: (text: string) => string;
}

/**
 * `conditions` with each of `wanted`, in its order, set (see {@link setCondition}) when it has a
 * value and removed when it has none. Types not in `wanted` are kept as they are: a kind leaves
 * out what it keeps while nothing speaks of it (its `Ready`, before a first verdict).
 */
export function putConditions(
  conditions: readonly Condition[],
  wanted: readonly { type: string; value: ConditionValue | undefined }[],
  context: ConditionContext,
): Condition[] {
  let next = [...conditions];
  for (const { type, value } of wanted) {
    if (!value) {
      next = next.filter((c) => c.type !== type);
      continue;
    }
    // Whatever the kind's cleaning, a message reaches a terminal (kubectl) as one printable line.
    const message = printableLine(context.message ? context.message(value.message) : value.message);
    next = setCondition(
      next,
      { type, ...value, message, observedGeneration: context.observedGeneration },
      context.now,
    );
  }
  return next;
}

/**
 * The top-level fields of `read` (a status read) outside `known`, as they are: the same values,
 * never copied or walked (one pass over its keys), so a status written with them compares equal
 * to `read` at once and they never cause a write. Each an own field, whatever its name.
 */
export function unknownFieldsOf(
  read: object | undefined,
  known: ReadonlySet<string>,
): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(read ?? {}))
    if (!known.has(key) && value !== undefined)
      Object.defineProperty(fields, key, { value, enumerable: true, writable: true, configurable: true });
  return fields;
}

/** `spec.connectionRef` of a Deployment resource. */
export interface ConnectionRef {
  kind: ConnectionKind;
  name: string;
}

/** The key and `status.connection` of the operator's own connection (its flags and env). */
export const DEFAULT_CONNECTION = "default";

/** A connection object: its kind and where it is (`namespace` is `""` for the cluster kind). */
export interface ConnectionId extends ObjectRef {
  kind: ConnectionKind;
}

/**
 * The connection a resource of `namespace` means by `ref`: a ServiceConnection is always the one
 * of the resource's own namespace (the reference has no namespace, so no other can be named).
 */
export function connectionOf(namespace: string, ref: ConnectionRef | undefined): ConnectionId | undefined {
  if (!ref) return undefined;
  return { kind: ref.kind, namespace: ref.kind === SERVICE_CONNECTION_KIND ? namespace : "", name: ref.name };
}

/**
 * The key of a connection, unique across both kinds and the default: `default`,
 * `ServiceConnection/<namespace>/<name>` or `ClusterServiceConnection/<name>`. The connection
 * controller's queue, the registry and the claim index use it.
 */
export function connectionKey(id: ConnectionId | undefined): string {
  return id ? `${id.kind}/${objectKey(id)}` : DEFAULT_CONNECTION;
}

/** The connection a key names, or undefined for the default (the inverse of {@link connectionKey}). */
export function parseConnectionKey(key: string): ConnectionId | undefined {
  if (key === DEFAULT_CONNECTION) return undefined;
  const slash = key.indexOf("/");
  const kind = key.slice(0, slash) as ConnectionKind;
  if (slash < 0 || !CONNECTION_KINDS.includes(kind)) throw new Error(`not a connection key: ${key}`);
  return { kind, ...parseObjectKey(key.slice(slash + 1)) };
}

/** The {@link ConnectionId} of a connection object (a cluster one has no namespace). */
export function idOf(obj: { metadata: { name: string; namespace?: string | undefined } }): ConnectionId {
  const namespace = obj.metadata.namespace ?? "";
  return {
    kind: namespace ? SERVICE_CONNECTION_KIND : CLUSTER_SERVICE_CONNECTION_KIND,
    namespace,
    name: obj.metadata.name,
  };
}

/** How `status.connection` and messages name a connection: `Kind/name`, or `default`. */
export function connectionLabel(ref: ConnectionRef | undefined): string {
  return ref ? `${ref.kind}/${ref.name}` : DEFAULT_CONNECTION;
}

/** How messages name a connection object, namespace included: `ServiceConnection team-a/prod`. */
export function describeConnection(id: ConnectionId): string {
  return `${id.kind} ${objectKey(id)}`;
}

/**
 * The namespace selector that limits who may use connection `id`: a ClusterServiceConnection's
 * `spec.namespaceSelector`; a ServiceConnection is its own namespace's alone ({@link connectionOf}).
 */
export function limitingSelector<S>(
  id: ConnectionId,
  spec: { namespaceSelector?: S | null | undefined } | undefined,
): S | undefined {
  return id.kind === CLUSTER_SERVICE_CONNECTION_KIND ? (spec?.namespaceSelector ?? undefined) : undefined;
}

/**
 * The flow of a Deployment key: for a ServiceConnection, its namespace's flow (a name no
 * connection's key can be) with the connection as its part; for a shared connection, the
 * connection's key with the namespace as its part. Either way the keys waiting at a cap are
 * counted under their connection's key (a namespace's connection while it has reconciles running;
 * the others of the namespace under its flow's name: `runtime/queue-flows.ts` `waitingAtCap`).
 */
export function connectionFlowOf(deployments: {
  get(ref: ObjectRef): { spec: { connectionRef?: ConnectionRef | undefined } } | undefined;
}): FlowOf {
  return (key) => {
    const ref = parseObjectKey(key);
    const connectionRef = deployments.get(ref)?.spec.connectionRef;
    const id = connectionOf(ref.namespace, connectionRef);
    const connection = connectionKey(id);
    return id?.kind === SERVICE_CONNECTION_KIND
      ? { flow: namespaceFlow(ref.namespace), part: connection, label: connection }
      : { flow: connection, part: ref.namespace };
  };
}

/**
 * The flow of a connection's check (its key): a ServiceConnection's namespace's, so that a
 * namespace's many connections whose service never answers hold one cap of the checks, not one
 * each; a ClusterServiceConnection (the cluster's administrators') and the default are their own.
 */
export function connectionCheckFlowOf(key: string): KeyFlow {
  const owner = shareOwnerOf(key);
  return owner === key ? { flow: key } : { flow: owner, part: key };
}

/**
 * The tenant whose share a connection's work spends (the connection check's workers, the memory
 * of its answers in flight): a ServiceConnection's namespace ({@link namespaceFlow}), for a
 * namespace may make many; a ClusterServiceConnection (the cluster's administrators') and the
 * default connection are their own.
 */
export function shareOwnerOf(connectionKey: string): string {
  const slash = connectionKey.indexOf("/");
  if (connectionKey.slice(0, slash) !== SERVICE_CONNECTION_KIND) return connectionKey;
  return namespaceFlow(parseObjectKey(connectionKey.slice(slash + 1)).namespace);
}

/** The flow of a namespace's own connections (connection keys start with a kind, never `namespace/`). */
function namespaceFlow(namespace: string): string {
  return `namespace/${namespace}`;
}
