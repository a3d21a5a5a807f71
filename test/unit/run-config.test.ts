// `dms-operator run` settings: the bind addresses a user can give, including `0` to disable one.
import { describe, expect, it } from "vitest";
import { runConfigFrom } from "../../src/commands/run-config.ts";

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
