/**
 * `dms-operator plan` against the simulator over loopback: every kind of outcome, in text and
 * JSON, with its exit status; bad files with file and line; nothing ever written to the service.
 */
import { execFile } from "node:child_process";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { RULES_NOT_CHECKED } from "../../src/gitops/validate.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { nodeCacheEnv } from "../support/node-env.ts";
import { unsafeCharacters } from "../support/terminal-safe.ts";
import {
  cli,
  INTEGRATION,
  KEY,
  manifestDir,
  resourceYaml,
  SECRET_VALUE,
  SEED,
  simulatorWithOdd,
  UNKNOWN_INTEGRATION,
} from "./gitops-fixture.ts";

let sim: RunningSimulator;
const dirs: string[] = [];

beforeAll(async () => {
  sim = await startSimulator({ apiKey: KEY, seed: SEED, secretsInResponses: "values" });
});
afterAll(async () => {
  await sim.close();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

/** Plans `files` (written to a fresh directory); `-o json` when asked. */
async function plan(files: Record<string, string>, args: string[] = []) {
  const dir = await manifestDir(files);
  dirs.push(dir);
  const run = await cli(sim.url, ["plan", "-f", dir, ...args]);
  return { ...run, dir };
}

interface JsonPlan {
  exitCode: number;
  counts: Record<string, number>;
  resources: Array<{
    name: string;
    file: string;
    line: number;
    action: string;
    adopt: boolean;
    newRevision: boolean;
    deploymentId?: string;
    changes: Array<{ group: string; field: string; line: string }>;
    summary: string[];
    problems: Array<{ reason: string }>;
    warnings: string[];
    secrets: string;
    error?: string;
  }>;
  fileErrors: Array<{ file: string; line: number; column: number; message: string }>;
}

const summarizer = {
  source: "internal_docker",
  sourceConfig: { resourceSpec: { minScale: 1, maxScale: 2 } },
  sourceRevisionConfig: { imageUri: "summarizer:2025-06-01" },
};
const billing = {
  source: "external_docker",
  sourceConfig: {
    listenerId: "5d6e7f80-91a2-4b3c-8d4e-5f6a7b8c9d0e",
    listenerConfig: { k8sNamespace: "agents" },
    resourceSpec: { cpu: 2, memoryMb: 2048 },
  },
  sourceRevisionConfig: { imageUri: "registry.example.com/acme/billing-agent:1.8.0" },
};

const writes = () => {
  const c = sim.counters();
  return (
    (c["POST /v2/deployments"]?.["200"] ?? 0) + (c["PATCH /v2/deployments/{deployment_id}"]?.["200"] ?? 0)
  );
};

describe("plan: one outcome per run, text and exit status", () => {
  const cases: Array<{ reason: string; file: string; code: number; expected: RegExp[] }> = [
    {
      reason: "a new deployment is created: exit 2, every field set listed",
      file: resourceYaml("new-agent", {
        source: "internal_docker",
        sourceRevisionConfig: { imageUri: "new:1" },
      }),
      code: 2,
      expected: [
        /^default\/new-agent \[.*r\.yaml:1\]: create$/m,
        /^ {4}\+ create deployment new-agent \(source internal_docker\)$/m,
        /^ {4}\+ sourceRevisionConfig\.imageUri: \(unset\) → new:1$/m,
        /Plan: 1 to create, 0 to adopt, 0 to patch/,
      ],
    },
    {
      reason: "an existing deployment declared as it is: adopted with no change, exit 0",
      file: resourceYaml("summarizer", summarizer),
      code: 0,
      expected: [/^default\/summarizer \[.*\]: adopt [0-9a-f-]{36} as it is \(no change on the service\)$/m],
    },
    {
      reason: "a resource_spec change: patch without a new revision, exit 2",
      file: resourceYaml("billing-agent", {
        ...billing,
        sourceConfig: { ...billing.sourceConfig, resourceSpec: { cpu: 4, memoryMb: 2048 } },
      }),
      code: 2,
      expected: [
        /: adopt [0-9a-f-]{36} and patch, no new revision$/m,
        /^ {4}~ sourceConfig\.resourceSpec\.cpu: 2 → 4$/m,
      ],
    },
    {
      reason: "an image change: patch with a new revision, exit 2",
      file: resourceYaml("billing-agent", {
        ...billing,
        sourceRevisionConfig: { imageUri: "registry.example.com/acme/billing-agent:1.9.0" },
      }),
      code: 2,
      expected: [
        /: adopt [0-9a-f-]{36} and patch, NEW REVISION$/m,
        /sourceRevisionConfig\.imageUri: registry\.example\.com\/acme\/billing-agent:1\.8\.0 → registry\.example\.com\/acme\/billing-agent:1\.9\.0/,
        /1 to patch \(1 with a new revision\)/,
      ],
    },
    {
      reason: "a literal secret value that differs: patch of secrets, naming it, never its value",
      file: resourceYaml("support-agent", {
        source: "github",
        sourceConfig: { integrationId: INTEGRATION, repoUrl: "https://github.com/acme/support-agent" },
        secrets: [{ name: "OPENAI_API_KEY", value: "sk-rotated" }],
      }),
      code: 2,
      expected: [/^ {4}~ secrets: rotated OPENAI_API_KEY$/m],
    },
    {
      reason: "secrets by reference without a kubeconfig: names compared, values not checked",
      file: resourceYaml("support-agent", {
        source: "github",
        sourceConfig: { integrationId: INTEGRATION, repoUrl: "https://github.com/acme/support-agent" },
        secrets: [{ name: "OPENAI_API_KEY", valueFrom: { secretKeyRef: { name: "s", key: "k" } } }],
      }),
      code: 0,
      expected: [
        /: adopt .* as it is/,
        /warning: secrets: the same names as the service's; their values are not checked/,
      ],
    },
    {
      reason: "another source than the service's deployment: blocked, exit 1",
      file: resourceYaml("intake", { source: "internal_docker" }),
      code: 1,
      expected: [
        /^default\/intake \[.*\]: blocked$/m,
        /! Immutable: spec\.source is internal_docker but the service's deployment has source internal_template/,
      ],
    },
    {
      reason: "ObserveOnly and in line with the service: nothing to do, exit 0",
      file: resourceYaml("summarizer", { ...summarizer, managementPolicy: "ObserveOnly" }),
      code: 0,
      expected: [
        /^default\/summarizer \[.*\]: nothing \(ObserveOnly\)$/m,
        /0 to adopt, 0 to patch \(0 with a new revision\), 1 unchanged/,
      ],
    },
    {
      reason: "a github shorthand whose repository the integration does not list: error, exit 1",
      file: resourceYaml("new-bot", {
        source: "github",
        github: { integrationId: INTEGRATION, repository: "acme/nope" },
      }),
      code: 1,
      expected: [
        /! spec\.github\.repository: repository acme\/nope is not reachable through GitHub integration/,
        /it lists acme\/support-agent, acme\/triage-bot/,
      ],
    },
    {
      reason: "an explicit repoUrl the integration does not list: planned, with a warning",
      file: resourceYaml("lost-repo", {
        source: "github",
        sourceConfig: { integrationId: INTEGRATION, repoUrl: "https://github.com/acme/gone" },
        sourceRevisionConfig: { repoRef: "main" },
      }),
      code: 0,
      expected: [
        /warning: repository https:\/\/github\.com\/acme\/gone is not among the 2 repositories GitHub integration/,
      ],
    },
    {
      reason: "an integration the service does not have: warned",
      file: resourceYaml("fresh", {
        source: "github",
        sourceConfig: { integrationId: UNKNOWN_INTEGRATION, repoUrl: "https://github.com/acme/x" },
      }),
      code: 2,
      expected: [/warning: the service has no GitHub integration 6f1c1d2e-0000-4000-8000-0000000000ff/],
    },
  ];
  it.each(cases)("$reason", async ({ file, code, expected }) => {
    const before = writes();
    const run = await plan({ "r.yaml": file });
    expect(run.stderr).toBe("");
    for (const pattern of expected) expect(run.stdout).toMatch(pattern);
    expect(run.code).toBe(code);
    expect(run.stdout).not.toContain(SECRET_VALUE);
    expect(writes()).toBe(before);
  });
});

describe("plan: JSON for machines", () => {
  it("gives each resource its action, change fields and revision flag, and the exit status", async () => {
    const run = await plan(
      {
        "a-create.yaml": resourceYaml("new-agent", { source: "internal_docker" }),
        "b-adopt.yaml": resourceYaml("summarizer", summarizer),
        "c-patch.yaml": resourceYaml("notes-agent", {
          source: "internal_source",
          sourceConfig: { installCommand: "uv sync" },
          sourceRevisionConfig: { sourceTarballPath: "uploads/notes-agent/2.tar.gz" },
        }),
        "d-blocked.yaml": resourceYaml("intake", {
          source: "github",
          sourceConfig: { integrationId: INTEGRATION, repoUrl: "https://github.com/acme/intake" },
        }),
      },
      ["-o", "json"],
    );
    const doc = JSON.parse(run.stdout) as JsonPlan;
    expect(run.code).toBe(1);
    expect(doc.exitCode).toBe(1);
    expect(doc.counts).toMatchObject({ create: 1, adopt: 1, patch: 1, blocked: 1, error: 0, newRevision: 1 });
    const byName = Object.fromEntries(doc.resources.map((r) => [r.name, r]));
    expect(byName["new-agent"]).toMatchObject({ action: "create", adopt: false, line: 1 });
    expect(byName.summarizer).toMatchObject({ action: "adopt", adopt: true, changes: [] });
    expect(byName["notes-agent"]).toMatchObject({ action: "patch", adopt: true, newRevision: true });
    expect(byName["notes-agent"]?.changes.map((c) => [c.group, c.field])).toEqual([
      ["source_config", "sourceConfig.installCommand"],
      ["source_revision_config", "sourceRevisionConfig.sourceTarballPath"],
    ]);
    expect(byName.intake?.problems.map((p) => p.reason)).toEqual(["Immutable"]);
  });

  it("exits 2 when changes are planned and nothing is wrong", async () => {
    const run = await plan({ "a.yaml": resourceYaml("new-agent", { source: "internal_docker" }) }, [
      "-o",
      "json",
    ]);
    expect(run.code).toBe(2);
    expect((JSON.parse(run.stdout) as JsonPlan).exitCode).toBe(2);
  });
});

describe("plan: YAML for machines", () => {
  it("writes a value holding characters of the printable rule as escapes: the same data as -o json", async () => {
    // A right-to-left override and a Hangul filler in a field the plan quotes in its changes.
    const hostile = "uv sync \u202e\u3164txt.exe";
    const files = {
      "a.yaml": resourceYaml("notes-agent", {
        source: "internal_source",
        sourceConfig: { installCommand: hostile },
        sourceRevisionConfig: { sourceTarballPath: "uploads/notes-agent/1.tar.gz" },
      }),
    };
    const yaml = await plan(files, ["-o", "yaml"]);
    expect(yaml.stderr).toBe("");
    expect(yaml.code).toBe(2);
    expect(unsafeCharacters(yaml.stdout)).toEqual([]);
    const json = await cli(sim.url, ["plan", "-f", yaml.dir, "-o", "json"]);
    expect(unsafeCharacters(json.stdout)).toEqual([]);
    const data = JSON.parse(json.stdout) as JsonPlan;
    expect(JSON.stringify(data.resources[0]?.changes)).toContain(JSON.stringify(hostile).slice(1, -1));
    expect(parse(yaml.stdout)).toEqual(data);
  });
});

describe("plan: bad files", () => {
  it("names the file and line of each problem, and still plans the valid resources", async () => {
    const bad = [
      "apiVersion: dms.dev/v1alpha1",
      "kind: Deployment",
      "metadata:",
      "  name: bad",
      "spec:",
      "  source: internal_docker",
      "  sourceConfig:",
      "    resourceSpec:",
      "      cpu: lots",
      "",
    ].join("\n");
    const run = await plan(
      { "bad.yaml": bad, "broken.yaml": "a: [\nb: c\n", "good.yaml": resourceYaml("summarizer", summarizer) },
      ["-o", "json"],
    );
    const doc = JSON.parse(run.stdout) as JsonPlan;
    expect(run.code).toBe(1);
    expect(doc.fileErrors).toEqual([
      {
        file: join(run.dir, "bad.yaml"),
        line: 9,
        column: 7,
        document: 1,
        message: "spec.sourceConfig.resourceSpec.cpu: Expected number",
      },
      // As the API server says after a blocking error: the CEL rules wait for it to be fixed.
      { file: join(run.dir, "bad.yaml"), line: 9, column: 7, document: 1, message: RULES_NOT_CHECKED },
      expect.objectContaining({ file: join(run.dir, "broken.yaml"), line: 2, column: 1, document: 1 }),
    ]);
    expect(doc.resources.map((r) => [r.name, r.action])).toEqual([["summarizer", "adopt"]]);

    const text = await cli(sim.url, ["plan", "-f", join(run.dir, "bad.yaml")]);
    expect(text.stdout).toContain(
      `${join(run.dir, "bad.yaml")}:9:7: error: spec.sourceConfig.resourceSpec.cpu: Expected number`,
    );
    expect(text.code).toBe(1);
  });

  it("walks directories recursively, reads several -f, and ignores other kinds", async () => {
    const dir = await manifestDir({
      "web.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 1}\n",
      "notes.txt": "not a manifest",
    });
    dirs.push(dir);
    const other = await plan({ "s.yml": resourceYaml("summarizer", summarizer) });
    const run = await cli(sim.url, ["plan", "-f", dir, "-f", other.dir, "-o", "json"]);
    expect((JSON.parse(run.stdout) as JsonPlan).resources.map((r) => r.name)).toEqual(["summarizer"]);
    expect(run.code).toBe(0);
  });

  it("a missing path, a usage mistake or a missing setting exits 1, never 2", async () => {
    const missing = await cli(sim.url, ["plan", "-f", "/nonexistent/dir"]);
    expect(missing).toMatchObject({
      code: 1,
      stderr: "error: /nonexistent/dir: no such file or directory\n",
    });
    const usage = await cli(sim.url, ["plan", "-f", "x", "--no-such-flag"]);
    expect(usage.code).toBe(1);
    expect(usage.stderr).toMatch(/unknown option '--no-such-flag'/);
    const noFile = await cli(sim.url, ["plan"]);
    expect(noFile.code).toBe(1);
    // The settings are checked once a resource needs them: one without spec.connectionRef.
    const { dir } = await plan({ "a.yaml": resourceYaml("new-agent", { source: "internal_docker" }) });
    const unconfigured = await cli(sim.url, ["plan", "-f", dir], { DMS_BASE_URL: "" });
    expect(unconfigured.code).toBe(1);
    expect(unconfigured.stderr).toMatch(/DMS_BASE_URL/);
    expect(unconfigured.stderr).toMatch(/needed by the resources without spec\.connectionRef/);
    expect(unconfigured.stdout).toBe("");
  });
});

describe("plan as a user runs it", () => {
  it("the real process exits 2 when changes are planned", async () => {
    const { dir } = await plan({ "a.yaml": resourceYaml("new-agent", { source: "internal_docker" }) });
    const cliPath = new URL("../../src/cli.ts", import.meta.url).pathname;
    const result = await promisify(execFile)(process.execPath, [cliPath, "plan", "-f", dir], {
      env: { PATH: process.env.PATH ?? "", ...nodeCacheEnv(), DMS_BASE_URL: sim.url, DMS_API_KEY: KEY },
    }).then(
      () => ({ code: 0 }),
      (error: { code: number; stdout: string }) => ({ code: error.code, stdout: error.stdout }),
    );
    expect(result).toMatchObject({ code: 2, stdout: expect.stringContaining("1 to create") });
  });
});

describe("plan: a deployment the service answers in a shape the operator cannot read", () => {
  it("is that resource's error, as the operator stalls it alone (UnreadableDeployment), and the others are planned", async () => {
    // Its secrets answered as an object, not a list.
    const odd = await simulatorWithOdd(
      { name: "odd-agent", source: "internal_docker", source_revision_config: { image_uri: "odd:1" } },
      { secrets: { OPENAI_API_KEY: "masked" } },
    );
    try {
      const dir = await manifestDir({
        "a.yaml": resourceYaml("summarizer", summarizer),
        "b.yaml": resourceYaml("odd-agent", {
          source: "internal_docker",
          sourceRevisionConfig: { imageUri: "odd:1" },
        }),
      });
      dirs.push(dir);
      const run = await cli(odd.url, ["plan", "-f", dir, "-o", "json"]);
      const doc = JSON.parse(run.stdout) as JsonPlan;
      expect(run.code).toBe(1);
      expect(doc.resources.map((r) => [r.name, r.action])).toEqual([
        ["summarizer", "adopt"],
        ["odd-agent", "error"],
      ]);
      expect(doc.resources[1]?.error).toMatch(
        /may be "odd-agent" but the operator cannot read it \(.*secrets/,
      );
    } finally {
      await odd.close();
    }
  });
});
