/**
 * The HTTP agents of one service client: its connections' pool (keep-alive, as Node's global
 * agents keep them), the CAs it trusts, and the proxy it goes through. One pair per client, so
 * per connection's settings: a connection's CA never reaches another's calls, and a changed CA
 * (a new client) starts from new connections. The Kubernetes API client has its own transport
 * (its kubeconfig's `proxy-url`) and never uses these.
 */
import type http from "node:http";
import type https from "node:https";
import type { LookupFunction } from "node:net";
import type { Duplex } from "node:stream";
import {
  type AddressPolicy,
  AddressRefusedError,
  checkedLookup,
  hostProblem,
  ipFamily,
} from "./address-policy.ts";
import { LOOKUPS, type LookupShares } from "./lookups.ts";

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
  /**
   * The addresses the agents may connect to (see `address-policy.ts`); undefined: any (the CLI,
   * which its user points at a service of their own).
   */
  addressPolicy?: AddressPolicy | undefined;
  /** The resolver of host names (`dns.lookup`; a test gives a stub). */
  resolve?: LookupFunction | undefined;
  /**
   * Whose lookups these are (see `lookups.ts`): given, the lookups of a name go within that
   * owner's share of {@link LOOKUPS} (or of `lookups`, a test's).
   */
  lookupOwner?: string | undefined;
  lookups?: LookupShares | undefined;
}

/** One agent per protocol. */
export interface ServiceAgents {
  readonly http: http.Agent;
  readonly https: https.Agent;
  /** Destroys every socket of both agents, in use or idle (a client replaced or dropped). */
  destroy(): void;
}

/**
 * The agents of one client. Keep-alive with Node's global agents' settings (idle sockets closed
 * after 5 s, the newest reused first); a client replaced or dropped destroys its agents'
 * sockets (`destroy`). The CA bundle is added to Node's default CAs
 * ({@link defaultCertificateAuthorities}), in one secure context ({@link trusting}). The HTTPS
 * agent is made when first asked for: a client of an `http://` service never loads TLS.
 */
export function serviceAgents(options: ServiceAgentOptions): ServiceAgents {
  const policy = options.addressPolicy;
  const resolve = options.resolve ?? (process.getBuiltinModule("node:dns").lookup as LookupFunction);
  const { lookupOwner: owner } = options;
  const shared = owner === undefined ? resolve : (options.lookups ?? LOOKUPS).lookupFor(owner, resolve);
  const lookup = policy ? checkedLookup(shared, policy) : undefined;
  const common = {
    keepAlive: true,
    timeout: 5_000,
    scheduling: "lifo" as const,
    ...(options.proxyEnv ? { proxyEnv: options.proxyEnv } : {}),
    // An agent's options override a request's: every direct connection resolves through it. A
    // connection to the proxy takes the proxy's own options, and the proxy resolves the host:
    // `guardHost` resolves it first, with the same check.
    ...(lookup ? { lookup } : {}),
  };
  const env = options.proxyEnv ?? {};
  const guarded = <A extends http.Agent>(agent: A, proxied: string | undefined): A => {
    if (policy && lookup) guardHost(agent, policy, proxied ? lookup : undefined);
    return agent;
  };
  const plain = process.getBuiltinModule("node:http") as typeof http;
  const httpAgent = guarded(new plain.Agent(common), env.HTTP_PROXY ?? env.http_proxy);
  let httpsAgent: https.Agent | undefined;
  return {
    http: httpAgent,
    get https() {
      const secure = process.getBuiltinModule("node:https") as typeof https;
      httpsAgent ??= guarded(
        new secure.Agent({ ...common, ...trusting(options.caBundle) }),
        env.HTTPS_PROXY ?? env.https_proxy,
      );
      return httpsAgent;
    },
    destroy() {
      httpAgent.destroy();
      httpsAgent?.destroy();
    },
  };
}

/**
 * The agent's option for the CAs it trusts besides Node's default ones: one secure context, made
 * once. Given the `ca` option instead, Node would make one for every new socket, parsing every
 * default root and the bundle again on the event loop (some 14 ms each), as often as the service
 * closes its connections.
 */
function trusting(caBundle: string | undefined): Pick<https.AgentOptions, "secureContext"> {
  if (caBundle === undefined) return {};
  const tls = process.getBuiltinModule("node:tls") as typeof import("node:tls");
  return { secureContext: tls.createSecureContext({ ca: [...defaultCertificateAuthorities(), caBundle] }) };
}

/**
 * Refuses, before any socket is made, a connection to a host `policy` refuses by its text: a
 * metadata service's name, or an IP literal (which no lookup sees). Through a proxy too: the
 * proxy would connect to it on the operator's behalf. And when the agent has a proxy
 * (`proxiedLookup`, the agent's checked lookup), a name is resolved here first and refused on
 * the same answers a direct connection is (a link-local or metadata address; with `public-only`,
 * loopback and private ones too) before anything reaches the proxy, which is still sent the name
 * (`CONNECT name:port`). A name the operator cannot resolve is not sent either. A host `NO_PROXY`
 * exempts is resolved twice (here, then by the direct connection), each answer checked.
 *
 * Best effort against a name whose answers change: the proxy resolves it again, and may get
 * another answer; the proxy's own egress rules are what holds then.
 */
function guardHost(agent: http.Agent, policy: AddressPolicy, proxiedLookup?: LookupFunction): void {
  const create = agent.createConnection.bind(agent);
  agent.createConnection = (options, callback?: (err: Error | null, stream: Duplex) => void) => {
    const host = options.host ?? options.hostname ?? "localhost";
    const problem = hostProblem(host, policy);
    const fail = (error: Error) => process.nextTick(() => callback?.(error, undefined as unknown as Duplex));
    if (problem !== undefined) {
      fail(new AddressRefusedError(problem));
      return undefined;
    }
    if (proxiedLookup === undefined || ipFamily(host.replace(/^\[|\]$/g, "")) !== 0)
      return create(options, callback);
    proxiedLookup(host, { all: true }, (error) => {
      if (error) return fail(error);
      const socket = create(options, callback);
      // The agent hands a socket over at once unless it waits for the proxy's tunnel, which
      // calls back itself when the tunnel is up (Node's `createSocket`); its callback runs once.
      if (socket && !waitsForTunnel(socket)) callback?.(null, socket);
    });
    return undefined;
  };
}

/** Whether Node's agent marked `socket` as waiting for a proxy's CONNECT tunnel. */
function waitsForTunnel(socket: Duplex): boolean {
  return Object.getOwnPropertySymbols(socket).some(
    (key) =>
      key.description === "kWaitForProxyTunnel" &&
      Boolean((socket as unknown as Record<symbol, unknown>)[key]),
  );
}

/**
 * The entries of a `NO_PROXY` list that Node's agents ignore, each with why and what to write
 * instead. Node matches a host, `host:port`, `.suffix`, `*.suffix`, `*` and an IPv4 range
 * `a.b.c.d-e.f.g.h`, always against the URL's host as written (never its resolved address): a
 * CIDR (`10.0.0.0/8`) never matches, nor does a bracketed IPv6 address (`[::1]`).
 */
export function ignoredNoProxyEntries(noProxy: string): { entry: string; fix: string }[] {
  const ignored: { entry: string; fix: string }[] = [];
  for (const raw of noProxy.split(",")) {
    const entry = raw.trim();
    const cidr = /^([0-9.]+)\/(\d{1,2})$/.exec(entry);
    if (cidr) {
      const range = ipv4Range(cidr[1] ?? "", Number(cidr[2]));
      ignored.push({
        entry,
        fix: range
          ? `write the range as ${range}, which Node matches against an IPv4 address in the base URL`
          : "write an IPv4 range as first-last, e.g. 10.0.0.0-10.255.255.255",
      });
    } else if (entry.includes("/"))
      ignored.push({ entry, fix: "Node matches no CIDR; list the host names (or .domain suffixes) instead" });
    else if (entry.startsWith("["))
      ignored.push({
        entry,
        fix: `write the IPv6 address without brackets (${entry.replace(/^\[|\](:\d+)?$/g, "")})`,
      });
  }
  return ignored;
}

/** `a.b.c.d/n` as Node's `first-last` range, or undefined when it is not an IPv4 CIDR. */
function ipv4Range(address: string, bits: number): string | undefined {
  const octets = address.split(".").map(Number);
  if (octets.length !== 4 || octets.some((o) => !Number.isInteger(o) || o > 255) || bits > 32)
    return undefined;
  const value = octets.reduce((n, o) => n * 256 + o, 0);
  const size = 2 ** (32 - bits);
  const first = value - (value % size);
  const text = (n: number) => [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join(".");
  return `${text(first)}-${text(first + size - 1)}`;
}

/** What {@link defaultCertificateAuthorities} reads; Node's own by default. */
export interface DefaultCaSources {
  getCACertificates?: ((type: "default") => string[]) | undefined;
  rootCertificates: readonly string[];
  env: NodeJS.ProcessEnv;
  readFile: (path: string) => string;
}

/** Node's own sources, read when first needed (loading TLS). */
function nodeCaSources(): DefaultCaSources {
  const tls = process.getBuiltinModule("node:tls") as typeof import("node:tls");
  return {
    getCACertificates: typeof tls.getCACertificates === "function" ? tls.getCACertificates : undefined,
    rootCertificates: tls.rootCertificates,
    env: process.env,
    readFile: (path) => process.getBuiltinModule("node:fs").readFileSync(path, "utf8"),
  };
}

/**
 * The CAs a TLS client of this process trusts by default: Node's bundled roots, the system's
 * under `--use-system-ca`, and `NODE_EXTRA_CA_CERTS` (a TLS-inspecting proxy's CA, which every
 * call must trust), as `tls.getCACertificates("default")` gives them. A Node without that
 * function (before 22.15) gets the bundled roots and the certificates of the
 * `NODE_EXTRA_CA_CERTS` file, which Node itself would have added (an unreadable file is left
 * out, as Node leaves it out with a warning).
 */
export function defaultCertificateAuthorities(sources: DefaultCaSources = nodeCaSources()): string[] {
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
