/**
 * The Deployment resources (`deployments.dms.dev`): the custom resource adapter of
 * `custom-resources.ts` for the Deployment kind.
 */
import {
  type DeploymentResource,
  type DeploymentResourceStatus,
  GROUP,
  KIND,
  PLURAL,
  VERSION,
} from "../crd/schema.ts";
import { isRecord } from "../json.ts";
import {
  type CustomResourceKind,
  CustomResources,
  type CustomResourcesOptions,
  decodeCustomResource,
} from "./custom-resources.ts";
import type { KubeObject } from "./object.ts";

export { FIELD_MANAGER, LAST_APPLIED_ANNOTATION } from "./custom-resources.ts";

/** A Deployment resource as read from the API server: metadata name and resourceVersion are known. */
export type DeploymentObject = DeploymentResource & KubeObject;

/** The resource type `deployments.dms.dev`. */
export const DEPLOYMENTS: CustomResourceKind = { group: GROUP, version: VERSION, plural: PLURAL, kind: KIND };

/**
 * A Deployment resource from the wire (see `decodeCustomResource`, which checks it and drops
 * what the operator never reads), undefined when unusable. The values most resources share
 * (apiVersion, kind, namespace, source, tenant, the reasons and messages of settled conditions, the times
 * to the second) are held once rather than once per cached resource (see {@link SHARED}). `raw`
 * is not modified.
 */
export function decodeDeployment(raw: unknown): DeploymentObject | undefined {
  const decoded = decodeCustomResource<DeploymentObject>(raw);
  if (!decoded) return undefined;
  sharedFields(decoded.metadata, ["namespace", "creationTimestamp"]);
  sharedFields(decoded, ["apiVersion", "kind"]);
  decoded.spec = sharedFields({ ...decoded.spec }, ["source"]);
  if (isRecord(decoded.status)) {
    const status = sharedFields({ ...decoded.status }, ["tenantId", "remoteStatus", "latestRevisionStatus"]);
    // Once a rollout is done the active revision is the latest: one string for both.
    if (status.latestRevisionId !== undefined && status.activeRevisionId === status.latestRevisionId)
      status.activeRevisionId = status.latestRevisionId;
    if (Array.isArray(status.conditions))
      status.conditions = status.conditions.map((c) =>
        isRecord(c) ? sharedFields({ ...c }, ["reason", "message", "lastTransitionTime"]) : c,
      );
    decoded.status = status;
  }
  return decoded;
}

/** `obj` with the string values of `fields` taken from {@link SHARED} (in place). */
function sharedFields<T extends object>(obj: T, fields: ReadonlyArray<keyof T & string>): T {
  const record = obj as Record<string, unknown>;
  for (const field of fields) {
    const value = record[field];
    if (typeof value === "string") record[field] = SHARED.of(value);
  }
  return obj;
}

/**
 * One copy of equal strings: JSON.parse makes a new string for every value longer than a few
 * characters, so "the service's deployment matches the spec" was held 10,000 times for 10,000
 * settled resources (with the tenant id, the reason and the apiVersion, ~2.4 MiB of the cache).
 * The table is bounded: once full it starts again, so values met once (an id, a time) never
 * accumulate, and a shared value is back in it at its next decode.
 */
class SharedStrings {
  readonly #table = new Map<string, string>();
  readonly #max: number;

  constructor(max: number) {
    this.#max = max;
  }

  of(value: string): string {
    const known = this.#table.get(value);
    if (known !== undefined) return known;
    if (this.#table.size >= this.#max) this.#table.clear();
    this.#table.set(value, value);
    return value;
  }
}

const SHARED = new SharedStrings(1024);

/** Options of {@link KubeDeployments}. */
export type KubeDeploymentsOptions = CustomResourcesOptions<DeploymentObject>;

/** Deployment resources in the operator's scope (see {@link CustomResources} for the contract). */
export class KubeDeployments extends CustomResources<DeploymentObject, DeploymentResourceStatus> {
  constructor(options: KubeDeploymentsOptions) {
    super(DEPLOYMENTS, options, decodeDeployment);
  }
}
