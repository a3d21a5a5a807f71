/** The operator's access to Kubernetes: its kubeconfig (a file, or in-cluster), client and identity. */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { KubeClient } from "../kube/client.ts";
import { loadKubeConfig } from "../kube/config.ts";
import type { OperatorConfig, OperatorDeps } from "./operator-config.ts";

/** What the operator's parts reach Kubernetes with. */
export interface KubeAccess {
  client: KubeClient;
  /** The kubeconfig context's namespace (in-cluster: the pod's), if any. */
  namespace: string | undefined;
  /** This process, for leader election, events and shard leases: the pod's name and a random tail. */
  identity: string;
}

/** Loads the kubeconfig `config` names and says which. Throws one clear Error when Kubernetes is not configured. */
export function kubeAccess(config: OperatorConfig, deps: OperatorDeps): KubeAccess {
  const identity = deps.identity ?? `${config.podName ?? hostname()}_${randomBytes(4).toString("hex")}`;
  const kube = loadKubeConfig({
    ...(config.kubeconfig ? { kubeconfig: config.kubeconfig } : {}),
    ...(config.context ? { context: config.context } : {}),
  });
  deps.logger.info({ kubernetes: kube.description }, "Kubernetes configuration loaded");
  return { client: new KubeClient(kube.config), namespace: kube.namespace, identity };
}
