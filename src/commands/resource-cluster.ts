/**
 * The cluster of the commands whose `<resource>` is a cluster resource by nature (`logs`,
 * `revisions`): found as kubectl finds it, `--kubeconfig`, else `KUBECONFIG` (its files merged,
 * as `run` merges them), else `~/.kube/config` when it exists; unless `--service` asks for the
 * service's deployment of that name (see resource-flags.ts).
 *
 * `plan` and `import` do not use this: a pull-request gate must never plan against whatever
 * cluster its runner happens to point at, so they read a cluster only when given `--kubeconfig`.
 */
import { existsSync } from "node:fs";
import { delimiter, join } from "node:path";
import { type Env, pickSetting } from "../config.ts";
import { type KubeConfigRequest, loadKubeConfig } from "../kube/config.ts";
import { type CommandCluster, commandClusterOf } from "./connections.ts";
import type { ResourceLookupFlags } from "./resource-flags.ts";
import { UsageError } from "./usage-error.ts";

/** The flags that decide where `<resource>` is looked up (resource-flags.ts). */
export type ResourceClusterFlags = Omit<ResourceLookupFlags, "namespace">;

/**
 * The kubeconfig to read, as kubectl chooses it, or undefined when there is none: `--kubeconfig`,
 * else the paths of `KUBECONFIG`, else `~/.kube/config` (of `HOME`, else `USERPROFILE`) when it
 * exists. An empty `--kubeconfig` (`--kubeconfig="$UNSET"`) is none given, as kubectl reads it.
 * Only `env` is read, never the process's own environment.
 */
export function defaultKubeconfig(
  flags: Pick<ResourceClusterFlags, "kubeconfig" | "context">,
  env: Env,
): { request: KubeConfigRequest; env: Env } | undefined {
  const context = flags.context === undefined ? {} : { context: flags.context };
  if (flags.kubeconfig !== undefined && flags.kubeconfig !== "")
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
 * The cluster `<resource>` is read from, or undefined under `--service`, where it is the service's
 * deployment name (see the module comment). A {@link UsageError} naming the fixes when no
 * kubeconfig is found (or `--service` is combined with a cluster flag); `--connection` without one
 * is left to `connectionFlag`, which says so with its other mistakes. A kubeconfig that cannot be
 * read is an error naming it.
 */
export function resourceCluster(
  flags: ResourceClusterFlags,
  env: Env,
  userAgent: string,
): CommandCluster | undefined {
  if (flags.service) {
    // An empty --kubeconfig is none given (`--kubeconfig="$UNSET"`), as everywhere here.
    const clusterFlags = (["kubeconfig", "context", "connection"] as const).filter(
      (f) => flags[f] !== undefined && (f !== "kubeconfig" || flags[f] !== ""),
    );
    if (clusterFlags.length > 0)
      throw new UsageError([
        `--service reads the service's deployment of that name, not the cluster: drop ${clusterFlags.map((f) => `--${f}`).join(", ")}, or drop --service to read the Deployment resource`,
      ]);
    return undefined;
  }
  const found = defaultKubeconfig(flags, env);
  if (!found) {
    if (flags.context !== undefined)
      throw new UsageError([
        `--context ${flags.context} needs a kubeconfig: pass --kubeconfig <path>, set KUBECONFIG, or create ~/.kube/config`,
      ]);
    if (flags.connection !== undefined) return undefined;
    throw new UsageError([
      `no kubeconfig to read the Deployment resource from: pass --kubeconfig <path>, set KUBECONFIG, or create ~/.kube/config; or pass --service to read the service's deployment of that name`,
    ]);
  }
  return commandClusterOf(loadKubeConfig(found.request, { env: found.env }), userAgent);
}
