import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { DEPLOYMENT_SOURCES, type Deployment, type ForgeRepo } from "../../src/api/wire.ts";
import { SecretNotFoundError } from "../../src/crd/errors.ts";
import { desiredFromSpec } from "../../src/crd/mapping.ts";
import { renderFiles, renderStream } from "../../src/gitops/import-render.ts";
import { type ImportSettings, importDeployments, secretValueState } from "../../src/gitops/importer.ts";
import { parseManifests } from "../../src/gitops/manifests.ts";
import type { RepoListing } from "../../src/gitops/repos.ts";
import { plan } from "../../src/reconcile/plan.ts";
import { remote } from "./plan-fixtures.ts";

const INTEGRATION = "6f1c1d2e-0000-4000-8000-000000000001";
const repo = (name: string): ForgeRepo => ({
  host_integration_id: INTEGRATION,
  id: name.length,
  owner: "acme",
  name,
  url: `https://github.com/acme/${name}`,
  default_branch: "main",
});
const listed = (...names: string[]): RepoListing => ({ kind: "listed", repos: names.map(repo) });
const settings = (over: Partial<ImportSettings> = {}): ImportSettings => ({
  repos: new Map([[INTEGRATION, listed("support-agent")]]),
  ...over,
});

const github = (over: Partial<Deployment> = {}) =>
  remote({
    name: "support-agent",
    source: "github",
    source_config: { integration_id: INTEGRATION, repo_url: "https://github.com/acme/support-agent" },
    source_revision_config: { repo_ref: "main", repo_commit_sha: "abc123" },
    ...over,
  });

/** The Secret manifest's stringData among rendered documents, or undefined. */
function secretData(text: string): Record<string, string> | null | undefined {
  for (const doc of parseAllDocuments(text)) {
    const value = doc.toJS() as { kind?: string; stringData?: Record<string, string> | null } | null;
    if (value?.kind === "Secret") return value.stringData ?? null;
  }
  return undefined;
}

/** Imports, renders as one stream, reads the stream back as `kubectl apply` would, and plans each resource. */
function roundTrip(deployments: Deployment[], s: ImportSettings) {
  const result = importDeployments(deployments, s);
  const text = renderStream(result, renderFiles(result, s));
  const parsed = parseManifests(text, "import.yaml");
  const data = secretData(text);
  const plans = parsed.resources.map(({ resource }) => {
    const secretName = resource.spec.secrets?.[0]?.valueFrom?.secretKeyRef.name;
    const desired = desiredFromSpec(resource.spec, resource.metadata.name, {
      ...(secretName && data ? { secretData: { [secretName]: data } } : {}),
    });
    const observed = deployments.find((d) => d.name === desired.name);
    return plan(desired, observed, {});
  });
  return { result, text, parsed, plans };
}

describe("importDeployments", () => {
  it("reproduces a deployment so that the planner finds nothing to send (secrets from the produced Secret)", () => {
    const d = github({ secrets: [{ name: "OPENAI_API_KEY", value: "sk-never-in-a-resource" }] });
    const { parsed, plans, text } = roundTrip([d], settings({ secretsFrom: "agents", namespace: "team" }));
    expect(parsed.problems).toEqual([]);
    expect(plans.map((p) => p.action)).toEqual(["noop"]);
    const resource = parsed.resources[0]?.resource;
    expect(resource?.metadata).toEqual({ name: "support-agent", namespace: "team" });
    expect(resource?.spec.secrets).toEqual([
      {
        name: "OPENAI_API_KEY",
        valueFrom: { secretKeyRef: { name: "agents", key: "support-agent.OPENAI_API_KEY" } },
      },
    ]);
    // The value is in the Secret manifest only, never in the resource's document.
    expect(secretData(text)).toEqual({ "support-agent.OPENAI_API_KEY": "sk-never-in-a-resource" });
    const resourceDoc = text.split("---\n").find((doc) => doc.includes("kind: Deployment"));
    expect(resourceDoc).not.toContain("sk-never-in-a-resource");
  });

  it("writes a secret value ending in blank lines into the manifest as it is, so the operator sends nothing", () => {
    // A YAML block scalar keeps trailing line breaks only to the end of its text: trimming the
    // text would cut them from the value, and the operator would send the shortened one.
    const values = { A_KEY: "line 1\nline 2\n\n", B_PEM: "-----END-----\n\n\n", C_LAST: "x\n\n" };
    const d = github({ secrets: Object.entries(values).map(([name, value]) => ({ name, value })) });
    const { parsed, plans, text } = roundTrip([d], settings({ secretsFrom: "agents" }));
    expect(parsed.problems).toEqual([]);
    expect(secretData(text)).toEqual(
      Object.fromEntries(Object.entries(values).map(([name, value]) => [`support-agent.${name}`, value])),
    );
    expect(plans.map((p) => p.action)).toEqual(["noop"]);
  });

  it("imports resource settings whose nested fields the service returns as null, as absent", () => {
    // The service answers unset fields inside the lists as null; the planner reads them as
    // absent, so the resource leaves them out rather than being refused by the CRD.
    const d = remote({
      name: "summarizer",
      source: "internal_docker",
      source_config: {
        resource_spec: {
          cpu: 1,
          sidecars: [
            {
              name: "proxy",
              image: "envoy:1.30",
              imagePullPolicy: null,
              command: null,
              env: [{ name: "MODE", value: "edge", valueFrom: null }],
              securityContext: { runAsNonRoot: true, runAsUser: null },
            },
          ],
          volume_mounts: [{ name: "cache", mountPath: "/cache", subPath: null, readOnly: null }],
        },
      } as Deployment["source_config"],
      source_revision_config: { image_uri: "summarizer:1" },
    });
    const { result, parsed, plans } = roundTrip([d], settings());
    expect(result.skipped).toEqual([]);
    expect(parsed.problems).toEqual([]);
    expect(parsed.resources[0]?.resource.spec.sourceConfig?.resourceSpec).toEqual({
      cpu: 1,
      volumeMounts: [{ name: "cache", mountPath: "/cache" }],
      sidecars: [
        {
          name: "proxy",
          image: "envoy:1.30",
          env: [{ name: "MODE", value: "edge" }],
          securityContext: { runAsNonRoot: true },
        },
      ],
    });
    expect(plans.map((p) => p.action)).toEqual(["noop"]);
  });

  it("through a connection, every resource names it in spec.connectionRef and still plans nothing", () => {
    const connectionRef = { kind: "ServiceConnection" as const, name: "prod" };
    const { parsed, plans, text } = roundTrip([github()], settings({ connectionRef, namespace: "team" }));
    expect(parsed.problems).toEqual([]);
    expect(plans.map((p) => p.action)).toEqual(["noop"]);
    const spec = parsed.resources[0]?.resource.spec;
    expect(spec?.connectionRef).toEqual(connectionRef);
    expect(Object.keys(spec ?? {}).slice(0, 3)).toEqual(["name", "source", "connectionRef"]);
    expect(text).toMatch(
      /^# Imported from the service's deployment "support-agent" \(.*\) through ServiceConnection\/prod\.$/m,
    );
    // Without one, no reference: the resource uses the operator's default connection.
    expect(importDeployments([github()], settings()).resources[0]?.resource.spec).not.toHaveProperty(
      "connectionRef",
    );
  });

  it("without --secrets-from, each deployment reads its own Secret and no manifest (so no value) is written", () => {
    const d = github({ secrets: [{ name: "TOKEN", value: "tok-1" }] });
    const result = importDeployments([d], settings());
    const files = renderFiles(result, {});
    expect(files.map((f) => f.name)).toEqual(["support-agent.yaml"]);
    expect(result.resources[0]?.resource.spec.secrets?.[0]?.valueFrom?.secretKeyRef).toEqual({
      name: "support-agent-secrets",
      key: "TOKEN",
    });
    expect(files[0]?.text).toContain("must hold keys TOKEN");
    expect(renderStream(result, files)).not.toContain("tok-1");
  });

  it("masked or missing values become commented placeholders: applying them unfilled sends nothing", () => {
    const d = github({
      secrets: [{ name: "MASKED", value: "********" }, { name: "ABSENT" }],
    });
    const s = settings({ secretsFrom: "agents" });
    const result = importDeployments([d], s);
    const [secret] = renderFiles(result, s).filter((f) => f.name === "agents.secret.yaml");
    expect(secret?.sensitive).toBe(false);
    // Still written readable by its owner only: the real values go into this very file.
    expect(secret?.ownerOnly).toBe(true);
    expect(secret?.text).toContain("FILL IN");
    expect(secret?.text).toContain(
      '# support-agent.MASKED: "FILL IN: value of secret \\"MASKED\\" of deployment \\"support-agent\\", masked by the service"',
    );
    expect(secret?.text).toContain("not returned by the service");
    // Unfilled, the Secret holds no key: the mapping names the missing keys instead of sending.
    expect(() => roundTrip([d], s)).toThrow(SecretNotFoundError);
  });

  it("classifies how the service showed a value", () => {
    expect(secretValueState(undefined)).toBe("absent");
    expect(secretValueState("********")).toBe("masked");
    expect(secretValueState("••••")).toBe("masked");
    expect(secretValueState("")).toBe("value");
    expect(secretValueState("sk-*-1")).toBe("value");
  });

  it("keeps the service's name in spec.name and derives a Kubernetes name when it is not one", () => {
    const result = importDeployments([github({ name: "Support Agent_v2" })], settings());
    const resource = result.resources[0]?.resource;
    expect(resource?.spec.name).toBe("Support Agent_v2");
    expect(resource?.metadata.name).toMatch(/^support-agent-v2-[0-9a-f]{6}$/);
  });

  const skips: Array<{ reason: string; deployments: Deployment[]; expected: RegExp }> = [
    {
      reason: "two deployments with one name cannot be told apart by the operator",
      deployments: [github({ id: "a" }), github({ id: "b" })],
      expected: /2 deployments with this name/,
    },
    {
      reason: "a deployment being deleted would be created again",
      deployments: [github({ status: "AWAITING_DELETE" })],
      expected: /being deleted/,
    },
    {
      reason: "what the CRD refuses cannot be applied (a request above its limit)",
      deployments: [github({ source_config: { resource_spec: { cpu: 4, cpu_limit: 2 } } })],
      expected: /CRD would refuse.*cpu must not exceed/,
    },
    {
      reason: "what the CRD refuses cannot be applied (a listener namespace longer than 63)",
      deployments: [
        remote({
          source: "external_docker",
          source_config: { listener_config: { k8s_namespace: "n".repeat(64) } },
        }),
      ],
      expected: /listenerConfig\.k8sNamespace/,
    },
  ];
  it.each(skips)("skips with a reason: $reason", ({ deployments, expected }) => {
    const result = importDeployments(deployments, settings());
    expect(result.resources).toEqual([]);
    expect(result.skipped.length).toBe(deployments.length);
    for (const s of result.skipped) expect(s.reason).toMatch(expected);
    expect(renderStream(result, [])).toMatch(/^# skipped "/m);
  });

  it("warns when a github repository is not reachable through its integration, or the integration is unknown", () => {
    const other = github({
      source_config: { integration_id: INTEGRATION, repo_url: "https://github.com/acme/gone" },
    });
    expect(importDeployments([other], settings()).resources[0]?.warnings).toEqual([
      `repository https://github.com/acme/gone is not among the 1 repository GitHub integration ${INTEGRATION} lists: new revisions will fail until the integration is granted access to it`,
    ]);
    const unknown = importDeployments(
      [github()],
      settings({ repos: new Map([[INTEGRATION, { kind: "not-found" }]]) }),
    );
    expect(unknown.resources[0]?.warnings[0]).toMatch(/no GitHub integration/);
    // Same repository written differently (case, .git): reachable.
    const same = github({
      source_config: { integration_id: INTEGRATION, repo_url: "https://GitHub.com/acme/Support-Agent.git" },
    });
    expect(importDeployments([same], settings()).resources[0]?.warnings).toEqual([]);
  });

  it("leaves secret references the resource cannot hold unmanaged, with a warning", () => {
    const d = github({ secret_references: [{ name: "DB", secret_name: "db", secret_key: "url" }] });
    const imported = importDeployments([d], settings()).resources[0];
    expect(imported?.resource.spec.secretReferences).toBeUndefined();
    expect(imported?.warnings).toContain(
      "its secret_references (DB) are left unmanaged: the resource allows them only with source external_docker",
    );
  });

  it("proposes spec.deletionProtection: true for prod deployments and those of no type, with a comment saying why", () => {
    const typed = (name: string, deployment_type: string | null | undefined) =>
      github({
        name,
        source_config: {
          integration_id: INTEGRATION,
          repo_url: "https://github.com/acme/support-agent",
          ...(deployment_type === undefined ? {} : { deployment_type }),
        },
      });
    const deployments = [
      typed("prod-agent", "prod"),
      typed("untyped-agent", undefined),
      typed("null-agent", null),
      typed("dev-agent", "dev"),
      typed("zero-agent", "dev_zero"),
      typed("newer-agent", "gpu_prod"),
    ];
    const { parsed, plans, text } = roundTrip(deployments, settings());
    expect(parsed.problems).toEqual([]);
    const protection = Object.fromEntries(
      parsed.resources.map(({ resource }) => [resource.metadata.name, resource.spec.deletionProtection]),
    );
    expect(protection).toEqual({
      "prod-agent": true,
      "untyped-agent": true,
      "null-agent": true,
      "dev-agent": undefined,
      "zero-agent": undefined,
      "newer-agent": undefined,
    });
    // An operator-side field: adopting the deployment still sends nothing.
    expect(plans.map((p) => p.action)).toEqual(deployments.map(() => "noop"));
    const doc = (name: string) => text.split("---\n").find((d) => d.includes(`name: ${name}\n`)) ?? "";
    expect(doc("prod-agent")).toContain(
      "# spec.deletionProtection: true because its deployment type is prod: the API server refuses to delete this resource (a pruned file, kubectl delete) until spec.deletionProtection is set to false; set it to false here if it may be deleted from Git.\n",
    );
    expect(doc("untyped-agent")).toContain(
      "# spec.deletionProtection: true because the service returns no deployment type for it, and makes a deployment prod when none is given:",
    );
    expect(doc("dev-agent")).not.toContain("deletionProtection");
  });

  it("puts every line of a comment behind #, even for names holding line breaks", () => {
    const d = github({ name: "evil\nkind: Secret" });
    const { parsed, result } = roundTrip([d], settings());
    expect(result.resources).toHaveLength(1);
    expect(parsed.problems).toEqual([]);
    expect(parsed.resources[0]?.resource.spec.name).toBe("evil\nkind: Secret");
  });
});

const text = fc.string({ minLength: 1, maxLength: 12 });
const deploymentArb = fc
  .record({
    name: fc.oneof(
      fc.stringMatching(/^[a-z][a-z0-9-]{0,20}[a-z0-9]$/),
      fc.string({ minLength: 1, maxLength: 30 }),
    ),
    source: fc.constantFrom(...DEPLOYMENT_SOURCES),
    customUrl: fc.option(text, { nil: undefined }),
    buildOnPush: fc.option(fc.boolean(), { nil: undefined }),
    minScale: fc.option(fc.nat(5), { nil: undefined }),
    extraScale: fc.nat(5),
    cpu: fc.option(fc.double({ min: 0, max: 64, noNaN: true }), { nil: undefined }),
    labels: fc.option(fc.dictionary(text, text, { maxKeys: 3 }), { nil: undefined }),
    imageUri: fc.option(text, { nil: undefined }),
    repoRef: fc.option(text, { nil: undefined }),
    secrets: fc.uniqueArray(fc.record({ name: text, value: fc.string({ maxLength: 20 }) }), {
      maxLength: 3,
      selector: (s) => s.name,
    }),
  })
  .map((a) => {
    const resourceSpec: Record<string, unknown> = {};
    if (a.minScale !== undefined)
      Object.assign(resourceSpec, { min_scale: a.minScale, max_scale: a.minScale + a.extraScale });
    if (a.cpu !== undefined) resourceSpec.cpu = a.cpu;
    if (a.labels !== undefined) resourceSpec.labels = a.labels;
    return remote({
      name: a.name,
      source: a.source,
      source_config: {
        // The service has the repository of every github deployment (its create requires it).
        ...(a.source === "github"
          ? { integration_id: INTEGRATION, repo_url: "https://github.com/acme/support-agent" }
          : {}),
        ...(a.customUrl !== undefined ? { custom_url: a.customUrl } : {}),
        ...(a.buildOnPush !== undefined ? { build_on_push: a.buildOnPush } : {}),
        ...(Object.keys(resourceSpec).length > 0 ? { resource_spec: resourceSpec } : {}),
      },
      source_revision_config: {
        ...(a.imageUri !== undefined ? { image_uri: a.imageUri } : {}),
        ...(a.repoRef !== undefined ? { repo_ref: a.repoRef } : {}),
      },
      secrets: a.secrets.filter((s) => secretValueState(s.value) === "value"),
    });
  });

describe("import law", () => {
  it("for any deployment whose values the service shows, applying the import plans nothing", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(deploymentArb, { maxLength: 4, selector: (d) => d.name }),
        fc.constantFrom("shared", "per-deployment"),
        (deployments, mode) => {
          const s = settings(mode === "shared" ? { secretsFrom: "all-secrets" } : {});
          if (mode === "per-deployment") {
            // Without a manifest, the user fills the Secrets: read values straight from the service.
            const result = importDeployments(deployments, s);
            for (const r of result.resources) {
              const data = Object.fromEntries(r.keys.map((k) => [k.key, k.value ?? ""]));
              const secretName = r.secretName ?? "";
              const desired = desiredFromSpec(r.resource.spec, r.resource.metadata.name, {
                secretData: { [secretName]: data },
              });
              expect(plan(desired, r.deployment, {}).action).toBe("noop");
            }
            return;
          }
          const { result, parsed, plans } = roundTrip(deployments, s);
          expect(parsed.problems).toEqual([]);
          expect(result.skipped).toEqual([]);
          expect(plans.every((p) => p.action === "noop")).toBe(true);
          expect(new Set(parsed.resources.map((r) => r.resource.metadata.name)).size).toBe(
            deployments.length,
          );
        },
      ),
      { numRuns: 150 },
    );
    // 150 imports each rendered as YAML, parsed, validated and planned: 0.7 s of CPU, 5 to 10 s
    // at machine loads of 13 to 20 on two cores (past the default 5 s).
  }, 30_000);
});
