import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { redactAndTruncate, redactSecrets } from "../../src/api/redact.ts";
import type { Deployment } from "../../src/api/wire.ts";
import type { DeploymentResourceStatus } from "../../src/crd/schema.ts";
import { outcomeFromProblems } from "../../src/reconcile/failures.ts";
import { resolvedRepo } from "../../src/reconcile/observe.ts";
import { CONDITION, REASON, type SyncOutcome } from "../../src/reconcile/reasons.ts";
import type { StatusInput } from "../../src/reconcile/run.ts";
import { statusFrom } from "../../src/reconcile/status.ts";
import { changedStatusFields } from "../../src/reconcile/status-changes.ts";
import { statusEqual } from "../../src/runtime/json.ts";
import { remote } from "./plan-fixtures.ts";

const T0 = new Date("2025-06-01T10:00:00.123Z");
const T1 = new Date("2025-06-01T10:05:00.000Z");
const REV1 = "11111111-1111-4111-8111-111111111111";
const REV2 = "22222222-2222-4222-8222-222222222222";
const synced: SyncOutcome = { kind: "synced" };

/**
 * One character of any code point but a lone surrogate: what fast-check's `unit: "binary"` draws,
 * the same values for the same seed and the same shrinks. Its own arbitrary because fast-check
 * builds that unit's inverse (each value's index, asked of the strings it injects) as a Map of
 * all 1.1 million code points, a second of CPU per test file that asks for the unit: 8 to 22 s
 * of the test below at machine loads of 14 to 21 on two cores.
 */
const SURROGATES = 0xe000 - 0xd800;
const anyCodePoint = fc.nat(0x10ffff - SURROGATES).map(
  (i) => String.fromCodePoint(i < 0xd800 ? i : i + SURROGATES),
  (char) => {
    const point = typeof char === "string" ? char.codePointAt(0) : undefined;
    if (point === undefined || String.fromCodePoint(point) !== char || (point >= 0xd800 && point < 0xe000))
      throw new Error("not one code point");
    return point < 0xd800 ? point : point - SURROGATES;
  },
);

const condition = (status: ReturnType<typeof statusFrom>, type: string) =>
  status.conditions?.find((c) => c.type === type);
const summary = (status: ReturnType<typeof statusFrom>) =>
  Object.fromEntries((status.conditions ?? []).map((c) => [c.type, `${c.status}/${c.reason}`]));

describe("statusFrom: conditions from the service's state", () => {
  const cases: Array<{
    reason: string;
    observed: Deployment | null | undefined;
    sync: SyncOutcome;
    expected: Record<string, string>;
  }> = [
    {
      reason: "READY with the latest revision active is Ready",
      observed: remote({ status: "READY", latest_revision_id: REV2, active_revision_id: REV2 }),
      sync: synced,
      expected: { Ready: "True/Available", Synced: "True/ReconcileSuccess" },
    },
    {
      reason: "READY while a newer revision rolls out is not Ready, and Reconciling",
      observed: remote({ status: "READY", latest_revision_id: REV2, active_revision_id: REV1 }),
      sync: synced,
      expected: {
        Ready: "False/RolloutInProgress",
        Synced: "True/ReconcileSuccess",
        Reconciling: "True/RolloutInProgress",
      },
    },
    {
      reason: "AWAITING_DATABASE is in progress",
      observed: remote({ status: "AWAITING_DATABASE" }),
      sync: synced,
      expected: {
        Ready: "False/AwaitingDatabase",
        Synced: "True/ReconcileSuccess",
        Reconciling: "True/AwaitingDatabase",
      },
    },
    {
      reason: "AWAITING_DELETE says the service is deleting it",
      observed: remote({ status: "AWAITING_DELETE" }),
      sync: synced,
      expected: { Ready: "False/Deleting", Synced: "True/ReconcileSuccess" },
    },
    {
      reason: "UNUSED has its own reason",
      observed: remote({ status: "UNUSED" }),
      sync: synced,
      expected: { Ready: "False/Unused", Synced: "True/ReconcileSuccess" },
    },
    {
      reason: "UNKNOWN makes Ready Unknown",
      observed: remote({ status: "UNKNOWN" }),
      sync: synced,
      expected: { Ready: "Unknown/Unknown", Synced: "True/ReconcileSuccess" },
    },
    {
      reason: "a create the listing does not show yet is in progress",
      observed: null,
      sync: synced,
      expected: { Ready: "False/Creating", Synced: "True/ReconcileSuccess", Reconciling: "True/Creating" },
    },
    {
      reason: "ObserveOnly without a deployment on the service says so",
      observed: null,
      sync: { kind: "observed", drift: [] },
      expected: { Ready: "False/NotFound", Synced: "True/ObserveOnly" },
    },
    {
      reason: "ObserveOnly with differences is Synced=False Drifted",
      observed: remote(),
      sync: { kind: "observed", drift: ["sourceConfig.buildOnPush: false → true"] },
      expected: { Ready: "True/Available", Synced: "False/Drifted" },
    },
    {
      reason: "a failure that can succeed later retries: Reconciling, not Stalled",
      observed: remote(),
      sync: { kind: "failed", reason: REASON.ServiceUnavailable, message: "503 from the service" },
      expected: {
        Ready: "True/Available",
        Synced: "False/ServiceUnavailable",
        Reconciling: "True/ServiceUnavailable",
      },
    },
    {
      reason: "a failure that needs a change stalls, without Reconciling",
      observed: undefined,
      sync: { kind: "failed", reason: REASON.SecretNotFound, message: "Secret s missing", stalled: true },
      expected: { Ready: "Unknown/Unknown", Synced: "False/SecretNotFound", Stalled: "True/SecretNotFound" },
    },
    {
      reason: "paused: no call was made, a condition says so",
      observed: undefined,
      sync: { kind: "paused" },
      expected: { Ready: "Unknown/Paused", Synced: "False/Paused" },
    },
    {
      reason: "deletion in progress",
      observed: remote({ status: "AWAITING_DELETE" }),
      sync: { kind: "deleting" },
      expected: { Ready: "False/Deleting", Synced: "False/Deleting", Reconciling: "True/Deleting" },
    },
  ];
  it.each(cases)("$reason", ({ observed, sync, expected }) => {
    expect(summary(statusFrom({ generation: 3, observed, sync, now: T0 }))).toEqual(expected);
  });
});

describe("statusFrom: fields", () => {
  it("gives settled resources of other revisions the same conditions, so the watch cache holds them once", () => {
    const settled = (revision: string) =>
      statusFrom({
        generation: 1,
        observed: remote({ status: "READY", latest_revision_id: revision, active_revision_id: revision }),
        sync: synced,
        now: T0,
      });
    const [one, two] = [settled(REV1), settled(REV2)];
    expect(one.activeRevisionId).toBe(REV1);
    expect(two.activeRevisionId).toBe(REV2);
    expect(one.conditions).toStrictEqual(two.conditions);
    expect(condition(one, CONDITION.Ready)?.message).not.toContain(REV1);
  });

  it("copies the service's ids and versions, and stamps every condition with the generation", () => {
    const observed = remote({
      image_version: "0.4.2",
      source_revision_config: { repo_ref: "main", repo_commit_sha: "abc123" },
    });
    const status = statusFrom({ generation: 7, observed, sync: synced, now: T0 });
    expect(status).toMatchObject({
      deploymentId: observed.id,
      tenantId: observed.tenant_id,
      remoteStatus: "READY",
      latestRevisionId: REV1,
      activeRevisionId: REV1,
      imageVersion: "0.4.2",
      repoCommitSha: "abc123",
      observedGeneration: 7,
    });
    for (const c of status.conditions ?? []) expect(c.observedGeneration).toBe(7);
    expect(condition(status, CONDITION.Ready)?.lastTransitionTime).toBe("2025-06-01T10:00:00Z");
  });

  it("leaves out a service's value past its field's bound, never writes it whole or cut", () => {
    // The service's answers are a tenant's input: a megabyte of version and of status, within the
    // response bound (8 MiB), must not make a status etcd refuses (1.5 MiB) or the cache holds.
    const MB = 1_000_000;
    const observed = remote({
      image_version: "v".repeat(MB),
      status: "S".repeat(MB),
      tenant_id: "t".repeat(65),
      source_revision_config: { image_uri: `registry/app:${"x".repeat(MB)}` },
    });
    const status = statusFrom({ generation: 1, observed, sync: synced, now: T0 });
    expect(status.imageVersion).toBeUndefined();
    expect(status.remoteStatus).toBeUndefined();
    expect(status.tenantId).toBeUndefined();
    expect(status.activeRevision).toMatchObject({ id: REV1 });
    expect(status.activeRevision?.imageUri).toBeUndefined();
    // The live revision names the id alone when what it deployed is past the bound.
    expect(status.liveRevision).toBe(REV1.slice(0, 8));
    expect(Buffer.byteLength(JSON.stringify(status))).toBeLessThan(8_192);
    const longSha = remote({ source_revision_config: { repo_commit_sha: "c".repeat(65) } });
    expect(
      statusFrom({ generation: 1, observed: longSha, sync: synced, now: T0 }).repoCommitSha,
    ).toBeUndefined();
    // At the bound, kept whole.
    const atBound = remote({ image_version: "v".repeat(1024), status: "S".repeat(64) });
    const kept = statusFrom({ generation: 1, observed: atBound, sync: synced, now: T0 });
    expect([kept.imageVersion?.length, kept.remoteStatus?.length, kept.liveRevision?.length]).toEqual([
      1024, 64, 1033,
    ]);
  });

  it("keeps what it did not look at, and clears what it knows is gone", () => {
    const first = statusFrom({
      generation: 1,
      observed: remote({
        image_version: "0.4.2",
        source_revision_config: { repo_ref: "main", repo_commit_sha: "abc123" },
      }),
      sync: synced,
      now: T0,
      record: { appliedSecretsHash: "a".repeat(64) },
      revision: { id: REV1, status: "DEPLOYED" },
    });
    // Everything the status says of the service's deployment, as `kubectl get -o yaml` shows it.
    const observedFields = {
      deploymentId: first.deploymentId,
      tenantId: first.tenantId,
      remoteStatus: "READY",
      latestRevisionId: REV1,
      activeRevisionId: REV1,
      latestRevisionStatus: "DEPLOYED",
      shortRevisions: "11111111/11111111",
      imageVersion: "0.4.2",
      repoCommitSha: "abc123",
    };
    expect(first).toMatchObject(observedFields);
    const paused = statusFrom({
      previous: first,
      generation: 2,
      observed: undefined,
      sync: { kind: "paused" },
      now: T1,
    });
    expect(paused).toMatchObject({
      ...observedFields,
      appliedSecretsHash: "a".repeat(64),
      observedGeneration: 2,
    });
    expect(condition(paused, CONDITION.Ready)).toEqual(condition(first, CONDITION.Ready));
    const gone = statusFrom({
      previous: first,
      generation: 2,
      observed: null,
      sync: synced,
      now: T1,
      record: { appliedSecretsHash: null },
    });
    for (const field of Object.keys(observedFields)) expect(gone).not.toHaveProperty(field);
    expect(gone.appliedSecretsHash).toBeUndefined();
    expect(gone.observedGeneration).toBe(2);
  });

  it("writes nothing new when nothing changed: a second identical reconcile yields an equal status", () => {
    const input: StatusInput = { generation: 1, observed: remote(), sync: synced, now: T0 };
    const first = statusFrom(input);
    const second = statusFrom({ ...input, previous: first, now: T1 });
    expect(statusEqual(first, second)).toBe(true);
  });

  it("a status change is noticed, and moves lastTransitionTime of that condition only", () => {
    const first = statusFrom({ generation: 1, observed: remote(), sync: synced, now: T0 });
    const rolling = remote({ latest_revision_id: REV2 });
    const second = statusFrom({ previous: first, generation: 2, observed: rolling, sync: synced, now: T1 });
    expect(statusEqual(first, second)).toBe(false);
    expect(condition(second, CONDITION.Ready)?.lastTransitionTime).toBe("2025-06-01T10:05:00Z");
    expect(condition(second, CONDITION.Synced)?.lastTransitionTime).toBe("2025-06-01T10:00:00Z");
  });

  it("drops Reconciling and Stalled once they no longer apply", () => {
    const stalled = statusFrom({
      generation: 1,
      observed: remote(),
      sync: { kind: "failed", reason: "InvalidSpec", message: "m", stalled: true },
      now: T0,
    });
    const fixed = statusFrom({ previous: stalled, generation: 2, observed: remote(), sync: synced, now: T1 });
    expect(Object.keys(summary(fixed))).toEqual([CONDITION.Ready, CONDITION.Synced]);
  });

  it("turns plan problems into a stalled failure: immutable fields and un-clearable secrets", () => {
    expect(outcomeFromProblems([])).toBeUndefined();
    expect(outcomeFromProblems([{ reason: "Immutable", field: "spec.source", message: "m1" }])).toEqual({
      kind: "failed",
      reason: REASON.Immutable,
      message: "m1",
      stalled: true,
    });
    expect(
      outcomeFromProblems([{ reason: "CannotClearSecrets", field: "spec.secrets", message: "m2" }]),
    ).toMatchObject({
      reason: REASON.CannotClearSecrets,
    });
  });
});

describe("statusFrom: a status a newer release wrote (the operator rolled back, its CRD kept)", () => {
  const input: StatusInput = {
    generation: 1,
    observed: remote(),
    sync: synced,
    now: T0,
    revision: { id: REV1, status: "DEPLOYED" },
  };
  const ours = statusFrom(input);
  /** A newer release's record, valid under its CRD, which this version's schema does not name. */
  const handled = { annotation: "dms.dev/promote-requested-at", value: "2026-12-01T00:00:00Z" };
  const newer = (status: DeploymentResourceStatus, extra: object = {}) =>
    ({ ...status, handledPromotion: handled, ...extra }) as DeploymentResourceStatus;
  const unknownOf = (status: DeploymentResourceStatus) =>
    (status as Record<string, unknown>).handledPromotion;

  it("keeps a field this version does not know as read, and writes nothing new for it", () => {
    const previous = newer(ours);
    const next = statusFrom({ ...input, previous, now: T1 });
    // The same value, not a copy: nothing of it is read, walked or compared deeply.
    expect(unknownOf(next)).toBe(handled);
    expect(statusEqual(previous, next)).toBe(true);
    expect(changedStatusFields(previous, next)).toEqual([]);
    // Kept whatever the reconcile clears of the fields this version knows.
    const gone = statusFrom({ ...input, previous, observed: null, now: T1 });
    expect(unknownOf(gone)).toBe(handled);
    expect(gone.deploymentId).toBeUndefined();
  });

  it("still drops a field of its own it no longer sets", () => {
    const previous = newer(ours, {
      rolloutStartedAt: "2025-06-01T09:00:00Z",
      failedRevisionLog: { revisionId: REV2, reason: "RevisionFailed" },
    });
    // The rollout's evidence, read: no rollout, no failed revision.
    const next = statusFrom({ ...input, previous, now: T1, rollout: {} });
    expect(next).not.toHaveProperty("rolloutStartedAt");
    expect(next).not.toHaveProperty("failedRevisionLog");
    expect(unknownOf(next)).toBe(handled);
  });

  it("keeps a field of any name as its own (__proto__ included), and a large one without a copy", () => {
    const big = "x".repeat(1_000_000);
    const previous = { ...JSON.parse('{"__proto__": {"kept": true}}'), ...ours, newerLog: big };
    const next = statusFrom({ ...input, previous, now: T1 });
    expect(Object.hasOwn(next, "__proto__")).toBe(true);
    expect(JSON.parse(JSON.stringify(next))).toMatchObject({ newerLog: big });
    expect(JSON.stringify(next)).toContain('"__proto__":{"kept":true}');
    expect(statusEqual(previous, next)).toBe(true);
  });

  it("drops a condition of a type it does not set (it could not keep it current), keeps Exported", () => {
    const at = "2025-06-01T09:00:00Z";
    const degraded = {
      type: "Degraded",
      status: "True" as const,
      reason: "Lagging",
      message: "m",
      lastTransitionTime: at,
    };
    const exported = {
      type: "Exported",
      status: "True" as const,
      reason: "Exported",
      message: "e",
      lastTransitionTime: at,
    };
    const previous = { ...ours, conditions: [...(ours.conditions ?? []), degraded, exported] };
    const next = statusFrom({ ...input, previous, now: T1 });
    expect(next.conditions?.map((c) => c.type)).toEqual([CONDITION.Ready, CONDITION.Synced, "Exported"]);
    expect(condition(next, "Exported")).toEqual(exported);
  });
});

describe("secret values never reach a status", () => {
  it("redacts values a service error echoes, from every condition message", () => {
    fc.assert(
      fc.property(
        // Values holding "*" are left out: the redaction marker itself is made of it.
        fc.uniqueArray(
          fc.string({ minLength: 1, maxLength: 12 }).filter((v) => !v.includes("*")),
          { minLength: 1, maxLength: 4 },
        ),
        fc.string({ maxLength: 20 }),
        (values, filler) => {
          const message = `422: invalid ${values.join(filler)} in ${filler}${values[0]}`;
          const status = statusFrom({
            generation: 1,
            observed: remote(),
            sync: { kind: "failed", reason: "ReconcileError", message },
            now: T0,
            secretValues: values,
          });
          const texts = (status.conditions ?? []).map((c) => c.message).join("\n");
          const leaked = values.filter((v) => texts.includes(v));
          expect(leaked).toEqual([]);
        },
      ),
    );
  });
});

describe("redactSecrets", () => {
  it("holds one byte per character however many occurrences overlap: a key of one repeated character in an 8 MiB body of it", () => {
    const body = "a".repeat(8 * 1024 * 1024);
    // What is measured is memory: the search's wall-clock budget (8 s for 8 MiB, past which the
    // text is withheld as "***") reads a clock that stands still here, so that a loaded machine
    // cannot turn the answer into "***". The budget has tests of its own (log-redaction.test.ts).
    const clock = vi.spyOn(performance, "now").mockReturnValue(0);
    try {
      const before = process.memoryUsage().heapUsed;
      expect(redactSecrets(body, ["a".repeat(32)])).toBe("***");
      expect(redactSecrets(`x${body}y`, ["a"])).toBe("x***y");
      // Millions of [from, to] pairs took hundreds of MiB here; a mark per character takes 8 MiB.
      expect(process.memoryUsage().heapUsed - before).toBeLessThan(64 * 1024 * 1024);
    } finally {
      clock.mockRestore();
    }
    // Two searches of 8 MiB: 0.5 s of CPU, 6.5 s seen at a load of 20 on two cores (past the
    // default 5 s).
  }, 30_000);

  const cases = [
    {
      reason: "every occurrence goes",
      text: "a=hunter2 b=hunter2",
      values: ["hunter2"],
      expected: "a=*** b=***",
    },
    {
      reason: "a value inside another goes with it whole",
      text: "x=abcdef",
      values: ["cd", "abcdef"],
      expected: "x=***",
    },
    {
      reason: "overlapping values merge into one marker",
      text: "abcde",
      values: ["abc", "cde"],
      expected: "***",
    },
    { reason: "empty values are ignored", text: "text", values: [""], expected: "text" },
    {
      reason: "a value with a quote, as JSON escapes it",
      text: '{"detail":"bad value pa\\"ss"}',
      values: ['pa"ss'],
      expected: '{"detail":"bad value ***"}',
    },
    {
      reason: "a value with a backslash and a newline, as JSON escapes them",
      text: '{"detail":"got C:\\\\new\\nline"}',
      values: ["C:\\new\nline"],
      expected: '{"detail":"got ***"}',
    },
    {
      reason: "non-ASCII escaped as \\u00e9 (Python's ensure_ascii), in either case of hex",
      text: '{"a":"caf\\u00e9-1","b":"caf\\u00E9-1","c":"café-1"}',
      values: ["café-1"],
      expected: '{"a":"***","b":"***","c":"***"}',
    },
    {
      reason: "a character outside the BMP escaped as a surrogate pair",
      text: '"k\\ud83d\\ude00y"',
      values: ["k😀y"],
      expected: '"***"',
    },
    {
      reason: "a slash escaped as \\/ and HTML characters as \\u003c (PHP, Go)",
      text: '"a\\/b\\u003cc\\u003e"',
      values: ["a/b<c>"],
      expected: '"***"',
    },
    {
      reason: "escaped twice: a request body quoted as a string inside the error body",
      text: JSON.stringify({ detail: JSON.stringify({ secrets: [{ name: "K", value: 'x"y\\z' }] }) }),
      values: ['x"y\\z'],
      expected: JSON.stringify({
        detail: JSON.stringify({ secrets: [{ name: "K", value: "***" }] }),
      }).replace(/\*\*\*/, "***"),
    },
    {
      reason: "a backslash that starts no escape stays, and so does the text around a value",
      text: "path \\q and s3cr3t",
      values: ["s3cr3t"],
      expected: "path \\q and ***",
    },
  ];
  it.each(cases)("$reason", ({ text, values, expected }) => {
    expect(redactSecrets(text, values)).toBe(expected);
  });

  it("finds any value as JSON text shows it, once or twice encoded, escaped to ASCII or not", () => {
    const asciiJson = (v: string) =>
      JSON.stringify(v).replace(
        /[^\x20-\x7e]/g,
        (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
      );
    fc.assert(
      fc.property(fc.string({ minLength: 3, maxLength: 16, unit: anyCodePoint }), (value) => {
        for (const encoded of [
          JSON.stringify(value),
          asciiJson(value),
          JSON.stringify(JSON.stringify(value)),
          asciiJson(asciiJson(value)),
        ]) {
          const text = `{"detail":"refused ${encoded.slice(1, -1)} here"}`;
          const redacted = redactSecrets(text, [value]);
          expect(redacted).toContain("***");
          expect(redacted).not.toContain(encoded.slice(1, -1));
          expect(redacted.endsWith(' here"}')).toBe(true);
        }
      }),
    );
    // A hundred generated values, four encodings each: 0.1 s of CPU, under 1 s at a load of 20 on
    // two cores.
  }, 30_000);

  it("redactAndTruncate never shows the first part of a value cut at the length", () => {
    const secret = "hunter2-hunter2-hunter2";
    for (let at = 0; at < 40; at++) {
      const text = `${"x".repeat(at)}${secret} and more`;
      const out = redactAndTruncate(text, [secret], 30);
      expect(out.length).toBeLessThanOrEqual(30);
      expect(out).not.toContain("hunter");
    }
  });
});

describe("changedStatusFields", () => {
  it("names the top-level fields and the conditions (by type) that differ, nothing when equal", () => {
    const at = "2026-11-27T10:00:00Z";
    const ready = {
      type: "Ready",
      status: "True",
      reason: "Available",
      message: "m",
      lastTransitionTime: at,
    } as const;
    const synced = {
      type: "Synced",
      status: "True",
      reason: "Synced",
      message: "s",
      lastTransitionTime: at,
    } as const;
    const a: DeploymentResourceStatus = {
      deploymentId: "d1",
      observedGeneration: 2,
      conditions: [ready, synced],
    };
    expect(changedStatusFields(a, structuredClone(a))).toEqual([]);
    expect(
      changedStatusFields(a, {
        deploymentId: "d1",
        observedGeneration: 3,
        rolloutStartedAt: "2026-11-27T10:00:00Z",
        conditions: [{ ...ready, message: "n" }, synced],
      }),
    ).toEqual(["observedGeneration", "conditions.Ready", "rolloutStartedAt"]);
    expect(changedStatusFields(undefined, { conditions: [synced] })).toEqual(["conditions.Synced"]);
  });
});

describe("spec.github's resolution in the status", () => {
  it("records the repository's URL and default branch as answered, a value past the bound left out", () => {
    const github = { repoUrl: "https://github.com/acme/app", defaultBranch: "main" };
    expect(resolvedRepo({ source: "github" }, github)).toEqual({
      resolvedRepoUrl: "https://github.com/acme/app",
      resolvedRepoRef: "main",
    });
    // The spec's own ref: no default branch recorded.
    expect(
      resolvedRepo({ source: "github", sourceRevisionConfig: { repoRef: "v1" } }, github).resolvedRepoRef,
    ).toBeNull();
    // A forge listing's megabyte of URL or branch (its answer is a tenant's input): left out.
    const MB = 1_000_000;
    const huge = { repoUrl: `https://github.com/acme/app?${"x".repeat(MB)}`, defaultBranch: "b".repeat(MB) };
    expect(resolvedRepo({ source: "github" }, huge)).toEqual({
      resolvedRepoUrl: null,
      resolvedRepoRef: null,
    });
    expect(resolvedRepo({ source: "github" }, undefined)).toEqual({
      resolvedRepoUrl: null,
      resolvedRepoRef: null,
    });
  });
});
