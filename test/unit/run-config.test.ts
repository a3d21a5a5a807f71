// `dms-operator run` settings: the bind addresses a user can give, including `0` to disable one.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runConfigFrom, runStartWarnings } from "../../src/commands/run-config.ts";
import { commandConfigProblems } from "../../src/commands/service-client.ts";
import { MAX_CONCURRENCY, SETTINGS } from "../../src/commands/settings.ts";
import { defaultOf, flagOf, type Setting } from "../../src/config.ts";
import { nodeCacheEnv } from "../support/node-env.ts";

const base = { baseUrl: "http://127.0.0.1:8090" };

describe("runConfigFrom bind addresses", () => {
  it("accepts 0 to disable the metrics or probe server, as the flag's help says", () => {
    const result = runConfigFrom({ ...base, metricsBindAddress: "0", healthProbeBindAddress: "0" }, {});
    expect(result).toMatchObject({
      ok: true,
      config: { metricsBindAddress: "0", healthProbeBindAddress: "0" },
    });
  });

  it("reports a malformed address as a problem line instead of throwing", () => {
    const result = runConfigFrom(
      { ...base, metricsBindAddress: "foo" },
      { DMS_HEALTH_PROBE_BIND_ADDRESS: "::x" },
    );
    expect(result).toEqual({
      ok: false,
      problems: [
        '--metrics-bind-address / DMS_METRICS_BIND_ADDRESS: "foo" is not [host]:port or 0',
        '--health-probe-bind-address / DMS_HEALTH_PROBE_BIND_ADDRESS: "::x" is not [host]:port or 0',
      ],
    });
  });
});

describe("runConfigFrom --sharded", () => {
  const problemsOf = (result: ReturnType<typeof runConfigFrom>) => (result.ok ? [] : result.problems);

  it("is off by default, on from the flag or DMS_SHARDED, with the default timings", () => {
    const plain = runConfigFrom(base, {});
    expect(plain.ok && "sharded" in plain.config).toBe(false);
    expect(runConfigFrom({ ...base, sharded: true }, {})).toMatchObject({
      ok: true,
      config: { sharded: true },
    });
    expect(runConfigFrom(base, { DMS_SHARDED: "true" })).toMatchObject({
      ok: true,
      config: { sharded: true },
    });
  });

  it("needs leader election: the leader assigns the resources", () => {
    expect(problemsOf(runConfigFrom({ ...base, sharded: true, leaderElect: false }, {}))).toEqual([
      "--sharded / DMS_SHARDED: needs leader election (drop --no-leader-elect): the elected leader assigns the resources to the replicas",
    ]);
  });
});

describe("runConfigFrom --metrics-secure", () => {
  const problemsOf = (result: ReturnType<typeof runConfigFrom>) => (result.ok ? [] : result.problems);

  it("serves /metrics over HTTPS on :8443 by default, in plain HTTP on :8080 with --metrics-secure=false", () => {
    expect(runConfigFrom(base, {})).toMatchObject({
      ok: true,
      config: { metricsSecure: true, metricsBindAddress: ":8443" },
    });
    for (const [flags, env] of [
      [{ metricsSecure: "false" }, {}],
      [{}, { DMS_METRICS_SECURE: "false" }],
    ] as const)
      expect(runConfigFrom({ ...base, ...flags }, env)).toMatchObject({
        ok: true,
        config: { metricsSecure: false, metricsBindAddress: ":8080" },
      });
    // A switch given alone is on; a given address is kept either way.
    expect(
      runConfigFrom({ ...base, metricsSecure: true, metricsBindAddress: "127.0.0.1:9443" }, {}),
    ).toMatchObject({ ok: true, config: { metricsSecure: true, metricsBindAddress: "127.0.0.1:9443" } });
  });

  it("reads the certificate directory from the flag or DMS_METRICS_CERT_DIR", () => {
    expect(runConfigFrom(base, { DMS_METRICS_CERT_DIR: "/var/run/metrics-tls" })).toMatchObject({
      ok: true,
      config: { metricsCertDir: "/var/run/metrics-tls" },
    });
    const result = runConfigFrom(base, {});
    expect(result.ok && "metricsCertDir" in result.config).toBe(false);
  });

  it("refuses HTTPS metrics on the probes' address, a certificate directory without HTTPS, and a non-boolean", () => {
    expect(problemsOf(runConfigFrom({ ...base, metricsBindAddress: ":8081" }, {}))).toEqual([
      "--metrics-bind-address / DMS_METRICS_BIND_ADDRESS: must differ from the health probe address (--health-probe-bind-address) while /metrics is served over HTTPS (--metrics-secure)",
    ]);
    expect(
      problemsOf(runConfigFrom({ ...base, metricsBindAddress: ":8081", metricsSecure: "false" }, {})),
    ).toEqual([]);
    expect(
      problemsOf(
        runConfigFrom({ ...base, metricsSecure: "false", metricsCertDir: "/var/run/metrics-tls" }, {}),
      ),
    ).toEqual([
      "--metrics-cert-dir / DMS_METRICS_CERT_DIR: only used over HTTPS; remove it, or drop --metrics-secure=false",
    ]);
    expect(problemsOf(runConfigFrom(base, { DMS_METRICS_SECURE: "maybe" }))).toEqual([
      "--metrics-secure / DMS_METRICS_SECURE: must be true or false (or 1/0, yes/no)",
    ]);
  });
});

describe("runConfigFrom polling bounds", () => {
  const problemsOf = (result: ReturnType<typeof runConfigFrom>) => (result.ok ? [] : result.problems);

  it("refuses a poll interval under 1s, naming the flag and its variable", () => {
    expect(problemsOf(runConfigFrom({ ...base, pollInterval: "1ms" }, {}))).toEqual([
      "--poll-interval / DMS_POLL_INTERVAL: must be at least 1s",
    ]);
    expect(problemsOf(runConfigFrom(base, { DMS_POLL_INTERVAL: "300ms" }))).toEqual([
      "--poll-interval / DMS_POLL_INTERVAL: must be at least 1s",
    ]);
  });

  it("refuses a create grace under 5s or under the poll interval", () => {
    expect(problemsOf(runConfigFrom({ ...base, createGrace: "2s" }, {}))).toEqual([
      "--create-grace / DMS_CREATE_GRACE: must be at least 5s and at least the poll interval (5s)",
    ]);
    expect(problemsOf(runConfigFrom({ ...base, pollInterval: "30s" }, { DMS_CREATE_GRACE: "20s" }))).toEqual([
      "--create-grace / DMS_CREATE_GRACE: must be at least 5s and at least the poll interval (30s)",
    ]);
  });

  it("accepts the lowest allowed values", () => {
    expect(
      runConfigFrom({ ...base, pollInterval: "1s", createGrace: "5s", resyncPeriod: "10s" }, {}),
    ).toMatchObject({ ok: true, config: { pollMs: 1_000, createGraceMs: 5_000, resyncMs: 10_000 } });
  });
});

describe("runConfigFrom shared parsing", () => {
  it("reads DMS_LEADER_ELECT as every boolean setting is read (1/0, yes/no)", () => {
    expect(runConfigFrom(base, { DMS_LEADER_ELECT: "0" })).toMatchObject({
      ok: true,
      config: { leaderElection: { enabled: false } },
    });
    expect(runConfigFrom(base, { DMS_LEADER_ELECT: "yes" })).toMatchObject({
      ok: true,
      config: { leaderElection: { enabled: true } },
    });
    expect(runConfigFrom(base, { DMS_LEADER_ELECT: "maybe" })).toEqual({
      ok: false,
      problems: ["--leader-elect / DMS_LEADER_ELECT: must be true or false (or 1/0, yes/no)"],
    });
  });

  it("lets the --no-leader-elect flag win over the environment", () => {
    expect(runConfigFrom({ ...base, leaderElect: false }, { DMS_LEADER_ELECT: "true" })).toMatchObject({
      ok: true,
      config: { leaderElection: { enabled: false } },
    });
  });

  it("refuses a namespace name longer than 63 characters", () => {
    const long = "a".repeat(64);
    expect(runConfigFrom({ ...base, namespaces: `team-a,${long}` }, {})).toEqual({
      ok: false,
      problems: [`--namespaces / DMS_NAMESPACES: "${long}" is not a namespace name`],
    });
  });
});

describe("runConfigFrom reconcile timeout", () => {
  const problemsOf = (result: ReturnType<typeof runConfigFrom>) => (result.ok ? [] : result.problems);

  it("defaults to 2m and reads the flag before DMS_RECONCILE_TIMEOUT", () => {
    expect(runConfigFrom(base, {})).toMatchObject({ ok: true, config: { reconcileTimeoutMs: 120_000 } });
    expect(runConfigFrom(base, { DMS_RECONCILE_TIMEOUT: "30s" })).toMatchObject({
      ok: true,
      config: { reconcileTimeoutMs: 30_000 },
    });
    expect(
      runConfigFrom({ ...base, reconcileTimeout: "45s" }, { DMS_RECONCILE_TIMEOUT: "30s" }),
    ).toMatchObject({ ok: true, config: { reconcileTimeoutMs: 45_000 } });
  });

  it("refuses a timeout under 5s or not above the request timeout, naming the flag and its variable", () => {
    const problem =
      "--reconcile-timeout / DMS_RECONCILE_TIMEOUT: must be at least 5s and more than the service request timeout (--timeout-ms 10000)";
    expect(problemsOf(runConfigFrom({ ...base, reconcileTimeout: "4s" }, {}))).toEqual([problem]);
    expect(problemsOf(runConfigFrom(base, { DMS_RECONCILE_TIMEOUT: "10s" }))).toEqual([problem]);
    expect(problemsOf(runConfigFrom({ ...base, timeoutMs: "20000", reconcileTimeout: "15s" }, {}))).toEqual([
      problem.replace("10000", "20000"),
    ]);
    expect(problemsOf(runConfigFrom({ ...base, reconcileTimeout: "soon" }, {}))).toContain(
      '--reconcile-timeout / DMS_RECONCILE_TIMEOUT: "soon" is not a duration; use e.g. 2m',
    );
  });

  it("accepts 5s when the request timeout is shorter", () => {
    expect(runConfigFrom({ ...base, timeoutMs: "2000", reconcileTimeout: "5s" }, {})).toMatchObject({
      ok: true,
      config: { reconcileTimeoutMs: 5_000 },
    });
  });
});

describe("runConfigFrom --max-reconciles-per-connection", () => {
  const problemsOf = (result: ReturnType<typeof runConfigFrom>) => (result.ok ? [] : result.problems);

  it("defaults to a quarter of --concurrency, rounded up, at least 1; reads the flag before its variable", () => {
    expect(runConfigFrom(base, {})).toMatchObject({ ok: true, config: { maxReconcilesPerConnection: 4 } });
    expect(runConfigFrom({ ...base, concurrency: "10" }, {})).toMatchObject({
      ok: true,
      config: { maxReconcilesPerConnection: 3 },
    });
    expect(runConfigFrom({ ...base, concurrency: "1" }, {})).toMatchObject({
      ok: true,
      config: { maxReconcilesPerConnection: 1 },
    });
    expect(
      runConfigFrom({ ...base, maxReconcilesPerConnection: "8" }, { DMS_MAX_RECONCILES_PER_CONNECTION: "2" }),
    ).toMatchObject({ ok: true, config: { maxReconcilesPerConnection: 8 } });
  });

  it("refuses more than --concurrency, and what is not a whole number from 1, naming the flag and its variable", () => {
    expect(
      problemsOf(runConfigFrom({ ...base, concurrency: "8", maxReconcilesPerConnection: "9" }, {})),
    ).toEqual([
      "--max-reconciles-per-connection / DMS_MAX_RECONCILES_PER_CONNECTION: must be at most --concurrency (8); leave it out for a quarter of it",
    ]);
    expect(problemsOf(runConfigFrom(base, { DMS_MAX_RECONCILES_PER_CONNECTION: "0" }))[0]).toContain(
      "--max-reconciles-per-connection / DMS_MAX_RECONCILES_PER_CONNECTION",
    );
  });
});

describe("runConfigFrom revision tracking", () => {
  it("is on by default, and reads on/off (or a boolean) from the flag before DMS_REVISION_TRACKING", () => {
    expect(runConfigFrom(base, {})).toMatchObject({ ok: true, config: { revisionTracking: true } });
    expect(
      runConfigFrom({ ...base, revisionTracking: "off" }, { DMS_REVISION_TRACKING: "on" }),
    ).toMatchObject({
      ok: true,
      config: { revisionTracking: false },
    });
    expect(runConfigFrom(base, { DMS_REVISION_TRACKING: "false" })).toMatchObject({
      ok: true,
      config: { revisionTracking: false },
    });
  });

  it("refuses another value, naming the flag and its variable", () => {
    expect(runConfigFrom({ ...base, revisionTracking: "sometimes" }, {})).toEqual({
      ok: false,
      problems: ['--revision-tracking / DMS_REVISION_TRACKING: must be on or off, got "sometimes"'],
    });
  });
});

describe("runConfigFrom in a pod", () => {
  it("takes the downward API's POD_NAME and POD_NAMESPACE, and a flag still wins", () => {
    const env = { POD_NAME: "dms-operator-7f9c-abcde", POD_NAMESPACE: "dms-system" };
    expect(runConfigFrom(base, env)).toMatchObject({
      ok: true,
      config: { podName: "dms-operator-7f9c-abcde", leaderElection: { namespace: "dms-system" } },
    });
    expect(runConfigFrom({ ...base, leaderElectionNamespace: "ops" }, env)).toMatchObject({
      config: { leaderElection: { namespace: "ops" } },
    });
    const outside = runConfigFrom(base, {});
    expect(outside.ok && outside.config.podName).toBeUndefined();
    expect(outside.ok && outside.config.leaderElection.namespace).toBeUndefined();
  });
});

describe("the settings tables", () => {
  const tables: Record<string, Setting<unknown>> = SETTINGS;

  it("name each variable by the convention: DMS_ and the setting's name in capitals (KUBECONFIG as kubectl's)", () => {
    for (const [key, setting] of Object.entries(tables)) {
      if (setting.env === undefined || key === "kubeconfig") continue;
      expect(setting.env, key).toBe(`DMS_${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`);
    }
    expect(tables.kubeconfig?.env).toBe("KUBECONFIG");
  });

  it("give every setting a default that its own parser accepts", () => {
    for (const [key, setting] of Object.entries(tables)) {
      if (setting.default !== undefined) expect(() => defaultOf(setting), key).not.toThrow();
    }
    // With nothing given, the configuration is the defaults: what --help and docs/guide/operating.md show.
    expect(runConfigFrom(base, {})).toMatchObject({
      ok: true,
      config: {
        concurrency: 16,
        resyncMs: 600_000,
        pollMs: 5_000,
        createGraceMs: 60_000,
        shutdownTimeoutMs: 30_000,
        leaderElection: { enabled: true, name: "dms-operator-leader", leaseDurationMs: 15_000 },
        metricsBindAddress: ":8443",
        metricsSecure: true,
        logLevel: "info",
        service: { timeoutMs: 10_000, retries: 4, qps: 20, burst: 40, apiKeyHeader: "X-Api-Key" },
      },
    });
  });

  it("are what the guide's configuration table says: each flag with its variable and default", () => {
    const readme = readFileSync(
      join(import.meta.dirname, "..", "..", "docs", "guide", "operating.md"),
      "utf8",
    );
    const section = readme.slice(readme.indexOf("## Configuration (`dms-operator run`)"));
    const rows = section
      .split("\n")
      .filter((line) => line.startsWith("| `--"))
      .map((line) => line.split("|").map((cell) => cell.trim()));
    const cells = (cell: string) => cell.split(/,\s*|\s+\/\s+/).map((c) => c.replaceAll("`", "").trim());
    for (const [key, setting] of Object.entries(tables)) {
      const row = rows.find((r) => cells(r[1] ?? "").some((c) => c.split(" ")[0] === flagOf(key)));
      expect(row, `docs/guide/operating.md row of ${flagOf(key)}`).toBeDefined();
      const at = cells(row?.[1] ?? "").findIndex((c) => c.split(" ")[0] === flagOf(key));
      if (setting.env !== undefined) expect(cells(row?.[2] ?? ""), key).toContain(setting.env);
      const shown = setting.required !== undefined ? "(required)" : (setting.shown ?? setting.default);
      if (shown) expect(cells(row?.[3] ?? "")[at], key).toBe(shown);
    }
    // One row per flag, and every row's flag is one of run's: a second row of a flag (which the
    // lookup above never reads) or a row of a flag gone would tell the reader something else.
    const named = rows.flatMap((r) =>
      cells(r[1] ?? "").flatMap((c) => (c.startsWith("--") ? [c.split(" ")[0]] : [])),
    );
    const known = new Set([...Object.keys(tables).map(flagOf), "--leader-elect", "--no-leader-elect"]);
    expect(named.filter((flag, i) => named.indexOf(flag) !== i)).toEqual([]);
    expect(named.filter((flag) => !known.has(flag ?? ""))).toEqual([]);
  });
});

describe("runConfigFrom --listing-deadline", () => {
  const deadline = (flags: Record<string, unknown>, env: Record<string, string> = {}) => {
    const result = runConfigFrom({ ...base, ...flags }, env);
    return result.ok ? result.config.listingDeadlineMs : result.problems;
  };

  it("defaults to a minute, or half the resync period when that is shorter", () => {
    expect(deadline({})).toBe(60_000);
    expect(deadline({ resyncPeriod: "30s" })).toBe(15_000);
  });

  it("reads the flag before DMS_LISTING_DEADLINE", () => {
    expect(deadline({}, { DMS_LISTING_DEADLINE: "2m" })).toBe(120_000);
    expect(deadline({ listingDeadline: "45s" }, { DMS_LISTING_DEADLINE: "2m" })).toBe(45_000);
  });

  it("refuses a deadline not below the resync period, naming both settings", () => {
    expect(deadline({ listingDeadline: "10m" })).toEqual([
      "--listing-deadline / DMS_LISTING_DEADLINE: must be below the resync period (--resync-period / DMS_RESYNC_PERIOD); a listing deadline of a few minutes at most is usual",
    ]);
    expect(deadline({ resyncPeriod: "15s" }, { DMS_LISTING_DEADLINE: "20s" })).toHaveLength(1);
  });

  it("refuses a deadline under 1s", () => {
    expect(deadline({ listingDeadline: "500ms" })).toEqual([
      "--listing-deadline / DMS_LISTING_DEADLINE: must be at least 1s",
    ]);
  });
});

describe("runConfigFrom --cluster-connections", () => {
  const clusterConnections = (flags: Record<string, unknown>, env: Record<string, string> = {}) => {
    const result = runConfigFrom({ ...base, ...flags }, env);
    return result.ok ? result.config.clusterConnections : result.problems;
  };

  it("is left to the operator (on when watching all namespaces) unless given", () => {
    expect(clusterConnections({})).toBeUndefined();
  });

  it("can be turned on for a sharded install, by flag or variable, and off for a cluster-wide one", () => {
    expect(clusterConnections({ namespaces: "a,b", clusterConnections: true })).toBe(true);
    expect(clusterConnections({ namespaces: "a" }, { DMS_CLUSTER_CONNECTIONS: "true" })).toBe(true);
    expect(clusterConnections({}, { DMS_CLUSTER_CONNECTIONS: "false" })).toBe(false);
  });

  it("names the variable and the values it takes when the value is not a boolean", () => {
    expect(String(clusterConnections({}, { DMS_CLUSTER_CONNECTIONS: "sometimes" }))).toContain(
      "--cluster-connections / DMS_CLUSTER_CONNECTIONS",
    );
  });
});

describe("runConfigFrom --max-secret-bytes", () => {
  const limit = (flags: Record<string, unknown>, env: Record<string, string> = {}) => {
    const result = runConfigFrom({ ...base, ...flags }, env);
    return result.ok ? result.config.maxSecretBytes : result.problems;
  };

  it("is 1 MiB unless given, and the flag wins over DMS_MAX_SECRET_BYTES", () => {
    expect(limit({})).toBe(1_048_576);
    expect(limit({}, { DMS_MAX_SECRET_BYTES: "4194304" })).toBe(4_194_304);
    expect(limit({ maxSecretBytes: "2097152" }, { DMS_MAX_SECRET_BYTES: "4194304" })).toBe(2_097_152);
  });

  it("refuses what is not a whole number of bytes from 1 KiB to 16 MiB, naming the flag and its variable", () => {
    for (const given of ["1MiB", "1023", "16777217", "1.5"])
      expect(limit({}, { DMS_MAX_SECRET_BYTES: given })).toEqual([
        `--max-secret-bytes / DMS_MAX_SECRET_BYTES: must be an integer from 1024 to 16777216 (bytes), got ${JSON.stringify(given)}; default 1048576`,
      ]);
  });
});

describe("runConfigFrom --default-connection-namespace-selector", () => {
  const selectorOf = (flags: Record<string, unknown>, env: Record<string, string> = {}) => {
    const result = runConfigFrom({ ...base, ...flags }, env);
    return result.ok ? result.config.defaultConnectionNamespaceSelector : result.problems;
  };

  it("is absent unless given: every watched namespace may use the default connection", () => {
    expect(selectorOf({})).toBeUndefined();
    // An empty selector selects everything: the same as none (and no namespace watch).
    expect(selectorOf({ defaultConnectionNamespaceSelector: "" })).toBeUndefined();
  });

  it("parses the label-selector syntax from the flag or the variable, keeping the text for messages", () => {
    expect(
      selectorOf({ defaultConnectionNamespaceSelector: "dms.dev/tenant=platform, !quarantine" }),
    ).toEqual({
      text: "dms.dev/tenant=platform, !quarantine",
      selector: [
        { key: "dms.dev/tenant", operator: "In", values: ["platform"] },
        { key: "quarantine", operator: "DoesNotExist", values: [] },
      ],
    });
    expect(selectorOf({}, { DMS_DEFAULT_CONNECTION_NAMESPACE_SELECTOR: "team in (a,b)" })).toMatchObject({
      text: "team in (a,b)",
    });
  });

  it("refuses a bad selector at start-up, naming the flag, its variable, what is wrong and how to write one", () => {
    expect(selectorOf({ defaultConnectionNamespaceSelector: "team in a" })).toEqual([
      '--default-connection-namespace-selector / DMS_DEFAULT_CONNECTION_NAMESPACE_SELECTOR: "team in a" is not a label selector: expected "(" after in/notin, found "a"; write requirements on namespace labels joined by commas, e.g. "dms.dev/tenant=platform" or "team in (a,b),!quarantine"',
    ]);
  });
});

describe("runConfigFrom --connection-address-policy and --max-connections-per-namespace", () => {
  const config = (flags: Record<string, unknown>, env: Record<string, string> = {}) => {
    const result = runConfigFrom({ ...base, ...flags }, env);
    return result.ok
      ? [result.config.connectionAddressPolicy, result.config.maxConnectionsPerNamespace]
      : result.problems;
  };

  it("allow private addresses and 20 connections per namespace unless given; the flag wins", () => {
    expect(config({})).toEqual(["allow-private", 20]);
    expect(
      config(
        { connectionAddressPolicy: "public-only", maxConnectionsPerNamespace: "5" },
        { DMS_CONNECTION_ADDRESS_POLICY: "allow-private", DMS_MAX_CONNECTIONS_PER_NAMESPACE: "50" },
      ),
    ).toEqual(["public-only", 5]);
    expect(config({}, { DMS_MAX_CONNECTIONS_PER_NAMESPACE: "50" })).toEqual(["allow-private", 50]);
  });

  it("refuse another policy, and a bound that is not a whole number from 1 to 10000, naming flag and variable", () => {
    expect(config({ connectionAddressPolicy: "none" })).toEqual([
      expect.stringMatching(
        /^--connection-address-policy \/ DMS_CONNECTION_ADDRESS_POLICY: .*allow-private.*public-only/,
      ),
    ]);
    for (const given of ["0", "10001", "2.5"])
      expect(config({}, { DMS_MAX_CONNECTIONS_PER_NAMESPACE: given })).toEqual([
        expect.stringMatching(
          /^--max-connections-per-namespace \/ DMS_MAX_CONNECTIONS_PER_NAMESPACE: must be an integer from 1 to 10000/,
        ),
      ]);
  });
});

describe("runConfigFrom --max-reconciles-per-connection", () => {
  const most = (flags: Record<string, unknown>, env: Record<string, string> = {}) => {
    const result = runConfigFrom({ ...base, ...flags }, env);
    return result.ok ? result.config.maxReconcilesPerConnection : result.problems;
  };

  it("defaults to a quarter of --concurrency, rounded up, at least 1", () => {
    expect(most({})).toBe(4);
    expect(most({ concurrency: "10" })).toBe(3);
    expect(most({ concurrency: "1" })).toBe(1);
    expect(most({}, { DMS_CONCURRENCY: "64" })).toBe(16);
  });

  it("reads the flag before DMS_MAX_RECONCILES_PER_CONNECTION", () => {
    expect(most({}, { DMS_MAX_RECONCILES_PER_CONNECTION: "2" })).toBe(2);
    expect(most({ maxReconcilesPerConnection: "5" }, { DMS_MAX_RECONCILES_PER_CONNECTION: "2" })).toBe(5);
  });

  it("refuses what is not a whole number from 1 to the highest concurrency, naming the flag and its variable", () => {
    for (const given of ["0", "1.5", String(MAX_CONCURRENCY + 1), "many"])
      expect(most({}, { DMS_MAX_RECONCILES_PER_CONNECTION: given })).toEqual([
        `--max-reconciles-per-connection / DMS_MAX_RECONCILES_PER_CONNECTION: must be an integer from 1 to ${MAX_CONCURRENCY} (reconciles at once), got ${JSON.stringify(given)}`,
      ]);
  });
});

describe("run checks its service settings as the CLI does", () => {
  it("refuses a base URL ending in /v2 at start, with the CLI's line naming the flag or variable and the fix", () => {
    const fromFlag = runConfigFrom({ baseUrl: "https://api.example.com/v2", apiKey: "k" }, {});
    expect(fromFlag).toEqual({
      ok: false,
      problems: [
        "--base-url https://api.example.com/v2 ends in /v2: drop /v2 (the routes are {base URL}/v2/…), e.g. https://api.example.com",
      ],
    });
    const fromEnv = runConfigFrom({}, { DMS_BASE_URL: "http://127.0.0.1:8090/v2/" });
    expect(fromEnv.ok ? [] : fromEnv.problems).toEqual([
      "DMS_BASE_URL http://127.0.0.1:8090/v2 ends in /v2: drop /v2 (the routes are {base URL}/v2/…), e.g. http://127.0.0.1:8090",
    ]);
    // The same line as a command's: one check.
    const cli = runConfigFrom({ baseUrl: "https://api.example.com/prefix", apiKey: "k" }, {});
    if (!cli.ok) throw new Error(cli.problems.join("; "));
    expect(
      commandConfigProblems(
        { ...cli.config.service, baseUrl: "https://api.example.com/v2" },
        { baseUrl: "x" },
      ),
    ).toEqual(fromFlag.ok ? [] : fromFlag.problems);
  });

  it("the process exits 1 at start with that line, before it reads a kubeconfig", () => {
    const run = spawnSync(
      process.execPath,
      [join(import.meta.dirname, "..", "..", "src", "cli.ts"), "run", "--metrics-bind-address=0"],
      {
        env: { PATH: process.env.PATH ?? "", ...nodeCacheEnv(), DMS_BASE_URL: "http://127.0.0.1:1/v2" },
        encoding: "utf8",
        timeout: 30_000,
      },
    );
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain(
      "error: DMS_BASE_URL http://127.0.0.1:1/v2 ends in /v2: drop /v2 (the routes are {base URL}/v2/…), e.g. http://127.0.0.1:1\n",
    );
    expect(run.status).toBe(1);
    // A Node process's start: 0.25 s of CPU (0.55 s without the compile cache), 5 to 11 s at a load
    // of 20 (past the default 5 s); longer than the 30 s the child is given, which ends a hung one.
  }, 60_000);

  it("starts without an API key for a service off this machine, warning of it (the default connection may be unused)", () => {
    const result = runConfigFrom({ baseUrl: "https://api.example.com" }, {});
    if (!result.ok) throw new Error(result.problems.join("; "));
    expect(runStartWarnings(result.config, { baseUrl: "https://api.example.com" })).toEqual([
      "no API key for https://api.example.com: set DMS_API_KEY_FILE to a file holding it (or DMS_API_KEY), or pass --api-key-file <path>: the default connection (Deployment resources without spec.connectionRef) is refused every request without one",
    ]);
    for (const [flags, env] of [
      [{ baseUrl: "https://api.example.com", apiKey: "k" }, {}],
      [{}, { DMS_BASE_URL: "http://127.0.0.1:8090" }],
    ] as const) {
      const ok = runConfigFrom(flags, env);
      if (!ok.ok) throw new Error(ok.problems.join("; "));
      expect(runStartWarnings(ok.config, flags)).toEqual([]);
    }
  });
});
