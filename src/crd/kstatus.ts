/**
 * Conditions as kstatus reads them, one way for every kind the operator writes the status of (the
 * Deployment resource and both connection kinds): a condition's `lastTransitionTime` moves only
 * when its status moves, each carries the generation it was computed from, and `Reconciling` and
 * `Stalled` are present only while True and never together.
 *
 * Nearly a leaf: it imports only the printable-text leaf of `api/` (which imports nothing), so
 * that every folder above `api/` may use it without a cycle. Messages arrive here cleaned
 * (redacted, cut) by the kind that wrote them, and leave as one printable line.
 */
import { printableLine } from "../api/printable.ts";

/** A condition shaped like metav1.Condition (the CRDs' `ConditionSchema`). */
export interface Condition {
  type: string;
  status: "True" | "False" | "Unknown";
  observedGeneration?: number;
  lastTransitionTime: string;
  reason: string;
  message: string;
}

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
