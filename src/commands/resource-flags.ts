/**
 * The flags that say where the `<resource>` of `logs` and `revisions` is looked up, and their
 * help: light, for the commands' registration; resource-cluster.ts and resource-deployment.ts find
 * it.
 *
 * By default `<resource>` is a Deployment resource of the cluster found as kubectl finds it
 * (`--kubeconfig`, else `KUBECONFIG`, else `~/.kube/config`; `--context`; `-n`). `--service`
 * makes it the service's deployment of that name (on the service the flags and environment name),
 * `--connection <kind/name>` the deployment of that name on a connection's tenant. Whether
 * `DMS_BASE_URL` is set never decides it.
 */
import type { Command } from "commander";
import { namespaceArgument } from "./context.ts";

/** The flags of the lookup, as commander parses them. */
export interface ResourceLookupFlags {
  namespace?: string;
  kubeconfig?: string;
  context?: string;
  connection?: string;
  service?: boolean;
}

/** Help of `--kubeconfig` in these commands. */
export const RESOURCE_KUBECONFIG_HELP =
  "read the Deployment resource (and its connection) from this cluster (default: KUBECONFIG, else ~/.kube/config)";

/** Help of `--connection` in these commands. */
export const RESOURCE_CONNECTION_HELP =
  "ServiceConnection/<name> (of --namespace, else the kubeconfig context's) or ClusterServiceConnection/<name>, read with the Secret of its API key from the cluster (--kubeconfig, else KUBECONFIG, else ~/.kube/config); replaces --base-url, --api-key(-file), --tenant-id, --insecure-skip-tls-verify and --ca-file";

/**
 * Adds `-n`, `--kubeconfig`, `--context`, `--connection` and `--service` to `command`; `what` is
 * what `--connection` and `--service` make of `<resource>` ("the service's deployment name").
 */
export function addResourceLookupOptions(command: Command, what: string): Command {
  return command
    .option(
      "-n, --namespace <ns>",
      "namespace of the resource, and of a ServiceConnection (default: the kubeconfig context's, else default)",
      namespaceArgument,
    )
    .option("--kubeconfig <path>", RESOURCE_KUBECONFIG_HELP)
    .option("--context <name>", "kubeconfig context to use")
    .option(
      "--service",
      `<resource> is ${what} on the service of --base-url / DMS_BASE_URL, not a Deployment resource of the cluster`,
    )
    .option(
      "--connection <kind/name>",
      `<resource> is ${what} on this connection's tenant: ${RESOURCE_CONNECTION_HELP}`,
    );
}
