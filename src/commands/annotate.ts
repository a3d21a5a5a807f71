/**
 * The verbs that steer one Deployment resource through its annotations, as `flux reconcile`,
 * `flux suspend` and `kubectl rollout pause` do: `reconcile` (`dms.dev/reconcile-requested-at`),
 * `suspend` and `resume` (`dms.dev/paused`), `rollout-now` (`dms.dev/rollout-now`). Each is one
 * JSON merge patch of that annotation alone, so it never overwrites a concurrent change of the
 * spec or of another annotation (no read-modify-write of the object). The operator reconciles on
 * any annotation change (src/wiring/triggers.ts) and acknowledges a reconcile request and a
 * rollout-now in `status.lastHandledReconcileAt` and `status.lastHandledRolloutNow`; `--wait`
 * waits for that acknowledgement.
 */
import type { Command } from "commander";
import { InvalidArgumentError } from "commander";
import {
  ANNOTATION_PAUSED,
  ANNOTATION_RECONCILE_REQUESTED_AT,
  ANNOTATION_ROLLOUT_NOW,
} from "../crd/schema.ts";
import { isRecord } from "../json.ts";
import { PatchType } from "../kube/client.ts";
import { DEPLOYMENTS } from "../kube/deployments.ts";
import { isNotFound } from "../kube/errors.ts";
import { collectionPath } from "../kube/reflector.ts";
import type { CliContext, RegisterCommand } from "./context.ts";
import { addKubectlOptions, type KubectlFlags, type PluginCluster, pluginCluster } from "./plugin-cluster.ts";

/** How kubectl names the kind in its answers: `deployment.dms.dev/<name>`. */
export const RESOURCE_PREFIX = "deployment.dms.dev";

/** The longest `--timeout` of `--wait`. */
const MAX_WAIT_MS = 3_600_000;
/** How often `--wait` reads the resource again. */
const WAIT_POLL_MS = 1000;

/** Argument parser: a Kubernetes object name (a DNS-1123 subdomain, at most 253 characters). */
export function resourceName(value: string): string {
  if (value.length > 253 || !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(value))
    throw new InvalidArgumentError(
      "must be the name of a Deployment resource: lower-case letters, digits, '-' and '.', at most 253 (see kubectl get dmsd).",
    );
  return value;
}

/** Flag parser of `--timeout`: a duration such as `30s`, `2m` or `1h`, from 1 s to 1 h. */
export function waitTimeout(value: string): number {
  const match = /^(\d+)(ms|s|m|h)$/.exec(value);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
  const ms = match ? Number(match[1]) * unit[match[2] as keyof typeof unit] : Number.NaN;
  if (!(ms >= 1000 && ms <= MAX_WAIT_MS))
    throw new InvalidArgumentError("must be a duration from 1s to 1h, e.g. 30s, 2m or 1h.");
  return ms;
}

/** The path of Deployment resource `name` in `namespace`. */
export function resourcePath(namespace: string, name: string): string {
  return `${collectionPath(DEPLOYMENTS, namespace)}/${encodeURIComponent(name)}`;
}

/**
 * Sets (a string) or removes (null) annotation `key` of the Deployment resource `name` with a
 * JSON merge patch of that annotation alone; resolves the patched object. A missing resource is
 * an Error saying how to list them.
 */
export async function patchAnnotation(
  cluster: PluginCluster,
  name: string,
  key: string,
  value: string | null,
  signal: AbortSignal,
): Promise<unknown> {
  try {
    return await cluster.client.request({
      method: "PATCH",
      path: resourcePath(cluster.namespace, name),
      contentType: PatchType.Merge,
      body: { metadata: { annotations: { [key]: value } } },
      signal,
    });
  } catch (error) {
    if (!isNotFound(error)) throw error;
    throw new Error(
      `Deployment resource ${cluster.namespace}/${name} not found: list them with kubectl get dmsd -n ${cluster.namespace} (or give -n <namespace>)`,
      { cause: error },
    );
  }
}

interface AnnotateFlags extends KubectlFlags {
  wait?: boolean;
  timeout?: number;
}

/** What a verb does to its annotation. */
interface Verb {
  name: string;
  description: string;
  annotation: string;
  /** The annotation's new value: a string sets it, null removes it. */
  value: () => string | null;
  /** What is printed after `deployment.dms.dev/<name>`. */
  done: string;
  /** The status field in which the operator acknowledges the value (`--wait` waits for it). */
  acknowledgedIn?: "lastHandledReconcileAt" | "lastHandledRolloutNow";
}

function registerVerb(verb: Verb): RegisterCommand {
  return (program, ctx) => {
    const command = program
      .command(verb.name)
      .description(verb.description)
      .argument("<name>", "the Deployment resource (kubectl get dmsd)", resourceName);
    addKubectlOptions(command);
    if (verb.acknowledgedIn)
      command
        .option("--wait", `wait until the operator acknowledges it (status.${verb.acknowledgedIn})`)
        .option("--timeout <duration>", "how long --wait waits, from 1s to 1h (default 60s)", waitTimeout);
    command.action(async (name: string, _flags: unknown, cmd: Command) => {
      const flags = cmd.optsWithGlobals<AnnotateFlags>();
      const cluster = pluginCluster(flags, ctx.env, `kubectl-dms-${verb.name}`);
      const value = verb.value();
      const patched = await patchAnnotation(cluster, name, verb.annotation, value, ctx.stopSignal);
      ctx.out(`${RESOURCE_PREFIX}/${name} ${verb.done}\n`);
      const annotations =
        isRecord(patched) && isRecord(patched.metadata) ? patched.metadata.annotations : undefined;
      if (
        verb.annotation !== ANNOTATION_PAUSED &&
        isRecord(annotations) &&
        annotations[ANNOTATION_PAUSED] === "true"
      )
        ctx.err(
          `note: ${RESOURCE_PREFIX}/${name} is suspended (${ANNOTATION_PAUSED}=true): the operator acts on it once resumed (kubectl dms resume ${name} -n ${cluster.namespace})\n`,
        );
      if (flags.wait && verb.acknowledgedIn && value !== null)
        await waitForAcknowledgement(cluster, name, verb.acknowledgedIn, value, flags.timeout ?? 60_000, ctx);
    });
  };
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
  try {
    for (;;) {
      const obj = await cluster.client.request({ method: "GET", path, signal });
      const status = isRecord(obj) && isRecord(obj.status) ? obj.status : {};
      if (status[field] === value) {
        const ready = Array.isArray(status.conditions)
          ? status.conditions.find((c) => isRecord(c) && c.type === "Ready")
          : undefined;
        const said = isRecord(ready)
          ? `Ready=${String(ready.status)} ${String(ready.reason)}: ${String(ready.message)}`
          : "no Ready condition yet";
        ctx.out(`${RESOURCE_PREFIX}/${name} acknowledged by the operator: ${said}\n`);
        return;
      }
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, WAIT_POLL_MS);
        signal.addEventListener(
          "abort",
          () => {
            clearTimeout(timer);
            reject(signal.reason);
          },
          { once: true },
        );
      });
    }
  } catch (error) {
    if (!deadline.aborted || ctx.stopSignal.aborted) throw error;
    throw new Error(
      `the operator did not acknowledge ${field}=${value} within ${timeoutMs / 1000}s: is it running, and does it watch namespace ${cluster.namespace}? (kubectl dms version; kubectl describe dmsd ${name} -n ${cluster.namespace})`,
      { cause: error },
    );
  }
}

const now = () => new Date().toISOString();

/** `reconcile <name>`: a new `dms.dev/reconcile-requested-at`. */
export const registerReconcileCommand = registerVerb({
  name: "reconcile",
  description: `ask the operator to reconcile a Deployment resource now: sets the annotation ${ANNOTATION_RECONCILE_REQUESTED_AT} to the current time; the operator acknowledges it in status.lastHandledReconcileAt`,
  annotation: ANNOTATION_RECONCILE_REQUESTED_AT,
  value: now,
  done: "reconcile requested",
  acknowledgedIn: "lastHandledReconcileAt",
});

/** `suspend <name>`: `dms.dev/paused=true`. */
export const registerSuspendCommand = registerVerb({
  name: "suspend",
  description: `suspend a Deployment resource: sets the annotation ${ANNOTATION_PAUSED}=true, and the operator makes no call to the service for it (deletion still works) until it is resumed`,
  annotation: ANNOTATION_PAUSED,
  value: () => "true",
  done: "suspended",
});

/** `resume <name>`: removes `dms.dev/paused`. */
export const registerResumeCommand = registerVerb({
  name: "resume",
  description: `resume a suspended Deployment resource: removes the annotation ${ANNOTATION_PAUSED}`,
  annotation: ANNOTATION_PAUSED,
  value: () => null,
  done: "resumed",
});

/** `rollout-now <name>`: a new `dms.dev/rollout-now`. */
export const registerRolloutNowCommand = registerVerb({
  name: "rollout-now",
  description: `let the change of a Deployment resource held outside its rollout windows go out now, once: sets the annotation ${ANNOTATION_ROLLOUT_NOW} to a new value (the current time); the operator acknowledges it in status.lastHandledRolloutNow`,
  annotation: ANNOTATION_ROLLOUT_NOW,
  value: now,
  done: "rollout-now requested",
  acknowledgedIn: "lastHandledRolloutNow",
});
