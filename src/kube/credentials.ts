/**
 * The credentials of one cluster and user, as the Kubernetes client applies them to each request
 * (`config.ts` reads them, once, from a kubeconfig or the pod's service account): TLS material and
 * a bearer token read by hand, files read again as they rotate; or, for what only
 * `@kubernetes/client-node` implements (exec plugins, auth providers, basic auth, impersonation,
 * a cluster's `proxy-url`), that library, imported on the first request only.
 */
import { readFileSync } from "node:fs";
import type { RequestOptions } from "node:https";

/** How long a token read from a file is used before the file is read again (client-go's period). */
export const TOKEN_FILE_REFRESH_MS = 60_000;

/**
 * The credentials of one cluster and user, as the transport applies them to each request.
 *
 * Contract: `applyToHTTPSOptions` sets the TLS options (`ca`, `cert`, `key`, `rejectUnauthorized`,
 * `servername`) and the authentication headers on `options`; it is called per request, so a
 * rotated token file is picked up within {@link TOKEN_FILE_REFRESH_MS}. It rejects when a
 * credential file cannot be read. client-node's `KubeConfig` satisfies this interface too.
 */
export interface KubeCredentials {
  getCurrentCluster(): { server: string } | null;
  applyToHTTPSOptions(options: RequestOptions): Promise<void>;
}

/** Bytes given inline (a kubeconfig's base64 `<field>-data`, which wins) or as a file. */
export type Material = { data: Buffer } | { file: string } | undefined;

function readMaterial(m: Material): Buffer | undefined {
  if (m === undefined) return undefined;
  return "data" in m ? m.data : readFileSync(m.file);
}

/** The cluster half of the credentials. */
export interface ClusterTls {
  server: string;
  ca: Material;
  insecure: boolean;
  tlsServerName: string | undefined;
  /** The cluster's `proxy-url` (http, https or socks5): only client-node tunnels through one. */
  proxyUrl?: string;
}

/** Where a user's bearer token comes from: inline, or a file read again as it rotates. */
export type BearerSource = { token: string } | { tokenFile: string };

/** A bearer token, inline or read from its file again once {@link TOKEN_FILE_REFRESH_MS} passed. */
class BearerToken {
  readonly #source: BearerSource;
  #read: { value: string; at: number } | undefined;

  constructor(source: BearerSource) {
    this.#source = source;
  }

  value(): string {
    if ("token" in this.#source) return this.#source.token;
    const now = Date.now();
    if (!this.#read || now - this.#read.at > TOKEN_FILE_REFRESH_MS) {
      this.#read = { value: readFileSync(this.#source.tokenFile, "utf8").trim(), at: now };
    }
    return this.#read.value;
  }
}

/** Client certificate, key and bearer token (inline or re-read from a file). */
export interface UserAuth {
  cert: Material;
  key: Material;
  token: BearerSource | undefined;
}

/** Credentials read by hand: TLS material and a bearer token. */
export class StaticCredentials implements KubeCredentials {
  readonly #tls: ClusterTls;
  readonly #user: UserAuth;
  readonly #token: BearerToken | undefined;

  constructor(tls: ClusterTls, user: UserAuth) {
    this.#tls = tls;
    this.#user = user;
    this.#token = user.token ? new BearerToken(user.token) : undefined;
  }

  getCurrentCluster(): { server: string; caFile?: string } {
    const { server, ca } = this.#tls;
    return ca && "file" in ca ? { server, caFile: ca.file } : { server };
  }

  async applyToHTTPSOptions(options: RequestOptions): Promise<void> {
    applyTls(options, this.#tls);
    const cert = readMaterial(this.#user.cert);
    const key = readMaterial(this.#user.key);
    if (cert) options.cert = cert;
    if (key) options.key = key;
    const token = this.#token?.value();
    if (token) options.headers = { ...plainHeaders(options), Authorization: `Bearer ${token}` };
  }
}

function applyTls(options: RequestOptions, tls: ClusterTls): void {
  if (tls.insecure) options.rejectUnauthorized = false;
  if (tls.tlsServerName) options.servername = tls.tlsServerName;
  const ca = readMaterial(tls.ca);
  if (ca) options.ca = ca;
}

function plainHeaders(options: RequestOptions): Record<string, unknown> {
  return options.headers && !Array.isArray(options.headers) ? { ...options.headers } : {};
}

/** What client-node is given of a user: its kubeconfig entry as read, its material resolved. */
export interface ClientNodeUser {
  /** The entry's `user` mapping (exec, auth-provider, username, password, as). */
  body: Record<string, unknown>;
  token: string | undefined;
  cert: Material;
  key: Material;
  bearer: BearerSource | undefined;
}

/**
 * A user that needs client-node (exec plugin, auth provider, basic auth, impersonation), or a
 * cluster reached through a `proxy-url`: the library is imported on the first request only, and
 * given the cluster and user as read by `config.ts`. (It sets the request's `agent` to one that
 * tunnels through the proxy; the transport keeps that agent.)
 */
export class ClientNodeCredentials implements KubeCredentials {
  readonly #tls: ClusterTls;
  readonly #user: ClientNodeUser | undefined;
  /** A `tokenFile` user behind a proxy: client-node would read the file once, we re-read it. */
  readonly #tokenFile: BearerToken | undefined;
  #config: Promise<KubeCredentials> | undefined;

  constructor(tls: ClusterTls, user: ClientNodeUser | undefined) {
    this.#tls = tls;
    this.#user = user;
    const source = user?.bearer;
    this.#tokenFile = source && "tokenFile" in source ? new BearerToken(source) : undefined;
  }

  getCurrentCluster(): { server: string } {
    return { server: this.#tls.server };
  }

  async applyToHTTPSOptions(options: RequestOptions): Promise<void> {
    this.#config ??= this.#load();
    await (await this.#config).applyToHTTPSOptions(options);
    const headers = plainHeaders(options);
    if (this.#tokenFile && headers.Authorization === undefined) {
      options.headers = { ...headers, Authorization: `Bearer ${this.#tokenFile.value()}` };
    }
  }

  async #load(): Promise<KubeCredentials> {
    const { KubeConfig } = await import("@kubernetes/client-node");
    const { ca, server, insecure, tlsServerName, proxyUrl } = this.#tls;
    const user = this.#user;
    const u = user?.body ?? {};
    const config = new KubeConfig();
    config.loadFromOptions({
      clusters: [
        {
          name: "cluster",
          server,
          skipTLSVerify: insecure,
          ...(tlsServerName ? { tlsServerName } : {}),
          ...(proxyUrl ? { proxyUrl } : {}),
          ...forClientNode(ca, "ca"),
        },
      ],
      users: [
        {
          name: "user",
          authProvider: u["auth-provider"],
          exec: u.exec,
          username: u.username as string | undefined,
          password: u.password as string | undefined,
          impersonateUser: u.as as string | undefined,
          token: user?.token,
          ...(user ? forClientNode(user.cert, "cert") : {}),
          ...(user ? forClientNode(user.key, "key") : {}),
        },
      ],
      contexts: [{ name: "context", cluster: "cluster", user: "user" }],
      currentContext: "context",
    });
    return config;
  }
}

/** `material` as client-node's `<prefix>File` or `<prefix>Data` (base64) field. */
function forClientNode(m: Material, prefix: "ca" | "cert" | "key"): Record<string, string> {
  if (!m) return {};
  return "file" in m ? { [`${prefix}File`]: m.file } : { [`${prefix}Data`]: m.data.toString("base64") };
}
