/**
 * What the verbs of annotate.ts do when they run: find the Deployment resources they are given
 * (names, `--all`, `-l`), patch the annotation of each, and with `--wait` wait for the operator's
 * acknowledgement of each. One resource's failure is reported on its own line and the others go
 * on; the command then ends with status 1, as kubectl does.
 */

import { escapeForTerminal } from "../api/terminal-text.ts";
import { listSelectorProblem } from "../crd/label-selector.ts";
import { PatchType } from "../kube/client.ts";
import { DEPLOYMENTS } from "../kube/custom-resources.ts";
import { isNotFound } from "../kube/errors.ts";
import { listItems, listMeta } from "../kube/listing.ts";
import { collectionPath } from "../kube/object.ts";
import { systemApiClock } from "../runtime/clock.ts";
import { isRecord } from "../runtime/json.ts";
import type { CliContext } from "./context.ts";
import { listingError, type PluginCluster, pluginCluster, resourceNotFoundError } from "./plugin-cluster.ts";
import type { KubectlFlags } from "./plugin-flags.ts";
import { CommandExit, EXIT } from "./program.ts";
import { UsageError } from "./usage-error.ts";
import { ANNOTATION_PAUSED, RESOURCE_PREFIX } from "./words.ts";

/** How often `--wait` reads the resource again. */
const WAIT_POLL_MS = 1000;
/** Most resources one `--all` or `-l` acts on (pages of {@link PAGE_SIZE}); more are refused, none changed. */
export const MAX_SELECTED = 5000;
const PAGE_SIZE = 500;

/** What a verb does to its annotation. */
export interface Verb {
  name: string;
  description: string;
  annotation: string;
  /** The annotation's new value: a string sets it, null removes it. */
  value: () => string | null;
  /** What is printed after `deployment.dms.dev/<name>`. */
  done: string;
  /** The status field in which the operator acknowledges the value (`--wait` waits for it). */
  acknowledgedIn?: "lastHandledReconcileAt" | "lastHandledRolloutNow" | "lastHandledRebuildAt";
}

/** The flags of a verb, as commander parses them. */
export interface VerbFlags extends KubectlFlags {
  all?: boolean;
  selector?: string;
  wait?: boolean;
  timeout?: number;
  verbose?: boolean;
}

/** The path of Deployment resource `name` in `namespace`. */
export function resourcePath(namespace: string, name: string): string {
  return `${collectionPath(DEPLOYMENTS, namespace)}/${encodeURIComponent(name)}`;
}

/**
 * The field manager of the verbs' annotations. Not kubectl's (the user agent, `kubectl-dms-<verb>`,
 * would name it so): Flux takes over the fields of every manager whose name starts with `kubectl`
 * and its next sync removes those Git does not declare, which would resume a suspended resource.
 */
export const VERB_FIELD_MANAGER = "dms-cli";

/**
 * Sets (a string) or removes (null) annotation `key` of the Deployment resource `name` with a
 * JSON merge patch of that annotation alone, under {@link VERB_FIELD_MANAGER}; resolves the
 * patched object. A missing resource is an Error saying how to list them.
 *
 * A merge patch that leaves a value as it was (`suspend` of a resource `kubectl annotate` or an
 * older version already paused) does not make {@link VERB_FIELD_MANAGER} its manager: the one that
 * wrote it stays, and Flux takes over and removes a `kubectl…` manager's fields. Then the annotation
 * is applied (server-side, that field alone, forced) under {@link VERB_FIELD_MANAGER} too.
 */
export async function patchAnnotation(
  cluster: PluginCluster,
  name: string,
  key: string,
  value: string | null,
  signal: AbortSignal,
): Promise<unknown> {
  try {
    const patched = await cluster.client.request({
      method: "PATCH",
      path: resourcePath(cluster.namespace, name),
      query: { fieldManager: VERB_FIELD_MANAGER },
      contentType: PatchType.Merge,
      body: { metadata: { annotations: { [key]: value } } },
      signal,
    });
    if (value === null || !managedByOthersOnly(patched, key)) return patched;
    const { group, version, kind } = DEPLOYMENTS;
    // No spec: an object deleted meanwhile is not created again (the CRD requires one).
    return await cluster.client.request({
      method: "PATCH",
      path: resourcePath(cluster.namespace, name),
      query: { fieldManager: VERB_FIELD_MANAGER, force: true },
      contentType: PatchType.Apply,
      body: { apiVersion: `${group}/${version}`, kind, metadata: { name, annotations: { [key]: value } } },
      signal,
    });
  } catch (error) {
    if (!isNotFound(error)) throw error;
    const missing = new Error(
      `Deployment resource ${cluster.namespace}/${name} not found: list them with kubectl get dmsd -n ${cluster.namespace} (or give -n <namespace>)`,
      { cause: error },
    );
    throw await resourceNotFoundError(cluster, missing, signal);
  }
}

/** Whether `obj`'s managedFields show annotation `key` owned, but not by {@link VERB_FIELD_MANAGER}. */
function managedByOthersOnly(obj: unknown, key: string): boolean {
  const entries = isRecord(obj) && isRecord(obj.metadata) ? obj.metadata.managedFields : undefined;
  if (!Array.isArray(entries)) return false;
  const owners = entries.filter((entry: unknown) => {
    const fields = isRecord(entry) && isRecord(entry.fieldsV1) ? entry.fieldsV1["f:metadata"] : undefined;
    const annotations = isRecord(fields) ? fields["f:annotations"] : undefined;
    return isRecord(annotations) && annotations[`f:${key}`] !== undefined;
  });
  return (
    owners.length > 0 && !owners.some((entry) => isRecord(entry) && entry.manager === VERB_FIELD_MANAGER)
  );
}

/** A Deployment resource a verb acts on. */
interface Target {
  namespace: string;
  name: string;
}

/**
 * The resources a verb acts on: those named (in the namespace), or with `--all` / `-l` the
 * Deployment resources of the namespace, or of every namespace with `-A` (matching the selector),
 * listed from the API server. A {@link UsageError} unless exactly one of the three is given, and
 * for names with `-A`, as kubectl refuses them.
 */
export async function targetNames(
  names: readonly string[],
  flags: Pick<VerbFlags, "all" | "selector" | "allNamespaces">,
  cluster: PluginCluster,
  signal: AbortSignal,
): Promise<Target[]> {
  const ways = [names.length > 0, flags.all === true, flags.selector !== undefined].filter(Boolean).length;
  if (ways !== 1)
    throw new UsageError([
      ways === 0
        ? "give the names of Deployment resources, --all, or -l <selector> (kubectl get dmsd lists them)"
        : "give names, --all or -l <selector>: one of them, not several",
    ]);
  if (names.length > 0) {
    if (flags.allNamespaces)
      throw new UsageError([
        "a resource cannot be named across all namespaces: give -n <namespace> with names, or --all or -l <selector> with -A",
      ]);
    return [...new Set(names)].map((name) => ({ namespace: cluster.namespace, name }));
  }
  const found: Target[] = [];
  let token: string | undefined;
  do {
    const page = await cluster.client
      .request({
        method: "GET",
        path: collectionPath(DEPLOYMENTS, flags.allNamespaces ? undefined : cluster.namespace),
        query: { limit: PAGE_SIZE, continue: token, labelSelector: flags.selector },
        signal,
      })
      .catch((error: unknown) => {
        throw listingError(error, cluster);
      });
    for (const item of listItems(page)) {
      const meta = isRecord(item) && isRecord(item.metadata) ? item.metadata : {};
      const namespace = typeof meta.namespace === "string" ? meta.namespace : cluster.namespace;
      if (typeof meta.name === "string") found.push({ namespace, name: meta.name });
    }
    token = listMeta(page).continue;
  } while (token !== undefined && found.length <= MAX_SELECTED);
  // Past the bound, none is changed: acting on the first ones only would leave the rest as they
  // were, unsaid (a suspend --all -A meant to hold every resource).
  if (found.length > MAX_SELECTED) {
    const where = flags.allNamespaces ? "in all namespaces" : `in namespace ${cluster.namespace}`;
    const matching = flags.selector === undefined ? "" : ` matching ${flags.selector}`;
    throw new Error(
      `more than ${MAX_SELECTED} Deployment resources found ${where}${matching}: a verb acts on at most ${MAX_SELECTED} at once, and none was changed; narrow them with -l <selector>${flags.allNamespaces ? " or -n <namespace>" : ""}`,
    );
  }
  return found;
}

/** Runs `verb` on the resources `names`, `--all` or `-l` name (see the module comment). */
export async function runVerb(
  verb: Verb,
  names: readonly string[],
  flags: VerbFlags,
  ctx: CliContext,
): Promise<void> {
  // A malformed selector is refused here, as kubectl refuses it, before any request.
  const problem = flags.selector === undefined ? undefined : listSelectorProblem(flags.selector);
  if (problem !== undefined)
    throw new UsageError([
      `invalid argument ${JSON.stringify(flags.selector)} for "-l, --selector" flag: unable to parse requirement: ${problem}`,
    ]);
  const cluster = pluginCluster(flags, ctx.env, `kubectl-dms-${verb.name}`);
  const targets = await targetNames(names, flags, cluster, ctx.stopSignal);
  if (targets.length === 0) {
    const matching = flags.selector === undefined ? "" : ` matching ${flags.selector}`;
    const where = flags.allNamespaces ? "" : ` in namespace ${cluster.namespace}`;
    ctx.err(`No Deployment resources found${where}${matching}.\n`);
    return;
  }
  let failed = 0;
  const fail = (name: string, error: unknown) => {
    failed += 1;
    // One resource: its failure is the command's, reported by the harness as before.
    if (ctx.stopSignal.aborted || targets.length === 1) throw error;
    const message = error instanceof Error ? error.message : String(error);
    ctx.err(`error: ${RESOURCE_PREFIX}/${name}: ${escapeForTerminal(message.replace(/\s*\n\s*/g, " "))}\n`);
  };
  const requested: { at: PluginCluster; name: string; value: string }[] = [];
  const never = new Map<PluginCluster, string>();
  for (const { namespace, name } of targets) {
    const value = verb.value();
    // The cluster, in the resource's own namespace (each its own under -A).
    const at = { ...cluster, namespace };
    try {
      const patched = await patchAnnotation(at, name, verb.annotation, value, ctx.stopSignal);
      ctx.out(`${RESOURCE_PREFIX}/${name} ${verb.done}\n`);
      if (verb.annotation !== ANNOTATION_PAUSED && isPaused(patched))
        ctx.err(
          `note: ${RESOURCE_PREFIX}/${name} is suspended (${ANNOTATION_PAUSED}=true): the operator acts on it once resumed (kubectl dms resume ${name} -n ${namespace})\n`,
        );
      const why = verb.acknowledgedIn && neverAcknowledged(verb.acknowledgedIn, patched);
      if (why) {
        never.set(at, why);
        // With --wait the error below says it.
        if (!flags.wait) ctx.err(`note: ${RESOURCE_PREFIX}/${name} ${why}\n`);
      }
      if (value !== null) requested.push({ at, name, value });
    } catch (error) {
      fail(name, error);
    }
  }
  if (flags.wait && verb.acknowledgedIn) {
    const field = verb.acknowledgedIn;
    const waits = requested.map(({ at, name, value }) => {
      // Waiting could only time out, and then blame the operator: said at once instead.
      const why = never.get(at);
      if (why !== undefined)
        return Promise.resolve(
          fail(name, new Error(`the operator never acknowledges it in status.${field}: it ${why}`)),
        );
      return waitForAcknowledgement(at, name, field, value, flags.timeout ?? 60_000, ctx).catch((error) =>
        fail(name, error),
      );
    });
    await Promise.all(waits);
  }
  if (failed > 0) throw new CommandExit(EXIT.failed);
}

/**
 * Why the operator never acknowledges a request in status field `field` of the resource as
 * patched, or undefined: a rebuild of an ObserveOnly resource, for which it writes nothing to the
 * service (src/reconcile/decide.ts returns before any rebuild), so builds no revision. A rollout-now
 * or a reconcile of one is acknowledged.
 */
export function neverAcknowledged(
  field: NonNullable<Verb["acknowledgedIn"]>,
  patched: unknown,
): string | undefined {
  const spec = isRecord(patched) && isRecord(patched.spec) ? patched.spec : undefined;
  if (field !== "lastHandledRebuildAt" || spec?.managementPolicy !== "ObserveOnly") return undefined;
  return "is ObserveOnly (spec.managementPolicy): the operator writes nothing to the service for it, so it builds no revision; set spec.managementPolicy: Manage to rebuild it";
}

function isPaused(patched: unknown): boolean {
  const annotations =
    isRecord(patched) && isRecord(patched.metadata) ? patched.metadata.annotations : undefined;
  return isRecord(annotations) && annotations[ANNOTATION_PAUSED] === "true";
}

/**
 * Reads the resource every second until `status[field]` is `value`, then prints its Ready
 * condition; an Error when `timeoutMs` passes first (the request stays: the operator acts on it
 * when it can).
 */
async function waitForAcknowledgement(
  cluster: PluginCluster,
  name: string,
  field: string,
  value: string,
  timeoutMs: number,
  ctx: CliContext,
): Promise<void> {
  const deadline = AbortSignal.timeout(timeoutMs);
  const signal = AbortSignal.any([ctx.stopSignal, deadline]);
  const path = resourcePath(cluster.namespace, name);
  let status: Record<string, unknown> = {};
  try {
    for (;;) {
      const obj = await cluster.client.request({ method: "GET", path, signal });
      status = isRecord(obj) && isRecord(obj.status) ? obj.status : {};
      if (acknowledgement(status, field, value) === true) {
        const ready = conditionOf(status, "Ready");
        const said = ready ? `Ready=${ready}` : "no Ready condition yet";
        ctx.out(`${RESOURCE_PREFIX}/${name} acknowledged by the operator: ${said}\n`);
        return;
      }
      // Kept timers (the process waits for them), and the abort listener removed with each one.
      await systemApiClock.sleep(WAIT_POLL_MS, signal);
    }
  } catch (error) {
    if (!deadline.aborted || ctx.stopSignal.aborted) throw error;
    if (acknowledgement(status, field, value) === "sent") {
      ctx.out(
        `${RESOURCE_PREFIX}/${name} acknowledged by the operator, which sent the rebuild; its answer is not recorded: the revision may or may not have been created (status.unconfirmedRebuild)\n`,
      );
      return;
    }
    // What the resource last said of its sync: a request held by rollout windows, or refused.
    const synced = conditionOf(status, "Synced");
    const says = synced?.startsWith("False ") ? `; the resource says Synced=${synced}` : "";
    throw new Error(
      `the operator did not acknowledge ${field}=${value} within ${timeoutMs / 1000}s${says}: is it running, and does it watch namespace ${cluster.namespace}? (kubectl dms version; kubectl describe dmsd ${name} -n ${cluster.namespace})`,
      { cause: error },
    );
  }
}

/**
 * Whether `status` acknowledges `field` = `value`: `"sent"` while a rebuild's call is out, or was
 * cut off (its intent: `status.unconfirmedRebuild` without the request's value, which the answer
 * settles), else whether the field holds the value.
 */
export function acknowledgement(
  status: Record<string, unknown>,
  field: string,
  value: string,
): boolean | "sent" {
  if (status[field] !== value) return false;
  const record = status.unconfirmedRebuild;
  return field === "lastHandledRebuildAt" && isRecord(record) && record.requestedAt === undefined
    ? "sent"
    : true;
}

/** Condition `type` of `status` as `<status> <reason>: <message>`, or undefined when it has none. */
function conditionOf(status: Record<string, unknown>, type: string): string | undefined {
  const found = Array.isArray(status.conditions)
    ? status.conditions.find((c) => isRecord(c) && c.type === type)
    : undefined;
  return isRecord(found)
    ? `${String(found.status)} ${String(found.reason)}: ${String(found.message)}`
    : undefined;
}
