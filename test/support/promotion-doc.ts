/**
 * docs/guide/promotion.md as test fixtures: its table (one row per situation of a stage's
 * `Deployment` resource), the Kargo `http` steps it tells users to paste, its Flux and Kustomize
 * snippets, and each situation's resource (for an image and for a commit) with the status the
 * operator's own status code writes. The tests compare the table with what the operator writes
 * and what Kargo's expression engine concludes.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse, parseAllDocuments } from "yaml";
import type { Deployment } from "../../src/api/wire.ts";
import type { DeploymentResourceStatus, DeploymentSpec } from "../../src/crd/schema.ts";
import type { StatusInput } from "../../src/reconcile/run.ts";
import { statusFrom } from "../../src/reconcile/status.ts";
import { conditionsText } from "./gitops-health-doc.ts";
import { markdownTable } from "./markdown-table.ts";

export { conditionsText };

/** The document, as a user reads it. */
export const PROMOTION_DOC_PATH = join(import.meta.dirname, "..", "..", "docs", "guide", "promotion.md");
const DOC = readFileSync(PROMOTION_DOC_PATH, "utf8");

/** The Kargo step columns of the table: header text, and which artifact's step answers it. */
export const STEP_COLUMNS = [
  { header: "Kargo step (image)", artifact: "image" },
  { header: "Kargo step (commit)", artifact: "commit" },
] as const;
export type Artifact = (typeof STEP_COLUMNS)[number]["artifact"];

/** One row of the table. */
export interface DocRow {
  situation: string;
  conditions: string;
  activeRevision: string;
  steps: Record<Artifact, string>;
}

/** The rows of the table under "What the step concludes", by situation. */
export function docTable(): Map<string, DocRow> {
  const section = DOC.split("### What the step concludes")[1]?.split("\n## ")[0] ?? "";
  const { rows, column } = markdownTable(section, "docs/guide/promotion.md");
  const situation = column("Situation");
  const conditions = column("Conditions the operator writes");
  const active = column("`status.activeRevision`");
  const steps = STEP_COLUMNS.map((c) => [c.artifact, column(c.header)] as const);
  return new Map(
    rows.map((row) => [
      row[situation] ?? "",
      {
        situation: row[situation] ?? "",
        conditions: row[conditions] ?? "",
        activeRevision: row[active] ?? "",
        steps: Object.fromEntries(steps.map(([a, i]) => [a, row[i] ?? ""])) as DocRow["steps"],
      },
    ]),
  );
}

function yamlBlocks(): string[] {
  return [...DOC.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1] ?? "");
}

/** A Kargo `http` step's expressions. */
export interface KargoStep {
  successExpression: string;
  failureExpression: string;
  url: string;
}

/**
 * The `http` step named `as` in the doc's snippets, exactly as a user would paste it. A snippet
 * that is a fragment of a Stage (indented `vars:`/`steps:`) is read as the list it is.
 */
export function docKargoStep(as: "wait-live" | "wait-live-commit"): KargoStep {
  for (const block of yamlBlocks()) {
    if (!block.includes(`as: ${as}`)) continue;
    const parsed = parse(block.replace(/^ {6}/gm, "")) as
      | { spec?: { promotionTemplate?: { spec?: { steps?: unknown[] } } }; steps?: unknown[] }
      | undefined;
    const steps = parsed?.spec?.promotionTemplate?.spec?.steps ?? parsed?.steps ?? [];
    const step = steps.find((s) => (s as { as?: string }).as === as) as
      | { uses?: string; config?: KargoStep }
      | undefined;
    if (step?.uses === "http" && step.config) return step.config;
  }
  throw new Error(`docs/guide/promotion.md has no http step "as: ${as}"`);
}

/** The step's expressions with Kargo's `${{ vars.<name> }}` filled in, as Kargo does before the step runs. */
export function withVars(step: KargoStep, vars: Record<string, string>): KargoStep {
  const fill = (text: string) =>
    text.replace(/\$\{\{\s*vars\.(\w+)\s*\}\}/g, (whole, name: string) => vars[name] ?? whole);
  return {
    url: step.url,
    successExpression: fill(step.successExpression),
    failureExpression: fill(step.failureExpression),
  };
}

/** The doc's Deployment resource with the Flux setter marker, and the line carrying it. */
export function docFluxResource(): { text: string; object: Record<string, unknown> } {
  for (const block of yamlBlocks()) {
    if (!block.includes('"$imagepolicy"') || !block.includes("kind: Deployment")) continue;
    return { text: block, object: parse(block) as Record<string, unknown> };
  }
  throw new Error("docs/guide/promotion.md has no Deployment with a Flux setter marker");
}

/** The doc's kustomization.yaml and its image field spec. */
export function docKustomize(): { kustomization: string; fieldSpec: string } {
  const blocks = yamlBlocks();
  const kustomization = blocks.find((b) => b.startsWith("# kustomization.yaml"));
  const fieldSpec = blocks.find((b) => b.startsWith("# dms-images.yaml"));
  if (!kustomization || !fieldSpec)
    throw new Error("docs/guide/promotion.md has no kustomization.yaml and dms-images.yaml snippets");
  return { kustomization, fieldSpec };
}

/** Every YAML document of a snippet (for a multi-document block). */
export function documents(text: string): unknown[] {
  return parseAllDocuments(text).map((d) => d.toJS());
}

const NOW = new Date("2025-06-01T12:00:00Z");
const PREVIOUS_REVISION = "2f0b6c1e-0000-4000-8000-000000000001";
const PROMOTED_REVISION = "2f0b6c1e-0000-4000-8000-000000000002";

/** What each artifact variant promotes, and what was live before. */
export const ARTIFACTS = {
  image: {
    previous: `registry.example.com/agent@sha256:${"a".repeat(64)}`,
    promoted: `registry.example.com/agent@sha256:${"b".repeat(64)}`,
    vars: (promoted: string) => ({ image: promoted }),
    step: "wait-live" as const,
  },
  commit: {
    previous: "1111111111111111111111111111111111111111",
    promoted: "2222222222222222222222222222222222222222",
    vars: (promoted: string) => ({ commit: promoted }),
    step: "wait-live-commit" as const,
  },
} as const;

/** The spec of a stage's resource deploying `value` of `artifact`. */
export function specOf(artifact: Artifact, value: string): DeploymentSpec {
  return artifact === "image"
    ? { source: "external_docker", sourceRevisionConfig: { imageUri: value } }
    : {
        source: "github",
        sourceConfig: {
          repoUrl: "https://github.com/acme/agent",
          integrationId: "0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e",
        },
        sourceRevisionConfig: { repoRef: value },
      };
}

/** The service's deployment with `active` live and `latest` its latest revision. */
function deployment(
  artifact: Artifact,
  latest: { id: string; value: string },
  active: string | null,
): Deployment {
  const config =
    artifact === "image"
      ? { image_uri: latest.value }
      : { repo_ref: latest.value, repo_commit_sha: latest.value };
  return {
    id: "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a",
    tenant_id: "7b0c4f8e-3a1d-4c2b-9e5f-1d2c3b4a5f60",
    name: "agent",
    source: artifact === "image" ? "external_docker" : "github",
    source_config: {},
    source_revision_config: config,
    secrets: [],
    created_at: "2025-06-01T11:00:00Z",
    updated_at: "2025-06-01T11:00:00Z",
    status: "READY",
    latest_revision_id: latest.id,
    active_revision_id: active,
  };
}

/** A situation: the spec's artifact, its generation, and the status the operator wrote. */
export interface Situation {
  /** Which artifact the spec names: the promoted one, or the previous (before the edit). */
  spec: "promoted" | "previous";
  generation: number;
  status: DeploymentResourceStatus;
}

const status = (input: Omit<StatusInput, "now" | "generation"> & { generation?: number }) =>
  statusFrom({ generation: 1, ...input, now: NOW });

/** Each situation of the doc's table, for `artifact`, with the status the operator's status code writes. */
export function situations(artifact: Artifact): Record<string, Situation> {
  const { previous, promoted } = ARTIFACTS[artifact];
  const old = { id: PREVIOUS_REVISION, value: previous };
  const next = { id: PROMOTED_REVISION, value: promoted };
  // The previous artifact live and Ready: what the stage showed before the promotion.
  const before = status({ observed: deployment(artifact, old, old.id), sync: { kind: "synced" } });
  const rolling = deployment(artifact, next, old.id);
  return {
    "Not reconciled yet": { spec: "promoted", generation: 1, status: {} },
    "Edited, new generation not seen": { spec: "promoted", generation: 2, status: before },
    "Previous artifact still live and Ready": { spec: "promoted", generation: 1, status: before },
    "Still rolling out": {
      spec: "promoted",
      generation: 1,
      status: status({ previous: before, observed: rolling, sync: { kind: "synced" } }),
    },
    "Held by a rollout window": {
      spec: "promoted",
      generation: 1,
      status: status({
        previous: before,
        observed: deployment(artifact, old, old.id),
        sync: {
          kind: "held",
          message:
            "the change that makes a new revision (sourceRevisionConfig) is held outside spec.rolloutWindows",
        },
      }),
    },
    "Promoted artifact live and Ready": {
      spec: "promoted",
      generation: 1,
      status: status({
        previous: before,
        observed: deployment(artifact, next, next.id),
        sync: { kind: "synced" },
      }),
    },
    "Revision failed": {
      spec: "promoted",
      generation: 1,
      status: status({
        previous: before,
        observed: rolling,
        sync: { kind: "synced" },
        revision: { id: next.id, status: "BUILD_FAILED" },
      }),
    },
    "Rollout past its timeout": {
      spec: "promoted",
      generation: 1,
      status: status({
        previous: before,
        observed: rolling,
        sync: { kind: "synced" },
        revision: { id: next.id, status: "DEPLOYING" },
        rollout: { startedAt: "2025-06-01T11:00:00Z", timedOutAfter: "30m" },
      }),
    },
  };
}

/** The doc's notation for `status.activeRevision` of `artifact`: promoted, previous, none or other. */
export function activeRevisionText(artifact: Artifact, s: DeploymentResourceStatus): string {
  const active = s.activeRevision;
  if (!active) return "none";
  const value = artifact === "image" ? active.imageUri : active.repoCommitSha;
  const { previous, promoted } = ARTIFACTS[artifact];
  return value === promoted ? "promoted" : value === previous ? "previous" : `other (${value ?? "unknown"})`;
}
