/**
 * The credentials of one cluster and user, as the Kubernetes client applies them to each request
 * (`config.ts` reads them, once, from a kubeconfig or the pod's service account): TLS material and
 * a bearer token read by hand, files read again as they rotate; or, for what only
 * `@kubernetes/client-node` implements (exec plugins, auth providers, basic auth, impersonation,
 * a cluster's `proxy-url`), that library, imported on the first request only.
 */
import { readFileSync } from "node:fs";
import type { RequestOptions } from "node:https";

/**
 * How long a credential read from a file (a token, a CA, a client certificate or key) is used
 * before the file is read again: client-go's period for a token file. A request between two reads
 * reads no file (a pod's CA bundle was read from disk on every request to the API server).
 */
export const TOKEN_FILE_REFRESH_MS = 60_000;

/**
 * The credentials of one cluster and user, as the transport applies them to each request.
 *
 * Contract: `applyToHTTPSOptions` sets the TLS options (`ca`, `cert`, `key`, `rejectUnauthorized`,
 * `servername`) and the authentication headers on `options`; the client calls it for a request
 * unless what it set last still holds (`appliedUntil`), so a rotated file is picked up within
 * {@link TOKEN_FILE_REFRESH_MS}. It rejects when a credential file cannot be read (and reads it
 * again on the next request). client-node's `KubeConfig` satisfies this interface too.
 */
export interface KubeCredentials {
  getCurrentCluster(): { server: string } | null;
  applyToHTTPSOptions(options: RequestOptions): Promise<void>;
  /**
   * Until when (`Date.now()`, ms) the options the last `applyToHTTPSOptions` set are what it
   * would set again (no file due for a re-read), read as that call returns: an implementation
   * that has it applies them before its first await. Without it, every request applies them.
   */
  appliedUntil?(): number;
}

/** Bytes given inline (a kubeconfig's base64 `<field>-data`, which wins) or as a file. */
export type Material = { data: Buffer } | { file: string } | undefined;

/** A file's bytes, read again once {@link TOKEN_FILE_REFRESH_MS} passed since the last read. */
class RereadFile {
  readonly #file: string;
  #read: { bytes: Buffer; at: number } | undefined;

  constructor(file: string) {
    this.#file = file;
  }

  /** Until when the last read's bytes are used (none read yet: already past). */
  freshUntil(): number {
    return this.#read ? this.#read.at + TOKEN_FILE_REFRESH_MS : Number.NEGATIVE_INFINITY;
  }

  /** The file's bytes: those of the last read while it is recent, else read now. */
  bytes(): Buffer {
    const now = Date.now();
    if (!this.#read || now - this.#read.at > TOKEN_FILE_REFRESH_MS) {
      // A failed read throws and keeps nothing: the next request reads again.
      this.#read = { bytes: readFileSync(this.#file), at: now };
    }
    return this.#read.bytes;
  }
}

/** Inline bytes, or a file's as {@link RereadFile} keeps them. */
type MaterialSource = { data: Buffer } | RereadFile | undefined;

function materialSource(m: Material): MaterialSource {
  return m === undefined || "data" in m ? m : new RereadFile(m.file);
}

function readMaterial(m: MaterialSource): Buffer | undefined {
  return m instanceof RereadFile ? m.bytes() : m?.data;
}

/** Until when `m`'s bytes stay those read last: for ever when given inline. */
function freshUntil(m: MaterialSource | BearerToken | undefined): number {
  const file = m instanceof BearerToken ? m.file : m;
  return file instanceof RereadFile ? file.freshUntil() : Number.POSITIVE_INFINITY;
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
  readonly #token: string | undefined;
  readonly file: RereadFile | undefined;
  #read: { bytes: Buffer; value: string } | undefined;

  constructor(source: BearerSource) {
    if ("token" in source) this.#token = source.token;
    else this.file = new RereadFile(source.tokenFile);
  }

  value(): string {
    if (!this.file) return this.#token ?? "";
    const bytes = this.file.bytes();
    // Decoded once a read: the same bytes give the same token.
    if (this.#read?.bytes !== bytes) this.#read = { bytes, value: bytes.toString("utf8").trim() };
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
  readonly #ca: MaterialSource;
  readonly #cert: MaterialSource;
  readonly #key: MaterialSource;
  readonly #token: BearerToken | undefined;

  constructor(tls: ClusterTls, user: UserAuth) {
    this.#tls = tls;
    this.#ca = materialSource(tls.ca);
    this.#cert = materialSource(user.cert);
    this.#key = materialSource(user.key);
    this.#token = user.token ? new BearerToken(user.token) : undefined;
  }

  getCurrentCluster(): { server: string; caFile?: string } {
    const { server, ca } = this.#tls;
    return ca && "file" in ca ? { server, caFile: ca.file } : { server };
  }

  async applyToHTTPSOptions(options: RequestOptions): Promise<void> {
    const { insecure, tlsServerName } = this.#tls;
    if (insecure) options.rejectUnauthorized = false;
    if (tlsServerName) options.servername = tlsServerName;
    const ca = readMaterial(this.#ca);
    if (ca) options.ca = ca;
    const cert = readMaterial(this.#cert);
    const key = readMaterial(this.#key);
    if (cert) options.cert = cert;
    if (key) options.key = key;
    const token = this.#token?.value();
    if (token) options.headers = { ...plainHeaders(options), Authorization: `Bearer ${token}` };
  }

  appliedUntil(): number {
    return Math.min(...[this.#ca, this.#cert, this.#key, this.#token].map(freshUntil));
  }
}

export function plainHeaders(options: RequestOptions): Record<string, unknown> {
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
