/**
 * The verbs that steer Deployment resources through their annotations, as `flux reconcile`,
 * `flux suspend` and `kubectl rollout pause` do: `reconcile` (`dms.dev/reconcile-requested-at`),
 * `suspend` and `resume` (`dms.dev/paused`), `rollout-now` (`dms.dev/rollout-now`), `rebuild`
 * (`dms.dev/rebuild-requested-at`, as `kubectl rollout restart` stamps a time). Each takes
 * several names, `--all` (every Deployment resource of the namespace) or `-l <selector>` (those
 * whose labels match), as `flux suspend --all` and `cmctl renew -l` do, of every namespace with
 * `-A` as `kubectl annotate --all -A`, and acts on each in turn.
 * Each change is one JSON merge patch of that annotation alone, so it never overwrites a
 * concurrent change of the spec or of another annotation (no read-modify-write of the object). The
 * operator reconciles on any annotation change (src/kube/object.ts, `specOrMetaChanged`) and acknowledges a
 * reconcile request, a rollout-now and a rebuild in `status.lastHandledReconcileAt`,
 * `status.lastHandledRolloutNow` and `status.lastHandledRebuildAt`; `--wait` waits for that
 * acknowledgement, of each resource.
 *
 * This module registers the verbs (their help needs nothing more); annotate-run.ts, loaded when
 * one runs, talks to the cluster.
 */
import { type Command, InvalidArgumentError } from "commander";
import type { Verb, VerbFlags } from "./annotate-run.ts";
import type { RegisterCommand } from "./context.ts";
import { addKubectlOptions } from "./plugin-flags.ts";
import { UsageError } from "./usage-error.ts";
import {
  ANNOTATION_PAUSED,
  ANNOTATION_REBUILD_REQUESTED_AT,
  ANNOTATION_RECONCILE_REQUESTED_AT,
  ANNOTATION_ROLLOUT_NOW,
} from "./words.ts";

/** The longest `--timeout` of `--wait`. */
const MAX_WAIT_MS = 3_600_000;

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

/** Argument parser of `<name...>`: each a Kubernetes object name (see {@link resourceName}). */
function resourceNames(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), resourceName(value)];
}

function registerVerb(verb: Verb): RegisterCommand {
  return (program, ctx) => {
    const command = program
      .command(verb.name)
      .description(verb.description)
      .argument("[name...]", "the Deployment resources (kubectl get dmsd)", resourceNames)
      .option("--all", "every Deployment resource of the namespace (of every namespace with -A)")
      .option(
        "-l, --selector <selector>",
        "the Deployment resources whose labels match, e.g. team=payments or 'tier in (web,api)'",
      );
    addKubectlOptions(command, { allNamespaces: true });
    if (verb.acknowledgedIn)
      command
        .option("--wait", `wait until the operator acknowledges it (status.${verb.acknowledgedIn}), for each`)
        .option(
          "--timeout <duration>",
          "how long --wait waits for each, from 1s to 1h (default 60s)",
          waitTimeout,
        );
    command.action(async (names: string[] | undefined, _flags: unknown, cmd: Command) => {
      const flags = cmd.optsWithGlobals<VerbFlags>();
      // The wait is asked for, not implied: a timeout alone would turn it on, and with it exit 1 on
      // a timeout, in a command that otherwise returns once patched.
      if (flags.timeout !== undefined && !flags.wait)
        throw new UsageError(["--timeout applies to --wait: add --wait"]);
      const { runVerb } = await import("./annotate-run.ts");
      await runVerb(verb, names ?? [], flags, ctx);
    });
  };
}

/** The current time in RFC 3339 (UTC, milliseconds): a new value at each call a millisecond apart. */
const now = () => new Date().toISOString();

/** `reconcile <name...>`: a new `dms.dev/reconcile-requested-at`. */
export const registerReconcileCommand = registerVerb({
  name: "reconcile",
  description: `ask the operator to reconcile Deployment resources now: sets the annotation ${ANNOTATION_RECONCILE_REQUESTED_AT} to the current time; the operator acknowledges it in status.lastHandledReconcileAt`,
  annotation: ANNOTATION_RECONCILE_REQUESTED_AT,
  value: now,
  done: "reconcile requested",
  acknowledgedIn: "lastHandledReconcileAt",
});

/** `suspend <name...>`: `dms.dev/paused=true`. */
export const registerSuspendCommand = registerVerb({
  name: "suspend",
  description: `suspend Deployment resources: sets the annotation ${ANNOTATION_PAUSED}=true, and the operator makes no call to the service for them (deletion still works) until they are resumed`,
  annotation: ANNOTATION_PAUSED,
  value: () => "true",
  done: "suspended",
});

/** `resume <name...>`: removes `dms.dev/paused`. */
export const registerResumeCommand = registerVerb({
  name: "resume",
  description: `resume suspended Deployment resources: removes the annotation ${ANNOTATION_PAUSED}`,
  annotation: ANNOTATION_PAUSED,
  value: () => null,
  done: "resumed",
});

/** `rollout-now <name...>`: a new `dms.dev/rollout-now`. */
export const registerRolloutNowCommand = registerVerb({
  name: "rollout-now",
  description: `let the change of Deployment resources held outside their rollout windows go out now, once: sets the annotation ${ANNOTATION_ROLLOUT_NOW} to a new value (the current time); the operator acknowledges it in status.lastHandledRolloutNow`,
  annotation: ANNOTATION_ROLLOUT_NOW,
  value: now,
  done: "rollout-now requested",
  acknowledgedIn: "lastHandledRolloutNow",
});

/** `rebuild <name...>`: a new `dms.dev/rebuild-requested-at`. */
export const registerRebuildCommand = registerVerb({
  name: "rebuild",
  description: `build a new revision of Deployment resources now from their current configuration (a tracked branch's head, the same image), as kubectl rollout restart restarts pods: sets the annotation ${ANNOTATION_REBUILD_REQUESTED_AT} to the current time (RFC 3339); the operator creates one revision through the service's rebuild route, held by rollout windows like any revision, and acknowledges it in status.lastHandledRebuildAt`,
  annotation: ANNOTATION_REBUILD_REQUESTED_AT,
  value: now,
  done: "rebuild requested",
  acknowledgedIn: "lastHandledRebuildAt",
});
