/**
 * The cluster of the kubectl-shaped verbs (`status`, `reconcile`, `suspend`, `resume`,
 * `rollout-now`, `version`): found as kubectl finds it (`--kubeconfig`, else `KUBECONFIG`, else
 * `~/.kube/config`; `--context`), and the namespace as kubectl picks it (`-n`, else the context's,
 * else `default`; `-A` for every namespace where a verb lists). Their flags: plugin-flags.ts.
 */
import type { Env } from "../config.ts";
import { KubeClient } from "../kube/client.ts";
import { loadKubeConfig } from "../kube/config.ts";
import { KubeApiError } from "../kube/errors.ts";
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
    client: new KubeClient(loaded.config, { userAgent, timeoutMs: REQUEST_TIMEOUT_MS }),
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
export function listingError(error: unknown, cluster: PluginCluster): unknown {
  if (!(error instanceof KubeApiError && error.status === 404)) return error;
  return new Error(
    `the API server does not serve deployments.dms.dev (${cluster.description}): install the CRDs (the release's crds.yaml, or the Helm chart), or pick another cluster with --context or --kubeconfig`,
    { cause: error },
  );
}
