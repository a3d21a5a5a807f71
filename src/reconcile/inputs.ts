/**
 * What a reconcile reads of its resource besides the spec, and from outside it, before anything
 * is planned: the annotations users set to steer the controller (read defensively: a value the
 * controller cannot use is ignored, and reported by the caller, never a crash); the values of the
 * Secrets the spec references (read live, in the resource's own namespace only). The `github`
 * shorthand's repository is resolved through the forge listings of `repo-listings.ts`.
 */
import { createHash } from "node:crypto";
import { unprintableIn } from "../api/printable.ts";
import { secretKeyRefs } from "../crd/mapping.ts";
import {
  ANNOTATION_PAUSED,
  ANNOTATION_REBUILD_REQUESTED_AT,
  ANNOTATION_RECONCILE_INTERVAL,
  ANNOTATION_RECONCILE_REQUESTED_AT,
  ANNOTATION_ROLLOUT_NOW,
  type DeploymentResourceStatus,
  type DeploymentSpec,
} from "../crd/schema.ts";
import { parseDuration } from "../duration.ts";
import { objectKey } from "../runtime/queue-records.ts";
import type { SecretsPort } from "./ports.ts";
import { SecretBudget, utf8Bytes } from "./secret-budget.ts";

type Annotated = { metadata: { annotations?: Record<string, string> } };

/** True when `dms.dev/paused` is `"true"`. */
export function isPaused(obj: Annotated): boolean {
  return obj.metadata.annotations?.[ANNOTATION_PAUSED] === "true";
}

/** The value of `dms.dev/reconcile-requested-at`, if set. */
export function reconcileRequestedAt(obj: Annotated): string | undefined {
  const value = obj.metadata.annotations?.[ANNOTATION_RECONCILE_REQUESTED_AT];
  return value ? keptAnnotationValue(value) : undefined;
}

/**
 * The longest annotation value kept as given. Every value the operator acts on is short (`true`,
 * a duration, a timestamp or a token); a longer one is kept as its digest ({@link keptAnnotationValue}).
 */
export const MAX_ANNOTATION_VALUE = 1024;

/**
 * An annotation's value as the operator keeps it (in its cache, and in the status fields that
 * record a value acted on): as given up to {@link MAX_ANNOTATION_VALUE} characters and within
 * the printable rule, else `sha256:<hex>`, still a different value when the original changes,
 * never `true` or a duration. A value the status could not record as given would otherwise be
 * left unset there (the status sink), and so acted on again at every reconcile. The same whether applied once or twice (a digest is short).
 */
export function keptAnnotationValue(value: string): string {
  return value.length <= MAX_ANNOTATION_VALUE && unprintableIn(value) === undefined
    ? value
    : `sha256:${createHash("sha256").update(value).digest("hex")}`;
}

/**
 * The value of `dms.dev/rollout-now`, if set, as kept ({@link keptAnnotationValue}): what
 * `status.lastHandledRolloutNow` holds once it was acted on, whether `obj` came from the cache or
 * from a file.
 */
export function rolloutNow(obj: Annotated): string | undefined {
  const value = obj.metadata.annotations?.[ANNOTATION_ROLLOUT_NOW];
  return value ? keptAnnotationValue(value) : undefined;
}

/**
 * The value of `dms.dev/rebuild-requested-at`, if set, as kept ({@link keptAnnotationValue}): a
 * value other than `status.lastHandledRebuildAt` asks for one new revision.
 */
export function rebuildRequestedAt(obj: Annotated): string | undefined {
  const value = obj.metadata.annotations?.[ANNOTATION_REBUILD_REQUESTED_AT];
  return value ? keptAnnotationValue(value) : undefined;
}

/** What the status records of the annotations' values acted on. */
type Handled = Pick<DeploymentResourceStatus, "lastHandledRolloutNow" | "lastHandledRebuildAt"> | undefined;

/** Whether an annotation's `value` (as kept) is one not acted on yet (`handled`). */
const notHandled = (value: string | undefined, handled: string | undefined): boolean =>
  value !== undefined && value !== handled;

/** Whether `dms.dev/rollout-now` carries a value not acted on yet (`status.lastHandledRolloutNow`). */
export const rolloutNowAsked = (obj: Annotated, status: Handled): boolean =>
  notHandled(rolloutNow(obj), status?.lastHandledRolloutNow);

/** Whether `dms.dev/rebuild-requested-at` carries a value not acted on yet (`status.lastHandledRebuildAt`). */
export const pendingRebuild = (obj: Annotated, status: Handled): boolean =>
  notHandled(rebuildRequestedAt(obj), status?.lastHandledRebuildAt);

/** Shortest interval honoured: a smaller one would poll the service hot. */
const MIN_RECONCILE_INTERVAL_MS = 10_000;

/**
 * The check interval asked by `dms.dev/reconcile-interval`, floored at
 * {@link MIN_RECONCILE_INTERVAL_MS}; undefined when absent or malformed. The reconciler returns it
 * with `Action.done` (the controller reconciles the object again after it) and, at that
 * reconcile, asks the service about the object's deployment rather than reading the periodic
 * pass's listing, which may be a whole `--resync-period` old.
 */
export function reconcileInterval(obj: Annotated): number | undefined {
  const raw = obj.metadata.annotations?.[ANNOTATION_RECONCILE_INTERVAL];
  if (raw === undefined) return undefined;
  const ms = parseDuration(raw);
  return ms === undefined ? undefined : Math.max(ms, MIN_RECONCILE_INTERVAL_MS);
}

/** The cache index of resources by the Secrets (`namespace/name`) their spec reads. */
export const SECRET_INDEX = "secretRefs";

/** The index values of {@link SECRET_INDEX}. */
export function secretIndexer(obj: { metadata: { namespace?: string }; spec: DeploymentSpec }): string[] {
  const namespace = obj.metadata.namespace ?? "";
  return [...new Set(secretKeyRefs(obj.spec).map((r) => objectKey({ namespace, name: r.secret })))];
}

/** Secret data by Secret name and key, plus every value read (for redaction). */
export interface ReadSecrets {
  data: Record<string, Record<string, string>>;
  values: string[];
}

/** The Secrets before any was read: nothing to scrub. */
export const NONE_READ: ReadSecrets = { data: {}, values: [] };

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

/**
 * Reads the values of the Secrets `run`'s spec references, within the secret budget, into what
 * it has `seen` (for every report to be scrubbed of them) and returns them. Once per reconcile:
 * a read that failed (or stopped at the budget) is not tried again for the failure's report.
 */
export async function readSecretsOf(
  from: { secrets: SecretsPort; maxSecretBytes: number },
  run: { obj: { metadata: { namespace?: string }; spec: DeploymentSpec }; seen: SecretsSeen },
  signal: AbortSignal,
): Promise<ReadSecrets> {
  run.seen.unread = false;
  const namespace = run.obj.metadata.namespace ?? "";
  run.seen.secrets = await readSecrets(run.obj.spec, namespace, from.secrets, signal, from.maxSecretBytes);
  return run.seen.secrets;
}

/**
 * Reads every `valueFrom.secretKeyRef` of `spec` from `namespace`, each referenced Secret once
 * however many entries use it. Missing Secrets or keys are simply absent from the result: the
 * mapping names each of them in one error.
 *
 * The values the spec would send (inline ones too, counted once per entry that sends them) are
 * counted against `maxBytes` as they are read: past it, the reading stops with a
 * `SecretsTooLargeError` (secret-budget.ts), before anything is built from the values.
 */
export async function readSecrets(
  spec: DeploymentSpec,
  namespace: string,
  secrets: SecretsPort,
  signal: AbortSignal,
  maxBytes: number,
): Promise<ReadSecrets> {
  const out = inlineSecrets(spec);
  // A spec that sends no secret has nothing to count (nor to read).
  if (!spec.secrets?.length) return out;
  const budget = new SecretBudget(maxBytes);
  for (const entry of spec.secrets ?? [])
    if (entry.value !== undefined)
      budget.add({
        what: `the value of spec.secrets[${entry.name}]`,
        bytes: utf8Bytes(entry.value),
        entries: 1,
      });
  const bySecret = referencesBySecret(spec);
  budget.check(bySecret.size === 0);
  let left = bySecret.size;
  for (const [secret, keys] of bySecret) {
    const read = await secrets.readKeys(namespace, secret, [...keys.keys()], signal);
    left -= 1;
    if (read.kind !== "found") continue;
    for (const [key, entries] of keys) {
      const value = read.values.get(key);
      if (value === undefined) continue;
      budget.add({ what: `key "${key}" of Secret "${secret}"`, bytes: utf8Bytes(value), entries });
      out.data[secret] ??= {};
      out.data[secret][key] = value;
      out.values.push(value);
    }
    budget.check(left === 0);
  }
  return out;
}

/** The Secrets `spec` reads, each with its keys and how many entries read each key. */
function referencesBySecret(spec: DeploymentSpec): Map<string, Map<string, number>> {
  const bySecret = new Map<string, Map<string, number>>();
  for (const entry of spec.secrets ?? []) {
    const ref = entry.valueFrom?.secretKeyRef;
    if (!ref) continue;
    const keys = bySecret.get(ref.name) ?? new Map<string, number>();
    keys.set(ref.key, (keys.get(ref.key) ?? 0) + 1);
    bySecret.set(ref.name, keys);
  }
  return bySecret;
}

/**
 * A digest of the resourceVersions of the Secrets `spec` reads through `valueFrom.secretKeyRef`,
 * as the metadata watch last saw them; undefined when the spec reads none or one of them is not
 * in the watch. Recorded with the secrets' hash once they are what the service has
 * (`status.appliedSecretVersions`): while it still matches (and the spec did not change), the
 * values are those last applied, and a reconcile need not read them.
 */
export function secretVersions(
  spec: DeploymentSpec,
  namespace: string,
  secrets: SecretsPort,
): string | undefined {
  const names = [...new Set(secretKeyRefs(spec).map((r) => r.secret))].sort();
  if (names.length === 0) return undefined;
  const lines: string[] = [];
  for (const name of names) {
    const version = secrets.version(namespace, name);
    if (version === undefined) return undefined;
    lines.push(`${name}\n${version}`);
  }
  return createHash("sha256").update(lines.join("\n\n")).digest("hex");
}

/** The inline secret values of `spec` (for redaction when the Secrets are not read). */
export function inlineSecrets(spec: DeploymentSpec): ReadSecrets {
  return { data: {}, values: (spec.secrets ?? []).flatMap((e) => (e.value === undefined ? [] : [e.value])) };
}
