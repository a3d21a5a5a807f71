// `--connection` as plan and import read it: the flags it refuses, and the settings a
// connection's spec leaves to the command's own flags and environment.
import { describe, expect, it } from "vitest";
import { connectionDefaultsFrom, connectionFlag } from "../../src/commands/service-client.ts";
import { UsageError } from "../../src/commands/usage-error.ts";
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
