/**
 * The cluster as `plan` and `import` read it through `--kubeconfig`, the service clients of the
 * connections a command reads there (`--connection`, and for `plan` each resource's own
 * `spec.connectionRef`), and the `--connection` flag itself.
 */
import type { ServiceClient } from "../api/client.ts";
import {
  type Env,
  flagOf,
  SERVICE_ENV,
  type ServiceConfig,
  type ServiceFlags,
  serviceConfigFrom,
} from "../config.ts";
import { type ConnectionReadPorts, type ReadConnection, readConnection } from "../connection/read.ts";
import { parseConnectionArg, serviceConfigOf } from "../connection/settings.ts";
import { type ConnectionId, type ConnectionRef, connectionKey } from "../crd/conventions.ts";
import { type LoadedKubeConfig, loadKubeConfig } from "../kube/config.ts";
import { KubeSecrets } from "../kube/secrets.ts";
import { ClusterClient } from "./cluster-errors.ts";
import type { CliContext, ConnectionFlags } from "./context.ts";
import { serviceClientOf } from "./service-client.ts";
import { UsageError } from "./usage-error.ts";

/** A cluster a command reads (never writes). */
export interface CommandCluster extends ConnectionReadPorts {
  client: ClusterClient;
  secrets: KubeSecrets;
  /** The kubeconfig context's namespace, if it names one. */
  namespace: string | undefined;
  /** What the kubeconfig said, for messages: `kubeconfig <path>, context <name>`. */
  description: string;
}

/** The cluster of `kubeconfig` (and `context`): nothing is cached or watched. */
export function commandCluster(
  kubeconfig: string,
  context: string | undefined,
  userAgent: string,
): CommandCluster {
  return commandClusterOf(loadKubeConfig({ kubeconfig, ...(context ? { context } : {}) }), userAgent);
}

/**
 * `--connection`, parsed, and the cluster of `--kubeconfig` (and `--context`), as `plan` and
 * `import` read them: a cluster only when `--kubeconfig` is given, never the one the environment
 * points at. A {@link UsageError} for `--context` without `--kubeconfig`, and for the mistakes
 * {@link connectionFlag} finds.
 */
export function kubeconfigCluster(
  flags: ConnectionFlags,
  userAgent: string,
): { ref: ConnectionRef | undefined; kube: CommandCluster | undefined } {
  if (flags.context !== undefined && flags.kubeconfig === undefined)
    throw new UsageError(["--context needs --kubeconfig"]);
  // Not KUBECONFIG's files, as the other commands would read an empty one: here it is the cluster
  // the user named, or none (a gate must not plan against whatever cluster its runner points at).
  if (flags.kubeconfig === "")
    throw new UsageError([
      "--kubeconfig is empty: name the kubeconfig file of the cluster to read, or drop --kubeconfig to read none",
    ]);
  const ref = connectionFlag(flags);
  const kube =
    flags.kubeconfig === undefined ? undefined : commandCluster(flags.kubeconfig, flags.context, userAgent);
  return { ref, kube };
}

/** The cluster of a kubeconfig already loaded: nothing is cached or watched. */
export function commandClusterOf(kube: LoadedKubeConfig, userAgent: string): CommandCluster {
  const client = new ClusterClient(kube.config, kube, { userAgent });
  return {
    client,
    secrets: new KubeSecrets({ client }),
    namespace: kube.namespace,
    description: kube.description,
  };
}

/**
 * One service client per connection for the whole run: each connection and its Secret are read
 * once, on first use; a failure to read one is remembered too, so every resource using it gets
 * the same answer without asking the cluster again.
 */
export class ConnectionClients {
  readonly #ports: ConnectionReadPorts;
  readonly #defaults: () => ServiceConfig;
  readonly #client: (config: ServiceConfig) => ServiceClient;
  readonly #clients = new Map<string, Promise<ServiceClient>>();
  readonly #reads = new Map<string, Promise<ReadConnection>>();

  /**
   * `defaults` gives what a connection's spec leaves out (called once per connection, so a
   * command whose resources use none never validates them); `client` makes a client.
   */
  constructor(
    ports: ConnectionReadPorts,
    defaults: () => ServiceConfig,
    client: (config: ServiceConfig) => ServiceClient,
  ) {
    this.#ports = ports;
    this.#defaults = defaults;
    this.#client = client;
  }

  /** The client of connection `id`; rejects with a `ConnectionReadError` when it cannot be used. */
  client(id: ConnectionId, signal: AbortSignal): Promise<ServiceClient> {
    const key = connectionKey(id);
    let found = this.#clients.get(key);
    if (!found) {
      found = this.read(id, signal).then((read) =>
        this.#client(serviceConfigOf(read.spec, read.apiKey, this.#defaults(), read.caBundle)),
      );
      this.#clients.set(key, found);
    }
    return found;
  }

  /** Connection `id` as read (once per run); rejects as {@link ConnectionClients.client} does. */
  read(id: ConnectionId, signal: AbortSignal): Promise<ReadConnection> {
    const key = connectionKey(id);
    let found = this.#reads.get(key);
    if (!found) {
      found = readConnection(this.#ports, id, signal);
      this.#reads.set(key, found);
    }
    return found;
  }
}

/**
 * The connections' clients of a command reading them through `ports`: what a connection's spec
 * leaves out comes from the command's flags and environment, and each client is made as the
 * command's own (logging each request under `--verbose`).
 */
export function commandConnectionClients(
  ports: ConnectionReadPorts,
  flags: ConnectionFlags & { verbose?: boolean },
  ctx: CliContext,
): ConnectionClients {
  return new ConnectionClients(
    ports,
    () => connectionDefaultsFrom(flags, ctx.env),
    (config) => serviceClientOf(config, flags, ctx),
  );
}

/**
 * The service settings a connection gives (its spec and Secret): their flags cannot be combined
 * with `--connection`, and their environment variables do not apply to a connection.
 */
const CONNECTION_SETTINGS = [
  "baseUrl",
  "apiKey",
  "apiKeyFile",
  "tenantId",
  "insecureSkipTlsVerify",
  "caFile",
] as const;

/**
 * `--connection <kind/name>`, parsed, or undefined when not given. A {@link UsageError} lists
 * every mistake: a malformed value, no cluster to read it from (`hasCluster`: by default, whether
 * `--kubeconfig` is given; `logs` and `revisions` also find one as kubectl does), and the flags
 * whose settings the connection gives (refused rather than mixed: a key must never be sent to
 * another tenant's URL, and a flag that would be silently ignored is a trap).
 */
export function connectionFlag(
  flags: ConnectionFlags,
  hasCluster = flags.kubeconfig !== undefined,
): ConnectionRef | undefined {
  if (flags.connection === undefined) return undefined;
  const parsed = parseConnectionArg(flags.connection);
  const problems = parsed.ok ? [] : [parsed.problem];
  if (!hasCluster)
    problems.push(
      "--connection needs --kubeconfig: the connection and the Secret holding its API key are read from the cluster; add --kubeconfig <path> (and --context <name>)",
    );
  const given = CONNECTION_SETTINGS.filter((key) => flags[key] !== undefined).map((key) => flagOf(key));
  if (given.length > 0)
    problems.push(
      `${given.join(", ")}: not with --connection, whose spec and Secret give the service's URL, API key, tenant and TLS setting; drop ${given.length > 1 ? "them" : "it"}, or drop --connection to give the settings by flags`,
    );
  if (!parsed.ok || problems.length > 0) throw new UsageError(problems);
  return parsed.ref;
}

// serviceConfigOf replaces the URL: this one only satisfies serviceConfigFrom, which requires one.
const CONNECTION_URL_PLACEHOLDER = "https://connection.invalid";

/**
 * The settings a connection's spec leaves to the command's own (headers, QPS, burst, timeout,
 * retries): its flags and environment, without those a connection gives. A {@link UsageError}
 * when one of them is invalid.
 */
export function connectionDefaultsFrom(flags: ServiceFlags, env: Env): ServiceConfig {
  const own = (key: string) => !CONNECTION_SETTINGS.some((c) => c === key || SERVICE_ENV[c] === key);
  const kept = Object.fromEntries(Object.entries(flags).filter(([key]) => own(key)));
  const ownEnv = Object.fromEntries(Object.entries(env).filter(([key]) => own(key)));
  const result = serviceConfigFrom({ ...kept, baseUrl: CONNECTION_URL_PLACEHOLDER }, ownEnv);
  if (!result.ok) throw new UsageError(result.problems);
  return result.config;
}
