/**
 * The adapters from the Kubernetes resources, Secrets and events to the reconciler's ports.
 */
import type { EventsPort, ResourcePort, SecretsPort, StoredResource } from "../reconcile/ports.ts";
import type { KubeDeployments } from "./deployments.ts";
import { ConflictError } from "./errors.ts";
import type { EventRecorder, EventRegarding } from "./events.ts";
import { type KubeObject, refOf } from "./object.ts";
import type { KubeSecrets } from "./secrets.ts";

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

/** Secret values, read live from the resource's own namespace; versions from the metadata watch. */
export function secretsPort(secrets: KubeSecrets): SecretsPort {
  return {
    read: async (namespace, name, key, signal) => {
      const result = await secrets.getSecretValue({ namespace, name }, key, signal);
      return result.kind === "found" ? { kind: "found", value: result.value } : { kind: result.kind };
    },
    readKeys: async (namespace, name, keys, signal) => {
      const result = await secrets.getSecretValues({ namespace, name }, keys, signal);
      return result.kind === "found" ? result : { kind: result.kind };
    },
    version: (namespace, name) => secrets.versionOf({ namespace, name }),
  };
}

/** Events about Deployment resources; recording never blocks or fails a reconcile. */
export function eventsPort(recorder: EventRecorder): EventsPort {
  return { record: (obj, event) => void recorder.record(regardingOf(obj, "Deployment"), event) };
}

/** What an event about one of the operator's own objects is regarding (`kind` when it has none). */
export function regardingOf(obj: KubeObject, kind: string): EventRegarding {
  return {
    apiVersion: obj.apiVersion ?? "dms.dev/v1alpha1",
    kind: obj.kind ?? kind,
    namespace: obj.metadata.namespace ?? "",
    name: obj.metadata.name,
    ...(obj.metadata.uid ? { uid: obj.metadata.uid } : {}),
    resourceVersion: obj.metadata.resourceVersion,
  };
}

function asObject(obj: StoredResource) {
  return { ...obj, metadata: { ...obj.metadata } };
}
