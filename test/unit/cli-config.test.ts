import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { addServiceOptions } from "../../src/commands/context.ts";
import {
  defaultOf,
  SERVICE_FLAG_SETTINGS,
  type ServiceConfig,
  type Settings,
  serviceConfigFrom,
} from "../../src/config.ts";

const noFiles = (path: string): string => {
  throw Object.assign(new Error(`ENOENT: ${path}`), { code: "ENOENT" });
};
const files =
  (contents: Record<string, string>) =>
  (path: string): string => {
    const content = contents[path];
    if (content === undefined) return noFiles(path);
    return content;
  };

function ok(result: ReturnType<typeof serviceConfigFrom>): ServiceConfig {
  if (!result.ok) throw new Error(`unexpected problems: ${result.problems.join(" | ")}`);
  return result.config;
}
function problems(result: ReturnType<typeof serviceConfigFrom>): string[] {
  if (result.ok) throw new Error("expected problems");
  return result.problems;
}

describe("serviceConfigFrom", () => {
  it("applies the defaults when only the base URL is given", () => {
    expect(ok(serviceConfigFrom({}, { DMS_BASE_URL: "https://api.example.com/" }, noFiles))).toEqual({
      baseUrl: "https://api.example.com",
      apiKey: undefined,
      tenantId: undefined,
      apiKeyHeader: "X-Api-Key",
      tenantHeader: "X-Tenant-Id",
      insecureSkipTlsVerify: false,
      timeoutMs: 10_000,
      maxResponseBytes: 8 * 1024 * 1024,
      retries: 4,
      qps: 20,
      burst: 40,
    });
  });

  it("accepts a base URL with a port and a path, and Authorization as the key's header", () => {
    const config = ok(
      serviceConfigFrom(
        { baseUrl: "http://dms.internal:8080/api/", apiKeyHeader: "Authorization", tenantHeader: "X-Org" },
        {},
        noFiles,
      ),
    );
    expect(config).toMatchObject({
      baseUrl: "http://dms.internal:8080/api",
      apiKeyHeader: "Authorization",
      tenantHeader: "X-Org",
    });
  });

  it("reads every setting from the environment", () => {
    const config = ok(
      serviceConfigFrom(
        {},
        {
          DMS_BASE_URL: "http://127.0.0.1:8090",
          DMS_API_KEY: " k-env ",
          DMS_TENANT_ID: "t-1",
          DMS_API_KEY_HEADER: "X-Key",
          DMS_TENANT_HEADER: "X-Org",
          DMS_INSECURE_SKIP_TLS_VERIFY: "true",
          DMS_TIMEOUT_MS: "2500",
          DMS_RETRIES: "0",
          DMS_QPS: "2.5",
          DMS_BURST: "5",
        },
        noFiles,
      ),
    );
    expect(config).toMatchObject({
      apiKey: "k-env",
      tenantId: "t-1",
      apiKeyHeader: "X-Key",
      tenantHeader: "X-Org",
      insecureSkipTlsVerify: true,
      timeoutMs: 2500,
      retries: 0,
      qps: 2.5,
      burst: 5,
    });
  });

  it("lets flags win over the environment, the key flags as a group", () => {
    const config = ok(
      serviceConfigFrom(
        { baseUrl: "https://flag.example.com", apiKey: "k-flag", timeoutMs: "100" },
        {
          DMS_BASE_URL: "https://env.example.com",
          DMS_API_KEY_FILE: "/run/secrets/key",
          DMS_TIMEOUT_MS: "9",
        },
        noFiles,
      ),
    );
    expect(config).toMatchObject({ baseUrl: "https://flag.example.com", apiKey: "k-flag", timeoutMs: 100 });
  });

  it("reads the key from a file, trimmed", () => {
    const config = ok(
      serviceConfigFrom(
        { apiKeyFile: "/run/secrets/key" },
        { DMS_BASE_URL: "https://api.example.com" },
        files({ "/run/secrets/key": "s3cret\n" }),
      ),
    );
    expect(config.apiKey).toBe("s3cret");
  });

  it.each([
    {
      reason: "missing base URL",
      flags: {},
      env: {},
      problem: "--base-url / DMS_BASE_URL: required, e.g. https://api.example.com",
    },
    {
      reason: "not a URL",
      flags: { baseUrl: "api.example.com" },
      env: {},
      problem: '--base-url / DMS_BASE_URL: "api.example.com" is not a URL',
    },
    {
      reason: "wrong scheme",
      flags: { baseUrl: "ftp://x" },
      env: {},
      problem: "must start with https:// or http://",
    },
    {
      reason: "credentials in the URL",
      flags: { baseUrl: "https://u:p@x" },
      env: {},
      problem:
        "--base-url / DMS_BASE_URL: must not carry user-info (user:password@host): put the API key in --api-key-file or DMS_API_KEY",
    },
    {
      // Parsed, it has no credentials; sent, the text is what the path is appended to.
      reason: "an empty user-info",
      flags: { baseUrl: "https://@x" },
      env: {},
      problem: "must not carry user-info",
    },
    {
      // Parsed, its fragment is empty: the text still cuts the appended path off.
      reason: "an empty fragment",
      flags: { baseUrl: "http://169.254.169.254/computeMetadata/v1/token#" },
      env: {},
      problem:
        '--base-url / DMS_BASE_URL: must not have a fragment (#…): the operator appends API paths such as /v2/deployments to it, and a fragment would cut them off; remove everything from the "#"',
    },
    {
      reason: "a query",
      flags: { baseUrl: "https://x/x?y=" },
      env: {},
      problem: "--base-url / DMS_BASE_URL: must not have a query (?…)",
    },
    {
      reason: "an empty query",
      flags: { baseUrl: "https://x/?" },
      env: {},
      problem: "--base-url / DMS_BASE_URL: must not have a query (?…)",
    },
    {
      reason: "both key and file",
      flags: { baseUrl: "https://x", apiKey: "k", apiKeyFile: "/f" },
      env: {},
      problem: "give one of them, not both",
    },
    {
      reason: "unreadable key file",
      flags: { baseUrl: "https://x" },
      env: { DMS_API_KEY_FILE: "/nope" },
      problem: "--api-key-file / DMS_API_KEY_FILE: cannot read /nope (ENOENT)",
    },
    {
      reason: "bad header name",
      flags: { baseUrl: "https://x", apiKeyHeader: "X Key" },
      env: {},
      problem: '--api-key-header / DMS_API_KEY_HEADER: "X Key" is not a valid header name',
    },
    {
      reason: "the Host header, in any case",
      flags: { baseUrl: "https://x", apiKeyHeader: "hOsT" },
      env: {},
      problem:
        "--api-key-header / DMS_API_KEY_HEADER: must not be hOsT: it frames or routes the request (the HTTP client sets it); choose a header of your own, e.g. X-Api-Key",
    },
    {
      reason: "a hop-by-hop header as the tenant header",
      flags: { baseUrl: "https://x" },
      env: { DMS_TENANT_HEADER: "Transfer-Encoding" },
      problem:
        "--tenant-header / DMS_TENANT_HEADER: must not be Transfer-Encoding: it frames or routes the request",
    },
    {
      reason: "a cookie",
      flags: { baseUrl: "https://x", tenantHeader: "Cookie" },
      env: {},
      problem: "--tenant-header / DMS_TENANT_HEADER: must not be Cookie: it carries a session",
    },
    {
      reason: "bad boolean",
      flags: { baseUrl: "https://x" },
      env: { DMS_INSECURE_SKIP_TLS_VERIFY: "maybe" },
      problem: "--insecure-skip-tls-verify / DMS_INSECURE_SKIP_TLS_VERIFY: must be true or false",
    },
    {
      reason: "zero timeout",
      flags: { baseUrl: "https://x", timeoutMs: "0" },
      env: {},
      problem: "--timeout-ms / DMS_TIMEOUT_MS: must be an integer from 1 to 600000",
    },
    {
      reason: "fractional burst",
      flags: { baseUrl: "https://x" },
      env: { DMS_BURST: "1.5" },
      problem: "--burst / DMS_BURST: must be an integer",
    },
    {
      reason: "text qps",
      flags: { baseUrl: "https://x", qps: "fast" },
      env: {},
      problem: "--qps / DMS_QPS: must be a number",
    },
  ])("names the flag, the variable and the fix: $reason", ({ flags, env, problem }) => {
    const found = problems(serviceConfigFrom(flags, env, noFiles));
    expect(found).toHaveLength(1);
    expect(found[0]).toContain(problem);
  });

  it("reports every problem at once", () => {
    const found = problems(serviceConfigFrom({ retries: "-1" }, { DMS_QPS: "0" }, noFiles));
    expect(found.map((p) => p.split(":")[0])).toEqual([
      "--base-url / DMS_BASE_URL",
      "--retries / DMS_RETRIES",
      "--qps / DMS_QPS",
    ]);
  });

  it("never puts the key file's content in a problem", () => {
    const found = problems(serviceConfigFrom({ apiKeyFile: "/k" }, {}, files({ "/k": "   \n" })));
    expect(found).toContain("--api-key-file / DMS_API_KEY_FILE: /k is empty; it must hold the API key");
  });
});

describe("the service settings' table", () => {
  it("gives every command's service flags, each with its default and variable", () => {
    const command = addServiceOptions(new Command("x"), { retries: "retries of one page" });
    const options = new Map(command.options.map((o) => [o.attributeName(), o]));
    expect([...options.keys()]).toEqual(Object.keys(SERVICE_FLAG_SETTINGS));
    for (const [key, setting] of Object.entries(SERVICE_FLAG_SETTINGS)) {
      const option = options.get(key);
      expect(option?.description, key).toContain(`(env ${setting.env})`);
      const shown = "shown" in setting ? setting.shown : "default" in setting ? setting.default : undefined;
      if (shown !== undefined) expect(option?.description, key).toContain(`(default ${shown})`);
    }
    expect(options.get("retries")?.description).toBe("retries of one page (default 4) (env DMS_RETRIES)");
  });

  it("reads nothing given as the defaults --help shows", () => {
    const config = ok(serviceConfigFrom({ baseUrl: "https://x" }, {}, noFiles));
    const table: Settings = SERVICE_FLAG_SETTINGS;
    for (const [key, setting] of Object.entries(table))
      if (setting.default !== undefined)
        expect(config[key as keyof ServiceConfig], key).toEqual(defaultOf(setting));
  });
});
