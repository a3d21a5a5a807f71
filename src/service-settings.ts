/**
 * The service's settings as rows of a {@link Settings} table (setting.ts): the settings of every
 * command that calls the service, each with its variable, parser, default, help and chart value,
 * and their flags in the order `--help` lists them. The table is read whole in config.ts.
 *
 * Light, as setting.ts: a command's registration (its `--help`) builds the service flags from
 * these rows, so this module loads no HTTP, TLS or client module; keep it so.
 */
import { DEFAULT_MAX_RESPONSE_BYTES } from "./api/errors.ts";
import { baseUrlProblems, headerNameProblem } from "./crd/connection-rules.ts";
import { type Parsed, parsers, type Settings } from "./setting.ts";

const { text, boolean, number } = parsers;

/**
 * The settings of every command that calls the service, as rows of a {@link Settings} table: its
 * variable (`DMS_` and the name in capitals), how its text is read and bounded, its default, its
 * help and its chart value. The API key and its file, and the CA file, are read apart (see
 * {@link SERVICE_CREDENTIAL_SETTINGS}).
 */
export const SERVICE_SETTINGS = {
  baseUrl: {
    env: "DMS_BASE_URL",
    parse: baseUrl,
    required: "https://api.example.com",
    arg: "<url>",
    help: "service base URL, e.g. https://api.example.com",
    chart: { value: "credentials.name" },
  },
  tenantId: {
    env: "DMS_TENANT_ID",
    parse: text,
    arg: "<id>",
    help: "tenant id sent with every request",
    chart: { value: "credentials.name" },
  },
  apiKeyHeader: {
    env: "DMS_API_KEY_HEADER",
    parse: headerName,
    default: "X-Api-Key",
    arg: "<name>",
    help: "header carrying the key",
    chart: "config",
  },
  tenantHeader: {
    env: "DMS_TENANT_HEADER",
    parse: headerName,
    default: "X-Tenant-Id",
    arg: "<name>",
    help: "header carrying the tenant",
    chart: "config",
  },
  insecureSkipTlsVerify: {
    env: "DMS_INSECURE_SKIP_TLS_VERIFY",
    parse: boolean,
    default: "false",
    shown: "off",
    help: "accept any TLS certificate (self-signed endpoints only)",
    // Spelled as a connection's spec.insecureSkipTLSVerify; chart 0.1.0 spelled it as the flag.
    chart: { config: "insecureSkipTLSVerify", deprecated: "insecureSkipTlsVerify" },
  },
  timeoutMs: {
    env: "DMS_TIMEOUT_MS",
    parse: number({ integer: true, min: 1, max: 600_000, unit: "milliseconds" }),
    default: "10000",
    arg: "<ms>",
    help: "timeout of each request",
    chart: "config",
  },
  maxResponseBytes: {
    env: "DMS_MAX_RESPONSE_BYTES",
    // At least 64 KiB: any less and an honest answer of one deployment could not come through.
    parse: number({ integer: true, min: 65_536, max: 1_073_741_824, unit: "bytes" }),
    default: String(DEFAULT_MAX_RESPONSE_BYTES),
    arg: "<bytes>",
    help: "largest response body accepted, after decompression",
    chart: "config",
  },
  retries: {
    env: "DMS_RETRIES",
    parse: number({ integer: true, min: 0, max: 20, unit: "retries" }),
    default: "4",
    arg: "<n>",
    help: "retries of a retryable failure",
    chart: "config",
  },
  qps: {
    env: "DMS_QPS",
    parse: number({ integer: false, min: 0.001, max: 100_000, unit: "requests per second" }),
    default: "20",
    arg: "<n>",
    help: "client-side requests per second",
    chart: "config",
  },
  burst: {
    env: "DMS_BURST",
    parse: number({ integer: true, min: 1, max: 100_000, unit: "requests" }),
    default: "40",
    arg: "<n>",
    help: "client-side burst",
    chart: "config",
  },
} satisfies Settings;

/**
 * The service settings {@link serviceConfigFrom} reads apart from the table: the key and its file
 * as a pair (flags win as a group), and the CA file, whose content is read and checked.
 */
export const SERVICE_CREDENTIAL_SETTINGS = {
  apiKey: {
    env: "DMS_API_KEY",
    parse: text,
    arg: "<key>",
    help: "API key; prefer the env variable or a file: flags are visible to other users",
    chart: { value: "credentials.name" },
  },
  apiKeyFile: {
    env: "DMS_API_KEY_FILE",
    parse: text,
    arg: "<path>",
    help: "file holding the API key, e.g. a mounted Secret",
    chart: { value: "credentials.name" },
  },
  caFile: {
    env: "DMS_CA_FILE",
    parse: text,
    arg: "<path>",
    help: "PEM file of CA certificates trusted besides the system's, e.g. a private CA of a self-hosted service",
    chart: { value: "caSecretRef" },
  },
} satisfies Settings;

/** Every service setting's flag, in the order `--help` lists them. */
export const SERVICE_FLAG_SETTINGS = {
  baseUrl: SERVICE_SETTINGS.baseUrl,
  apiKey: SERVICE_CREDENTIAL_SETTINGS.apiKey,
  apiKeyFile: SERVICE_CREDENTIAL_SETTINGS.apiKeyFile,
  tenantId: SERVICE_SETTINGS.tenantId,
  apiKeyHeader: SERVICE_SETTINGS.apiKeyHeader,
  tenantHeader: SERVICE_SETTINGS.tenantHeader,
  insecureSkipTlsVerify: SERVICE_SETTINGS.insecureSkipTlsVerify,
  caFile: SERVICE_CREDENTIAL_SETTINGS.caFile,
  timeoutMs: SERVICE_SETTINGS.timeoutMs,
  maxResponseBytes: SERVICE_SETTINGS.maxResponseBytes,
  retries: SERVICE_SETTINGS.retries,
  qps: SERVICE_SETTINGS.qps,
  burst: SERVICE_SETTINGS.burst,
} satisfies Settings;

/** Environment variable of each service setting. */
export const SERVICE_ENV = Object.fromEntries(
  Object.entries(SERVICE_FLAG_SETTINGS).map(([key, setting]) => [key, setting.env]),
) as { readonly [K in keyof typeof SERVICE_FLAG_SETTINGS]: string };

/** A header name for the key or the tenant id: a token, and none the HTTP client or a proxy owns. */
function headerName(value: string): Parsed<string> {
  const problem = headerNameProblem(value);
  return problem === undefined ? { value } : { problem };
}

/**
 * An http(s) URL the API paths can be appended to: no query, fragment or credentials, judged on
 * the text too (`…/token#` parses to an empty fragment, and `https://@host` to no credentials).
 */
function baseUrl(value: string): Parsed<string> {
  const [problem] = baseUrlProblems(value, "--api-key-file or DMS_API_KEY");
  return problem === undefined ? { value: value.replace(/\/+$/, "") } : { problem };
}
