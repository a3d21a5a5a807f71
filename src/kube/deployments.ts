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
import type { ResourcePort, StoredResource } from "../reconcile/ports.ts";
import {
  Interner,
  internFields,
  isRecord,
  SharedObjects,
  shareEqualString,
  shareFrom,
} from "../runtime/json.ts";
import {
  type CustomResourceKind,
  CustomResources,
  type CustomResourcesOptions,
  decodeCustomResource,
} from "./custom-resources.ts";
import { ConflictError } from "./errors.ts";
import { type KubeObject, refOf } from "./object.ts";

export { LAST_APPLIED_ANNOTATION } from "./custom-resources.ts";

/** A Deployment resource as read from the API server: metadata name and resourceVersion are known. */
export type DeploymentObject = DeploymentResource & KubeObject;

/** The resource type `deployments.dms.dev`. */
export const DEPLOYMENTS: CustomResourceKind = { group: GROUP, version: VERSION, plural: PLURAL, kind: KIND };

/**
 * The strings shared by the Deployment resources decoded in this process (see {@link Interner}),
 * one table for every cache and command of the process, as values repeat across them. 1,024
 * strings hold the values many resources share; the rest are met once.
 */
const DEPLOYMENT_STRINGS = new Interner(1024);

/**
 * The objects and arrays shared by the Deployment resources decoded in this process (see
 * {@link SharedObjects}): a source configuration, a condition, the finalizer list that many
 * resources hold alike, held once and frozen.
 */
const DEPLOYMENT_OBJECTS = new SharedObjects(1024);

/**
 * A Deployment resource from the wire (see `decodeCustomResource`, which checks it and drops
 * what the operator never reads), undefined when unusable. The values most resources share
 * (apiVersion, kind, namespace, source, tenant, connection, the digest of no secrets, the reasons
 * and messages of settled conditions, the times to the second) are held once rather than once per
 * cached resource, in {@link DEPLOYMENT_STRINGS}, and so are the objects many share alike (the
 * source configuration, a condition set in the same second and the list of them, the finalizer
 * list), frozen, in {@link DEPLOYMENT_OBJECTS}. `raw` is not modified.
 */
export function decodeDeployment(raw: unknown): DeploymentObject | undefined {
  const strings = DEPLOYMENT_STRINGS;
  const objects = DEPLOYMENT_OBJECTS;
  const decoded = decodeCustomResource<DeploymentObject>(raw);
  if (!decoded) return undefined;
  internFields(strings, decoded.metadata, ["namespace", "creationTimestamp"]);
  if (Array.isArray(decoded.metadata.finalizers))
    decoded.metadata.finalizers = objects.of(decoded.metadata.finalizers);
  internFields(strings, decoded, ["apiVersion", "kind"]);
  const spec = internFields(strings, { ...decoded.spec }, ["source"]);
  if (isRecord(spec.sourceConfig)) spec.sourceConfig = objects.of(spec.sourceConfig);
  decoded.spec = spec;
  if (isRecord(decoded.status)) {
    const status = internFields(strings, { ...decoded.status }, [
      "connection",
      "tenantId",
      "remoteStatus",
      "latestRevisionStatus",
      "imageVersion",
      "appliedSecretsHash",
      "appliedSecretVersions",
      "createRequestedAt",
      "createdAt",
      "rolloutStartedAt",
    ]);
    // Once a rollout is done the active revision is the latest: one string for both.
    shareEqualString(status, "latestRevisionId", "activeRevisionId");
    // A settled resource's conditions say what every one says: one list for all set in that second.
    if (Array.isArray(status.conditions))
      status.conditions = objects.of(
        status.conditions.map((c) =>
          isRecord(c)
            ? objects.of(internFields(strings, { ...c }, ["reason", "message", "lastTransitionTime"]))
            : c,
        ),
      );
    shareRevisionStrings(status, decoded.spec.sourceRevisionConfig, strings);
    decoded.status = status;
  }
  return decoded;
}

/**
 * The live revision and the revision history repeat what the status and the spec already hold
 * (the active revision's id, the image or ref it deployed, the commit) and what every resource
 * shares (the digest of no secrets, the times to the second): held once, in place. At 10,000
 * resources that is about 3 MiB of the watch cache.
 */
function shareRevisionStrings(
  status: DeploymentResourceStatus,
  config: DeploymentObject["spec"]["sourceRevisionConfig"],
  strings: Interner,
): void {
  const ids = [status.activeRevisionId, status.latestRevisionId];
  const artifacts = [config?.imageUri, config?.repoRef, status.repoCommitSha];
  const share = (entry: Record<string, unknown>) => {
    shareFrom(entry, "id", ids);
    shareFrom(entry, "imageUri", artifacts);
    shareFrom(entry, "repoRef", artifacts);
    shareFrom(entry, "repoCommitSha", artifacts);
  };
  if (isRecord(status.activeRevision)) {
    const active = internFields(strings, { ...status.activeRevision }, ["deployedAt"]);
    share(active);
    status.activeRevision = active;
  }
  if (Array.isArray(status.revisionHistory))
    status.revisionHistory = status.revisionHistory.map((e) => {
      if (!isRecord(e)) return e;
      const entry = { ...e };
      share(entry);
      shareFrom(entry, "secretsHash", [status.appliedSecretsHash]);
      // The digest of no secrets (or of the same shared ones) is every such resource's.
      if (entry.secretsHash !== status.appliedSecretsHash) internFields(strings, entry, ["secretsHash"]);
      internFields(strings, entry, ["redeployedAt"]);
      return entry;
    });
}

/** Options of {@link KubeDeployments}. */
export type KubeDeploymentsOptions = CustomResourcesOptions<DeploymentObject>;

/** Deployment resources in the operator's scope (see {@link CustomResources} for the contract). */
export class KubeDeployments extends CustomResources<DeploymentObject, DeploymentResourceStatus> {
  constructor(options: KubeDeploymentsOptions) {
    super(DEPLOYMENTS, options, decodeDeployment);
  }
}

/**
 * Deployment resources: reads from the watch cache, claims from its index `claimIndex`, writes to
 * the API server under the resourceVersion read; 409s are conflicts.
 */
export function resourcePort(deployments: KubeDeployments, claimIndex: string): ResourcePort {
  return {
    get: (ref) => deployments.get(ref),
    claimants: (name) => deployments.byIndex(claimIndex, name),
    patchStatus: (obj, status, signal) =>
      deployments.patchStatus(refOf(obj), status, signal, obj.metadata.resourceVersion),
    addFinalizer: (obj, finalizer, signal) => deployments.addFinalizer(asObject(obj), finalizer, signal),
    removeFinalizer: (obj, finalizer, signal) =>
      deployments.removeFinalizer(asObject(obj), finalizer, signal),
    isConflict: (error) => error instanceof ConflictError,
  };
}

function asObject(obj: StoredResource) {
  return { ...obj, metadata: { ...obj.metadata } };
}
