/**
 * The one resource most reconciler unit tests reconcile: `default/agent`, an external image, and
 * the create body the service is sent for it.
 */
import type { CreateDeploymentBody } from "../../src/api/wire-requests.ts";
import type { DeploymentSpec } from "../../src/crd/schema.ts";

/** The resource's spec. */
export const SPEC: DeploymentSpec = {
  source: "external_docker",
  sourceConfig: { customUrl: "https://agent.example" },
  sourceRevisionConfig: { imageUri: "repo/agent:1" },
};

/** The service's deployment that {@link SPEC} describes: the body of its create. */
export const BODY: CreateDeploymentBody = {
  name: "agent",
  source: "external_docker",
  source_config: { custom_url: "https://agent.example" },
  source_revision_config: { image_uri: "repo/agent:1" },
};

/** The resource's namespace and name. */
export const REF = { namespace: "default", name: "agent" };
