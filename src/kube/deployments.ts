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

/** A Deployment resource from the wire (see `decodeCustomResource`): undefined when unusable. */
export const decodeDeployment = (raw: unknown): DeploymentObject | undefined =>
  decodeCustomResource<DeploymentObject>(raw);

/** Options of {@link KubeDeployments}. */
export type KubeDeploymentsOptions = CustomResourcesOptions<DeploymentObject>;

/** Deployment resources in the operator's scope (see {@link CustomResources} for the contract). */
export class KubeDeployments extends CustomResources<DeploymentObject, DeploymentResourceStatus> {
  constructor(options: KubeDeploymentsOptions) {
    super(DEPLOYMENTS, options);
  }
}
