/**
 * `status [-n ns | -A]`: one screen of the operator's work, read from the cluster alone (no call
 * to the service): the Deployment resources grouped by their conditions (Stalled, not Ready,
 * Reconciling, Ready) with the reason and message of each, the changes held outside the rollout
 * windows and when they go out, the revisions that failed, and the connections with their
 * readiness. Under `run --sharded`, the replica that owns each resource (its
 * `shard.dms.dev/owner` label) and a drain under way.
 *
 * Bounded: at most {@link MAX_RESOURCES} resources and as many connections of each kind are read
 * (pages of {@link PAGE_SIZE}, each call under the client's timeout, all of them within
 * {@link STATUS_DEADLINE_MS}), at most {@link SECTION_ROWS} rows are printed per section (and the
 * opening of a held change is computed for those only), and each message is cut to one line of
 * {@link MESSAGE_WIDTH} characters with the printable rule (`api/printable.ts`).
 *
 * This module reads, loaded when `status` runs (status-resource.ts makes the views of what it read,
 * status-render.ts prints them); status.ts registers the command.
 */
import type { KubeClient } from "../kube/client.ts";
import { CLUSTER_SERVICE_CONNECTIONS, SERVICE_CONNECTIONS } from "../kube/connections.ts";
import { DEPLOYMENTS } from "../kube/custom-resources.ts";
import { KubeApiError } from "../kube/errors.ts";
import { listItems, listMeta } from "../kube/listing.ts";
import { collectionPath, type ResourceType } from "../kube/object.ts";
import type { CliContext } from "./context.ts";
import type { OutputFlags } from "./output.ts";
import { listingError, pluginCluster } from "./plugin-cluster.ts";
import type { KubectlFlags } from "./plugin-flags.ts";
import { renderStatusAs } from "./status-render.ts";
import {
  type ConnectionView,
  connectionView,
  type Listed,
  MAX_RESOURCES,
  PAGE_SIZE,
  STATUS_DEADLINE_MS,
} from "./status-resource.ts";

export { renderStatus, renderStatusAs, statusDocument } from "./status-render.ts";
export {
  type ConnectionView,
  columns,
  connectionView,
  heldUntil,
  MAX_RESOURCES,
  MESSAGE_WIDTH,
  OWNERS_NAMED,
  oneLine,
  PAGE_SIZE,
  type ResourceView,
  resourceView,
  SECTION_ROWS,
  STATUS_DEADLINE_MS,
} from "./status-resource.ts";

/** The objects of `type` (in `namespace`, or all), page after page, at most {@link MAX_RESOURCES}. */
async function listAll(
  client: KubeClient,
  type: ResourceType,
  namespace: string | undefined,
  signal: AbortSignal,
): Promise<Listed> {
  const items: unknown[] = [];
  let token: string | undefined;
  do {
    const page = await client.request({
      method: "GET",
      path: collectionPath(type, namespace),
      query: { limit: PAGE_SIZE, continue: token },
      signal,
    });
    items.push(...listItems(page));
    token = listMeta(page).continue;
  } while (token !== undefined && items.length < MAX_RESOURCES);
  return {
    items: items.slice(0, MAX_RESOURCES),
    truncated: token !== undefined || items.length > MAX_RESOURCES,
  };
}

/** A listing, or the line saying why it could not be read (not allowed, kind not installed). */
async function listOrSay(list: () => Promise<Listed>, what: string): Promise<Listed | string> {
  try {
    return await list();
  } catch (error) {
    if (error instanceof KubeApiError && (error.status === 403 || error.status === 404))
      return `cannot list ${what}: ${error.status === 403 ? "forbidden" : "not found (are the CRDs installed?)"}`;
    throw error;
  }
}
/** The flags of `status`, as commander parses them. */
export type StatusFlags = KubectlFlags & OutputFlags;

/** Runs `status` (see the module comment). */
export async function runStatus(flags: StatusFlags, ctx: CliContext): Promise<void> {
  const cluster = pluginCluster(flags, ctx.env, "kubectl-dms-status");
  const all = flags.allNamespaces === true;
  const namespace = all ? undefined : cluster.namespace;
  const deadline = AbortSignal.timeout(STATUS_DEADLINE_MS);
  const signal = AbortSignal.any([ctx.stopSignal, deadline]);
  const notes: string[] = [];
  const [resources, namespaced, clusterWide] = await Promise.all([
    listAll(cluster.client, DEPLOYMENTS, namespace, signal),
    listOrSay(() => listAll(cluster.client, SERVICE_CONNECTIONS, namespace, signal), "ServiceConnections"),
    listOrSay(
      () => listAll(cluster.client, CLUSTER_SERVICE_CONNECTIONS, undefined, signal),
      "ClusterServiceConnections",
    ),
  ]).catch((error: unknown) => {
    if (!deadline.aborted || ctx.stopSignal.aborted) throw listingError(error, cluster);
    throw new Error(
      `the API server did not list the resources and connections within ${STATUS_DEADLINE_MS / 1000} s (${cluster.description}): narrow with -n, or check the cluster`,
      { cause: error },
    );
  });
  const connections: ConnectionView[] = [];
  for (const [kind, listed] of [
    [SERVICE_CONNECTIONS.kind, namespaced],
    [CLUSTER_SERVICE_CONNECTIONS.kind, clusterWide],
  ] as const) {
    if (typeof listed === "string") notes.push(listed);
    else connections.push(...listed.items.flatMap((i) => connectionView(kind, i) ?? []));
  }
  const input = {
    scope: all ? "every namespace" : `namespace ${cluster.namespace}`,
    allNamespaces: all,
    namespace: cluster.namespace,
    resources,
    connections,
    notes,
    now: Date.now(),
  };
  ctx.out(renderStatusAs(flags, input, ctx));
}
