/**
 * `dms-operator import` against the simulator over loopback: a resource per source kind that
 * plans as "adopt, no change", secrets only in the Secret manifest (placeholders when the service
 * masks them), warnings and skipped deployments reported, files per resource with --out-dir.
 */
import { chmod, readdir, readFile, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import type { DeploymentResource } from "../../src/crd/schema.ts";
import { type RunningSimulator, type SimulatorSeed, startSimulator } from "../../src/simulator/server.ts";
import { unsafeCharacters } from "../support/terminal-safe.ts";
import {
  cli,
  INTEGRATION,
  KEY,
  manifestDir,
  SECRET_VALUE,
  SEED,
  simulatorWithOdd,
} from "./gitops-fixture.ts";

/** The shared seed plus a deployment the CRD would refuse (a request above its limit). */
const IMPORT_SEED: SimulatorSeed = {
  ...SEED,
  deployments: [
    ...(SEED.deployments ?? []),
    {
      name: "greedy",
      source: "internal_docker",
      source_config: { resource_spec: { cpu: 4, cpu_limit: 2 } },
      source_revision_config: { image_uri: "greedy:1" },
    },
  ],
};

let shown: RunningSimulator;
let masked: RunningSimulator;
const dirs: string[] = [];

beforeAll(async () => {
  shown = await startSimulator({ apiKey: KEY, seed: IMPORT_SEED, secretsInResponses: "values" });
  masked = await startSimulator({ apiKey: KEY, seed: IMPORT_SEED, secretsInResponses: "masked" });
});
afterAll(async () => {
  await shown.close();
  await masked.close();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

type Resource = DeploymentResource & { kind: string; metadata: { name: string; namespace?: string } };
interface SecretDoc {
  kind: "Secret";
  metadata: { name: string; namespace?: string };
  stringData: Record<string, string> | null;
}

function documents(text: string): Array<Resource | SecretDoc> {
  return parseAllDocuments(text)
    .map((d) => d.toJS() as Resource | SecretDoc | null)
    .filter((d): d is Resource | SecretDoc => d !== null);
}
const resources = (text: string) => documents(text).filter((d): d is Resource => d.kind === "Deployment");
const secretOf = (text: string) => documents(text).find((d): d is SecretDoc => d.kind === "Secret");

describe("import", () => {
  it("writes one resource per source kind that reproduces the service's deployment", async () => {
    const run = await cli(shown.url, ["import", "--namespace", "team"]);
    expect(run.code).toBe(0);
    const byName = Object.fromEntries(resources(run.stdout).map((r) => [r.metadata.name, r]));
    expect(Object.keys(byName).sort()).toEqual([
      "billing-agent",
      "intake",
      "lost-repo",
      "notes-agent",
      "summarizer",
      "support-agent",
    ]);
    expect(byName["support-agent"]?.spec).toEqual({
      name: "support-agent",
      source: "github",
      // A prod deployment is proposed protected from an accidental delete (a pruned file).
      deletionProtection: true,
      sourceConfig: {
        integrationId: INTEGRATION,
        repoUrl: "https://github.com/acme/support-agent",
        buildOnPush: true,
        // The service's type, written so that a change of it is refused at kubectl apply.
        deploymentType: "prod",
        resourceSpec: { minScale: 1, maxScale: 3, cpu: 1, memoryMb: 1024 },
      },
      sourceRevisionConfig: { repoRef: "main", graphConfigPath: "langgraph.json" },
      secrets: [
        {
          name: "OPENAI_API_KEY",
          valueFrom: { secretKeyRef: { name: "support-agent-secrets", key: "OPENAI_API_KEY" } },
        },
      ],
    });
    expect(byName["billing-agent"]?.spec).toMatchObject({
      source: "external_docker",
      sourceConfig: {
        listenerConfig: { k8sNamespace: "agents" },
        resourceSpec: { labels: { team: "billing" } },
      },
      sourceRevisionConfig: { imageUri: "registry.example.com/acme/billing-agent:1.8.0" },
      secretReferences: [{ name: "DATABASE_URL", secretName: "billing-db", secretKey: "url" }],
    });
    expect(byName.summarizer?.spec).toMatchObject({
      source: "internal_docker",
      sourceRevisionConfig: { imageUri: "summarizer:2025-06-01" },
    });
    expect(byName["notes-agent"]?.spec).toMatchObject({
      source: "internal_source",
      sourceConfig: { installCommand: "pip install -e ." },
      sourceRevisionConfig: { sourceTarballPath: "uploads/notes-agent/1.tar.gz" },
    });
    expect(byName.intake?.spec).toEqual({
      name: "intake",
      source: "internal_template",
      deletionProtection: true,
      sourceConfig: { deploymentType: "prod" },
    });
    expect(Object.values(byName).every((r) => r.metadata.namespace === "team")).toBe(true);
    expect(run.stdout).toContain("# spec.deletionProtection: true because");
    // Without --secrets-from no manifest, so no value anywhere on stdout.
    expect(run.stdout).not.toContain(SECRET_VALUE);
    expect(secretOf(run.stdout)).toBeUndefined();
    expect(run.stderr).toContain(
      "note: 1 deployment(s) read secrets from Secrets not written here (support-agent-secrets); pass --secrets-from <name> to get a manifest",
    );
  });

  it("lists what cannot be declared, and warns about an unreachable repository, on stderr and in the YAML", async () => {
    const run = await cli(shown.url, ["import"]);
    expect(run.stderr).toMatch(
      /^skipped "greedy" \(id [0-9a-f-]{36}\): the CRD would refuse the resource: .*cpu must not exceed/m,
    );
    expect(run.stdout).toMatch(/^# skipped "greedy" \(id [0-9a-f-]{36}\): the CRD would refuse/m);
    const warning = `repository https://github.com/acme/gone is not among the 2 repositories GitHub integration ${INTEGRATION} lists`;
    expect(run.stderr).toContain(`warning: lost-repo: ${warning}`);
    expect(run.stdout).toContain(`# warning: ${warning}`);
    expect(run.stderr).toContain("imported 6 deployment(s), skipped 1");
  });

  it("filters like the listing does", async () => {
    const run = await cli(shown.url, ["import", "--name-contains", "agent", "--status", "READY"]);
    expect(
      resources(run.stdout)
        .map((r) => r.metadata.name)
        .sort(),
    ).toEqual(["billing-agent", "notes-agent", "support-agent"]);
  });

  it("with --name, imports the deployment of exactly that name, and names those that contain it when none has it", async () => {
    const one = await cli(shown.url, ["import", "--name", "support-agent"]);
    expect(one.code, one.stderr).toBe(0);
    expect(resources(one.stdout).map((r) => r.metadata.name)).toEqual(["support-agent"]);

    const none = await cli(shown.url, ["import", "--name", "agent"]);
    expect(none.code).toBe(1);
    expect(none.stdout).toBe("");
    expect(none.stderr).toBe(
      `error: the service at ${shown.url} has no deployment named "agent"; 3 contain it: "support-agent", "billing-agent", "notes-agent" (--name-contains imports those)\n`,
    );

    const empty = await cli(shown.url, ["import", "--name", ""]);
    expect(empty.code).not.toBe(0);
    expect(empty.stderr).toContain("option '--name <name>' argument '' is invalid. must not be empty.");
    expect(empty.stdout).toBe("");

    const both = await cli(shown.url, ["import", "--name", "intake", "--name-contains", "in"]);
    expect(both.code).not.toBe(0);
    expect(both.stderr).toContain("cannot be used with option '--name-contains");
  });

  it("with --secrets-from and no --out-dir, prints no value unless --print-secret-values is given", async () => {
    const run = await cli(shown.url, ["import", "--name-contains", "support", "--secrets-from", "agents"]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain("pass --out-dir <dir>");
    expect(run.stderr).not.toContain(SECRET_VALUE);
  });

  it("with --secrets-from, writes the values the service shows into one Secret, and only there", async () => {
    const run = await cli(shown.url, [
      "import",
      "--name-contains",
      "support",
      "--secrets-from",
      "agents",
      "--print-secret-values",
      "--namespace",
      "team",
    ]);
    expect(secretOf(run.stdout)).toEqual({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "agents", namespace: "team" },
      type: "Opaque",
      stringData: { "support-agent.OPENAI_API_KEY": SECRET_VALUE },
    });
    expect(resources(run.stdout)[0]?.spec.secrets?.[0]?.valueFrom?.secretKeyRef).toEqual({
      name: "agents",
      key: "support-agent.OPENAI_API_KEY",
    });
    const resourceText = run.stdout.split("---\n").filter((d) => d.includes("kind: Deployment"));
    expect(resourceText.join("")).not.toContain(SECRET_VALUE);
  });

  it("when the service masks values, the Secret holds marked placeholders and stderr says so", async () => {
    const run = await cli(masked.url, ["import", "--name-contains", "support", "--secrets-from", "agents"]);
    expect(secretOf(run.stdout)?.stringData).toBeNull();
    expect(run.stdout).toContain(
      '  # support-agent.OPENAI_API_KEY: "FILL IN: value of secret \\"OPENAI_API_KEY\\" of deployment \\"support-agent\\", masked by the service"',
    );
    expect(run.stderr).toContain(
      "note: the service masks the values of 1 secret(s): Secret agents has placeholders marked FILL IN that you must fill before applying",
    );
  });

  it("with --out-dir, writes one file per resource, the Secret readable by its owner only", async () => {
    const dir = await manifestDir({});
    dirs.push(dir);
    const run = await cli(shown.url, ["import", "--out-dir", dir, "--secrets-from", "agents"]);
    expect(run.code).toBe(0);
    expect((await readdir(dir)).sort()).toEqual([
      "agents.secret.yaml",
      "billing-agent.yaml",
      "intake.yaml",
      "lost-repo.yaml",
      "notes-agent.yaml",
      "summarizer.yaml",
      "support-agent.yaml",
    ]);
    expect((await stat(join(dir, "agents.secret.yaml"))).mode & 0o777).toBe(0o600);
    expect(run.stdout).toContain(`wrote ${join(dir, "summarizer.yaml")}`);
    expect(run.stdout).toMatch(/^# skipped "greedy"/m);
    expect(resources(await readFile(join(dir, "intake.yaml"), "utf8"))).toHaveLength(1);
  });

  it("with --out-dir, the Secret of placeholders is readable by its owner only too, also when --force overwrites it", async () => {
    // The real values are filled in this very file: it must not start world-readable.
    const dir = await manifestDir({});
    dirs.push(dir);
    const secret = join(dir, "agents.secret.yaml");
    const run = await cli(masked.url, ["import", "--out-dir", dir, "--secrets-from", "agents"]);
    expect(run.code).toBe(0);
    expect(await readFile(secret, "utf8")).toContain("FILL IN");
    expect((await stat(secret)).mode & 0o777).toBe(0o600);
    await chmod(secret, 0o644);
    const again = await cli(shown.url, ["import", "--out-dir", dir, "--secrets-from", "agents", "--force"]);
    expect(again.code).toBe(0);
    expect((await stat(secret)).mode & 0o777).toBe(0o600);
  });

  it("what it writes plans as 'adopt, no change' for every deployment, and the service sees no write", async () => {
    const dir = await manifestDir({});
    dirs.push(dir);
    await cli(shown.url, ["import", "--out-dir", dir]);
    const before = JSON.stringify(shown.counters());
    const run = await cli(shown.url, ["plan", "-f", dir, "-o", "json"]);
    const doc = JSON.parse(run.stdout) as { resources: Array<{ name: string; action: string }> };
    expect(doc.resources.map((r) => r.action)).toEqual(Array(6).fill("adopt"));
    expect(run.code).toBe(0);
    const after = shown.counters();
    expect(after["POST /v2/deployments"]).toEqual(JSON.parse(before)["POST /v2/deployments"]);
    expect(after["PATCH /v2/deployments/{deployment_id}"]).toBeUndefined();
  });

  it("writes a value holding characters of the printable rule as YAML escapes, and it applies as given", async () => {
    // A right-to-left override and a Hangul filler: raw, they would reorder and hide what a
    // reviewer reads of the manifest; escaped, kubectl apply still sends exactly the service's value.
    const hostile = "pip install -e . \u202e\u3164txt.exe";
    const secret = "s3cr\u202et\u3164";
    const sim = await startSimulator({
      apiKey: KEY,
      seed: {
        deployments: [
          {
            name: "hostile",
            source: "internal_source",
            source_config: { install_command: hostile },
            source_revision_config: { source_tarball_path: "uploads/hostile/1.tar.gz" },
            secrets: [{ name: "TOKEN", value: secret }],
          },
        ],
      },
      secretsInResponses: "values",
    });
    try {
      const run = await cli(sim.url, ["import", "--secrets-from", "agents", "--print-secret-values"]);
      expect(run.code).toBe(0);
      expect(unsafeCharacters(run.stdout)).toEqual([]);
      expect(run.stdout).toContain("\\u202e\\u3164");
      const [resource] = resources(run.stdout);
      expect(resource?.spec.sourceConfig).toMatchObject({ installCommand: hostile });
      expect(Object.values(secretOf(run.stdout)?.stringData ?? {})).toEqual([secret]);
      // What it wrote plans as the service's deployment unchanged: the value came back exactly.
      const dir = await manifestDir({ "hostile.yaml": run.stdout });
      dirs.push(dir);
      const plan = await cli(sim.url, ["plan", "-f", dir, "-o", "json"]);
      const doc = JSON.parse(plan.stdout) as { resources: Array<{ action: string; changes: unknown[] }> };
      expect(doc.resources).toMatchObject([{ action: "adopt", changes: [] }]);
      expect(plan.code).toBe(0);
    } finally {
      await sim.close();
    }
  });
});

describe("import with one deployment it cannot check", () => {
  it("imports the others, and skips with its reason the one whose integration id the service answers as no uuid", async () => {
    const odd = await simulatorWithOdd(
      {
        name: "legacy-github",
        source: "github",
        source_config: { repo_url: "https://github.com/acme/legacy" },
        source_revision_config: { repo_ref: "main" },
      },
      { source_config: { integration_id: "legacy-integration-7" } },
    );
    try {
      const run = await cli(odd.url, ["import", "--namespace", "team"]);
      expect(run.code).toBe(0);
      expect(run.stdout).toContain("name: support-agent");
      // Skipped with its reason (the CRD refuses such an id), the listing of repositories not
      // asked for an id that is no uuid.
      expect(run.stderr).toMatch(
        /^skipped "legacy-github" \(id [0-9a-f-]{36}\): the CRD would refuse the resource: spec\.sourceConfig\.integrationId/m,
      );
    } finally {
      await odd.close();
    }
  });
});
