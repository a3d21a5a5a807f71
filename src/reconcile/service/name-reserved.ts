/**
 * A name the service will not create again: the service makes a tracing project of the same
 * name with every deployment, and deleting the deployment without `delete_tracing_project=true`
 * leaves it behind. A create of that name then answers 409, which no retry mends: the resource
 * says so (reason `NameReserved`, Stalled) with the ways out, instead of retrying blindly.
 *
 * The 409 is told from a name taken by a deployment in two ways (the error body's shape is not
 * in the spec, so it is read tolerantly): its message speaks of a (tracing) project, and a lookup
 * of the name lists no deployment of it. Anything else keeps the behaviour of any 409.
 */
import { isServiceError } from "../../api/errors.ts";

/**
 * Messages of a 409 that speak of the tracing project rather than of a deployment: "tracing
 * project", the service's older word for it ("tracer session"), or a project or session that
 * "already exists".
 */
const TRACING_PROJECT_CONFLICT = [
  /\btrac(?:ing|er)[\s_-]*(?:project|session)s?\b/i,
  /\b(?:project|session)\b.*\balready exists?\b/i,
];

/** True when `error` is a 409 whose message speaks of a tracing project (see the module's note). */
export function isTracingProjectConflict(error: unknown): boolean {
  if (!isServiceError(error, "conflict")) return false;
  const text = error.detail.slice(0, 4096);
  return TRACING_PROJECT_CONFLICT.some((pattern) => pattern.test(text));
}

/**
 * The create of `name` was refused because a tracing project of that name remains. The message
 * names the name and every way out; `cause` is the service's answer.
 */
export class NameReservedError extends Error {
  override readonly name = "NameReservedError";
  readonly deploymentName: string;
  constructor(deploymentName: string, cause: unknown) {
    super(nameReservedMessage(deploymentName), { cause });
    this.deploymentName = deploymentName;
  }
}

/** The message of the `NameReserved` condition: what is wrong and how to fix it. */
export function nameReservedMessage(name: string): string {
  return `the service refused to create "${name}": a tracing project of that name remains from a deployment deleted earlier without its tracing project. Delete the tracing project "${name}" in the service's UI (the operator tries again at its next resync, or now with the annotation dms.dev/reconcile-requested-at), or give this resource another spec.name; next time, set spec.deleteTracingProject: true with deletionPolicy: Delete so that deleting the resource deletes the tracing project too`;
}
