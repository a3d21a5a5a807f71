/**
 * The HTTP agents of one service client: its connections' pool (keep-alive, as Node's global
 * agents keep them), the CAs it trusts, and the proxy it goes through. One pair per client, so
 * per connection's settings: a connection's CA never reaches another's calls, and a changed CA
 * (a new client) starts from new connections. The Kubernetes API client has its own transport
 * (its kubeconfig's `proxy-url`) and never uses these.
 */
import { readFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import tls from "node:tls";

/** The proxy variables a service client honours, as Node's agents read them. */
export const PROXY_VARIABLES = [
  "HTTPS_PROXY",
  "https_proxy",
  "HTTP_PROXY",
  "http_proxy",
  "NO_PROXY",
  "no_proxy",
] as const;

/** The proxy variables of an environment (only those set and not empty). */
export type ProxyEnv = Partial<Record<(typeof PROXY_VARIABLES)[number], string>>;

/**
 * The first Node releases whose `http.Agent`/`https.Agent` take `proxyEnv` (Node's docs: added
 * in v24.5.0 and v22.21.0). On an older Node the option is ignored without a word, and calls
 * would silently bypass the proxy: {@link proxySupportProblem} refuses that instead.
 */
export const PROXY_SUPPORT_SINCE = { 22: 21, 24: 5 } as const;

/** The proxy variables of `env`, or undefined when none is set (no proxy at all). */
export function proxyEnvOf(env: Readonly<Record<string, string | undefined>>): ProxyEnv | undefined {
  const picked: ProxyEnv = {};
  for (const name of PROXY_VARIABLES) {
    const value = env[name];
    if (value !== undefined && value.trim() !== "") picked[name] = value.trim();
  }
  return Object.keys(picked).length > 0 ? picked : undefined;
}

/** Whether Node `version` (`22.21.0`) has the agents' built-in proxy support. */
export function nodeHasProxySupport(version: string): boolean {
  const [major = 0, minor = 0] = version.split(".").map(Number);
  if (major >= 25) return true;
  const since = PROXY_SUPPORT_SINCE[major as keyof typeof PROXY_SUPPORT_SINCE];
  return since !== undefined && minor >= since;
}

/**
 * What is wrong with the proxy settings of `proxyEnv` on Node `version`, each problem naming
 * the variable and the fix; empty when they can be used. A proxy URL is `http://` or
 * `https://` with a host (Node tunnels through no other kind), and a proxy needs a Node that
 * supports it.
 */
export function proxySupportProblem(proxyEnv: ProxyEnv | undefined, version: string): string[] {
  if (proxyEnv === undefined) return [];
  const problems: string[] = [];
  for (const name of PROXY_VARIABLES) {
    const value = proxyEnv[name];
    if (value === undefined || name.toLowerCase() === "no_proxy") continue;
    let url: URL | undefined;
    try {
      url = new URL(value);
    } catch {
      url = undefined;
    }
    if (!url || (url.protocol !== "http:" && url.protocol !== "https:") || url.hostname === "")
      problems.push(
        `${name}: ${JSON.stringify(redactProxyUrl(value))} is not an http:// or https:// proxy URL with a host, e.g. http://proxy.example.com:3128`,
      );
  }
  const proxies = PROXY_VARIABLES.some((n) => n.toLowerCase() !== "no_proxy" && proxyEnv[n] !== undefined);
  if (proxies && !nodeHasProxySupport(version))
    problems.push(
      `HTTPS_PROXY / HTTP_PROXY: set, but Node ${version} cannot send the service's calls through a proxy (its agents' proxy support came in Node 22.21 and 24.5); run on Node >= 22.21 (24.5 on Node 24), or unset the variables`,
    );
  return problems;
}

/** A proxy URL without its password, for messages and logs. */
export function redactProxyUrl(value: string): string {
  try {
    const url = new URL(value);
    if (url.password === "") return value;
    url.password = "REDACTED";
    return url.toString();
  } catch {
    return value.replace(/\/\/[^/@]*@/, "//REDACTED@");
  }
}

/** What {@link serviceAgents} builds from. */
export interface ServiceAgentOptions {
  /**
   * PEM certificates trusted in addition to Node's default roots: a private CA for a self-hosted
   * service, while the public service keeps working.
   */
  caBundle: string | undefined;
  /** The proxy variables to honour; undefined: no proxy. */
  proxyEnv: ProxyEnv | undefined;
}

/** got's `agent` option: one agent per protocol. */
export interface ServiceAgents {
  http: http.Agent;
  https: https.Agent;
}

/**
 * The agents of one client. Keep-alive with Node's global agents' settings (idle sockets closed
 * after 5 s, the newest reused first), so that an agent left behind by a rebuilt client lets its
 * sockets go on its own. The CA bundle is added to Node's default CAs
 * ({@link defaultCertificateAuthorities}): the `ca` option otherwise replaces them.
 */
export function serviceAgents(options: ServiceAgentOptions): ServiceAgents {
  const common = {
    keepAlive: true,
    timeout: 5_000,
    scheduling: "lifo" as const,
    ...(options.proxyEnv ? { proxyEnv: options.proxyEnv } : {}),
  };
  return {
    http: new http.Agent(common),
    https: new https.Agent({
      ...common,
      ...(options.caBundle === undefined
        ? {}
        : { ca: [...defaultCertificateAuthorities(), options.caBundle] }),
    }),
  };
}

/** What {@link defaultCertificateAuthorities} reads; Node's own by default. */
export interface DefaultCaSources {
  getCACertificates?: ((type: "default") => string[]) | undefined;
  rootCertificates: readonly string[];
  env: NodeJS.ProcessEnv;
  readFile: (path: string) => string;
}

const NODE_CA_SOURCES: DefaultCaSources = {
  getCACertificates: typeof tls.getCACertificates === "function" ? tls.getCACertificates : undefined,
  rootCertificates: tls.rootCertificates,
  env: process.env,
  readFile: (path) => readFileSync(path, "utf8"),
};

/**
 * The CAs a TLS client of this process trusts by default: Node's bundled roots, the system's
 * under `--use-system-ca`, and `NODE_EXTRA_CA_CERTS` (a TLS-inspecting proxy's CA, which every
 * call must trust), as `tls.getCACertificates("default")` gives them. A Node without that
 * function (before 22.15) gets the bundled roots and the certificates of the
 * `NODE_EXTRA_CA_CERTS` file, which Node itself would have added (an unreadable file is left
 * out, as Node leaves it out with a warning).
 */
export function defaultCertificateAuthorities(sources: DefaultCaSources = NODE_CA_SOURCES): string[] {
  if (sources.getCACertificates) return sources.getCACertificates("default");
  const extraFile = sources.env.NODE_EXTRA_CA_CERTS;
  let extra: string | undefined;
  try {
    // One entry may hold several PEM certificates: `ca` reads them all.
    extra = extraFile ? sources.readFile(extraFile) : undefined;
  } catch {
    extra = undefined;
  }
  return [...sources.rootCertificates, ...(extra === undefined ? [] : [extra])];
}
