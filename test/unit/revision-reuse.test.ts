import { describe, expect, it } from "vitest";
import type { Deployment, Revision } from "../../src/api/wire.ts";
import type { RevisionReusePolicy } from "../../src/crd/spec-policies.ts";
import { REDEPLOY_REASON_MAX_LENGTH, REVISION_HISTORY_LIMIT } from "../../src/crd/status-schema.ts";
import { activeRevision } from "../../src/reconcile/live-revision.ts";
import { redeployedFrom } from "../../src/reconcile/redeploy.ts";
import {
  configAfterPatch,
  type DesiredRevision,
  NO_SECRETS_HASH,
  type RevisionHistoryEntry,
  recordCreated,
  recordDeployed,
  revisionConfigHash,
  revisionReusePolicy,
  splitForRedeploy,
  vouchedSecretsHash,
} from "../../src/reconcile/revision-history.ts";
import { chooseRevision, reuseTarget } from "../../src/reconcile/revision-reuse.ts";
import { hashSecrets } from "../../src/reconcile/secret-hash.ts";
import { statusFrom } from "../../src/reconcile/status.ts";
import { remote } from "./plan-fixtures.ts";

const SECRETS = hashSecrets([{ name: "TOKEN", value: "one" }]);
const ROTATED = hashSecrets([{ name: "TOKEN", value: "two" }]);
const DIGEST_A = `registry.example/agent@sha256:${"a".repeat(64)}`;
const DIGEST_B = `registry.example/agent@sha256:${"b".repeat(64)}`;
const SHA = "0123456789abcdef0123456789abcdef01234567";
const R1 = "11111111-1111-4111-8111-111111111111";
const R2 = "22222222-2222-4222-8222-222222222222";
const R3 = "33333333-3333-4333-8333-333333333333";

const deploymentFixture = (overrides: Partial<Deployment>): Deployment =>
  remote({ source: "external_docker", latest_revision_id: R1, active_revision_id: R1, ...overrides });

const revision = (
  id: string,
  config: Revision["source_revision_config"],
  extra: Partial<Revision> = {},
): Revision => ({
  id,
  status: "DEPLOYED",
  source: "external_docker",
  source_revision_config: config,
  ...extra,
});
const desired = (
  config: DesiredRevision["config"],
  extra: Partial<DesiredRevision> = {},
): DesiredRevision => ({
  config,
  source: "external_docker",
  secretsHash: SECRETS,
  ...extra,
});
const created = (id: string, extra: Partial<RevisionHistoryEntry> = {}): RevisionHistoryEntry => ({
  id,
  secretsHash: SECRETS,
  deployed: true,
  ...extra,
});

interface Case {
  name: string;
  policy: RevisionReusePolicy;
  want: DesiredRevision;
  revisions: Revision[];
  history: RevisionHistoryEntry[];
  /** The revision redeployed, or the start of the reason for building. */
  expected: { redeploy: string } | { build: string };
}

// The revert case: R1 deployed A, R2 deployed B (live), the spec goes back to A.
const reverted = [revision(R2, { image_uri: DIGEST_B }), revision(R1, { image_uri: DIGEST_A })];

const CASES: Case[] = [
  {
    name: "an image by digest changed back: the revision that deployed it",
    policy: "Pinned",
    want: desired({ image_uri: DIGEST_A }),
    revisions: reverted,
    history: [created(R2), created(R1)],
    expected: { redeploy: R1 },
  },
  {
    name: "Never: always build",
    policy: "Never",
    want: desired({ image_uri: DIGEST_A }),
    revisions: reverted,
    history: [created(R2), created(R1)],
    expected: { build: "spec.revisionReuse is Never" },
  },
  {
    name: "an image by tag under Pinned: build",
    policy: "Pinned",
    want: desired({ image_uri: "registry.example/agent:1.4" }),
    revisions: [
      revision(R2, { image_uri: "registry.example/agent:1.5" }),
      revision(R1, { image_uri: "registry.example/agent:1.4" }),
    ],
    history: [created(R2), created(R1)],
    expected: { build: "image registry.example/agent:1.4 is not pinned by digest" },
  },
  {
    name: "an image by tag under SameReference: the revision with that tag",
    policy: "SameReference",
    want: desired({ image_uri: "registry.example/agent:1.4" }),
    revisions: [
      revision(R2, { image_uri: "registry.example/agent:1.5" }),
      revision(R1, { image_uri: "registry.example/agent:1.4" }),
    ],
    history: [created(R2), created(R1)],
    expected: { redeploy: R1 },
  },
  {
    name: "a full commit sha equal to the sha the revision built: reused under Pinned",
    policy: "Pinned",
    want: desired({ repo_ref: SHA, graph_config_path: "langgraph.json" }, { source: "github" }),
    revisions: [
      revision(
        R2,
        { repo_ref: "main", graph_config_path: "langgraph.json", repo_commit_sha: "f".repeat(40) },
        { source: "github" },
      ),
      revision(
        R1,
        { repo_ref: SHA, graph_config_path: "langgraph.json", repo_commit_sha: SHA },
        { source: "github" },
      ),
    ],
    history: [created(R2), created(R1)],
    expected: { redeploy: R1 },
  },
  {
    name: "a 40-hex ref the revision did not build (the service reports another sha): build",
    policy: "Pinned",
    want: desired({ repo_ref: SHA }, { source: "github" }),
    revisions: [revision(R1, { repo_ref: SHA, repo_commit_sha: "e".repeat(40) }, { source: "github" })],
    history: [created(R1)],
    expected: { build: `repoRef ${SHA} is not the commit revision ${R1} built` },
  },
  {
    name: "a short sha is a name that can move under Pinned",
    policy: "Pinned",
    want: desired({ repo_ref: SHA.slice(0, 7) }, { source: "github" }),
    revisions: [revision(R1, { repo_ref: SHA.slice(0, 7), repo_commit_sha: SHA }, { source: "github" })],
    history: [created(R1)],
    expected: { build: `repoRef ${SHA.slice(0, 7)} is a branch or tag name` },
  },
  {
    name: "a branch under Pinned: build",
    policy: "Pinned",
    want: desired({ repo_ref: "main" }, { source: "github" }),
    revisions: [revision(R1, { repo_ref: "main", repo_commit_sha: SHA }, { source: "github" })],
    history: [created(R1)],
    expected: { build: "repoRef main is a branch or tag name" },
  },
  {
    name: "a branch under SameReference: reused",
    policy: "SameReference",
    want: desired({ repo_ref: "main" }, { source: "github" }),
    revisions: [revision(R1, { repo_ref: "main", repo_commit_sha: SHA }, { source: "github" })],
    history: [created(R1)],
    expected: { redeploy: R1 },
  },
  {
    name: "a secret rotated since: never reused",
    policy: "Pinned",
    want: desired({ image_uri: DIGEST_A }, { secretsHash: ROTATED }),
    revisions: reverted,
    history: [created(R2), created(R1)],
    expected: { build: `revision ${R1} deployed the same config with other secret values` },
  },
  {
    name: "secrets the operator cannot vouch for now: never reused",
    policy: "SameReference",
    want: desired({ image_uri: DIGEST_A }, { secretsHash: undefined }),
    revisions: reverted,
    history: [created(R2), created(R1)],
    expected: { build: `revision ${R1} deployed the same config, but the secrets cannot be vouched for` },
  },
  {
    name: "recorded without a digest: never reused",
    policy: "Pinned",
    want: desired({ image_uri: DIGEST_A }),
    revisions: reverted,
    history: [created(R2), { id: R1, deployed: true }],
    expected: { build: `revision ${R1} deployed the same config, but the secrets cannot be vouched for` },
  },
  {
    name: "a revision the operator did not create: never reused",
    policy: "SameReference",
    want: desired({ image_uri: DIGEST_A }),
    revisions: reverted,
    history: [created(R2)],
    expected: { build: `revision ${R1} deployed the same config, but this operator did not create it` },
  },
  {
    name: "a revision that never reached DEPLOYED: not reused",
    policy: "Pinned",
    want: desired({ image_uri: DIGEST_A }),
    revisions: [
      revision(R2, { image_uri: DIGEST_B }),
      revision(R1, { image_uri: DIGEST_A }, { status: "BUILD_FAILED" }),
    ],
    history: [created(R2), created(R1, { deployed: false })],
    expected: { build: `revision ${R1} has the same config but never reached DEPLOYED` },
  },
  {
    name: "DEPLOYED as listed counts, even before the operator saw it active",
    policy: "Pinned",
    want: desired({ image_uri: DIGEST_A }),
    revisions: reverted,
    history: [created(R2), created(R1, { deployed: false })],
    expected: { redeploy: R1 },
  },
  {
    name: "another graph_config_path is another config",
    policy: "Pinned",
    want: desired({ image_uri: DIGEST_A, graph_config_path: "other.json" }),
    revisions: reverted,
    history: [created(R2), created(R1)],
    expected: { build: "no earlier revision among the latest listed deployed the same config" },
  },
  {
    name: "another revision source is another config",
    policy: "Pinned",
    want: desired({ image_uri: DIGEST_A }, { source: "internal_docker" }),
    revisions: reverted,
    history: [created(R2), created(R1)],
    expected: {
      build: `revision ${R1} deployed the same config from source external_docker, not internal_docker`,
    },
  },
  {
    name: "null and absent fields are the same",
    policy: "Pinned",
    want: desired({ image_uri: DIGEST_A, graph_config_path: null }),
    revisions: [revision(R1, { image_uri: DIGEST_A, repo_ref: "" })],
    history: [created(R1)],
    expected: { redeploy: R1 },
  },
  {
    name: "the newest match wins",
    policy: "Pinned",
    want: desired({ image_uri: DIGEST_A }),
    revisions: [revision(R3, { image_uri: DIGEST_A }), ...reverted],
    history: [created(R3), created(R2), created(R1)],
    expected: { redeploy: R3 },
  },
  {
    name: "a miss does not hide an older match",
    policy: "Pinned",
    want: desired({ image_uri: DIGEST_A }),
    revisions: [revision(R3, { image_uri: DIGEST_A }), ...reverted],
    history: [created(R3, { secretsHash: ROTATED }), created(R2), created(R1)],
    expected: { redeploy: R1 },
  },
  {
    name: "an uploaded tarball path can be uploaded again: build under Pinned",
    policy: "Pinned",
    want: desired({ source_tarball_path: "uploads/agent.tgz" }, { source: "internal_source" }),
    revisions: [revision(R1, { source_tarball_path: "uploads/agent.tgz" }, { source: "internal_source" })],
    history: [created(R1)],
    expected: { build: "an uploaded source tarball's path can be uploaded again" },
  },
  {
    name: "no revisions listed: build",
    policy: "Pinned",
    want: desired({ image_uri: DIGEST_A }),
    revisions: [],
    history: [],
    expected: { build: "no earlier revision among the latest listed deployed the same config" },
  },
];

describe("chooseRevision", () => {
  it.each(CASES)("$name", ({ policy, want, revisions, history, expected }) => {
    const decision = chooseRevision({ policy, desired: want, revisions, history });
    if ("redeploy" in expected) {
      expect(decision).toMatchObject({ kind: "redeploy", revisionId: expected.redeploy });
    } else {
      expect(decision.kind).toBe("build");
      expect(decision.reason.startsWith(expected.build)).toBe(true);
    }
  });

  it("says which revision and what it deployed", () => {
    const decision = chooseRevision({
      policy: "Pinned",
      desired: desired({ image_uri: DIGEST_A }),
      revisions: reverted,
      history: [created(R2), created(R1)],
    });
    expect(decision.reason).toBe(
      `revision ${R1} deployed image ${DIGEST_A} with the same secrets (a pinned reference)`,
    );
  });

  it("spec.revisionReuse defaults to Pinned", () => {
    expect(revisionReusePolicy({})).toBe("Pinned");
    expect(revisionReusePolicy({ revisionReuse: "Never" })).toBe("Never");
  });
});

describe("status.revisionHistory", () => {
  it("keeps the last revisions created, newest first, each once, within its bound", () => {
    let history: RevisionHistoryEntry[] = [];
    for (let i = 0; i < REVISION_HISTORY_LIMIT + 5; i++)
      history = recordCreated(history, `r${i}`, i % 2 === 0 ? SECRETS : undefined);
    expect(history).toHaveLength(REVISION_HISTORY_LIMIT);
    expect(history[0]).toEqual({ id: `r${REVISION_HISTORY_LIMIT + 4}`, secretsHash: SECRETS });
    expect(history[1]).toEqual({ id: `r${REVISION_HISTORY_LIMIT + 3}` });
    history = recordCreated(history, "r10", ROTATED);
    expect(history.filter((e) => e.id === "r10")).toEqual([{ id: "r10", secretsHash: ROTATED }]);
    expect(history[0]?.id).toBe("r10");
  });

  it("names the revision a redeploy made live and why, the reason within its bound", () => {
    const from = redeployedFrom(R1, `revision ${R1} deployed image ${"x".repeat(2000)}`);
    expect(from.redeployedFrom).toBe(R1);
    expect(from.redeployReason).toHaveLength(REDEPLOY_REASON_MAX_LENGTH);
    expect(from.redeployReason?.endsWith("…")).toBe(true);
    // A cut never splits a surrogate pair: the API server would store U+FFFD for its half.
    const emoji = redeployedFrom(R1, "🚀".repeat(REDEPLOY_REASON_MAX_LENGTH)).redeployReason ?? "";
    expect(emoji.length).toBeLessThanOrEqual(REDEPLOY_REASON_MAX_LENGTH);
    expect(emoji).toMatch(/^(🚀)+…$/u);
    expect(recordCreated(undefined, R2, SECRETS, undefined, redeployedFrom(R1, "short"))).toEqual([
      { id: R2, secretsHash: SECRETS, redeployedFrom: R1, redeployReason: "short" },
    ]);
  });

  it("marks a revision deployed once, and changes nothing otherwise", () => {
    const history = recordCreated(undefined, R1, SECRETS);
    const marked = recordDeployed(history, R1);
    expect(marked).toEqual([{ id: R1, secretsHash: SECRETS, deployed: true }]);
    expect(recordDeployed(marked, R1)).toBe(marked);
    expect(recordDeployed(history, R2)).toBe(history);
    expect(recordDeployed(undefined, R1)).toBeUndefined();
  });
});

describe("status.activeRevision", () => {
  const NOW = "2030-01-01T00:00:00Z";
  const LATER = "2030-01-01T00:05:00Z";

  it("names the active revision and what it deployed, from when the operator first saw it", () => {
    const d = deploymentFixture({
      latest_revision_id: R1,
      active_revision_id: R1,
      source_revision_config: { repo_ref: "main", repo_commit_sha: SHA },
    });
    const first = activeRevision(d, undefined, NOW);
    expect(first).toEqual({ id: R1, repoRef: "main", repoCommitSha: SHA, deployedAt: NOW });
    expect(activeRevision(d, first, LATER)).toEqual(first);
  });

  it("during a rollout the active revision is older: kept from before, or known from a redeploy", () => {
    const rolling = deploymentFixture({
      latest_revision_id: R2,
      active_revision_id: R1,
      source_revision_config: { image_uri: DIGEST_B },
    });
    const before = { id: R1, imageUri: DIGEST_A, deployedAt: NOW };
    expect(activeRevision(rolling, before, LATER)).toEqual(before);
    expect(activeRevision(rolling, undefined, LATER)).toEqual({ id: R1, deployedAt: LATER });
    expect(activeRevision(rolling, undefined, LATER, { id: R1, config: { image_uri: DIGEST_A } })).toEqual({
      id: R1,
      imageUri: DIGEST_A,
      deployedAt: LATER,
    });
  });

  it("none without an active revision; a value past its bound is left out", () => {
    expect(activeRevision(deploymentFixture({ active_revision_id: null }), undefined, NOW)).toBeUndefined();
    const long = deploymentFixture({
      latest_revision_id: R1,
      active_revision_id: R1,
      source_revision_config: { image_uri: `registry.example/${"x".repeat(2000)}:1` },
    });
    expect(activeRevision(long, undefined, NOW)).toEqual({ id: R1, deployedAt: NOW });
  });
});

describe("statusFrom: status.activeRevision and status.revisionHistory", () => {
  const now = new Date("2030-01-01T00:00:00Z");
  const base = { generation: 1, sync: { kind: "synced" as const }, now };

  it("writes the active revision, marks it deployed in the history, keeps both when not looked at", () => {
    const observed = deploymentFixture({ source_revision_config: { image_uri: DIGEST_A } });
    const status = statusFrom({ ...base, observed, revisionHistory: recordCreated(undefined, R1, SECRETS) });
    expect(status.activeRevision).toEqual({ id: R1, imageUri: DIGEST_A, deployedAt: "2030-01-01T00:00:00Z" });
    expect(status.revisionHistory).toEqual([{ id: R1, secretsHash: SECRETS, deployed: true }]);
    const kept = statusFrom({ ...base, previous: status, observed: undefined });
    expect(kept.activeRevision).toEqual(status.activeRevision);
    expect(kept.revisionHistory).toEqual(status.revisionHistory);
  });

  it("a latest revision reported DEPLOYED is marked too; a deployment known gone clears both", () => {
    const observed = deploymentFixture({ latest_revision_id: R2, active_revision_id: R1 });
    const status = statusFrom({
      ...base,
      observed,
      revision: { id: R2, status: "DEPLOYED" },
      revisionHistory: [created(R2, { deployed: false }), created(R1, { deployed: false })],
    });
    expect(status.revisionHistory?.map((e) => e.deployed)).toEqual([true, true]);
    const gone = statusFrom({ ...base, previous: status, observed: null });
    expect(gone.activeRevision).toBeUndefined();
    expect(gone.revisionHistory).toBeUndefined();
  });
});

describe("what a redeploy stands in for", () => {
  it("the config a PATCH would leave: given fields over the current ones, no resolved sha", () => {
    const current = { repo_ref: "main", graph_config_path: "langgraph.json", repo_commit_sha: SHA };
    expect(configAfterPatch(current, { repo_ref: SHA, image_uri: null })).toEqual({
      repo_ref: SHA,
      graph_config_path: "langgraph.json",
    });
  });

  it.each([
    {
      name: "the revision part alone: nothing left to PATCH",
      body: { source_revision_config: { image_uri: DIGEST_A } },
      split: { rest: undefined },
    },
    {
      name: "with source_config: that part is still PATCHed",
      body: { source_revision_config: { image_uri: DIGEST_A }, source_config: { build_on_push: false } },
      split: { rest: { source_config: { build_on_push: false } } },
    },
    {
      name: "a revision_source alone",
      body: { revision_source: "github" as const },
      split: { rest: undefined },
    },
    {
      name: "with secrets: never replaced",
      body: { source_revision_config: { image_uri: DIGEST_A }, secrets: [] },
      split: undefined,
    },
    {
      name: "no revision-defining field",
      body: { source_config: { build_on_push: false } },
      split: undefined,
    },
  ])("$name", ({ body, split }) => {
    expect(splitForRedeploy(body)).toEqual(split);
  });
});

describe("reuseTarget (what `revisions` marks)", () => {
  // R1 deployed A, R2 deployed B (the service's latest); A was switched back to (R1 active).
  const deployment = deploymentFixture({
    latest_revision_id: R2,
    source_revision_config: { image_uri: DIGEST_B },
  });
  const spec = { sourceRevisionConfig: { imageUri: DIGEST_A } };
  const entry = (extra: Partial<RevisionHistoryEntry> = {}) =>
    created(R1, {
      secretsHash: NO_SECRETS_HASH,
      configHash: revisionConfigHash({ image_uri: DIGEST_A }, "external_docker"),
      ...extra,
    });

  it("marks the revision the spec goes back to", () => {
    const status = { revisionHistory: [created(R2, { secretsHash: NO_SECRETS_HASH }), entry()] };
    expect(reuseTarget(spec, status, deployment, reverted)).toMatchObject({
      kind: "redeploy",
      revisionId: R1,
    });
  });

  it("marks nothing once a switch back to it is pending: nothing will be sent", () => {
    const status = { revisionHistory: [entry({ redeployedAt: "2030-01-01T00:00:00Z" }), created(R2)] };
    expect(reuseTarget(spec, status, deployment, reverted)).toBeUndefined();
  });
});

describe("vouchedSecretsHash", () => {
  it.each([
    {
      name: "the secrets sent",
      input: { managed: true, sentHash: ROTATED, appliedHash: SECRETS, serviceSecretCount: 1 },
      hash: ROTATED,
    },
    {
      name: "managed, nothing sent: the applied digest",
      input: { managed: true, appliedHash: SECRETS, serviceSecretCount: 1 },
      hash: SECRETS,
    },
    {
      name: "managed, none applied yet: cannot vouch",
      input: { managed: true, serviceSecretCount: 1 },
      hash: undefined,
    },
    {
      name: "left out, the service has none: no secrets",
      input: { managed: false, serviceSecretCount: 0 },
      hash: NO_SECRETS_HASH,
    },
    {
      name: "left out, the service has some: cannot vouch",
      input: { managed: false, serviceSecretCount: 2 },
      hash: undefined,
    },
  ])("$name", ({ input, hash }) => {
    expect(vouchedSecretsHash(input)).toBe(hash);
  });
});
