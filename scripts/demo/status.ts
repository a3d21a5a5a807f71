/**
 * What the demo shows of the Deployment resources: one row per resource, read from
 * `kubectl get dmsd -o json`, and the rule for "done". Pure, so the unit tests pin what a user sees.
 */
import { type Column, renderRows } from "../../src/commands/output.ts";

/** One condition as the demo needs it. */
export interface ConditionView {
  status: string;
  reason: string;
  message: string;
  observedGeneration: number | undefined;
}

/** One resource as the table shows it. */
export interface ResourceRow {
  name: string;
  source: string;
  policy: string;
  generation: number;
  observedGeneration: number | undefined;
  remote: string | undefined;
  latest: string | undefined;
  active: string | undefined;
  ready: ConditionView | undefined;
  synced: ConditionView | undefined;
}

/**
 * Rows of a `kubectl get dmsd -o json` List, sorted by name. Throws an Error naming what is
 * missing when `list` is not a List of objects with names; absent status fields stay undefined.
 */
export function rowsFromList(list: unknown): ResourceRow[] {
  const items = field(list, "items");
  if (!Array.isArray(items)) throw new Error("kubectl get -o json answered something other than a List");
  return items.map(rowFrom).sort((a, b) => a.name.localeCompare(b.name));
}

function rowFrom(item: unknown): ResourceRow {
  const metadata = field(item, "metadata");
  const spec = field(item, "spec");
  const status = field(item, "status");
  const name = text(field(metadata, "name"));
  if (name === undefined) throw new Error("a listed resource has no metadata.name");
  const conditions = field(status, "conditions");
  const find = (type: string) =>
    Array.isArray(conditions) ? conditionView(conditions.find((c) => field(c, "type") === type)) : undefined;
  return {
    name,
    source: text(field(spec, "source")) ?? "?",
    policy: text(field(spec, "managementPolicy")) ?? "Manage",
    generation: count(field(metadata, "generation")) ?? 0,
    observedGeneration: count(field(status, "observedGeneration")),
    remote: text(field(status, "remoteStatus")),
    latest: text(field(status, "latestRevisionId")),
    active: text(field(status, "activeRevisionId")),
    ready: find("Ready"),
    synced: find("Synced"),
  };
}

function conditionView(value: unknown): ConditionView | undefined {
  if (value === undefined) return undefined;
  return {
    status: text(field(value, "status")) ?? "Unknown",
    reason: text(field(value, "reason")) ?? "",
    message: text(field(value, "message")) ?? "",
    observedGeneration: count(field(value, "observedGeneration")),
  };
}

/**
 * Whether the operator has caught up with `row`: Ready and Synced are True and were set from the
 * resource's current generation (an older True says nothing about the latest edit).
 */
export function isDone(row: ResourceRow): boolean {
  const current = (c: ConditionView | undefined) =>
    c?.status === "True" && c.observedGeneration === row.generation;
  return current(row.ready) && current(row.synced);
}

/** One line per row that is not done: its name and what its Ready (or Synced) condition says. */
export function describeNotDone(rows: readonly ResourceRow[]): string[] {
  return rows
    .filter((row) => !isDone(row))
    .map((row) => {
      const blocking = row.ready?.status === "True" ? row.synced : row.ready;
      const type = blocking === row.synced ? "Synced" : "Ready";
      if (!blocking) return `${row.name}: no Ready condition yet (has the operator seen it?)`;
      if (blocking.status === "True")
        return `${row.name}: generation ${row.generation} not reconciled yet (conditions are from ${blocking.observedGeneration ?? "an unknown generation"})`;
      return `${row.name}: ${type}=${blocking.status} ${blocking.reason}: ${blocking.message}`;
    });
}

/** A revision id shortened for the table (ids are UUIDs; 8 characters tell them apart here). */
export function shortId(id: string | undefined): string | undefined {
  return id?.slice(0, 8);
}

const COLUMNS: readonly Column<ResourceRow>[] = [
  { header: "NAME", value: (r) => r.name },
  { header: "SOURCE", value: (r) => r.source },
  { header: "POLICY", value: (r) => r.policy },
  { header: "REMOTE", value: (r) => r.remote },
  { header: "READY", value: (r) => r.ready?.status },
  { header: "SYNCED", value: (r) => r.synced?.status },
  { header: "REASON", value: (r) => (r.ready?.status === "True" ? r.synced?.reason : r.ready?.reason) },
  { header: "LATEST", value: (r) => shortId(r.latest) },
  { header: "ACTIVE", value: (r) => shortId(r.active) },
];

/** The rows as a kubectl-style table, ending with a newline. */
export function renderTable(rows: readonly ResourceRow[]): string {
  const listing = {
    columns: COLUMNS,
    name: (r: ResourceRow) => r.name,
    empty: "No Deployment resources yet.",
  };
  return renderRows(rows, listing, { format: "table" });
}

function field(value: unknown, key: string): unknown {
  return typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined;
}

function text(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

function count(value: unknown): number | undefined {
  return typeof value === "number" && Number.isInteger(value) ? value : undefined;
}
