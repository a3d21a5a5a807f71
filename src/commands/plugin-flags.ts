/**
 * The kubectl flags of the kubectl-shaped verbs (`status`, `reconcile`, `suspend`, `resume`,
 * `rollout-now`, `version`): light, for their registration; plugin-cluster.ts reads the cluster
 * they name.
 */
import type { Command } from "commander";
import { namespaceArgument } from "./context.ts";

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

/**
 * Adds `--kubeconfig`, `--context` and, unless `namespace` is false (a verb that reads no
 * Deployment resource), `-n, --namespace` to `command`, and `-A, --all-namespaces` when
 * `allNamespaces` (a verb that lists).
 */
export function addKubectlOptions(
  command: Command,
  options: { allNamespaces?: boolean; namespace?: boolean } = {},
): Command {
  if (options.namespace !== false)
    command.option(
      "-n, --namespace <ns>",
      "namespace (default: the kubeconfig context's, else default)",
      namespaceArgument,
    );
  command
    .option("--kubeconfig <path>", PLUGIN_KUBECONFIG_HELP)
    .option("--context <name>", "kubeconfig context to use (default: its current context)");
  if (options.allNamespaces)
    command.option("-A, --all-namespaces", "every namespace (overrides -n and the context's namespace)");
  return command;
}
