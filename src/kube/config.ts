/**
 * Where the operator's Kubernetes credentials come from: an explicit kubeconfig (flag or
 * `KUBECONFIG`), else the pod's service account. Never client-node's `loadFromDefault()`, which
 * silently falls back to http://localhost:8080 and turns a misconfiguration into a confusing
 * connection error far from its cause.
 */
import { existsSync, readFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";

/** The standard mount of a pod's service account credentials. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** What the caller asks for: a kubeconfig path (the `--kubeconfig` flag) and a context in it. */
export interface KubeConfigRequest {
  kubeconfig?: string;
  context?: string;
}

/** Where to look; defaults are the process environment and {@link SERVICE_ACCOUNT_DIR}. */
export interface KubeConfigEnvironment {
  env?: NodeJS.ProcessEnv;
  serviceAccountDir?: string;
}

/** A loaded configuration and a description of its origin, for the start-up log line. */
export interface LoadedKubeConfig {
  config: KubeConfig;
  source: "kubeconfig" | "in-cluster";
  /** e.g. `kubeconfig /home/me/.kube/config, context kind-dev` or `in-cluster service account`. */
  description: string;
  /** The server URL the client will talk to. */
  server: string;
  /** The context's namespace, or the pod's namespace in a cluster; undefined when neither says. */
  namespace: string | undefined;
}

/**
 * Loads the Kubernetes configuration.
 *
 * Contract: `request.kubeconfig`, else the first non-empty path of `KUBECONFIG` (further paths
 * merged, as kubectl does); else in-cluster when `KUBERNETES_SERVICE_HOST`/`_PORT` are set and the
 * service account token and CA files exist. Throws an Error with one clear line when the file is
 * missing or unreadable, the context does not exist, the chosen context has no cluster server, or
 * there is no configuration at all. Never falls back to localhost.
 */
export function loadKubeConfig(
  request: KubeConfigRequest,
  where: KubeConfigEnvironment = {},
): LoadedKubeConfig {
  const env = where.env ?? process.env;
  const paths = request.kubeconfig
    ? [request.kubeconfig]
    : (env.KUBECONFIG ?? "").split(delimiter).filter((p) => p !== "");
  if (paths.length > 0)
    return fromFiles(paths, request.context, request.kubeconfig ? "--kubeconfig" : "KUBECONFIG");
  const inCluster = fromServiceAccount(env, where.serviceAccountDir ?? SERVICE_ACCOUNT_DIR);
  if (inCluster) {
    if (request.context) {
      throw new Error(`--context ${request.context} needs a kubeconfig: pass --kubeconfig or set KUBECONFIG`);
    }
    return inCluster;
  }
  throw new Error("no Kubernetes configuration: pass --kubeconfig or run in a cluster");
}

function fromFiles(paths: string[], context: string | undefined, origin: string): LoadedKubeConfig {
  const config = new KubeConfig();
  paths.forEach((path, index) => {
    if (!existsSync(path)) throw new Error(`kubeconfig ${path} (from ${origin}) does not exist`);
    const next = index === 0 ? config : new KubeConfig();
    try {
      next.loadFromFile(path);
    } catch (err) {
      throw new Error(`kubeconfig ${path} (from ${origin}) cannot be read: ${(err as Error).message}`, {
        cause: err,
      });
    }
    if (next !== config) config.mergeConfig(next, true);
  });
  if (context) {
    if (!config.getContextObject(context)) {
      const known = config.getContexts().map((c) => c.name);
      throw new Error(
        `context ${context} is not in ${paths.join(delimiter)} (contexts: ${known.join(", ") || "none"})`,
      );
    }
    config.setCurrentContext(context);
  }
  const current = config.getCurrentContext();
  const server = config.getCurrentCluster()?.server;
  if (!current || !server) {
    throw new Error(
      `kubeconfig ${paths.join(delimiter)} has no current context with a cluster server; pass --context`,
    );
  }
  return {
    config,
    source: "kubeconfig",
    description: `kubeconfig ${paths.join(delimiter)}, context ${current}`,
    server,
    namespace: config.getContextObject(current)?.namespace || undefined,
  };
}

function fromServiceAccount(env: NodeJS.ProcessEnv, dir: string): LoadedKubeConfig | undefined {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  const tokenFile = join(dir, "token");
  const caFile = join(dir, "ca.crt");
  if (!host || !port || !existsSync(tokenFile) || !existsSync(caFile)) return undefined;
  const server = `https://${host.includes(":") ? `[${host}]` : host}:${port}`;
  const namespaceFile = join(dir, "namespace");
  const namespace = existsSync(namespaceFile)
    ? readFileSync(namespaceFile, "utf8").trim() || undefined
    : undefined;
  const config = new KubeConfig();
  // The token file is re-read by client-node's file authenticator, so projected tokens rotate.
  config.loadFromOptions({
    clusters: [{ name: "in-cluster", server, caFile, skipTLSVerify: false }],
    users: [{ name: "in-cluster", authProvider: { name: "tokenFile", config: { tokenFile } } }],
    contexts: [{ name: "in-cluster", cluster: "in-cluster", user: "in-cluster", namespace }],
    currentContext: "in-cluster",
  });
  return { config, source: "in-cluster", description: "in-cluster service account", server, namespace };
}
