/**
 * The result of `dms-operator plan`: its exit status (0 nothing to do, 2 changes planned, 1
 * errors) and its rendering for people (text) and for programs (JSON). Pure.
 */
import { escapeForTerminal, escapeJsonText } from "../api/terminal-text.ts";
import { DEFAULT_CONNECTION } from "../crd/conventions.ts";
import type { ManifestProblem } from "./manifests.ts";
import type { ProtectedRemoval } from "./protection.ts";
import type { HeldReview, ReviewAction, ReviewEntry } from "./review.ts";

/** Everything a plan found. */
export interface PlanReport {
  entries: ReviewEntry[];
  /** Invalid manifests: each with file, line and column. */
  fileErrors: ManifestProblem[];
  /** Whether a kubeconfig was given (Secrets and live resources were read). */
  clusterRead: boolean;
  /**
   * With a cluster read: its protected resources that the files no longer hold (see
   * protection.ts), and what could not be checked (`unchecked`: why). Warnings: the exit status
   * does not change.
   */
  protection?: { removals: ProtectedRemoval[]; unchecked?: string };
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

/** The report as data (stable field names; see docs/gitops.md): what `-o json` and `-o yaml` print. */
export function planDocument(report: PlanReport): Record<string, unknown> {
  return {
    exitCode: planExitStatus(report),
    clusterRead: report.clusterRead,
    counts: planCounts(report.entries),
    invalidDocuments: invalidDocuments(report.fileErrors),
    resources: report.entries,
    fileErrors: report.fileErrors,
    // null: not known (no cluster read); what could not be checked, in protectedRemovalsUnchecked.
    protectedRemovals: report.protection?.removals ?? null,
    ...(report.protection?.unchecked === undefined
      ? {}
      : { protectedRemovalsUnchecked: report.protection.unchecked }),
  };
}

/** The report as one JSON document. */
export function renderPlanJson(report: PlanReport): string {
  return `${escapeJsonText(JSON.stringify(planDocument(report), null, 2))}\n`;
}

/** How many documents are invalid: one broken document is one error, however many lines report it. */
export function invalidDocuments(problems: readonly ManifestProblem[]): number {
  return new Set(problems.map((p) => `${p.file}\u0000${p.document}`)).size;
}

/** Colours of the text report (a terminal's, or none). */
export interface PlanColours {
  green(text: string): string;
  yellow(text: string): string;
  red(text: string): string;
}

const NO_COLOURS: PlanColours = { green: (t) => t, yellow: (t) => t, red: (t) => t };

const where = (e: { file: string; line: number }) => `${e.file}:${e.line}`;

function headline(e: ReviewEntry): string {
  const id = e.deploymentId ? ` ${e.deploymentId}` : "";
  switch (e.action) {
    case "create":
      return "create";
    case "adopt":
      return `adopt${id} as it is (no change on the service)`;
    case "patch":
      return `${e.adopt ? `adopt${id} and patch` : `patch${id}`}, ${e.redeploy ? `redeploy revision ${e.redeploy.revisionId} (no build)` : e.newRevision ? "NEW REVISION" : "no new revision"}`;
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

/** The headline's colour: green a create, yellow a change, red what cannot go ahead. */
function headlineColour(e: ReviewEntry, c: PlanColours): (text: string) => string {
  if (e.action === "create") return c.green;
  if (e.action === "patch") return c.yellow;
  if (e.action === "error" || e.action === "blocked" || e.problems.length > 0) return c.red;
  return (t) => t;
}

/**
 * The report for people: one block per resource, then file errors, then a one-line total.
 * `colours` (a terminal's): `+` lines green, `~` yellow, `-` and `!` red.
 */
export function renderPlanText(report: PlanReport, colours: PlanColours = NO_COLOURS): string {
  const c = colours;
  // What the files, the service and the cluster wrote (a display name, a path, a field's name, a
  // service's error) with its controls written as escapes, before any colour is added: a value
  // must not drive the reviewer's terminal or the CI log.
  const x = escapeForTerminal;
  const out: string[] = [];
  for (const e of report.entries) {
    const target = e.deploymentName === e.name ? "" : ` (service name "${e.deploymentName}")`;
    const through = e.connection === DEFAULT_CONNECTION ? "" : ` via ${e.connection}`;
    out.push(
      `${x(`${e.namespace}/${e.name}${target}${through} [${where(e)}]`)}: ${headlineColour(e, c)(x(headline(e)))}`,
    );
    const [marker, colour] = e.action === "create" ? ["+", c.green] : ["~", c.yellow];
    for (const line of e.summary) out.push(`    ${colour(x(`${marker} ${line}`))}`);
    if (e.held) out.push(`    ${x(heldLine(e.held))}`);
    for (const line of e.drift) out.push(`    ≠ ${x(line)}`);
    for (const p of e.problems) out.push(`    ${c.red(x(`! ${p.reason}: ${p.message}`))}`);
    if (e.error) out.push(`    ${c.red(x(`! ${e.error}`))}`);
    if (e.skipReason) out.push(`    - ${x(e.skipReason)}`);
    for (const w of e.warnings) out.push(`    warning: ${x(w)}`);
    if (e.paused && e.action !== "error" && e.action !== "skipped")
      out.push("    note: paused (dms.dev/paused); applies once unpaused");
  }
  for (const p of report.fileErrors) out.push(fileErrorLine(p, c.red));
  for (const r of report.protection?.removals ?? []) out.push(`${c.yellow("warning")}: ${x(r.message)}`);
  if (report.protection?.unchecked)
    out.push(`note: deletion protection not checked ${x(report.protection.unchecked)}`);
  const n = planCounts(report.entries);
  if (out.length > 0) out.push("");
  const errors = n.error + invalidDocuments(report.fileErrors);
  out.push(
    `Plan: ${n.create} to create, ${n.adopt} to adopt, ${n.patch} to patch (${n.newRevision} with a new revision), ${n.noop} unchanged, ${n.blocked} blocked, ${errors} ${errors === 1 ? "error" : "errors"}${n.skipped > 0 ? `, ${n.skipped} not reviewed` : ""}.`,
  );
  if (!report.clusterRead) {
    out.push(
      "Without --kubeconfig: referenced Secrets were not read (their values are not checked), a deployment found by name is shown as adopted even if a resource in the cluster already manages it, and the resources of the cluster that the files no longer hold are not known (a protected one, spec.deletionProtection: true, that a prune would delete is not flagged).",
    );
  }
  return `${out.join("\n")}\n`;
}

/**
 * A manifest's problem as `file:line:col: error: message`, `red` colouring the word: the path and
 * the message (which quotes the file's own keys and values) with their controls as escapes.
 */
export function fileErrorLine(p: ManifestProblem, red: (text: string) => string = (t) => t): string {
  return `${escapeForTerminal(`${p.file}:${p.line}:${p.column}`)}: ${red("error")}: ${escapeForTerminal(p.message)}`;
}

/**
 * What `-o name` leaves out and a reader must still see, a line each for stderr: a resource's
 * problems and error (`error: team-a/web [file:line]: NameConflict: …`, what fails the plan), then
 * the protected resources a prune would delete (`warning: …`). Controls written as escapes.
 */
export function planErrorLines(report: PlanReport): string[] {
  const x = escapeForTerminal;
  return [
    ...report.entries.flatMap((e) => [
      ...e.problems.map(
        (p) => `error: ${x(`${e.namespace}/${e.name} [${where(e)}]: ${p.reason}: ${p.message}`)}`,
      ),
      ...(e.error ? [`error: ${x(`${e.namespace}/${e.name} [${where(e)}]: ${e.error}`)}`] : []),
    ]),
    ...(report.protection?.removals ?? []).map((r) => `warning: ${x(r.message)}`),
  ];
}
