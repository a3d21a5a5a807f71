// `--connection` as plan and import read it: the flags it refuses, and the settings a
// connection's spec leaves to the command's own flags and environment.
import { describe, expect, it } from "vitest";
import { connectionDefaultsFrom, connectionFlag } from "../../src/commands/connections.ts";
import { commandConfigProblems } from "../../src/commands/service-client.ts";
import { UsageError } from "../../src/commands/usage-error.ts";
import { serviceConfigFrom } from "../../src/config.ts";
import { serviceConfigOf } from "../../src/connection/settings.ts";

const usageLines = (f: () => unknown): readonly string[] => {
  try {
    f();
  } catch (error) {
    if (error instanceof UsageError) return error.lines;
    throw error;
  }
  throw new Error("no UsageError");
};

describe("connectionFlag", () => {
  it("is undefined without --connection, whatever else is given", () => {
    expect(connectionFlag({ baseUrl: "http://x", apiKey: "k" })).toBeUndefined();
  });

  it("parses kinds, plurals and short names, case-insensitively", () => {
    for (const [text, kind] of [
      ["ServiceConnection/prod", "ServiceConnection"],
      ["serviceconnections/prod", "ServiceConnection"],
      ["DMSCCONN/prod", "ClusterServiceConnection"],
    ] as const)
      expect(connectionFlag({ connection: text, kubeconfig: "k" })).toEqual({ kind, name: "prod" });
  });

  it("lists every mistake at once: the value, no kubeconfig, each flag the connection replaces", () => {
    const lines = usageLines(() =>
      connectionFlag({ connection: "prod", tenantId: "t", insecureSkipTlsVerify: true, qps: "5" }),
    );
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^--connection "prod": give <kind>\/<name>/);
    expect(lines[1]).toMatch(/^--connection needs --kubeconfig/);
    // --qps is not among them: it is a default the spec may override, as for the operator.
    expect(lines[2]).toMatch(/^--tenant-id, --insecure-skip-tls-verify: not with --connection/);
  });
});

describe("connectionDefaultsFrom", () => {
  it("keeps the command's headers, limits and timeouts, and drops the default tenant's identity", () => {
    const defaults = connectionDefaultsFrom(
      { qps: "7", timeoutMs: "2500" },
      {
        DMS_BASE_URL: "https://default.example",
        DMS_API_KEY: "default-key",
        DMS_TENANT_ID: "0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e",
        DMS_INSECURE_SKIP_TLS_VERIFY: "true",
        DMS_API_KEY_HEADER: "Authorization",
        DMS_BURST: "9",
      },
    );
    expect(defaults).toMatchObject({ qps: 7, burst: 9, timeoutMs: 2500, apiKeyHeader: "Authorization" });
    expect(defaults.apiKey).toBeUndefined();
    expect(defaults.tenantId).toBeUndefined();
    expect(defaults.insecureSkipTlsVerify).toBe(false);
    const config = serviceConfigOf(
      { baseUrl: "https://tenant.example", apiKeySecretRef: { name: "s", key: "k" } },
      "tenant-key",
      defaults,
    );
    expect(config).toMatchObject({ baseUrl: "https://tenant.example", apiKey: "tenant-key", qps: 7 });
  });

  it("does not read the default key's file, and reports an invalid setting it keeps", () => {
    expect(() => connectionDefaultsFrom({}, { DMS_API_KEY_FILE: "/nonexistent/key" })).not.toThrow();
    expect(usageLines(() => connectionDefaultsFrom({}, { DMS_QPS: "fast" }))).toEqual([
      expect.stringMatching(/^--qps \/ DMS_QPS: must be a number/),
    ]);
  });
});

describe("a command's service settings, before anything is sent", () => {
  const config = (baseUrl: string, apiKey?: string) => {
    const result = serviceConfigFrom({ baseUrl, ...(apiKey ? { apiKey } : {}) }, {});
    if (!result.ok) throw new Error(result.problems.join("; "));
    return result.config;
  };

  it("a base URL ending in /v2: drop /v2, naming where it came from", () => {
    expect(commandConfigProblems(config("https://api.example.com/v2", "k"), { baseUrl: "x" })).toEqual([
      "--base-url https://api.example.com/v2 ends in /v2: drop /v2 (the routes are {base URL}/v2/…), e.g. https://api.example.com",
    ]);
    expect(commandConfigProblems(config("https://api.example.com/v2/", "k"), {})[0]).toMatch(
      /^DMS_BASE_URL https:\/\/api\.example\.com\/v2 ends in \/v2: drop \/v2/,
    );
    expect(commandConfigProblems(config("https://api.example.com/prefix", "k"), {})).toEqual([]);
  });

  it("no API key for a service off this machine: the fix, not a 401; the simulator on loopback may do without", () => {
    expect(commandConfigProblems(config("https://api.example.com"), {})).toEqual([
      "no API key for https://api.example.com: set DMS_API_KEY_FILE to a file holding it (or DMS_API_KEY), or pass --api-key-file <path>; the service refuses every request without one",
    ]);
    for (const local of ["http://127.0.0.1:8090", "http://localhost:8090", "http://[::1]:8090"])
      expect(commandConfigProblems(config(local), {})).toEqual([]);
  });
});
