/**
 * The kubectl flags of the kubectl-shaped verbs (`status`, `reconcile`, `suspend`, `resume`,
 * `rollout-now`, `version`): light, for their registration; plugin-cluster.ts reads the cluster
 * they name.
 */
import { type Command, InvalidArgumentError } from "commander";
import { isNamespaceName } from "../setting.ts";

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
