/**
 * What a test does to, and reads from, the API server as a user would: Deployment resources,
 * connections, Secrets and Events, over the project's own REST transport (no kubectl process per
 * poll, which would cost the 2-core test machine dearly while waiting for a condition).
 */

import type { RequestOptions } from "node:https";
import {
  CLUSTER_SERVICE_CONNECTION_PLURAL,
  type ConnectionKind,
  SERVICE_CONNECTION_KIND,
  SERVICE_CONNECTION_PLURAL,
} from "../../src/crd/connection-schema.ts";
import type { Condition, DeploymentSpec } from "../../src/crd/schema.ts";
import { KubeClient, PatchType } from "../../src/kube/client.ts";
import { loadKubeConfig } from "../../src/kube/config.ts";
import type { ConnectionObject } from "../../src/kube/connections.ts";
import { isNotFound } from "../../src/kube/errors.ts";
import { readInstallKey } from "../../src/kube/install-key.ts";
import { listItems } from "../../src/kube/listing.ts";
import type { DeploymentObject } from "../../src/kube/object.ts";
import { keyedSecretDigest, type SecretDigest } from "../../src/reconcile/secret-hash.ts";
import { httpsText, parseSamples, sumOf } from "../bench/probes.ts";
import { testKubeconfigPath, waitFor } from "./cluster.ts";

const DEPLOYMENTS = "/apis/dms.dev/v1alpha1/namespaces";

/** Path of a connection object: namespaced for a ServiceConnection, cluster-wide otherwise. */
function connectionPath(kind: ConnectionKind, name: string, namespace?: string): string {
  if (kind === SERVICE_CONNECTION_KIND) {
    if (!namespace) throw new Error(`a ${kind} needs a namespace`);
    return `${DEPLOYMENTS}/${namespace}/${SERVICE_CONNECTION_PLURAL}/${name}`;
  }
  return `/apis/dms.dev/v1alpha1/${CLUSTER_SERVICE_CONNECTION_PLURAL}/${name}`;
}

/** An Event about a resource, as `kubectl events` shows it. */
export interface SeenEvent {
  type: string;
  reason: string;
  note: string;
  reportingInstance: string;
  count: number;
}

/** Extra metadata of a resource created by a test. */
export interface ResourceMeta {
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
  finalizers?: string[];
}

/** An object with kstatus conditions: a Deployment resource or a connection. */
export type WithConditions = { status?: { conditions?: Condition[] } } | undefined;

/** The condition of `type` on `obj`, if any. */
export function conditionOf(obj: WithConditions, type: string): Condition | undefined {
  return obj?.status?.conditions?.find((c) => c.type === type);
}

/** True when `obj` has condition `type` with `status` (and `reason`, when given). */
export function hasCondition(
  obj: WithConditions,
  type: string,
  status: "True" | "False" | "Unknown",
  reason?: string,
): boolean {
  const c = conditionOf(obj, type);
  return c !== undefined && c.status === status && (reason === undefined || c.reason === reason);
}

/** A user of the cluster: creates, changes and reads resources, Secrets and Events. */
export class ClusterUser {
  readonly client: KubeClient;
  readonly #kube: ReturnType<typeof loadKubeConfig>["config"];

  constructor(kubeconfig: string = testKubeconfigPath()) {
    this.#kube = loadKubeConfig({ kubeconfig }).config;
    this.client = new KubeClient(this.#kube);
  }

  /**
   * Requests the API server has answered so far for `resource` with `verb` (e.g. `secrets`,
   * `GET`), from every client, as its own `apiserver_request_total` counts them.
   */
  async requestsServed(resource: string, verb: string): Promise<number> {
    const server = this.#kube.getCurrentCluster()?.server;
    if (!server) throw new Error("the kubeconfig names no server");
    const tls: RequestOptions = {};
    await this.#kube.applyToHTTPSOptions(tls);
    const samples = parseSamples(await httpsText(`${server}/metrics`, tls), "apiserver_request_total");
    return sumOf(samples, (l) => l.resource === resource && l.verb === verb);
  }

  /**
   * The secrets' digests of the operator whose install key is in `namespace` (its Lease's), as
   * it records them in status; the operator must have read (or created) the key already.
   */
  async secretDigest(namespace: string): Promise<SecretDigest> {
    return keyedSecretDigest(await readInstallKey(this.client, namespace, AbortSignal.timeout(10_000)));
  }

  /** `kubectl create` of a Deployment resource. */
  async create(namespace: string, name: string, spec: DeploymentSpec, meta: ResourceMeta = {}) {
    return (await this.client.request({
      method: "POST",
      path: `${DEPLOYMENTS}/${namespace}/deployments`,
      body: { apiVersion: "dms.dev/v1alpha1", kind: "Deployment", metadata: { name, ...meta }, spec },
    })) as DeploymentObject;
  }

  /** The resource as the API server has it now, or undefined. */
  async get(namespace: string, name: string): Promise<DeploymentObject | undefined> {
    try {
      return (await this.client.request({
        method: "GET",
        path: `${DEPLOYMENTS}/${namespace}/deployments/${name}`,
      })) as DeploymentObject;
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  /** A JSON merge patch of the resource (spec, annotations...), as `kubectl patch --type merge`. */
  async patch(namespace: string, name: string, patch: Record<string, unknown>) {
    return (await this.client.request({
      method: "PATCH",
      path: `${DEPLOYMENTS}/${namespace}/deployments/${name}`,
      contentType: PatchType.Merge,
      body: patch,
    })) as DeploymentObject;
  }

  /** Sets (or, with null, removes) annotations. */
  annotate(namespace: string, name: string, annotations: Record<string, string | null>) {
    return this.patch(namespace, name, { metadata: { annotations } });
  }

  /** `kubectl delete` (returns at once; finalizers may keep the object a while). */
  async delete(namespace: string, name: string): Promise<void> {
    await this.client.request({ method: "DELETE", path: `${DEPLOYMENTS}/${namespace}/deployments/${name}` });
  }

  /** Creates or replaces an Opaque Secret with string data. */
  async putSecret(namespace: string, name: string, data: Record<string, string>): Promise<void> {
    const path = `/api/v1/namespaces/${namespace}/secrets`;
    const body = { apiVersion: "v1", kind: "Secret", metadata: { name, namespace }, stringData: data };
    try {
      await this.client.request({ method: "PUT", path: `${path}/${name}`, body });
    } catch (error) {
      if (!isNotFound(error)) throw error;
      await this.client.request({ method: "POST", path, body });
    }
  }

  /**
   * Creates the ServiceConnection `tenant` of `namespace` to `baseUrl`, its key `apiKey` in the
   * Secret `tenant` (key `api-key`).
   */
  async createTenantConnection(namespace: string, baseUrl: string, apiKey: string): Promise<void> {
    await this.putSecret(namespace, "tenant", { "api-key": apiKey });
    await this.client.request({
      method: "POST",
      path: `${DEPLOYMENTS}/${namespace}/${SERVICE_CONNECTION_PLURAL}`,
      body: {
        apiVersion: "dms.dev/v1alpha1",
        kind: SERVICE_CONNECTION_KIND,
        metadata: { name: "tenant", namespace },
        spec: { baseUrl, apiKeySecretRef: { name: "tenant", key: "api-key" } },
      },
    });
  }

  /** The connection as the API server has it now, or undefined (`namespace`: a ServiceConnection's). */
  async connection(
    kind: ConnectionKind,
    name: string,
    namespace?: string,
  ): Promise<ConnectionObject | undefined> {
    try {
      return (await this.client.request({
        method: "GET",
        path: connectionPath(kind, name, namespace),
      })) as ConnectionObject;
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  /** Waits until the connection satisfies `check`; returns it. */
  waitForConnection(
    kind: ConnectionKind,
    name: string,
    namespace: string | undefined,
    check: (obj: ConnectionObject | undefined) => boolean,
    description: string,
    timeoutMs = 20_000,
  ): Promise<ConnectionObject> {
    return this.#waitSeen(
      () => this.connection(kind, name, namespace),
      (obj) => (obj && check(obj) ? obj : undefined),
      `${kind} ${name}: ${description}`,
      timeoutMs,
    );
  }

  /**
   * Reads until `accept` returns a value; on timeout the error also says what the conditions
   * last read were, so that a failure shows what the operator reported instead.
   */
  async #waitSeen<T extends WithConditions, R>(
    read: () => Promise<T>,
    accept: (obj: T) => R | undefined,
    description: string,
    timeoutMs: number,
  ): Promise<R> {
    let last: T | undefined;
    try {
      return await waitFor(
        async () => {
          last = await read();
          return accept(last);
        },
        { description, timeoutMs, intervalMs: 150 },
      );
    } catch (error) {
      const seen = (last?.status?.conditions ?? [])
        .map((c) => `${c.type}=${c.status} ${c.reason ?? ""}: ${c.message ?? ""}`)
        .join("; ");
      if (error instanceof Error && seen !== "") error.message += `; last seen: ${seen}`;
      throw error;
    }
  }

  /** Events about the resource `name` in `namespace`, oldest first. */
  async events(namespace: string, name: string): Promise<SeenEvent[]> {
    const list = await this.client.request({
      method: "GET",
      path: `/apis/events.k8s.io/v1/namespaces/${namespace}/events`,
    });
    return listItems(list)
      .map((raw) => raw as Record<string, unknown> & { regarding?: { name?: string } })
      .filter((e) => e.regarding?.name === name)
      .sort((a, b) => String(a.eventTime).localeCompare(String(b.eventTime)))
      .map((e) => ({
        type: String(e.type),
        reason: String(e.reason),
        note: String(e.note ?? ""),
        reportingInstance: String(e.reportingInstance ?? ""),
        count: (e.series as { count?: number } | undefined)?.count ?? 1,
      }));
  }

  /** Waits until the resource satisfies `check`; returns it. */
  waitFor(
    namespace: string,
    name: string,
    check: (obj: DeploymentObject | undefined) => boolean,
    description: string,
    timeoutMs = 20_000,
  ): Promise<DeploymentObject> {
    return this.#waitSeen(
      () => this.get(namespace, name),
      (obj) => (check(obj) ? (obj ?? ({} as DeploymentObject)) : undefined),
      `${namespace}/${name}: ${description}`,
      timeoutMs,
    );
  }

  /** Waits for Ready=True and Synced=True on the current generation. */
  waitReady(namespace: string, name: string, timeoutMs = 20_000): Promise<DeploymentObject> {
    return this.waitFor(
      namespace,
      name,
      (o) =>
        hasCondition(o, "Ready", "True") &&
        hasCondition(o, "Synced", "True") &&
        o?.status?.observedGeneration === o?.metadata.generation,
      "Ready and Synced",
      timeoutMs,
    );
  }

  /** Waits for an Event with `reason` about the resource; returns it. */
  waitForEvent(namespace: string, name: string, reason: string, timeoutMs = 20_000): Promise<SeenEvent> {
    return waitFor(async () => (await this.events(namespace, name)).find((e) => e.reason === reason), {
      description: `event ${reason} about ${namespace}/${name}`,
      timeoutMs,
      intervalMs: 150,
    });
  }
}
