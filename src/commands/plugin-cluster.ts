/**
 * The cluster of the kubectl-shaped verbs (`status`, `reconcile`, `suspend`, `resume`,
 * `rollout-now`, `version`): found as kubectl finds it (`--kubeconfig`, else `KUBECONFIG`, else
 * `~/.kube/config`; `--context`), and the namespace as kubectl picks it (`-n`, else the context's,
 * else `default`; `-A` for every namespace where a verb lists). Their flags: plugin-flags.ts.
 */
import type { Env } from "../config.ts";
import type { KubeClient } from "../kube/client.ts";
import { loadKubeConfig } from "../kube/config.ts";
import { KubeApiError } from "../kube/errors.ts";
import { ClusterClient } from "./cluster-errors.ts";
import type { KubectlFlags } from "./plugin-flags.ts";
import { defaultKubeconfig } from "./resource-cluster.ts";
import { UsageError } from "./usage-error.ts";

/** A cluster to talk to and the namespace the verb is about. */
export interface PluginCluster {
  client: KubeClient;
  /** The namespace: `-n`, else the context's, else `default`. */
  namespace: string;
  /** What the kubeconfig said, for messages: `kubeconfig <path>, context <name>`. */
  description: string;
}

/**
 * The cluster of `flags` (see the module comment); a {@link UsageError} naming the fixes when
 * there is no kubeconfig, an Error with one line when it cannot be read.
 */
export function pluginCluster(flags: KubectlFlags, env: Env, userAgent: string): PluginCluster {
  const found = defaultKubeconfig(flags, env);
  if (!found)
    throw new UsageError([
      "no kubeconfig: pass --kubeconfig <path>, set KUBECONFIG, or create ~/.kube/config (as kubectl reads it)",
    ]);
  const loaded = loadKubeConfig(found.request, { env: found.env });
  return {
    client: new ClusterClient(loaded.config, loaded, {
      userAgent,
      timeoutMs: REQUEST_TIMEOUT_MS,
      forbidden: true,
    }),
    namespace: flags.namespace ?? loaded.namespace ?? "default",
    description: loaded.description,
  };
}

/** Each call to the API server ends within this: kubectl's own default is no timeout at all. */
export const REQUEST_TIMEOUT_MS = 30_000;

/**
 * `error`, thrown by a listing of Deployment resources, with the fixes named when it is the API
 * server's 404: it serves no such kind (the CRDs are not installed, or it is another cluster than
 * meant); any other error as it is.
 */
export function listingError(error: unknown, cluster: Pick<PluginCluster, "description">): unknown {
  if (!(error instanceof KubeApiError && error.status === 404)) return error;
  return notServedError(cluster, error);
}

/**
 * The error of a 404 on one Deployment resource: the kind not served at all when the API server's
 * discovery document does not list it (no CRDs: a 404 then says nothing of the name), else
 * `missing`, the resource's own. A failure to read the discovery document leaves `missing`.
 * What it reads is loaded here, on that path only: `version` and completion load this module too.
 */
export async function resourceNotFoundError(
  cluster: Pick<PluginCluster, "client" | "description">,
  missing: Error,
  signal: AbortSignal,
): Promise<Error> {
  const [{ servesType }, { DEPLOYMENTS }] = await Promise.all([
    import("../connection/read.ts"),
    import("../kube/custom-resources.ts"),
  ]);
  const served = await servesType(cluster.client, DEPLOYMENTS, signal).catch(() => true);
  return served ? missing : notServedError(cluster, missing);
}

const notServedError = (cluster: Pick<PluginCluster, "description">, cause: unknown) =>
  new Error(
    `the API server does not serve deployments.dms.dev (${cluster.description}): install the CRDs (the release's crds.yaml, or the Helm chart), or pick another cluster with --context or --kubeconfig`,
    { cause },
  );
