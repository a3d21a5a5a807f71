/**
 * docs/gitops-health.md as test fixtures: its decision table (one row per situation of a
 * `Deployment` resource, one column per tool), the Argo CD health Lua and the Flux
 * `healthCheckExprs` it tells users to paste, and each situation's status as the operator's own
 * status code writes it. The tests compare the table with what the tools' engines compute.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import type { Deployment } from "../../src/api/wire.ts";
import { type DeploymentResourceStatus, FINALIZER } from "../../src/crd/schema.ts";
import type { StatusInput } from "../../src/reconcile/run.ts";
import { statusFrom } from "../../src/reconcile/status.ts";
import type { EngineVerdicts, FluxHealthCheckExprs } from "../controlplane/gitops-health.ts";
import { markdownTable } from "./markdown-table.ts";

/** The document, as a user reads it. */
export const HEALTH_DOC_PATH = join(import.meta.dirname, "..", "..", "docs", "gitops-health.md");
const DOC = readFileSync(HEALTH_DOC_PATH, "utf8");
/** The document's text. */
export const HEALTH_DOC = DOC;
const HEALTH_KEY = "resource.customizations.health.dms.dev_Deployment";

/** The tool columns of the table: header text, and which engine verdict answers it. */
export const TOOL_COLUMNS = [
  { header: "Argo CD", engine: "argocd" },
  { header: "Flux `wait: true` (kstatus)", engine: "fluxKstatus" },
  { header: "Flux `healthCheckExprs`", engine: "fluxHealthCheckExprs" },
] as const satisfies readonly { header: string; engine: keyof EngineVerdicts }[];

/** One row of the table: the situation, its Conditions cell, and each tool's cell by header. */
export interface DocRow {
  situation: string;
  conditions: string;
  tools: Record<(typeof TOOL_COLUMNS)[number]["header"], string>;
}

function yamlBlocks(): unknown[] {
  return [...DOC.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => parse(m[1] ?? "") as unknown);
}

/** The Lua script of the doc's argocd-cm snippet, exactly as a user would paste it. */
export function docArgoScript(): string {
  for (const block of yamlBlocks()) {
    const script = (block as { data?: Record<string, string> } | null)?.data?.[HEALTH_KEY];
    if (script) return script;
  }
  throw new Error(`docs/gitops-health.md has no argocd-cm snippet with ${HEALTH_KEY}`);
}

/** The `healthCheckExprs` entry for our kind in the doc's Kustomization snippet. */
export function docFluxExprs(): FluxHealthCheckExprs {
  for (const block of yamlBlocks()) {
    const exprs = (block as { spec?: { healthCheckExprs?: FluxHealthCheckExprs[] } } | null)?.spec
      ?.healthCheckExprs;
    const ours = exprs?.find((e) => e.apiVersion?.startsWith("dms.dev/") && e.kind === "Deployment");
    if (ours) return ours;
  }
  throw new Error(
    "docs/gitops-health.md has no Kustomization snippet with healthCheckExprs for dms.dev Deployment",
  );
}

/** The rows of the table under "What each tool concludes", by situation. */
export function docTable(): Map<string, DocRow> {
  const section = DOC.split("## What each tool concludes")[1]?.split("\n## ")[0] ?? "";
  const { rows, column } = markdownTable(section, "docs/gitops-health.md");
  const situation = column("Situation");
  const conditions = column("Conditions the operator writes");
  const tools = TOOL_COLUMNS.map((t) => [t.header, column(t.header)] as const);
  return new Map(
    rows.map((row) => [
      row[situation] ?? "",
      {
        situation: row[situation] ?? "",
        conditions: row[conditions] ?? "",
        tools: Object.fromEntries(tools.map(([name, i]) => [name, row[i] ?? ""])) as DocRow["tools"],
      },
    ]),
  );
}

/** The status a cell promises: its first word (a cell may add a note mark, e.g. `Current (!)`). */
export function promisedStatus(cell: string): string {
  return /^[A-Za-z]+/.exec(cell)?.[0] ?? cell;
}

/**
 * Each cell of `row` that the engines contradict, as a sentence naming the situation, the tool
 * and both answers; empty when the doc is right.
 */
export function disagreements(row: DocRow, verdicts: EngineVerdicts, where: string): string[] {
  return TOOL_COLUMNS.flatMap(({ header, engine }) => {
    const said = promisedStatus(row.tools[header]);
    const computed = verdicts[engine];
    if (computed?.status === said) return [];
    const why = computed?.message ? ` (${computed.message})` : "";
    return [
      `${row.situation} [${where}]: ${header}: docs/gitops-health.md says ${said}, the engine computes ${computed?.status ?? "nothing"}${why}`,
    ];
  });
}

/** The doc's notation for a status: `Type=Status (Reason)` in a fixed order, and a stale generation. */
export function conditionsText(
  generation: number | undefined,
  s: DeploymentResourceStatus | undefined,
): string {
  if (!s?.conditions) return "none";
  const text = ["Ready", "Synced", "Reconciling", "Stalled"]
    .flatMap((type) => s.conditions?.filter((c) => c.type === type) ?? [])
    .map((c) => `${c.type}=${c.status} (${c.reason})`)
    .join(", ");
  return s.observedGeneration === generation
    ? text
    : `${text}, from generation ${s.observedGeneration} of ${generation}`;
}

const NOW = new Date("2025-06-01T12:00:00Z");
const LATEST = "2f0b6c1e-0000-4000-8000-000000000002";
const PREVIOUS = "2f0b6c1e-0000-4000-8000-000000000001";

function deployment(status: Deployment["status"], active: string | null = LATEST): Deployment {
  return {
    id: "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a",
    tenant_id: "7b0c4f8e-3a1d-4c2b-9e5f-1d2c3b4a5f60",
    name: "summarizer",
    source: "internal_docker",
    source_config: {},
    source_revision_config: { image_uri: "summarizer:2025-06-01" },
    secrets: [],
    created_at: "2025-06-01T11:00:00Z",
    updated_at: "2025-06-01T11:00:00Z",
    status,
    latest_revision_id: LATEST,
    active_revision_id: active,
  };
}

const status = (input: Omit<StatusInput, "now" | "generation"> & { generation?: number }) =>
  statusFrom({ generation: 1, ...input, now: NOW });
const READY = status({ observed: deployment("READY"), sync: { kind: "synced" } });

/** A situation: the resource's generation, the status the operator wrote, and whether it is being deleted. */
export interface Situation {
  generation: number;
  status?: DeploymentResourceStatus;
  /** The resource has a deletionTimestamp (and the operator's finalizer), as every deleted one has. */
  deleting?: boolean;
}

/** Each situation of the doc's table, with the status the operator's own status code writes for it. */
export const SITUATIONS: Record<string, Situation> = {
  // The CRD defaults status to {}: what the API server answers for a resource nobody has reconciled.
  "Not reconciled yet": { generation: 1, status: {} },
  "Edited, new generation not seen": { generation: 2, status: READY },
  Creating: { generation: 1, status: status({ observed: null, sync: { kind: "synced" } }) },
  "Database being provisioned": {
    generation: 1,
    status: status({ observed: deployment("AWAITING_DATABASE", null), sync: { kind: "synced" } }),
  },
  "Rolling out a new revision": {
    generation: 1,
    status: status({ previous: READY, observed: deployment("READY", PREVIOUS), sync: { kind: "synced" } }),
  },
  Ready: { generation: 1, status: READY },
  "Retrying after a service error": {
    generation: 1,
    status: status({
      previous: READY,
      observed: undefined,
      sync: { kind: "failed", reason: "ServiceUnavailable", message: "the service answered 503" },
    }),
  },
  Stalled: {
    generation: 1,
    status: status({
      previous: READY,
      observed: undefined,
      sync: {
        kind: "failed",
        reason: "SecretNotFound",
        message: 'Secret "agent-secrets" has no key "token"',
        stalled: true,
      },
    }),
  },
  "A revision failed to build": {
    generation: 1,
    status: status({
      previous: READY,
      observed: deployment("READY", PREVIOUS),
      sync: { kind: "synced" },
      revision: { id: LATEST, status: "BUILD_FAILED" },
    }),
  },
  "A rollout past its timeout": {
    generation: 1,
    status: status({
      previous: READY,
      observed: deployment("READY", PREVIOUS),
      sync: { kind: "synced" },
      revision: { id: LATEST, status: "DEPLOYING" },
      rollout: { startedAt: "2025-06-01T11:00:00Z", timedOutAfter: "30m" },
    }),
  },
  "Held outside the rollout windows": {
    generation: 1,
    status: status({
      previous: READY,
      observed: deployment("READY"),
      sync: {
        kind: "held",
        message:
          "the change that makes a new revision (sourceRevisionConfig.imageUri) is held outside spec.rolloutWindows",
      },
    }),
  },
  "Paused by annotation": {
    generation: 1,
    status: status({ previous: READY, observed: undefined, sync: { kind: "paused" } }),
  },
  "ObserveOnly, in line": {
    generation: 1,
    status: status({ observed: deployment("READY"), sync: { kind: "observed", drift: [] } }),
  },
  "ObserveOnly, drifted": {
    generation: 1,
    status: status({ observed: deployment("READY"), sync: { kind: "observed", drift: ["image differs"] } }),
  },
  "driftPolicy Report, drifted": {
    generation: 1,
    status: status({
      observed: deployment("READY"),
      sync: { kind: "drifted", message: "spec.driftPolicy is Report: the service's deployment differs" },
    }),
  },
  "ObserveOnly, no such deployment": {
    generation: 1,
    status: status({
      observed: null,
      sync: {
        kind: "observed",
        drift: ['the service has no deployment named "summarizer" (ObserveOnly never creates one)'],
      },
    }),
  },
  "Unused on the service": {
    generation: 1,
    status: status({ observed: deployment("UNUSED"), sync: { kind: "synced" } }),
  },
  Deleting: {
    generation: 1,
    deleting: true,
    status: status({ previous: READY, observed: deployment("AWAITING_DELETE"), sync: { kind: "deleting" } }),
  },
  "Service reports an unknown state": {
    generation: 1,
    status: status({ observed: deployment("UNKNOWN"), sync: { kind: "synced" } }),
  },
  "Service reports an unlisted status": {
    generation: 1,
    status: status({ observed: deployment("AWAITING_FINAL_DELETE"), sync: { kind: "synced" } }),
  },
};

/** The resource of a situation as the API server would serve it. */
export function situationResource(s: Situation) {
  return {
    apiVersion: "dms.dev/v1alpha1",
    kind: "Deployment",
    metadata: {
      name: "summarizer",
      namespace: "team-a",
      generation: s.generation,
      ...(s.deleting ? { deletionTimestamp: "2025-06-01T12:00:00Z", finalizers: [FINALIZER] } : {}),
    },
    spec: { source: "internal_docker" },
    ...(s.status ? { status: s.status } : {}),
  };
}
