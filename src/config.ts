/**
 * Typed, validated configuration from command-line flags and environment variables (flags win).
 * Each group has one function returning either the settings or every problem found, each a single
 * line naming the flag and the variable and saying how to fix it. Nothing here exits or logs.
 * A setting is a row of a table ({@link Setting}): its variable, its parser (which holds its bound,
 * also as the JSON schema of its chart value), its default, its help and its chart value. The
 * rows and how a table is read are in setting.ts, the service's rows in service-settings.ts (light:
 * a command's `--help` is built from them), re-exported here; what reads the service's settings
 * whole (the key and CA files, the proxies) is here; `run`'s rows, with the service's, are the
 * table of `commands/settings.ts`.
 */
import { type ProxyEnv, proxyEnvOf, proxySupportProblem } from "./api/agent.ts";
import type { TransportSettings } from "./api/client-options.ts";
import { parseCaBundle } from "./api/tls.ts";
import { SERVICE_ENV, SERVICE_SETTINGS } from "./service-settings.ts";
import { type Env, flagOf, pickSetting, readSettings, settingName } from "./setting.ts";

export { SERVICE_ENV, SERVICE_FLAG_SETTINGS } from "./service-settings.ts";
export type { Env, Setting, Settings, SettingValues } from "./setting.ts";
export { defaultOf, flagOf, pickSetting, readSettings, settingName } from "./setting.ts";

/** Either valid settings or the list of problems that prevent them. */
export type ConfigResult<T> = { ok: true; config: T } | { ok: false; problems: string[] };

/** Service connection flags as commander parses them (camel-cased long names; values are strings). */
export interface ServiceFlags {
  baseUrl?: string;
  apiKey?: string;
  apiKeyFile?: string;
  tenantId?: string;
  apiKeyHeader?: string;
  tenantHeader?: string;
  insecureSkipTlsVerify?: boolean;
  caFile?: string;
  timeoutMs?: string | number;
  maxResponseBytes?: string | number;
  retries?: string | number;
  qps?: string | number;
  burst?: string | number;
}

/**
 * How to reach the service. Assignable to `ServiceClientOptions`. Holds the API key: never logged.
 */
export type ServiceConfig = Pick<
  TransportSettings,
  | "baseUrl"
  | "apiKey"
  | "tenantId"
  | "apiKeyHeader"
  | "tenantHeader"
  | "insecureSkipTlsVerify"
  | "timeoutMs"
  | "maxResponseBytes"
  | "retries"
> & {
  qps: number;
  burst: number;
  /** PEM certificates trusted besides Node's default roots (`--ca-file`, a connection's CA). */
  caBundle?: string;
  /** The proxy variables of the environment (`HTTPS_PROXY`, `NO_PROXY`, …), when any is set. */
  proxyEnv?: ProxyEnv;
};

/**
 * What the service settings get wrong before anything is sent, for the CLI's commands and `run`
 * alike, each naming where the value came from and the fix: a base URL ending in `/v2` (every
 * route already starts with it: the requests would go to `/v2/v2/…` and answer 404), and no API
 * key for a service off this machine (the simulator on loopback may run without one). The key's
 * line says how to give one; its caller says what happens without it.
 */
export function serviceSettingProblems(
  config: Pick<ServiceConfig, "baseUrl" | "apiKey">,
  flags: Pick<ServiceFlags, "baseUrl">,
): { baseUrl?: string; apiKey?: string } {
  let url: URL | undefined;
  try {
    url = new URL(config.baseUrl);
  } catch {
    // serviceConfigFrom has said what is wrong with it.
    return {};
  }
  const urlFrom = flags.baseUrl !== undefined ? flagOf("baseUrl") : SERVICE_ENV.baseUrl;
  return {
    ...(/\/v2\/?$/i.test(url.pathname)
      ? {
          baseUrl: `${urlFrom} ${config.baseUrl} ends in /v2: drop /v2 (the routes are {base URL}/v2/…), e.g. ${config.baseUrl.replace(/\/v2\/?$/i, "")}`,
        }
      : {}),
    ...(config.apiKey === undefined && !isLoopback(url.hostname)
      ? {
          apiKey: `no API key for ${url.origin}: set ${SERVICE_ENV.apiKeyFile} to a file holding it (or ${SERVICE_ENV.apiKey}), or pass ${flagOf("apiKeyFile")} <path>`,
        }
      : {}),
  };
}

/** Whether `hostname` (as `URL` gives it) is this machine's loopback. */
function isLoopback(hostname: string): boolean {
  return hostname === "localhost" || hostname === "[::1]" || /^127(\.\d{1,3}){3}$/.test(hostname);
}

/** Reads a whole text file; injected so tests need no files when they do not want them. */
export type ReadTextFile = (path: string) => string;
/**
 * Service connection settings from `flags`, falling back to `env`, then to defaults.
 *
 * Contract: never throws; returns every problem at once. The key comes from `--api-key`,
 * `DMS_API_KEY`, or a file (`--api-key-file` / `DMS_API_KEY_FILE`, e.g. a mounted Secret, trimmed);
 * giving both a key and a file is a problem, as is an empty or unreadable file (whose content never
 * appears in a problem). The key is optional: a service or simulator may run without one.
 * `--ca-file` / `DMS_CA_FILE` names PEM certificates trusted besides Node's default roots: an
 * unreadable file, one that is not PEM certificates (the problem names the bad one), or one given
 * with `--insecure-skip-tls-verify` is a problem. The proxy variables (`HTTPS_PROXY`,
 * `HTTP_PROXY`, `NO_PROXY`, either case) of `env` are kept; a proxy URL that is not one, or a
 * proxy on a Node without proxy support (`nodeVersion`), is a problem.
 */
export function serviceConfigFrom(
  flags: ServiceFlags,
  env: Env,
  readTextFile: ReadTextFile = (path) => process.getBuiltinModule("node:fs").readFileSync(path, "utf8"),
  nodeVersion: string = process.versions.node,
): ConfigResult<ServiceConfig> {
  const { values, problems } = readSettings(SERVICE_SETTINGS, flags, env);
  // Flags win as a group: `--api-key` must not clash with a DMS_API_KEY_FILE left in the environment.
  const keyFromFlags = flags.apiKey !== undefined || flags.apiKeyFile !== undefined;
  const fromEnv = (key: "apiKey" | "apiKeyFile") => pickSetting(undefined, env[SERVICE_ENV[key]]);
  const apiKey = resolveApiKey(
    keyFromFlags ? flags.apiKey : fromEnv("apiKey"),
    keyFromFlags ? flags.apiKeyFile : fromEnv("apiKeyFile"),
    readTextFile,
    problems,
  );
  const caFile = pickSetting(flags.caFile, env[SERVICE_ENV.caFile]);
  const caBundle = caFile === undefined ? undefined : readCaFile(caFile, readTextFile, problems);
  if (caFile !== undefined && values.insecureSkipTlsVerify)
    problems.push(
      `${settingName("caFile", SERVICE_ENV.caFile)} and ${settingName("insecureSkipTlsVerify", SERVICE_ENV.insecureSkipTlsVerify)}: give one of them: a CA to verify the service's certificate with, or (a test service only) no verification`,
    );
  const proxyEnv = proxyEnvOf(env);
  problems.push(...proxySupportProblem(proxyEnv, nodeVersion));
  if (problems.length > 0) return { ok: false, problems };
  return {
    ok: true,
    config: {
      ...values,
      baseUrl: values.baseUrl ?? "",
      apiKey,
      ...(caBundle === undefined ? {} : { caBundle }),
      ...(proxyEnv === undefined ? {} : { proxyEnv }),
    },
  };
}

/** The PEM text of `--ca-file`, checked as a CA bundle; undefined (and a problem) when it is not one. */
function readCaFile(file: string, readTextFile: ReadTextFile, problems: string[]): string | undefined {
  const where = settingName("caFile", SERVICE_ENV.caFile);
  let content: string;
  try {
    content = readTextFile(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "unreadable";
    problems.push(
      `${where}: cannot read ${file} (${code}); point it at the PEM file of the CA that signs the service's certificate`,
    );
    return undefined;
  }
  const parsed = parseCaBundle(content, `${where} ${file}`);
  if (!parsed.ok) {
    problems.push(parsed.problem);
    return undefined;
  }
  return content;
}

function resolveApiKey(
  key: string | undefined,
  file: string | undefined,
  readTextFile: ReadTextFile,
  problems: string[],
): string | undefined {
  const keyWhere = settingName("apiKey", SERVICE_ENV.apiKey);
  const fileWhere = settingName("apiKeyFile", SERVICE_ENV.apiKeyFile);
  if (key !== undefined && file !== undefined) {
    problems.push(`${keyWhere} and ${fileWhere}: give one of them, not both`);
    return undefined;
  }
  if (file === undefined) return key?.trim() || undefined;
  let content: string;
  try {
    content = readTextFile(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "unreadable";
    problems.push(`${fileWhere}: cannot read ${file} (${code}); point it at the file holding the API key`);
    return undefined;
  }
  const trimmed = content.trim();
  if (trimmed === "") problems.push(`${fileWhere}: ${file} is empty; it must hold the API key`);
  return trimmed || undefined;
}
