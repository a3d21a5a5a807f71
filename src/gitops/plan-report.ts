/**
 * The result of `dms-operator plan`: its exit status (0 nothing to do, 2 changes planned, 1
 * errors) and its rendering for people (text) and for programs (JSON). Pure.
 */
import { DEFAULT_CONNECTION } from "../identity/connection.ts";
import type { ManifestProblem } from "./manifests.ts";
import type { HeldReview, ReviewAction, ReviewEntry } from "./review.ts";

/** Everything a plan found. */
export interface PlanReport {
  entries: ReviewEntry[];
  /** Invalid manifests: each with file, line and column. */
  fileErrors: ManifestProblem[];
  /** Whether a kubeconfig was given (Secrets and live resources were read). */
  clusterRead: boolean;
}

/** Exit statuses of `plan`. */
export const PLAN_EXIT = { nothingToDo: 0, error: 1, changes: 2 } as const;

/** Resources per action. */
export type PlanCounts = Record<ReviewAction, number> & { newRevision: number };

/** How many resources end in each action, and how many patches make a new revision. */
export function planCounts(entries: readonly ReviewEntry[]): PlanCounts {
  const counts: PlanCounts = {
    create: 0,
    adopt: 0,
    patch: 0,
    noop: 0,
    blocked: 0,
    error: 0,
    skipped: 0,
    newRevision: 0,
  };
  for (const e of entries) {
    counts[e.action]++;
    if (e.newRevision) counts.newRevision++;
  }
  return counts;
}

/**
 * 1 when a file is invalid, a resource cannot be planned, is blocked or asks what cannot be done
 * (a gate must not pass those silently); else 2 when a create or a patch would be sent; else 0.
 * Adopting a deployment as it is writes nothing to the service, so it counts as nothing to do;
 * a skipped resource (another connection than `--connection`'s) was left out on purpose.
 */
export function planExitStatus(report: PlanReport): number {
  const bad = report.entries.some(
    (e) => e.action === "error" || e.action === "blocked" || e.problems.length > 0,
  );
  if (report.fileErrors.length > 0 || bad) return PLAN_EXIT.error;
  const writes = report.entries.some((e) => e.action === "create" || e.action === "patch");
  return writes ? PLAN_EXIT.changes : PLAN_EXIT.nothingToDo;
}

/** The report as one JSON document (stable field names; see docs/gitops.md). */
export function renderPlanJson(report: PlanReport): string {
  const doc = {
    exitCode: planExitStatus(report),
    clusterRead: report.clusterRead,
    counts: planCounts(report.entries),
    resources: report.entries,
    fileErrors: report.fileErrors,
  };
  return `${JSON.stringify(doc, null, 2)}\n`;
}

const where = (e: { file: string; line: number }) => `${e.file}:${e.line}`;

function headline(e: ReviewEntry): string {
  const id = e.deploymentId ? ` ${e.deploymentId}` : "";
  switch (e.action) {
    case "create":
      return "create";
    case "adopt":
      return `adopt${id} as it is (no change on the service)`;
    case "patch":
      return `${e.adopt ? `adopt${id} and patch` : `patch${id}`}, ${e.newRevision ? "NEW REVISION" : "no new revision"}`;
    case "noop":
      return e.observeOnly
        ? `nothing (ObserveOnly${e.drift.length > 0 ? "; differences below are reported, never corrected" : ""})`
        : "nothing to do";
    case "blocked":
      return "blocked";
    case "error":
      return "error";
    case "skipped":
      return "skipped (not reviewed)";
  }
}

/** What the rollout windows hold: `held until <time> (<local>): outside rollout windows (…): fields`. */
function heldLine(held: HeldReview): string {
  const what = `outside rollout windows (${held.windows}): ${held.fields.join(", ")}`;
  return held.until
    ? `held until ${held.until} (${held.local ?? ""}): ${what}`
    : `held: ${what}; ${held.when}`;
}

/** The report for people: one block per resource, then file errors, then a one-line total. */
export function renderPlanText(report: PlanReport): string {
  const out: string[] = [];
  for (const e of report.entries) {
    const target = e.deploymentName === e.name ? "" : ` (service name "${e.deploymentName}")`;
    const through = e.connection === DEFAULT_CONNECTION ? "" : ` via ${e.connection}`;
    out.push(`${e.namespace}/${e.name}${target}${through} [${where(e)}]: ${headline(e)}`);
    const marker = e.action === "create" ? "+" : "~";
    for (const line of e.summary) out.push(`    ${marker} ${line}`);
    if (e.held) out.push(`    ${heldLine(e.held)}`);
    for (const line of e.drift) out.push(`    ≠ ${line}`);
    for (const p of e.problems) out.push(`    ! ${p.reason}: ${p.message}`);
    if (e.error) out.push(`    ! ${e.error}`);
    if (e.skipReason) out.push(`    - ${e.skipReason}`);
    for (const w of e.warnings) out.push(`    warning: ${w}`);
    if (e.paused && e.action !== "error" && e.action !== "skipped")
      out.push("    note: paused (dms.dev/paused); applies once unpaused");
  }
  for (const p of report.fileErrors) out.push(`${p.file}:${p.line}:${p.column}: error: ${p.message}`);
  const c = planCounts(report.entries);
  if (out.length > 0) out.push("");
  out.push(
    `Plan: ${c.create} to create, ${c.adopt} to adopt, ${c.patch} to patch (${c.newRevision} with a new revision), ${c.noop} unchanged, ${c.blocked} blocked, ${c.error + report.fileErrors.length} error(s)${c.skipped > 0 ? `, ${c.skipped} not reviewed` : ""}.`,
  );
  if (!report.clusterRead) {
    out.push(
      "Without --kubeconfig: referenced Secrets were not read (their values are not checked), and a deployment found by name is shown as adopted even if a resource in the cluster already manages it.",
    );
  }
  return `${out.join("\n")}\n`;
}
