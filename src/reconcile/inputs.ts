/**
 * What a reconcile reads of its resource besides the spec, and from outside it, before anything
 * is planned: the annotations users set to steer the controller (read defensively: a value the
 * controller cannot use is ignored, and reported by the caller, never a crash); the values of the
 * Secrets the spec references (read live, in the resource's own namespace only); and the claims:
 * which resource owns a service deployment name. The `github` shorthand's repository is resolved
 * through the forge listings of `repo-listings.ts`.
 */
import { createHash } from "node:crypto";
import { unprintableIn } from "../api/printable.ts";
import { connectionKey, connectionOf, DEFAULT_CONNECTION } from "../crd/conventions.ts";
import { effectiveName, secretKeyRefs } from "../crd/mapping.ts";
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
import { isRecord } from "../runtime/json.ts";
import { keyOfMeta, objectKey } from "../runtime/queue-records.ts";
import type { ResourcePort, SecretsPort, StoredResource } from "./ports.ts";
import { SecretBudget, utf8Bytes } from "./secret-budget.ts";

type Annotated = { metadata: { annotations?: Record<string, string> } };

/** True when `dms.dev/paused` is `"true"`. */
export function isPaused(obj: Annotated): boolean {
  return obj.metadata.annotations?.[ANNOTATION_PAUSED] === "true";
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

/** The value of the annotation `name`, if set, as kept ({@link keptAnnotationValue}). */
function keptAnnotation(obj: Annotated, name: string): string | undefined {
  const value = obj.metadata.annotations?.[name];
  return value ? keptAnnotationValue(value) : undefined;
}

/** The value of `dms.dev/reconcile-requested-at`, if set. */
export const reconcileRequestedAt = (obj: Annotated) =>
  keptAnnotation(obj, ANNOTATION_RECONCILE_REQUESTED_AT);

/**
 * The value of `dms.dev/rollout-now`, if set, as kept: what `status.lastHandledRolloutNow` holds
 * once it was acted on, whether `obj` came from the cache or from a file.
 */
export const rolloutNow = (obj: Annotated) => keptAnnotation(obj, ANNOTATION_ROLLOUT_NOW);

/**
 * The value of `dms.dev/rebuild-requested-at`, if set, as kept: a value other than
 * `status.lastHandledRebuildAt` asks for one new revision.
 */
export const rebuildRequestedAt = (obj: Annotated) => keptAnnotation(obj, ANNOTATION_REBUILD_REQUESTED_AT);

/** What the status records of the annotations' values acted on. */
type Handled = Pick<DeploymentResourceStatus, "lastHandledRolloutNow" | "lastHandledRebuildAt"> | undefined;

/** A `status.lastHandled…` value as kept: 0.1.0 recorded values as given (a held change let out else). */
export const handledValue = (recorded: string | null | undefined): string | undefined =>
  recorded ? keptAnnotationValue(recorded) : undefined;
/** Whether an annotation's `value` (as kept) is one not acted on yet (`handled`, as recorded). */
const notHandled = (value: string | undefined, handled: string | undefined): boolean =>
  value !== undefined && value !== handledValue(handled);

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

/*
 * Claims: which resource owns a service deployment name. Two resources may claim one name on one
 * connection (in one namespace or in two); the older one keeps it and the other stalls, so the
 * service never gets two writers for one deployment. The same name on two connections (two
 * tenants) is no conflict. `plan` applies the same rule to the cluster's resources. A resource
 * refused its connection (a namespace selector, see `connection/access.ts`) claims no name on it
 * and makes no call through it: a hostile namespace cannot hold another team's name on a shared
 * tenant by creating its resource first.
 */

/**
 * What the rule reads of a resource. A {@link StoredResource} is one; so is a resource `plan`
 * reads from a file, which has no `creationTimestamp` until it is applied.
 */
export interface Claimant {
  metadata: { name: string; namespace?: string; creationTimestamp?: string };
  spec: DeploymentSpec;
}

/**
 * True when `a` was created before `b` (ties broken by namespace/name, so the order is total).
 * A resource without a `creationTimestamp` is not created yet: younger than any that has one.
 */
export function olderThan(a: Claimant, b: Claimant): boolean {
  const ta = a.metadata.creationTimestamp;
  const tb = b.metadata.creationTimestamp;
  if (ta !== tb) {
    if (ta === undefined) return false;
    if (tb === undefined) return true;
    return ta < tb;
  }
  return keyOfMeta(a) < keyOfMeta(b);
}

/** The service name a resource claims. */
export const claimedName = (o: Claimant): string => effectiveName(o.spec, o.metadata.name);

/** The key of the connection a resource uses (see `crd/conventions.ts`). */
export const connectionKeyOf = (o: Claimant): string =>
  connectionKey(connectionOf(o.metadata.namespace ?? "", o.spec.connectionRef));

/**
 * What a resource claims: its service name on its connection. On the default connection that is
 * the name itself (the string the resource already holds: 10,000 resources then cost no claim
 * strings of their own); on another, the connection's key, a newline and the name. A tenant
 * writes both `spec.name` and `spec.connectionRef.name`, and neither is kept from holding a
 * newline, so a claim is kept unambiguous by {@link claimOn} rather than by the names.
 */
export function claimOf(o: Claimant): string {
  return claimOn(connectionKeyOf(o), claimedName(o));
}

/**
 * The claim of a Deployment resource from the wire, read before its decode; undefined when its
 * metadata or spec is not as a claim needs (its decode then says whether it is usable).
 */
export function claimOnTheWire(raw: unknown): string | undefined {
  if (!isRecord(raw) || !isRecord(raw.metadata) || !isRecord(raw.spec)) return undefined;
  const { name, namespace } = raw.metadata;
  if (typeof name !== "string" || (namespace !== undefined && typeof namespace !== "string"))
    return undefined;
  try {
    return claimOf({
      metadata: { name, ...(namespace ? { namespace } : {}) },
      spec: raw.spec as DeploymentSpec,
    });
  } catch {
    return undefined;
  }
}

/**
 * The claim of the service name `name` on the connection `key` (see {@link claimOf}). The two
 * plain forms, the bare name and `key\nname`, are kept for the names and keys without a newline
 * (the claims of the names the service lists, and the sharder's placement by claim, stay as they
 * were); a default name or a key holding one would make a claim another connection's resource
 * also makes (`spec.name: "ClusterServiceConnection/shared\nweb"` on the default connection, to
 * hold the name `web` on `shared` against the team it is for), so those take a form neither plain
 * one can be: a newline, then the pair as JSON.
 */
export function claimOn(key: string, name: string): string {
  if (key === DEFAULT_CONNECTION) return name.includes("\n") ? escapedClaim(key, name) : name;
  return key.includes("\n") ? escapedClaim(key, name) : `${key}\n${name}`;
}

/** See {@link claimOn}: starts with a newline, which no plain claim does, and holds no other. */
const escapedClaim = (key: string, name: string): string => `\n${JSON.stringify([key, name])}`;

/** The cache index of resources by what they claim, so a claim check reads only its rivals. */
export const CLAIM_INDEX = "claim";

/** The index values of {@link CLAIM_INDEX}. */
export const claimIndexer = (o: Claimant): string[] => [claimOf(o)];

/** The cache index of resources by the key of the connection they use. */
export const CONNECTION_INDEX = "connection";

/**
 * The index values of {@link CONNECTION_INDEX}. Resources of the default connection are not
 * indexed: it is never counted or re-checked.
 */
export function connectionIndexer(o: Claimant): string[] {
  const key = connectionKeyOf(o);
  return key === DEFAULT_CONNECTION ? [] : [key];
}

/**
 * The resource that holds `obj`'s service name on its connection before it, if any, among `all`
 * (every resource will do: others are skipped). Resources being deleted still hold their name
 * until they are gone: their cleanup may still need the deployment.
 */
export function olderClaimant<T extends Claimant>(obj: Claimant, all: readonly T[]): T | undefined {
  const claim = claimOf(obj);
  let holder: T | undefined;
  for (const other of all) {
    if (keyOfMeta(other) === keyOfMeta(obj) || claimOf(other) !== claim) continue;
    if (olderThan(other, obj) && (!holder || olderThan(other, holder))) holder = other;
  }
  return holder;
}

/** Whether a resource's namespace may not use its connection now (the namespace access check). */
export type Refuses = (o: StoredResource) => boolean;

/**
 * Whether `o` holds its claim: not when it is refused its connection, unless it owns a
 * deployment there (its status records one: only the operator writes status), so that a
 * relabelled namespace does not hand its name to a rival.
 */
export function holdsClaim(o: StoredResource, refuses: Refuses): boolean {
  return Boolean(o.status?.deploymentId) || !refuses(o);
}

/** `resources` whose claimants are only those that {@link holdsClaim}. */
export function refusalAware<R extends Pick<ResourcePort, "claimants">>(resources: R, refuses: Refuses): R {
  return {
    ...resources,
    claimants: (claim) => resources.claimants(claim).filter((o) => holdsClaim(o, refuses)),
  };
}

/**
 * The deployment `o` owns that the operator may call about (poll, read): the one its status
 * records, unless `o` is refused its connection, through which it then makes no call at all.
 */
export function reachableDeployment(o: StoredResource, refuses: Refuses): string | undefined {
  const id = o.status?.deploymentId;
  return id && !refuses(o) ? id : undefined;
}

/** The older resource holding `obj`'s service name, if any (read from the claim index). */
export function holderOf(
  resources: Pick<ResourcePort, "claimants">,
  obj: StoredResource,
): StoredResource | undefined {
  return olderClaimant(obj, resources.claimants(claimOf(obj)));
}
