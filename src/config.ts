/**
 * Typed, validated configuration from command-line flags and environment variables (flags win).
 * Each group has one function returning either the settings or every problem found, each a single
 * line naming the flag and the variable and saying how to fix it. Nothing here exits or logs.
 */
import { readFileSync } from "node:fs";
import type { TransportSettings } from "./api/transport.ts";

/** Environment variables as `process.env` holds them. */
export type Env = Readonly<Record<string, string | undefined>>;

/** Either valid settings or the list of problems that prevent them. */
export type ConfigResult<T> = { ok: true; config: T } | { ok: false; problems: string[] };

/** Environment variable of each service setting. */
export const SERVICE_ENV = {
  baseUrl: "DMS_BASE_URL",
  apiKey: "DMS_API_KEY",
  apiKeyFile: "DMS_API_KEY_FILE",
  tenantId: "DMS_TENANT_ID",
  apiKeyHeader: "DMS_API_KEY_HEADER",
  tenantHeader: "DMS_TENANT_HEADER",
  insecureSkipTlsVerify: "DMS_INSECURE_SKIP_TLS_VERIFY",
  timeoutMs: "DMS_TIMEOUT_MS",
  retries: "DMS_RETRIES",
  qps: "DMS_QPS",
  burst: "DMS_BURST",
} as const;

/** Service connection flags as commander parses them (camel-cased long names; values are strings). */
export interface ServiceFlags {
  baseUrl?: string;
  apiKey?: string;
  apiKeyFile?: string;
  tenantId?: string;
  apiKeyHeader?: string;
  tenantHeader?: string;
  insecureSkipTlsVerify?: boolean;
  timeoutMs?: string | number;
  retries?: string | number;
  qps?: string | number;
  burst?: string | number;
}

/**
 * How to reach the service. Assignable to `ServiceClientOptions`.
 * Holds the API key: log it only through {@link describeServiceConfig}.
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
  | "retries"
> & { qps: number; burst: number };

/** Reads a whole text file; injected so tests need no files when they do not want them. */
export type ReadTextFile = (path: string) => string;

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * Service connection settings from `flags`, falling back to `env`, then to defaults.
 *
 * Contract: never throws; returns every problem at once. The key comes from `--api-key`,
 * `DMS_API_KEY`, or a file (`--api-key-file` / `DMS_API_KEY_FILE`, e.g. a mounted Secret, trimmed);
 * giving both a key and a file is a problem, as is an empty or unreadable file (whose content never
 * appears in a problem). The key is optional: a service or simulator may run without one.
 */
export function serviceConfigFrom(
  flags: ServiceFlags,
  env: Env,
  readTextFile: ReadTextFile = (path) => readFileSync(path, "utf8"),
): ConfigResult<ServiceConfig> {
  const problems: string[] = [];
  const pick = (key: keyof typeof SERVICE_ENV): string | undefined =>
    pickSetting(flags[key as keyof ServiceFlags], env[SERVICE_ENV[key]]);
  const where = (key: keyof typeof SERVICE_ENV) => `${flagOf(key)} / ${SERVICE_ENV[key]}`;

  const baseUrl = checkBaseUrl(pick("baseUrl"), where("baseUrl"), problems);
  // Flags win as a group: `--api-key` must not clash with a DMS_API_KEY_FILE left in the environment.
  const keyFromFlags = flags.apiKey !== undefined || flags.apiKeyFile !== undefined;
  const apiKey = resolveApiKey(
    keyFromFlags ? flags.apiKey : pick("apiKey"),
    keyFromFlags ? flags.apiKeyFile : pick("apiKeyFile"),
    readTextFile,
    problems,
  );
  const tenantId = pick("tenantId");
  const apiKeyHeader = pick("apiKeyHeader") ?? "X-Api-Key";
  const tenantHeader = pick("tenantHeader") ?? "X-Tenant-Id";
  for (const [key, value] of [
    ["apiKeyHeader", apiKeyHeader],
    ["tenantHeader", tenantHeader],
  ] as const) {
    if (!HEADER_NAME.test(value)) {
      problems.push(`${where(key)}: ${JSON.stringify(value)} is not a valid header name, e.g. X-Api-Key`);
    }
  }
  const insecure = flags.insecureSkipTlsVerify ?? parseBool(pick("insecureSkipTlsVerify"));
  if (insecure === null) problems.push(`${where("insecureSkipTlsVerify")}: must be true or false`);

  const number = (key: "timeoutMs" | "retries" | "qps" | "burst", rule: NumberRule) =>
    parseNumber(pick(key), where(key), rule, problems);
  const config: ServiceConfig = {
    baseUrl: baseUrl ?? "",
    apiKey,
    tenantId,
    apiKeyHeader,
    tenantHeader,
    insecureSkipTlsVerify: insecure ?? false,
    timeoutMs: number("timeoutMs", {
      integer: true,
      min: 1,
      max: 600_000,
      fallback: 10_000,
      unit: "milliseconds",
    }),
    retries: number("retries", { integer: true, min: 0, max: 20, fallback: 4, unit: "retries" }),
    qps: number("qps", {
      integer: false,
      min: 0.001,
      max: 100_000,
      fallback: 20,
      unit: "requests per second",
    }),
    burst: number("burst", { integer: true, min: 1, max: 100_000, fallback: 40, unit: "requests" }),
  };
  return problems.length > 0 ? { ok: false, problems } : { ok: true, config };
}

/** The settings with the key replaced by whether one is set: safe to log or print. */
export function describeServiceConfig(config: ServiceConfig): Record<string, unknown> {
  const { apiKey, ...rest } = config;
  return { ...rest, apiKey: apiKey === undefined ? "(none)" : "(set)" };
}

/**
 * The text of a setting: the flag when given (a given empty flag counts, so it is reported as
 * invalid rather than silently replaced), else the environment variable unless unset or empty.
 * Boolean flags are not text and fall through to the environment.
 */
export function pickSetting(
  flag: string | number | boolean | undefined,
  fromEnv: string | undefined,
): string | undefined {
  if (flag !== undefined && typeof flag !== "boolean") return String(flag);
  return fromEnv === undefined || fromEnv === "" ? undefined : fromEnv;
}

/**
 * A boolean setting's text: true for `true`/`1`/`yes`, false for `false`/`0`/`no` (any case,
 * trimmed), undefined when not given, null when it is none of those.
 */
export function parseBool(value: string | undefined): boolean | undefined | null {
  if (value === undefined) return undefined;
  const v = value.trim().toLowerCase();
  if (["true", "1", "yes"].includes(v)) return true;
  if (["false", "0", "no"].includes(v)) return false;
  return null;
}

/** Whether `value` is a Kubernetes namespace name (a DNS-1123 label: at most 63 of a-z, 0-9, '-'). */
export function isNamespaceName(value: string): boolean {
  return value.length <= 63 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(value);
}

/** The long flag of a setting, e.g. `--base-url`. */
export function flagOf(key: keyof typeof SERVICE_ENV): string {
  return `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

function checkBaseUrl(value: string | undefined, where: string, problems: string[]): string | undefined {
  if (value === undefined) {
    problems.push(`${where}: required, e.g. https://api.example.com`);
    return undefined;
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    problems.push(`${where}: ${JSON.stringify(value)} is not a URL, e.g. https://api.example.com`);
    return undefined;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    problems.push(`${where}: must start with https:// or http://, got ${url.protocol}`);
  } else if (url.username !== "" || url.password !== "") {
    problems.push(`${where}: must not carry credentials; pass the key with --api-key-file or DMS_API_KEY`);
  } else if (url.search !== "" || url.hash !== "") {
    problems.push(`${where}: must not have a query or fragment, e.g. https://api.example.com`);
  } else {
    return value.replace(/\/+$/, "");
  }
  return undefined;
}

function resolveApiKey(
  key: string | undefined,
  file: string | undefined,
  readTextFile: ReadTextFile,
  problems: string[],
): string | undefined {
  const keyWhere = `${flagOf("apiKey")} / ${SERVICE_ENV.apiKey}`;
  const fileWhere = `${flagOf("apiKeyFile")} / ${SERVICE_ENV.apiKeyFile}`;
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

interface NumberRule {
  integer: boolean;
  min: number;
  max: number;
  fallback: number;
  unit: string;
}

function parseNumber(value: string | undefined, where: string, rule: NumberRule, problems: string[]): number {
  if (value === undefined) return rule.fallback;
  const n = Number(value.trim());
  const kind = rule.integer ? "an integer" : "a number";
  if (
    value.trim() === "" ||
    !Number.isFinite(n) ||
    (rule.integer && !Number.isInteger(n)) ||
    n < rule.min ||
    n > rule.max
  ) {
    problems.push(
      `${where}: must be ${kind} from ${rule.min} to ${rule.max} (${rule.unit}), got ${JSON.stringify(value)}; default ${rule.fallback}`,
    );
    return rule.fallback;
  }
  return n;
}
