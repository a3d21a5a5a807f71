/**
 * The cluster of the commands whose `<resource>` is a cluster resource by nature (`logs`,
 * `revisions`): found as kubectl finds it, `--kubeconfig`, else `KUBECONFIG` (its files merged,
 * as `run` merges them), else `~/.kube/config` when it exists; unless the user asked for the
 * service directly (`--base-url` or `DMS_BASE_URL`, and no `--kubeconfig`, `--context` or
 * `--connection`), in which case `<resource>` is the service's deployment name.
 *
 * `plan` and `import` do not use this: a pull-request gate must never plan against whatever
 * cluster its runner happens to point at, so they read a cluster only when given `--kubeconfig`.
 */
import { existsSync } from "node:fs";
import { delimiter, join } from "node:path";
import { type Env, pickSetting, SERVICE_ENV } from "../config.ts";
import { type KubeConfigRequest, loadKubeConfig } from "../kube/config.ts";
import { type CommandCluster, commandClusterOf } from "./connections.ts";
import { UsageError } from "./context.ts";

/** The flags that decide where `<resource>` is looked up. */
export interface ResourceClusterFlags {
  kubeconfig?: string;
  context?: string;
  connection?: string;
  baseUrl?: string;
}

/** Help of `--kubeconfig` in these commands. */
export const RESOURCE_KUBECONFIG_HELP =
  "read the Deployment resource (and its connection) from this cluster (default: KUBECONFIG, else ~/.kube/config when it exists, unless --base-url or DMS_BASE_URL names the service)";

/** Help of `--connection` in these commands. */
export const RESOURCE_CONNECTION_HELP =
  "ServiceConnection/<name> (of --namespace, else the kubeconfig context's) or ClusterServiceConnection/<name>, read with the Secret of its API key from the cluster (--kubeconfig, else KUBECONFIG, else ~/.kube/config); replaces --base-url, --api-key(-file), --tenant-id, --insecure-skip-tls-verify and --ca-file";

/**
 * The kubeconfig to read, as kubectl chooses it, or undefined when there is none: `--kubeconfig`,
 * else the paths of `KUBECONFIG`, else `~/.kube/config` (of `HOME`, else `USERPROFILE`) when it
 * exists. Only `env` is read, never the process's own environment.
 */
export function defaultKubeconfig(
  flags: Pick<ResourceClusterFlags, "kubeconfig" | "context">,
  env: Env,
): { request: KubeConfigRequest; env: Env } | undefined {
  const context = flags.context === undefined ? {} : { context: flags.context };
  if (flags.kubeconfig !== undefined)
    return { request: { kubeconfig: flags.kubeconfig, ...context }, env: {} };
  const paths = (env.KUBECONFIG ?? "").split(delimiter).filter((p) => p !== "");
  // Only KUBECONFIG is passed on: loadKubeConfig must not turn to a pod's service account here.
  if (paths.length > 0) return { request: context, env: { KUBECONFIG: env.KUBECONFIG } };
  const home = pickSetting(undefined, env.HOME) ?? pickSetting(undefined, env.USERPROFILE);
  const file = home === undefined ? undefined : join(home, ".kube", "config");
  if (file === undefined || !existsSync(file)) return undefined;
  return { request: { kubeconfig: file, origin: "~/.kube/config", ...context }, env: {} };
}

/**
 * The cluster `<resource>` is read from, or undefined when it is the service's deployment name
 * (see the module comment). A {@link UsageError} when `--context` is given and there is no
 * kubeconfig; `--connection` without one is left to `connectionFlag`, which says so with its
 * other mistakes. A kubeconfig that cannot be read is an error naming it.
 */
export function resourceCluster(
  flags: ResourceClusterFlags,
  env: Env,
  userAgent: string,
): CommandCluster | undefined {
  const askedForCluster =
    flags.kubeconfig !== undefined || flags.context !== undefined || flags.connection !== undefined;
  const serviceNamed =
    flags.baseUrl !== undefined || pickSetting(undefined, env[SERVICE_ENV.baseUrl]) !== undefined;
  if (!askedForCluster && serviceNamed) return undefined;
  const found = defaultKubeconfig(flags, env);
  if (!found) {
    if (flags.context !== undefined)
      throw new UsageError([
        `--context ${flags.context} needs a kubeconfig: pass --kubeconfig <path>, set KUBECONFIG, or create ~/.kube/config`,
      ]);
    return undefined;
  }
  return commandClusterOf(loadKubeConfig(found.request, { env: found.env }), userAgent);
}
