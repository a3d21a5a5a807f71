import { Value } from "@sinclair/typebox/value";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  DEPLOYMENT_SOURCES,
  type Deployment,
  type ForgeRepo,
  RESOURCE_SPEC_NUMBER_FIELDS,
} from "../../src/api/wire.ts";
import {
  GithubRepositoryNotFoundError,
  InvalidSpecError,
  SecretNotFoundError,
} from "../../src/crd/errors.ts";
import { resolveGithub } from "../../src/crd/github.ts";
import { desiredFromSpec, MAX_RESOURCE_SPEC_DEPTH, secretKeyRefs } from "../../src/crd/mapping.ts";
import { RESOURCE_SPEC_NUMBERS } from "../../src/crd/resource-spec-schema.ts";
import { type DeploymentSpec, DeploymentSpecSchema } from "../../src/crd/schema.ts";
import { secretDataKey, specFromDeployment } from "../../src/gitops/importer.ts";
import { plan } from "../../src/reconcile/plan.ts";
import { remote } from "./plan-fixtures.ts";

const INTEGRATION = "6f1c1d2e-0000-4000-8000-000000000001";
const repo = (name: string, branch: string): ForgeRepo => ({
  host_integration_id: INTEGRATION,
  id: name.length,
  owner: "acme",
  name,
  url: `https://github.com/acme/${name}`,
  default_branch: branch,
});
const REPOS = [repo("support-agent", "main"), repo("research-agent", "main"), repo("triage-bot", "develop")];

describe("desiredFromSpec", () => {
  const cases: Array<{ reason: string; spec: DeploymentSpec; expected: object }> = [
    {
      reason: "a spec with only the source manages nothing else; the name defaults to metadata.name",
      spec: { source: "internal_template" },
      expected: { name: "meta-name", source: "internal_template" },
    },
    {
      reason: "spec.name wins over metadata.name",
      spec: { name: "Service Name", source: "github" },
      expected: { name: "Service Name", source: "github" },
    },
    {
      reason: "empty nested objects set nothing, so they manage nothing",
      spec: {
        source: "github",
        sourceConfig: { listenerConfig: {}, resourceSpec: {} },
        sourceRevisionConfig: {},
      },
      expected: { name: "meta-name", source: "github" },
    },
    {
      reason: "map keys and env names are never case-converted",
      spec: {
        source: "external_docker",
        sourceConfig: {
          resourceSpec: {
            labels: { "app.kubernetes.io/Name": "x", camelKey: "y" },
            annotations: { "Some.Annotation/KEY": "z" },
            sidecars: [
              {
                name: "s",
                env: [{ name: "myVar", valueFrom: { secretKeyRef: { name: "n", key: "someKey" } } }],
              },
            ],
          },
        },
      },
      expected: {
        name: "meta-name",
        source: "external_docker",
        source_config: {
          resource_spec: {
            labels: { "app.kubernetes.io/Name": "x", camelKey: "y" },
            annotations: { "Some.Annotation/KEY": "z" },
            sidecars: [
              {
                name: "s",
                env: [{ name: "myVar", valueFrom: { secretKeyRef: { name: "n", key: "someKey" } } }],
              },
            ],
          },
        },
      },
    },
    {
      reason:
        "scalar source fields, the listener namespace, revision fields and the revision source map one by one",
      spec: {
        source: "external_docker",
        revisionSource: "internal_docker",
        sourceConfig: {
          buildOnPush: false,
          customUrl: "https://a.example",
          listenerId: "5d6e7f80-91a2-4b3c-8d4e-5f6a7b8c9d0e",
          listenerConfig: { k8sNamespace: "agents" },
          installCommand: "npm ci",
          buildCommand: "npm run build",
        },
        sourceRevisionConfig: {
          imageUri: "r/a:1",
          graphConfigPath: "g.json",
          sourceTarballPath: "t.tgz",
          repoRef: "v1",
        },
        secretReferences: [{ name: "DATABASE_URL", secretName: "billing-db", secretKey: "url" }],
      },
      expected: {
        name: "meta-name",
        source: "external_docker",
        revision_source: "internal_docker",
        source_config: {
          build_on_push: false,
          custom_url: "https://a.example",
          listener_id: "5d6e7f80-91a2-4b3c-8d4e-5f6a7b8c9d0e",
          listener_config: { k8s_namespace: "agents" },
          install_command: "npm ci",
          build_command: "npm run build",
        },
        source_revision_config: {
          image_uri: "r/a:1",
          graph_config_path: "g.json",
          source_tarball_path: "t.tgz",
          repo_ref: "v1",
        },
        secret_references: [{ name: "DATABASE_URL", secret_name: "billing-db", secret_key: "url" }],
      },
    },
  ];
  it.each(cases)("$reason", ({ spec, expected }) => {
    expect(desiredFromSpec(spec, "meta-name", {})).toEqual(expected);
  });

  it("maps every ResourceSpec field to its wire name, with values as given", () => {
    const resourceSpec: Record<string, unknown> = {};
    const wire: Record<string, unknown> = {};
    RESOURCE_SPEC_NUMBERS.forEach(([camel, snake], i) => {
      resourceSpec[camel] = i + 0.5;
      wire[snake] = i + 0.5;
    });
    Object.assign(resourceSpec, {
      serviceAccountName: "sa",
      imagePullSecrets: [{ name: "regcred" }],
      volumes: [{ name: "v", emptyDir: {} }],
      volumeMounts: [{ name: "v", mountPath: "/data", readOnly: true }],
      initContainers: [{ name: "init", image: "busybox", command: ["sh"] }],
    });
    Object.assign(wire, {
      service_account_name: "sa",
      image_pull_secrets: [{ name: "regcred" }],
      volumes: [{ name: "v", emptyDir: {} }],
      volume_mounts: [{ name: "v", mountPath: "/data", readOnly: true }],
      init_containers: [{ name: "init", image: "busybox", command: ["sh"] }],
    });
    const desired = desiredFromSpec({ source: "github", sourceConfig: { resourceSpec } }, "n", {});
    expect(desired.source_config?.resource_spec).toEqual(wire);
    expect(Object.keys(wire)).toEqual(expect.arrayContaining([...RESOURCE_SPEC_NUMBER_FIELDS]));
  });

  it("sends spec.sourceConfig.deploymentType on create as source_config.deployment_type", () => {
    const desired = desiredFromSpec(
      { source: "github", sourceConfig: { deploymentType: "dev_zero" } },
      "agent",
    );
    expect(desired.source_config).toEqual({ deployment_type: "dev_zero" });
    const created = plan(desired, undefined, {});
    expect(created.action === "create" && created.body.source_config).toEqual({
      deployment_type: "dev_zero",
    });
    // Left out, nothing is sent: the service gives its default (prod).
    expect(desiredFromSpec({ source: "github" }, "agent").source_config).toBeUndefined();
  });

  it("fills the github shorthand from its resolution, the default branch only when repoRef is unset", () => {
    const github = resolveGithub({ integrationId: INTEGRATION, repository: "acme/triage-bot" }, REPOS);
    const spec: DeploymentSpec = {
      source: "github",
      github: { integrationId: INTEGRATION, repository: "acme/triage-bot" },
    };
    expect(desiredFromSpec(spec, "n", { github })).toMatchObject({
      source_config: { integration_id: INTEGRATION, repo_url: "https://github.com/acme/triage-bot" },
      source_revision_config: { repo_ref: "develop" },
    });
    const pinned = { ...spec, sourceRevisionConfig: { repoRef: "v1.2.0" } };
    expect(desiredFromSpec(pinned, "n", { github }).source_revision_config).toEqual({ repo_ref: "v1.2.0" });
  });

  it("refuses a github shorthand that was not resolved, naming the field", () => {
    const spec: DeploymentSpec = {
      source: "github",
      github: { integrationId: INTEGRATION, repository: "acme/x" },
    };
    expect(() => desiredFromSpec(spec, "n", {})).toThrow(InvalidSpecError);
    expect(() => desiredFromSpec(spec, "n", {})).toThrow(/spec\.github/);
  });

  it.each([40, 5_000])(
    "refuses a Kubernetes-shaped object kept as given nested %i levels deep, naming where: a service echoing it would nest its answers past their bound",
    (levels) => {
      let deep: Record<string, unknown> = {};
      for (let i = 0; i < levels; i++) deep = { seLinuxOptions: deep };
      const spec = {
        source: "internal_docker",
        sourceConfig: { resourceSpec: { sidecars: [{ name: "s", image: "i", securityContext: deep }] } },
      } as DeploymentSpec;
      const refusal = (() => {
        try {
          desiredFromSpec(spec, "n", {});
        } catch (error) {
          return error;
        }
      })();
      expect(refusal).toBeInstanceOf(InvalidSpecError);
      expect((refusal as InvalidSpecError).field).toBe(
        `spec.sourceConfig.resourceSpec.sidecars[0].securityContext${".seLinuxOptions".repeat(MAX_RESOURCE_SPEC_DEPTH - 2)}`,
      );
      expect((refusal as Error).message).toContain(`nests deeper than ${MAX_RESOURCE_SPEC_DEPTH} levels`);
      // As deep as the bound: sent as given.
      let within: Record<string, unknown> = {};
      for (let i = 0; i < MAX_RESOURCE_SPEC_DEPTH - 3; i++) within = { seLinuxOptions: within };
      const kept = { sidecars: [{ name: "s", image: "i", securityContext: within }] };
      expect(
        desiredFromSpec({ ...spec, sourceConfig: { resourceSpec: kept } }, "n", {}).source_config,
      ).toEqual({
        resource_spec: kept,
      });
    },
  );

  it("resolves literal and referenced secret values from the resource's Secrets", () => {
    const spec: DeploymentSpec = {
      source: "github",
      secrets: [
        { name: "LITERAL", value: "v-literal" },
        { name: "API_KEY", valueFrom: { secretKeyRef: { name: "agent-secrets", key: "api-key" } } },
      ],
    };
    const desired = desiredFromSpec(spec, "n", { secretData: { "agent-secrets": { "api-key": "v-ref" } } });
    expect(desired.secrets).toEqual([
      { name: "LITERAL", value: "v-literal" },
      { name: "API_KEY", value: "v-ref" },
    ]);
  });

  it("names every missing Secret and key, and no value, when references cannot be resolved", () => {
    const spec: DeploymentSpec = {
      source: "github",
      secrets: [
        { name: "A", valueFrom: { secretKeyRef: { name: "absent", key: "k" } } },
        { name: "B", valueFrom: { secretKeyRef: { name: "present", key: "missing-key" } } },
        { name: "C", valueFrom: { secretKeyRef: { name: "present", key: "ok" } } },
      ],
    };
    const run = () => desiredFromSpec(spec, "n", { secretData: { present: { ok: "v-visible-value" } } });
    expect(run).toThrow(SecretNotFoundError);
    try {
      run();
    } catch (error) {
      const e = error as SecretNotFoundError;
      expect(e.missing).toEqual([
        { secret: "absent", key: "k", for: "A" },
        { secret: "present", key: "missing-key", for: "B" },
      ]);
      expect(e.message).toMatch(/Secret "absent".*Secret "present"/);
      expect(e.message).not.toContain("v-visible-value");
    }
  });

  it("lists the Secret keys a spec reads, once each", () => {
    const ref = { secretKeyRef: { name: "s", key: "k" } };
    const spec: DeploymentSpec = {
      source: "github",
      secrets: [
        { name: "A", valueFrom: ref },
        { name: "B", valueFrom: ref },
        { name: "C", value: "x" },
      ],
    };
    expect(secretKeyRefs(spec)).toEqual([{ secret: "s", key: "k" }]);
  });
});

describe("resolveGithub", () => {
  it("finds owner/name case-insensitively, as GitHub does", () => {
    expect(resolveGithub({ integrationId: INTEGRATION, repository: "ACME/Support-Agent" }, REPOS)).toEqual({
      integrationId: INTEGRATION,
      repoUrl: "https://github.com/acme/support-agent",
      defaultBranch: "main",
    });
  });

  it("says which repositories the integration does reach when the one asked for is not there", () => {
    const run = () => resolveGithub({ integrationId: INTEGRATION, repository: "acme/nope" }, REPOS);
    expect(run).toThrow(GithubRepositoryNotFoundError);
    expect(run).toThrow(
      `spec.github.repository: repository acme/nope is not reachable through GitHub integration ${INTEGRATION} (it lists acme/research-agent, acme/support-agent, acme/triage-bot)`,
    );
  });
});

describe("specFromDeployment", () => {
  it("reproduces a deployment field by field, secrets as references to one Secret, read-only fields left out", () => {
    const deployment = remote({
      name: "billing agent",
      source: "external_docker",
      source_config: {
        listener_id: "5d6e7f80-91a2-4b3c-8d4e-5f6a7b8c9d0e",
        listener_config: { k8s_namespace: "agents" },
        custom_url: null,
        resource_spec: { cpu: 2, memory_mb: null, labels: { Team: "billing" } },
      },
      source_revision_config: { image_uri: "r/b:1.8.0", repo_commit_sha: "abc", repo_ref: null },
      secrets: [
        { name: "API_KEY", value: "sk-1" },
        { name: "odd name!", value: "x" },
      ],
      secret_references: [{ name: "DATABASE_URL", secret_name: "billing-db", secret_key: "url" }],
    });
    expect(specFromDeployment(deployment, { secretName: "billing-secrets" })).toEqual({
      name: "billing agent",
      source: "external_docker",
      sourceConfig: {
        listenerId: "5d6e7f80-91a2-4b3c-8d4e-5f6a7b8c9d0e",
        listenerConfig: { k8sNamespace: "agents" },
        resourceSpec: { cpu: 2, labels: { Team: "billing" } },
      },
      sourceRevisionConfig: { imageUri: "r/b:1.8.0" },
      secrets: [
        { name: "API_KEY", valueFrom: { secretKeyRef: { name: "billing-secrets", key: "API_KEY" } } },
        {
          name: "odd name!",
          valueFrom: { secretKeyRef: { name: "billing-secrets", key: secretDataKey("odd name!") } },
        },
      ],
      secretReferences: [{ name: "DATABASE_URL", secretName: "billing-db", secretKey: "url" }],
    });
  });

  it("writes the deployment type the CRD lists, and leaves out one it does not (a newer service's)", () => {
    const typed = (type: string) =>
      specFromDeployment(remote({ source: "github", source_config: { deployment_type: type } }), {
        secretName: "s",
      }).sourceConfig;
    expect(typed("dev_free_zero")).toEqual({ deploymentType: "dev_free_zero" });
    expect(typed("gpu_large")).toBeUndefined();
  });

  it("writes the service's display name within the CRD's bound, and maps it back for a PATCH", () => {
    const named = (displayName: string) =>
      specFromDeployment(remote({ display_name: displayName }), { secretName: "s" }).displayName;
    expect(named("Support agent")).toBe("Support agent");
    expect(named("x".repeat(257))).toBeUndefined();
    const spec = specFromDeployment(remote({ display_name: "Support agent" }), { secretName: "s" });
    expect(desiredFromSpec(spec, "agent").display_name).toBe("Support agent");
    expect(plan(desiredFromSpec(spec, "agent"), remote({ display_name: "Support agent" }), {}).action).toBe(
      "noop",
    );
  });

  it("keys each secret with the caller's keyOf when given one", () => {
    const deployment = remote({ secrets: [{ name: "API_KEY", value: "sk-1" }] });
    const spec = specFromDeployment(deployment, { secretName: "shared", keyOf: (s) => `agent.${s}` });
    expect(spec.secrets).toEqual([
      { name: "API_KEY", valueFrom: { secretKeyRef: { name: "shared", key: "agent.API_KEY" } } },
    ]);
  });

  it("gives every secret a valid, distinct Secret data key", () => {
    expect(secretDataKey("API_KEY")).toBe("API_KEY");
    expect(secretDataKey("a b")).toMatch(/^[-._a-zA-Z0-9]+$/);
    expect(secretDataKey("a b")).not.toBe(secretDataKey("a_b"));
    expect(secretDataKey("a b")).not.toBe(secretDataKey("a:b"));
  });
});

const text = fc.string({ minLength: 1, maxLength: 6 });
const deploymentArb: fc.Arbitrary<Deployment> = fc
  .record({
    name: fc.string({ minLength: 1, maxLength: 20 }),
    source: fc.constantFrom(...DEPLOYMENT_SOURCES),
    source_config: fc.record(
      {
        integration_id: fc.oneof(fc.uuid(), fc.constant(null)),
        repo_url: fc.oneof(text, fc.constant(null)),
        build_on_push: fc.boolean(),
        custom_url: text,
        listener_config: fc.record({ k8s_namespace: text }),
        resource_spec: fc.record(
          {
            ...Object.fromEntries(
              RESOURCE_SPEC_NUMBER_FIELDS.map((f) => [f, fc.oneof(fc.nat(64), fc.constant(null))]),
            ),
            labels: fc.dictionary(text, text, { maxKeys: 2 }),
            sidecars: fc.array(fc.record({ name: text, args: fc.array(text, { maxLength: 2 }) }), {
              maxLength: 2,
            }),
          },
          { requiredKeys: [] },
        ),
      },
      { requiredKeys: [] },
    ),
    source_revision_config: fc.record(
      { repo_ref: text, image_uri: fc.oneof(text, fc.constant(null)), repo_commit_sha: text },
      { requiredKeys: [] },
    ),
    secrets: fc.uniqueArray(fc.record({ name: fc.string({ minLength: 1, maxLength: 8 }), value: text }), {
      selector: (s) => s.name,
      maxLength: 3,
    }),
    secret_references: fc.option(
      fc.uniqueArray(fc.record({ name: text, secret_name: text, secret_key: text }), {
        selector: (r) => r.name,
        maxLength: 2,
      }),
      { nil: null },
    ),
    display_name: fc.option(fc.string({ maxLength: 8 }), { nil: undefined }),
  })
  .map((parts) => remote(parts));

describe("mapping (properties)", () => {
  it("round trip: importing a deployment and applying the result plans nothing, and the spec is valid", () => {
    fc.assert(
      fc.property(deploymentArb, (deployment) => {
        const spec = specFromDeployment(deployment, { secretName: "imported" });
        expect([...Value.Errors(DeploymentSpecSchema, spec)]).toEqual([]);
        const data = Object.fromEntries(
          deployment.secrets.map((s) => [secretDataKey(s.name), s.value ?? ""]),
        );
        const desired = desiredFromSpec(spec, "meta", { secretData: { imported: data } });
        expect(plan(desired, deployment, {})).toMatchObject({ action: "noop", problems: [] });
      }),
      { numRuns: 300 },
    );
  });
});
