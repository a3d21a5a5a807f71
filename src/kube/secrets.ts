import type { SecretsPort } from "../reconcile/ports.ts";
import { isRecord } from "../runtime/json.ts";
import type { ObjectRef } from "../runtime/queue-records.ts";
import type { KubeClient } from "./client.ts";
import { isNotFound } from "./errors.ts";
import { isKubeObject, itemPath, type ResourceType } from "./object.ts";
import { WatchedResource, type WatchOptions } from "./scope.ts";

/** The core resource type `secrets`. */
export const SECRETS: ResourceType = { group: "", version: "v1", plural: "secrets" };

/** `Accept` asking the API server for lists of object metadata only. */
export const METADATA_LIST_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
/** `Accept` asking the API server for watch events carrying object metadata only. */
export const METADATA_WATCH_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

/** What the cache keeps of a Secret: its identity and version, nothing else. */
export interface SecretMeta {
  metadata: { namespace: string; name: string; resourceVersion: string };
}

/**
 * Keeps only namespace, name and resourceVersion. Annotations are dropped on purpose: `kubectl
 * apply` stores a Secret's whole manifest, values included, in `last-applied-configuration`.
 */
export function decodeSecretMeta(raw: unknown): SecretMeta | undefined {
  if (!isKubeObject(raw)) return undefined;
  const { namespace, name, resourceVersion } = raw.metadata;
  return { metadata: { namespace: namespace ?? "", name, resourceVersion } };
}

/** The outcome of reading one key of one Secret. */
export type SecretValueResult =
  | { kind: "found"; value: string }
  | { kind: "missing-secret"; namespace: string; name: string }
  | { kind: "missing-key"; namespace: string; name: string; key: string };

/** The outcome of reading some keys of one Secret: the values of those it has. */
export type SecretValuesResult =
  | { kind: "found"; values: Map<string, string> }
  | { kind: "missing-secret"; namespace: string; name: string };

/** Options of {@link KubeSecrets}. */
export interface KubeSecretsOptions extends WatchOptions {
  /** Namespaces to watch; empty or absent means all. */
  namespaces?: readonly string[];
}

/**
 * Change notifications and value reads for Secrets.
 *
 * Contract: `onChange` listeners receive the reference of every Secret added, updated or deleted
 * in scope (including the differences found by a relist); they never receive data. `has` answers
 * from the metadata cache. `getSecretValue` and `getSecretValues` always ask the API server (one
 * GET each) and resolve a typed result for a missing Secret or key; they reject only on other
 * failures, with errors that never contain a value.
 */
export class KubeSecrets extends WatchedResource<SecretMeta> {
  readonly #client: KubeClient;

  constructor(options: KubeSecretsOptions) {
    super(options.namespaces, options, {
      resource: SECRETS,
      decode: decodeSecretMeta,
      accept: { list: METADATA_LIST_ACCEPT, watch: METADATA_WATCH_ACCEPT },
    });
    this.#client = options.client;
  }

  /** Calls `listener` with the reference of each Secret that appears, changes or goes; returns the unsubscribe. */
  onChange(listener: (ref: ObjectRef) => void): () => void {
    const notify = (s: SecretMeta) => listener({ namespace: s.metadata.namespace, name: s.metadata.name });
    return this.cache.subscribe({ onAdd: notify, onUpdate: (_old, s) => notify(s), onDelete: notify });
  }

  /** True when the metadata cache has seen the Secret (it may lag the server). */
  has(ref: ObjectRef): boolean {
    return this.cache.get(ref.namespace, ref.name) !== undefined;
  }

  /** The Secret's resourceVersion in the metadata cache, undefined when not (yet) seen. */
  versionOf(ref: ObjectRef): string | undefined {
    return this.cache.get(ref.namespace, ref.name)?.metadata.resourceVersion;
  }

  /** The cached metadata of every Secret in scope (identity and resourceVersion only). */
  list(): SecretMeta[] {
    return this.cache.list();
  }

  /** GETs the Secret and returns the UTF-8 decoded value of `key`. */
  async getSecretValue(ref: ObjectRef, key: string, signal: AbortSignal): Promise<SecretValueResult> {
    const read = await this.getSecretValues(ref, [key], signal);
    if (read.kind === "missing-secret") return read;
    const value = read.values.get(key);
    if (value === undefined) return { kind: "missing-key", namespace: ref.namespace, name: ref.name, key };
    return { kind: "found", value };
  }

  /**
   * GETs the Secret once and returns the UTF-8 decoded values of those of `keys` it has (the
   * others are absent from `values`); the other keys' data is never decoded.
   */
  async getSecretValues(
    ref: ObjectRef,
    keys: readonly string[],
    signal: AbortSignal,
  ): Promise<SecretValuesResult> {
    let secret: unknown;
    try {
      // A name no Secret can have is not sent (itemPath refuses it as missing): "." would be read
      // as the namespace's whole list of Secrets (every value of every one), ".." as the namespace.
      secret = await this.#client.request({ method: "GET", path: itemPath(SECRETS, ref), signal });
    } catch (err) {
      if (isNotFound(err)) return { kind: "missing-secret", namespace: ref.namespace, name: ref.name };
      throw err;
    }
    const data = isRecord(secret) && isRecord(secret.data) ? secret.data : {};
    const values = new Map<string, string>();
    for (const key of keys) {
      const encoded = Object.hasOwn(data, key) ? data[key] : undefined;
      if (typeof encoded === "string") values.set(key, Buffer.from(encoded, "base64").toString("utf8"));
    }
    return { kind: "found", values };
  }
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
