/**
 * The cluster of the kubectl-shaped verbs (`status`, `reconcile`, `suspend`, `resume`,
 * `rollout-now`, `version`): found as kubectl finds it (`--kubeconfig`, else `KUBECONFIG`, else
 * `~/.kube/config`; `--context`), and the namespace as kubectl picks it (`-n`, else the context's,
 * else `default`; `-A` for every namespace where a verb lists).
 */
import { type Command, InvalidArgumentError } from "commander";
import type { Env } from "../config.ts";
import { isNamespaceName } from "../config.ts";
import { KubeClient } from "../kube/client.ts";
import { loadKubeConfig } from "../kube/config.ts";
import { defaultKubeconfig } from "./resource-cluster.ts";
import { UsageError } from "./usage-error.ts";

/** The kubectl flags of these verbs, as commander parses them. */
export interface KubectlFlags {
  kubeconfig?: string;
  context?: string;
  namespace?: string;
  allNamespaces?: boolean;
}

/** Help of `--kubeconfig` in these verbs. */
export const PLUGIN_KUBECONFIG_HELP =
  "path to the kubeconfig file (default: KUBECONFIG, else ~/.kube/config, as kubectl)";

/** Flag parser: a namespace name (a DNS-1123 label). */
export function namespaceName(value: string): string {
  if (!isNamespaceName(value))
    throw new InvalidArgumentError(
      "must be a namespace name: lower-case letters, digits and '-', at most 63.",
    );
  return value;
}

/**
 * Adds `--kubeconfig`, `--context` and `-n, --namespace` to `command`, and `-A, --all-namespaces`
 * when `allNamespaces` (a verb that lists).
 */
export function addKubectlOptions(command: Command, options: { allNamespaces?: boolean } = {}): Command {
  command
    .option(
      "-n, --namespace <ns>",
      "namespace (default: the kubeconfig context's, else default)",
      namespaceName,
    )
    .option("--kubeconfig <path>", PLUGIN_KUBECONFIG_HELP)
    .option("--context <name>", "kubeconfig context to use (default: its current context)");
  if (options.allNamespaces)
    command.option("-A, --all-namespaces", "every namespace (overrides -n and the context's namespace)");
  return command;
}

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
