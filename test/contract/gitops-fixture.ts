/**
 * Shared by the gitops contract tests: a seed with one deployment per source kind, and a way to
 * run `dms-operator` commands in-process (real HTTP to a simulator on loopback, the real program
 * harness and exit statuses) without paying a Node start-up per call.
 */
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { registerImportCommand } from "../../src/commands/import-command.ts";
import { registerPlanCommand } from "../../src/commands/plan-command.ts";
import type { SimulatorSeed } from "../../src/simulator/seed.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { type Run, runCli } from "../support/cli.ts";

export const KEY = "gitops-test-key-8c2d";
export const INTEGRATION = "6f1c1d2e-0000-4000-8000-000000000001";
export const UNKNOWN_INTEGRATION = "6f1c1d2e-0000-4000-8000-0000000000ff";
/** A secret value that must never appear in any output of plan, nor in a Deployment resource. */
export const SECRET_VALUE = "sk-contract-never-print-71c9";

/** One deployment per source kind, plus a github one whose repository the integration does not list. */
export const SEED: SimulatorSeed = {
  integrations: [
    {
      id: INTEGRATION,
      repos: [
        { id: 1, owner: "acme", name: "support-agent", default_branch: "main" },
        { id: 2, owner: "acme", name: "triage-bot", default_branch: "develop" },
      ],
    },
  ],
  deployments: [
    {
      name: "support-agent",
      source: "github",
      source_config: {
        integration_id: INTEGRATION,
        repo_url: "https://github.com/acme/support-agent",
        build_on_push: true,
        resource_spec: { min_scale: 1, max_scale: 3, cpu: 1, memory_mb: 1024 },
      },
      source_revision_config: { repo_ref: "main", graph_config_path: "langgraph.json" },
      secrets: [{ name: "OPENAI_API_KEY", value: SECRET_VALUE }],
    },
    {
      name: "billing-agent",
      source: "external_docker",
      source_config: {
        listener_id: "5d6e7f80-91a2-4b3c-8d4e-5f6a7b8c9d0e",
        listener_config: { k8s_namespace: "agents" },
        resource_spec: { cpu: 2, memory_mb: 2048, labels: { team: "billing" } },
      },
      source_revision_config: { image_uri: "registry.example.com/acme/billing-agent:1.8.0" },
      secret_references: [{ name: "DATABASE_URL", secret_name: "billing-db", secret_key: "url" }],
    },
    {
      name: "summarizer",
      source: "internal_docker",
      source_config: { resource_spec: { min_scale: 1, max_scale: 2 } },
      source_revision_config: { image_uri: "summarizer:2025-06-01" },
    },
    {
      name: "notes-agent",
      source: "internal_source",
      source_config: { install_command: "pip install -e ." },
      source_revision_config: {
        graph_config_path: "langgraph.json",
        source_tarball_path: "uploads/notes-agent/1.tar.gz",
      },
    },
    { name: "intake", source: "internal_template", source_config: {}, source_revision_config: {} },
    {
      name: "lost-repo",
      source: "github",
      source_config: { integration_id: INTEGRATION, repo_url: "https://github.com/acme/gone" },
      source_revision_config: { repo_ref: "main" },
    },
  ],
};

export type { Run } from "../support/cli.ts";

/** A simulator of {@link SEED} and one more deployment, answered with `extra` merged in (a quirk). */
export function simulatorWithOdd(
  deployment: NonNullable<SimulatorSeed["deployments"]>[number],
  extra: Record<string, unknown>,
): Promise<RunningSimulator> {
  const odd = { ...deployment, quirks: { extra } };
  return startSimulator({ apiKey: KEY, seed: { ...SEED, deployments: [...(SEED.deployments ?? []), odd] } });
}

/** Runs `dms-operator <args>` in-process against `baseUrl`, with the plan and import commands; `stdin` is what `-f -` reads. */
export async function cli(
  baseUrl: string,
  args: string[],
  env: Record<string, string> = {},
  stdin?: string,
): Promise<Run> {
  return runCli(args, {
    commands: [registerImportCommand, registerPlanCommand],
    env: { DMS_BASE_URL: baseUrl, DMS_API_KEY: KEY, ...env },
    ...(stdin === undefined ? {} : { stdin }),
  });
}

/** Writes `files` (relative path → text) into a fresh temporary directory and returns it. */
export async function manifestDir(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "dms-gitops-"));
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  return dir;
}

/** A Deployment resource document named `name` with `spec` (YAML flow is fine: YAML is JSON's superset). */
export function resourceYaml(name: string, spec: object, metadata: object = {}): string {
  return `${JSON.stringify({ apiVersion: "dms.dev/v1alpha1", kind: "Deployment", metadata: { name, ...metadata }, spec }, null, 2)}\n`;
}
