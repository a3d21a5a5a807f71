import { describe, expect, it } from "vitest";
import type { Deployment, ResourceSpec } from "../../src/api/wire.ts";
import type { DesiredDeployment } from "../../src/crd/mapping.ts";
import { type LastApplied, type Plan, plan } from "../../src/reconcile/plan.ts";
import { hashSecrets } from "../../src/reconcile/secret-hash.ts";
import { remote } from "./plan-fixtures.ts";

const base: DesiredDeployment = { name: "agent", source: "github" };
const want = (d: Partial<DesiredDeployment>): DesiredDeployment => ({ ...base, ...d });
const KEY = { name: "API_KEY", value: "sk-live-0123456789" };
/** A resource_spec with a field a newer service might add, which wire.ts does not know. */
const withUnknown = (spec: ResourceSpec): ResourceSpec => Object.assign(spec, { gpu_count: 1 });
const DB = { name: "DB_PASSWORD", value: "pw-9f8e7d6c5b" };

interface Case {
  reason: string;
  desired: DesiredDeployment;
  observed: Deployment | undefined;
  last?: LastApplied;
  expected: Partial<Plan> & Record<string, unknown>;
}

const cases: Case[] = [
  {
    reason: "no deployment on the service: create it with exactly the fields the spec sets",
    desired: want({
      source_config: { repo_url: "https://github.com/acme/a" },
      source_revision_config: { repo_ref: "main" },
    }),
    observed: undefined,
    expected: {
      action: "create",
      body: {
        name: "agent",
        source: "github",
        source_config: { repo_url: "https://github.com/acme/a" },
        source_revision_config: { repo_ref: "main" },
      },
    },
  },
  {
    reason: "revision_source is not part of a create body (the POST shape has none)",
    desired: want({ revision_source: "internal_docker" }),
    observed: undefined,
    expected: { action: "create", body: { name: "agent", source: "github" } },
  },
  {
    reason: "a field the spec leaves out is never reset or sent, whatever the service has",
    desired: want({ source_config: { build_on_push: true } }),
    observed: remote({
      source_config: { build_on_push: true, custom_url: "https://x.example" },
      secrets: [KEY],
    }),
    expected: { action: "noop", problems: [] },
  },
  {
    reason: "only the changed source_config field is sent, and no revision results",
    desired: want({ source_config: { build_on_push: true, custom_url: "https://a.example" } }),
    observed: remote({ source_config: { build_on_push: false, custom_url: "https://a.example" } }),
    expected: {
      action: "patch",
      newRevision: false,
      body: { source_config: { build_on_push: true } },
      summary: ["sourceConfig.buildOnPush: false → true"],
    },
  },
  {
    reason: "a source_revision_config change sends only that field and makes a new revision",
    desired: want({ source: "external_docker", source_revision_config: { image_uri: "repo/a:2" } }),
    observed: remote({
      source: "external_docker",
      source_revision_config: { image_uri: "repo/a:1", repo_commit_sha: "abc" },
    }),
    expected: {
      action: "patch",
      newRevision: true,
      body: { source_revision_config: { image_uri: "repo/a:2" } },
      summary: ["sourceRevisionConfig.imageUri: repo/a:1 → repo/a:2"],
    },
  },
  {
    reason: "revision_source goes along with a new revision",
    desired: want({ revision_source: "internal_source", source_revision_config: { repo_ref: "v2" } }),
    observed: remote({ source_revision_config: { repo_ref: "v1" } }),
    expected: {
      action: "patch",
      body: { source_revision_config: { repo_ref: "v2" }, revision_source: "internal_source" },
    },
  },
  {
    reason: "revision_source alone never triggers a PATCH: the service does not report it back",
    desired: want({ revision_source: "internal_source", source_revision_config: { repo_ref: "v1" } }),
    observed: remote({ source_revision_config: { repo_ref: "v1" } }),
    expected: { action: "noop" },
  },
  {
    reason: "a source_config and a revision change travel apart in one body, each with only its fields",
    desired: want({
      source_config: { install_command: "npm ci" },
      source_revision_config: { repo_ref: "b", graph_config_path: "g.json" },
    }),
    observed: remote({
      source_config: { install_command: "npm i" },
      source_revision_config: { repo_ref: "a", graph_config_path: "g.json" },
    }),
    expected: {
      action: "patch",
      newRevision: true,
      body: { source_config: { install_command: "npm ci" }, source_revision_config: { repo_ref: "b" } },
    },
  },
  {
    reason: "the name differs: a deployment cannot be renamed, so nothing is sent",
    desired: want({ name: "agent-2", source_config: { build_on_push: true } }),
    observed: remote(),
    expected: { action: "blocked" },
  },
  {
    reason: "the source differs: it cannot change, so nothing is sent",
    desired: want({ source: "internal_docker" }),
    observed: remote(),
    expected: { action: "blocked" },
  },
  {
    reason: "the deployment type the spec sets differs from the service's: refused, never PATCHed",
    desired: want({ source_config: { deployment_type: "dev", build_on_push: true } }),
    observed: remote({ source_config: { deployment_type: "prod", build_on_push: false } }),
    expected: {
      action: "blocked",
      problems: [
        expect.objectContaining({
          reason: "DeploymentTypeMismatch",
          field: "spec.sourceConfig.deploymentType",
        }),
      ],
    },
  },
  {
    reason: "the deployment type the spec sets is the service's: nothing to send",
    desired: want({ source_config: { deployment_type: "dev" } }),
    observed: remote({ source_config: { deployment_type: "dev" } }),
    expected: { action: "noop", problems: [] },
  },
  {
    reason: "a spec without a deployment type accepts the service's, and the rest is compared as ever",
    desired: want({ source_config: { build_on_push: true } }),
    observed: remote({ source_config: { deployment_type: "dev_free_zero", build_on_push: false } }),
    expected: { action: "patch", body: { source_config: { build_on_push: true } } },
  },
  {
    reason: "a service that returns no deployment type: nothing to compare, and the type is not PATCHed",
    desired: want({ source_config: { deployment_type: "dev", build_on_push: true } }),
    observed: remote({ source_config: { build_on_push: false } }),
    expected: { action: "patch", body: { source_config: { build_on_push: true } } },
  },
  {
    reason: "the deployment type is sent on create",
    desired: want({ source_config: { deployment_type: "dev_zero" } }),
    observed: undefined,
    expected: {
      action: "create",
      body: { name: "agent", source: "github", source_config: { deployment_type: "dev_zero" } },
    },
  },
  {
    reason:
      "resource_spec: one changed field sends the whole spec merged over the service's, unknown fields included",
    desired: want({ source_config: { resource_spec: { cpu: 2, labels: { Team: "A" } } } }),
    observed: remote({
      source_config: { resource_spec: withUnknown({ cpu: 1, memory_mb: 512, labels: { Team: "A" } }) },
    }),
    expected: {
      action: "patch",
      newRevision: false,
      body: {
        source_config: { resource_spec: withUnknown({ cpu: 2, memory_mb: 512, labels: { Team: "A" } }) },
      },
      summary: ["sourceConfig.resourceSpec.cpu: 1 → 2"],
    },
  },
  {
    reason: "resource_spec numbers compare numerically: 1 and 1.0 are the same value",
    desired: want({ source_config: { resource_spec: { cpu: 1.0, max_scale: 3 } } }),
    observed: remote({
      source_config: { resource_spec: JSON.parse('{"cpu": 1, "max_scale": 3.0, "min_scale": 1}') },
    }),
    expected: { action: "noop" },
  },
  {
    reason: "a managed map is compared whole: a key only the service has is drift; key case is kept",
    desired: want({ source_config: { resource_spec: { labels: { Team: "a" } } } }),
    observed: remote({ source_config: { resource_spec: { labels: { Team: "a", extra: "x" } } } }),
    expected: { action: "patch", body: { source_config: { resource_spec: { labels: { Team: "a" } } } } },
  },
  {
    reason: "nested Kubernetes objects compare deeply, whatever the key order",
    desired: want({
      source_config: {
        resource_spec: { sidecars: [{ name: "s", resources: { limits: { cpu: "1", memory: "1Gi" } } }] },
      },
    }),
    observed: remote({
      source_config: {
        resource_spec: { sidecars: [{ resources: { limits: { memory: "1Gi", cpu: "1" } }, name: "s" }] },
      },
    }),
    expected: { action: "noop" },
  },
  {
    reason: "lists are ordered (env order matters to Kubernetes): a reorder is a change",
    desired: want({
      source_config: { resource_spec: { sidecars: [{ name: "s", env: [{ name: "A" }, { name: "B" }] }] } },
    }),
    observed: remote({
      source_config: { resource_spec: { sidecars: [{ name: "s", env: [{ name: "B" }, { name: "A" }] }] } },
    }),
    expected: { action: "patch", newRevision: false },
  },
  {
    reason: "a desired value against a null on the service is a change",
    desired: want({ source_config: { custom_url: "https://a.example", resource_spec: { cpu: 1 } } }),
    observed: remote({ source_config: { custom_url: null, resource_spec: null } }),
    expected: {
      action: "patch",
      body: { source_config: { custom_url: "https://a.example", resource_spec: { cpu: 1 } } },
      summary: [
        "sourceConfig.customUrl: (unset) → https://a.example",
        "sourceConfig.resourceSpec.cpu: (unset) → 1",
      ],
    },
  },
  {
    reason: "listener namespace: compared by value, sent as the listener_config object",
    desired: want({ source: "external_docker", source_config: { listener_config: { k8s_namespace: "b" } } }),
    observed: remote({
      source: "external_docker",
      source_config: { listener_config: { k8s_namespace: "a" } },
    }),
    expected: { action: "patch", body: { source_config: { listener_config: { k8s_namespace: "b" } } } },
  },
  {
    reason: "secrets unmanaged (left out of the spec): never sent, whatever the service has",
    desired: want({}),
    observed: remote({ secrets: [KEY] }),
    expected: { action: "noop", problems: [] },
  },
  {
    reason: "secrets: masked values with the hash last applied and the same names are in sync",
    desired: want({ secrets: [KEY, DB] }),
    observed: remote({
      secrets: [
        { name: "DB_PASSWORD", value: "****" },
        { name: "API_KEY", value: "****" },
      ],
    }),
    last: { secretsHash: hashSecrets([DB, KEY]) },
    expected: { action: "noop", secretsHash: hashSecrets([KEY, DB]) },
  },
  {
    reason: "secrets: no values shown and no hash recorded (first sight): sent once to be sure",
    desired: want({ secrets: [KEY] }),
    observed: remote({ secrets: [{ name: "API_KEY" }] }),
    expected: {
      action: "patch",
      newRevision: false,
      body: { secrets: [KEY] },
      summary: ["secrets: rotated API_KEY"],
    },
  },
  {
    reason: "secrets: the service shows the desired values: in sync even without a recorded hash",
    desired: want({ secrets: [KEY] }),
    observed: remote({ secrets: [KEY] }),
    expected: { action: "noop", secretsHash: hashSecrets([KEY]) },
  },
  {
    reason:
      "secrets: a value rotated in the Kubernetes Secret changes the hash: send all, name the rotated one",
    desired: want({ secrets: [{ name: "API_KEY", value: "sk-live-new-value" }, DB] }),
    observed: remote({ secrets: [KEY, DB] }),
    last: { secretsHash: hashSecrets([KEY, DB]) },
    expected: { action: "patch", summary: ["secrets: rotated API_KEY"] },
  },
  {
    reason: "secrets: a name added and one only the service has are both reported",
    desired: want({ secrets: [KEY] }),
    observed: remote({ secrets: [{ name: "OLD", value: "****" }] }),
    expected: { action: "patch", summary: ["secrets: added API_KEY", "secrets: removed OLD"] },
  },
  {
    reason: "secrets: a secret deleted on the service with the hash unchanged is re-added",
    desired: want({ secrets: [KEY, DB] }),
    observed: remote({ secrets: [{ name: "API_KEY", value: "****" }] }),
    last: { secretsHash: hashSecrets([KEY, DB]) },
    expected: { action: "patch", summary: ["secrets: added DB_PASSWORD"], body: { secrets: [KEY, DB] } },
  },
  {
    reason: "secrets: an empty list sent before that the service kept: reported, not sent again",
    desired: want({ secrets: [] }),
    observed: remote({ secrets: [{ name: "API_KEY", value: "****" }] }),
    last: { secretsHash: hashSecrets([]) },
    expected: { action: "noop" },
  },
  {
    reason: "secrets: an empty list against none is in sync",
    desired: want({ secrets: [] }),
    observed: remote({ secrets: [] }),
    expected: { action: "noop", problems: [], secretsHash: hashSecrets([]) },
  },
  {
    reason: "secret references compare as a set keyed by name (order does not matter)",
    desired: want({
      source: "external_docker",
      secret_references: [
        { name: "B", secret_name: "s", secret_key: "b" },
        { name: "A", secret_name: "s", secret_key: "a" },
      ],
    }),
    observed: remote({
      source: "external_docker",
      secret_references: [
        { name: "A", secret_name: "s", secret_key: "a" },
        { name: "B", secret_name: "s", secret_key: "b" },
      ],
    }),
    expected: { action: "noop" },
  },
  {
    reason: "secret references: a changed key sends the whole desired list, without a revision",
    desired: want({
      source: "external_docker",
      secret_references: [{ name: "A", secret_name: "s", secret_key: "a2" }],
    }),
    observed: remote({
      source: "external_docker",
      secret_references: [{ name: "A", secret_name: "s", secret_key: "a" }],
    }),
    expected: {
      action: "patch",
      newRevision: false,
      body: { secret_references: [{ name: "A", secret_name: "s", secret_key: "a2" }] },
      summary: ["secretReferences: A:s:a → A:s:a2"],
    },
  },
];

describe("plan", () => {
  it.each(cases)("$reason", ({ desired, observed, last, expected }) => {
    const { body, ...rest } = expected;
    const result = plan(desired, observed, last ?? {});
    expect(result).toMatchObject(rest);
    // Bodies compare exactly: a PATCH must carry nothing beyond what changed.
    if (body !== undefined) expect("body" in result ? result.body : undefined).toEqual(body);
  });

  it("sends an empty secrets list once, as the spec reads it: no secrets", () => {
    const result = plan(want({ secrets: [] }), remote({ secrets: [{ name: "API_KEY" }] }), {});
    expect(result).toMatchObject({
      action: "patch",
      body: { secrets: [] },
      summary: ["secrets: removed API_KEY"],
      secretsHash: hashSecrets([]),
    });
  });

  it("sends it no more once it was sent and the service kept the secrets: a problem naming the field and the fix", () => {
    const last = { secretsHash: hashSecrets([]) };
    const result = plan(want({ secrets: [] }), remote({ secrets: [{ name: "API_KEY" }] }), last);
    expect(result.action).toBe("noop");
    expect(result.action === "noop" && result.problems).toEqual([
      expect.objectContaining({
        reason: "CannotClearSecrets",
        field: "spec.secrets",
        message: expect.stringMatching(/API_KEY.*"unchanged".*not sent again.*remove them on the service/),
      }),
    ]);
  });

  it("sends spec.displayName by a PATCH when it differs, never on create, and leaves the service's when unset", () => {
    const named = plan(want({ display_name: "Support agent" }), remote(), {});
    expect(named).toMatchObject({
      action: "patch",
      newRevision: false,
      body: { display_name: "Support agent" },
      summary: ["displayName: (unset) → Support agent"],
    });
    expect(plan(want({ display_name: "A" }), remote({ display_name: "A" }), {}).action).toBe("noop");
    expect(plan(want({}), remote({ display_name: "A" }), {}).action).toBe("noop");
    const create = plan(want({ display_name: "A" }), undefined, {});
    expect(create).toMatchObject({ action: "create", displayName: "A" });
    expect(create.action === "create" && create.body).not.toHaveProperty("display_name");
  });

  it("names both immutable fields with the way out when name and source differ", () => {
    const result = plan(want({ name: "other", source: "internal_source" }), remote(), {});
    expect(result).toMatchObject({
      action: "blocked",
      problems: [{ field: "spec.name" }, { field: "spec.source" }],
    });
    expect(result.action === "blocked" && result.problems[0]?.message).toMatch(
      /cannot be renamed.*restore spec.name/,
    );
  });

  it("names spec.sourceConfig.deploymentType, both types and that a new type means a new deployment", () => {
    const result = plan(
      want({ source_config: { deployment_type: "dev" } }),
      remote({ source_config: { deployment_type: "prod" } }),
      {},
    );
    expect(result.action === "blocked" && result.problems[0]?.message).toMatch(
      /spec\.sourceConfig\.deploymentType is dev .*has the type prod.*a new type means a new deployment/,
    );
  });

  it("the create summary lists what will be set and names secrets without their values", () => {
    const result = plan(
      want({ secrets: [KEY], source_config: { resource_spec: { cpu: 1 } } }),
      undefined,
      {},
    );
    expect(result).toMatchObject({
      action: "create",
      summary: [
        "create deployment agent (source github)",
        "sourceConfig.resourceSpec.cpu: (unset) → 1",
        "secrets: added API_KEY",
      ],
      secretsHash: hashSecrets([KEY]),
    });
  });

  it("cuts long values in summaries to one short line", () => {
    const long = "x".repeat(500);
    const result = plan(want({ source_config: { build_command: long } }), remote(), {});
    const [line] = result.action === "patch" ? result.summary : [];
    expect(line?.length).toBeLessThan(200);
    expect(line).toMatch(/…$/);
  });
});
