/**
 * Where the operator's Kubernetes credentials come from: an explicit kubeconfig (flag or
 * `KUBECONFIG`), else the pod's service account. Never client-node's `loadFromDefault()`, which
 * silently falls back to http://localhost:8080 and turns a misconfiguration into a confusing
 * connection error far from its cause.
 *
 * The common cases (service account; kubeconfig with client certificate, bearer token or token
 * file, CA, insecure-skip-tls-verify) are read here by hand: `@kubernetes/client-node` loads its
 * whole generated API on import, ~80 MiB of resident memory the operator never uses. Only a user
 * that needs what client-node alone implements (exec plugins, auth providers, basic auth,
 * impersonation, a cluster's `proxy-url`) loads it, lazily, on the first request. What is read
 * here once, `credentials.ts` applies to each request. `test/unit/kube-config-conformance.test.ts`
 * compares what both would send, shape by shape.
 */
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { delimiter, dirname, isAbsolute, join } from "node:path";
import { isRecord } from "../runtime/json.ts";
import {
  type BearerSource,
  ClientNodeCredentials,
  type ClientNodeUser,
  type ClusterTls,
  type KubeCredentials,
  type Material,
  StaticCredentials,
} from "./credentials.ts";

/** The standard mount of a pod's service account credentials. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** What the caller asks for: a kubeconfig path (the `--kubeconfig` flag) and a context in it. */
export interface KubeConfigRequest {
  kubeconfig?: string;
  context?: string;
  /** What named `kubeconfig`, for error messages (default `--kubeconfig`). */
  origin?: string;
}

/** Where to look; defaults are the process environment and {@link SERVICE_ACCOUNT_DIR}. */
export interface KubeConfigEnvironment {
  env?: NodeJS.ProcessEnv;
  serviceAccountDir?: string;
}

/** A loaded configuration and a description of its origin, for the start-up log line. */
export interface LoadedKubeConfig {
  config: KubeCredentials;
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
 * merged as kubectl does: the first file to name a cluster, user or context, or to set the current
 * context, wins; one that does not exist is skipped, unless none does); else in-cluster when
 * `KUBERNETES_SERVICE_HOST`/`_PORT` are set and the service account token and CA files exist.
 * Relative file paths in a kubeconfig are resolved against that file's directory; inline `*-data`
 * overrides the matching file, and `token` overrides `tokenFile` (kubectl's rules). Throws an
 * Error with one clear line when a file is missing, unreadable or malformed, the context does not
 * exist, the chosen context has no cluster server, or there is no configuration at all. Never
 * falls back to localhost.
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
    return fromFiles(
      paths,
      request.context,
      request.kubeconfig ? (request.origin ?? "--kubeconfig") : "KUBECONFIG",
    );
  const inCluster = fromServiceAccount(env, where.serviceAccountDir ?? SERVICE_ACCOUNT_DIR);
  if (inCluster) {
    if (request.context) {
      throw new Error(`--context ${request.context} needs a kubeconfig: pass --kubeconfig or set KUBECONFIG`);
    }
    return inCluster;
  }
  throw new Error("no Kubernetes configuration: pass --kubeconfig or run in a cluster");
}

/** A named entry of a kubeconfig list, with the directory of the file it came from. */
interface Entry {
  body: Record<string, unknown>;
  dir: string;
  file: string;
}

/** The merged content of the kubeconfig files: first occurrence wins. */
interface Merged {
  clusters: Map<string, Entry>;
  users: Map<string, Entry>;
  contexts: Map<string, Entry>;
  currentContext: string | undefined;
}

function fromFiles(paths: string[], context: string | undefined, origin: string): LoadedKubeConfig {
  const merged: Merged = {
    clusters: new Map(),
    users: new Map(),
    contexts: new Map(),
    currentContext: undefined,
  };
  // As kubectl, a file of KUBECONFIG that does not exist is skipped (none existing is an error).
  const existing = origin === "KUBECONFIG" ? paths.filter((path) => existsSync(path)) : [];
  const files = existing.length > 0 ? existing : paths;
  for (const path of files) mergeFile(merged, path, origin);
  const all = files.join(delimiter);
  if (context && !merged.contexts.has(context)) {
    const known = [...merged.contexts.keys()];
    throw new Error(`context ${context} is not in ${all} (contexts: ${known.join(", ") || "none"})`);
  }
  const current = context ?? merged.currentContext;
  const ctx = current ? merged.contexts.get(current) : undefined;
  const clusterName = ctx ? stringField(ctx, "cluster") : undefined;
  const cluster = clusterName ? merged.clusters.get(clusterName) : undefined;
  const server = cluster ? stringField(cluster, "server") : undefined;
  if (!current || !ctx || !cluster || !server) {
    throw new Error(`kubeconfig ${all} ${unusable(merged, current, clusterName, cluster)}`);
  }
  const userName = stringField(ctx, "user");
  const user = userName ? merged.users.get(userName) : undefined;
  const tls = clusterTls(cluster, server);
  return {
    config:
      tls.proxyUrl !== undefined || (user && needsClientNode(user))
        ? new ClientNodeCredentials(tls, user ? clientNodeUser(user) : undefined)
        : credentialsFor(tls, user),
    source: "kubeconfig",
    description: `kubeconfig ${all}, context ${current}`,
    server: tls.server,
    namespace: stringField(ctx, "namespace") || undefined,
  };
}

/**
 * What keeps the kubeconfig's context `current` from naming a server, and the fix: kubectl's
 * `use-context` or `--context` when there is no such context, the context or cluster to complete
 * otherwise (`--context` would not help a context that was asked for).
 */
function unusable(
  merged: Merged,
  current: string | undefined,
  clusterName: string | undefined,
  cluster: Entry | undefined,
): string {
  const contexts = [...merged.contexts.keys()].join(", ") || "none";
  if (!current)
    return `sets no current-context: pass --context <name> (contexts: ${contexts}), or pick one with kubectl config use-context`;
  if (!merged.contexts.has(current))
    return `has no context ${current}, its current-context (contexts: ${contexts}): pass --context <name>, or pick one with kubectl config use-context`;
  if (!clusterName)
    return `has a context ${current} that names no cluster: give it one, or pass another --context`;
  if (!cluster)
    return `has no cluster ${clusterName}, which context ${current} names: add it (kubectl config set-cluster), or pass another --context`;
  return `has a cluster ${clusterName} (of context ${current}) without a server: set its server (kubectl config set-cluster ${clusterName} --server=https://…), or pass another --context`;
}

function mergeFile(merged: Merged, path: string, origin: string): void {
  if (!existsSync(path)) throw new Error(`kubeconfig ${path} (from ${origin}) does not exist`);
  let doc: unknown;
  try {
    doc = parseKubeconfig(readFileSync(path, "utf8"));
  } catch (err) {
    throw new Error(`kubeconfig ${path} (from ${origin}) cannot be read: ${firstLine(err)}`, { cause: err });
  }
  if (doc === null || doc === undefined) return; // An empty file is an empty configuration.
  if (!isRecord(doc))
    throw new Error(`kubeconfig ${path} (from ${origin}) is not a kubeconfig: not a mapping`);
  const dir = dirname(path);
  for (const [list, key, target] of [
    ["clusters", "cluster", merged.clusters],
    ["users", "user", merged.users],
    ["contexts", "context", merged.contexts],
  ] as const) {
    const items = doc[list];
    if (items === undefined || items === null) continue;
    if (!Array.isArray(items))
      throw new Error(`kubeconfig ${path} (from ${origin}): ${list} must be a list, got ${typeof items}`);
    items.forEach((item, i) => {
      const name = isRecord(item) ? item.name : undefined;
      if (typeof name !== "string" || name === "")
        throw new Error(`kubeconfig ${path} (from ${origin}): ${list}[${i}].name is missing`);
      const body = (item as Record<string, unknown>)[key] ?? {};
      if (!isRecord(body))
        throw new Error(`kubeconfig ${path} (from ${origin}): ${list}[${i}].${key} must be a mapping`);
      if (!target.has(name)) target.set(name, { body, dir, file: path });
    });
  }
  const current = doc["current-context"];
  if (merged.currentContext === undefined && typeof current === "string" && current !== "")
    merged.currentContext = current;
}

/**
 * JSON (which is YAML, and what generated kubeconfigs often are) is parsed without loading the
 * YAML parser, ~10 MiB of resident memory that an in-cluster operator never needs; anything else
 * loads it, synchronously, here.
 */
function parseKubeconfig(text: string): unknown {
  if (/^\s*\{/.test(text)) {
    try {
      return JSON.parse(text);
    } catch {
      // Not JSON after all (YAML flow style): the YAML parser decides.
    }
  }
  const { parse } = createRequire(import.meta.url)("yaml") as typeof import("yaml");
  return parse(text);
}

function firstLine(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).split("\n")[0] ?? "";
}

/** A string field of an entry; a field of another type is a clear error naming it. */
function stringField(entry: Entry, field: string): string | undefined {
  const value = entry.body[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw new Error(`kubeconfig ${entry.file}: ${field} must be a string`);
  return value;
}

/** A file named in the kubeconfig, relative to the kubeconfig's own directory. */
function fileField(entry: Entry, field: string): string | undefined {
  const file = stringField(entry, field);
  return file ? (isAbsolute(file) ? file : join(entry.dir, file)) : undefined;
}

/** Bytes given inline (base64 `<field>-data`, which wins) or as a file `<field>`. */
function material(entry: Entry, field: string): Material {
  const data = stringField(entry, `${field}-data`);
  if (data) return { data: Buffer.from(data, "base64") };
  const file = fileField(entry, field);
  return file ? { file } : undefined;
}

function clusterTls(cluster: Entry, server: string): ClusterTls {
  return {
    server: server.replace(/\/+$/, ""),
    ca: material(cluster, "certificate-authority"),
    insecure: cluster.body["insecure-skip-tls-verify"] === true,
    tlsServerName: stringField(cluster, "tls-server-name") || undefined,
    ...(stringField(cluster, "proxy-url") ? { proxyUrl: stringField(cluster, "proxy-url") } : {}),
  };
}

/** True when `user` needs what only client-node implements. */
function needsClientNode(user: Entry): boolean {
  const b = user.body;
  return ["exec", "auth-provider", "username", "password", "as"].some(
    (k) => b[k] !== undefined && b[k] !== null,
  );
}

function credentialsFor(tls: ClusterTls, user: Entry | undefined): StaticCredentials {
  return new StaticCredentials(tls, {
    cert: user ? material(user, "client-certificate") : undefined,
    key: user ? material(user, "client-key") : undefined,
    token: user ? bearerSource(user) : undefined,
  });
}

/** Where a user's bearer token comes from: inline `token` wins over `tokenFile`, as in kubectl. */
function bearerSource(user: Entry): BearerSource | undefined {
  const token = stringField(user, "token");
  const tokenFile = fileField(user, "tokenFile") ?? fileField(user, "token-file");
  return token ? { token } : tokenFile ? { tokenFile } : undefined;
}

/** What client-node is given of `user`: its entry as read, its material resolved here. */
function clientNodeUser(user: Entry): ClientNodeUser {
  return {
    body: user.body,
    token: stringField(user, "token"),
    cert: material(user, "client-certificate"),
    key: material(user, "client-key"),
    bearer: bearerSource(user),
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
  // The token file is re-read (see credentials.ts), so projected tokens rotate.
  const config = new StaticCredentials(
    { server, ca: { file: caFile }, insecure: false, tlsServerName: undefined },
    { cert: undefined, key: undefined, token: { tokenFile } },
  );
  return { config, source: "in-cluster", description: "in-cluster service account", server, namespace };
}
