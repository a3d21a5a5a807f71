/**
 * What `status` shows of each object it reads (status-view.ts): the view of a Deployment resource
 * and of a connection, read tolerantly, when a held change goes out, and the one-line and column
 * helpers its screen prints with; the bounds it reads and prints within.
 */
import { cutToLength, printableLine } from "../api/printable.ts";
import { FAILED_REVISION_STATUSES } from "../api/wire.ts";
import { ANNOTATION_PAUSED } from "../crd/schema.ts";
import { SERVICE_CONNECTIONS } from "../kube/connections.ts";
import { DRAIN_LABEL, OWNER_LABEL } from "../kube/shards.ts";
import { nextOpening } from "../reconcile/rollout/next-opening.ts";
import { compileWindows, type RolloutWindowSpec } from "../reconcile/rollout/rollout-windows.ts";
import { localTime } from "../reconcile/rollout/zones.ts";
import { workMs } from "../runtime/clock.ts";
import { isRecord } from "../runtime/json.ts";

/** Most objects of one kind read. */
export const MAX_RESOURCES = 5000;
/** Objects per list call. */
export const PAGE_SIZE = 500;
/** Most rows printed per section (the rest are counted). */
export const SECTION_ROWS = 30;
/** The whole of `status`'s reading ends within this (each call also within the client's timeout). */
export const STATUS_DEADLINE_MS = 60_000;
/** Longest message printed, in characters. */
export const MESSAGE_WIDTH = 160;
/** Longest owner printed (a label value: 63 at most when the API server validated it). */
const OWNER_WIDTH = 63;
/** Most owners named in the summary line (a label a tenant may write can name many). */
export const OWNERS_NAMED = 10;

type Json = Record<string, unknown>;

/** A condition as read, every field a string ("" when absent or not a string). */
interface Cond {
  type: string;
  status: string;
  reason: string;
  message: string;
}

/** What the sections show of a Deployment resource. */
export interface ResourceView {
  namespace: string;
  name: string;
  group: "Stalled" | "NotReady" | "Reconciling" | "Ready";
  reason: string;
  message: string;
  paused: boolean;
  /**
   * `run --sharded`: the replica the resource is labelled for (`shard.dms.dev/owner`), and
   * whether the sharder asked it to let go (`shard.dms.dev/drain`); absent when unsharded.
   */
  owner?: string;
  draining?: boolean;
  held?: { message: string; windows?: unknown; connection?: string };
  failed?: { revision: string; status: string; excerpt: string };
}

/** A connection as the connections section shows it. */
export interface ConnectionView {
  kind: string;
  namespace: string;
  name: string;
  ready: string;
  reason: string;
  message: string;
  resources: string;
  windows?: unknown;
  /** `spec.rolloutWindowsPolicy: Binding`: its windows rule besides a resource's own. */
  binding?: boolean;
}

const str = (v: unknown): string => (typeof v === "string" ? v : "");

function conditionsOf(status: Json): Cond[] {
  const list = Array.isArray(status.conditions) ? status.conditions.slice(0, 32) : [];
  return list.filter(isRecord).map((c) => ({
    type: str(c.type),
    status: str(c.status),
    reason: str(c.reason),
    message: str(c.message),
  }));
}

/** The view of one listed Deployment resource, read tolerantly; undefined when it is not one. */
export function resourceView(item: unknown): ResourceView | undefined {
  if (!isRecord(item) || !isRecord(item.metadata) || typeof item.metadata.name !== "string") return undefined;
  const meta = item.metadata;
  const spec = isRecord(item.spec) ? item.spec : {};
  const status = isRecord(item.status) ? item.status : {};
  const conditions = conditionsOf(status);
  const cond = (type: string) => conditions.find((c) => c.type === type);
  const ready = cond("Ready");
  const stalled = cond("Stalled");
  const reconciling = cond("Reconciling");
  const synced = cond("Synced");
  // kstatus: Stalled first, then work in progress (a rollout, a held change: Ready may still be
  // True for the revision live meanwhile), then Ready.
  const shown =
    stalled?.status === "True"
      ? { group: "Stalled" as const, c: stalled }
      : reconciling?.status === "True"
        ? { group: "Reconciling" as const, c: reconciling }
        : ready?.status === "True"
          ? { group: "Ready" as const, c: synced?.status === "False" ? synced : ready }
          : { group: "NotReady" as const, c: ready };
  const annotations = isRecord(meta.annotations) ? meta.annotations : {};
  const view: ResourceView = {
    namespace: str(meta.namespace),
    name: str(meta.name),
    group: shown.group,
    reason: shown.c?.reason || (conditions.length === 0 ? "NotReconciledYet" : ""),
    message:
      shown.c?.message ||
      (conditions.length === 0
        ? "the operator has not written a status: is it running and watching this namespace?"
        : ""),
    paused: annotations[ANNOTATION_PAUSED] === "true",
  };
  const labels = isRecord(meta.labels) ? meta.labels : {};
  // A label value is at most 63 characters; cut anyway (read tolerantly, print bounded).
  const owner = oneLine(str(labels[OWNER_LABEL]), OWNER_WIDTH);
  if (owner !== "") view.owner = owner;
  if (labels[DRAIN_LABEL] !== undefined) view.draining = true;
  if (synced?.reason === "OutsideRolloutWindow") {
    const ref = isRecord(spec.connectionRef) ? spec.connectionRef : undefined;
    view.held = {
      message: synced.message,
      ...(spec.rolloutWindows !== undefined ? { windows: spec.rolloutWindows } : {}),
      ...(ref && typeof ref.kind === "string" && typeof ref.name === "string"
        ? {
            connection: connectionKey(
              ref.kind,
              ref.kind === SERVICE_CONNECTIONS.kind ? str(meta.namespace) : "",
              ref.name,
            ),
          }
        : {}),
    };
  }
  const revisionStatus = str(status.latestRevisionStatus);
  if ((FAILED_REVISION_STATUSES as readonly string[]).includes(revisionStatus)) {
    const revision = str(status.latestRevisionId);
    const log = isRecord(status.failedRevisionLog) ? status.failedRevisionLog : {};
    const excerpt = str(log.revisionId) === revision ? str(log.excerpt) : "";
    const lastLine = excerpt.trimEnd().split("\n").pop() ?? "";
    view.failed = { revision, status: revisionStatus, excerpt: lastLine };
  }
  return view;
}

export const connectionKey = (kind: string, namespace: string, name: string) =>
  `${kind}/${namespace}/${name}`;

/** The view of one listed connection, read tolerantly; undefined when it is not one. */
export function connectionView(kind: string, item: unknown): ConnectionView | undefined {
  if (!isRecord(item) || !isRecord(item.metadata) || typeof item.metadata.name !== "string") return undefined;
  const spec = isRecord(item.spec) ? item.spec : {};
  const status = isRecord(item.status) ? item.status : {};
  const ready = conditionsOf(status).find((c) => c.type === "Ready");
  const count = status.deployments;
  return {
    kind,
    namespace: str(item.metadata.namespace),
    name: item.metadata.name,
    ready: ready?.status || "Unknown",
    reason: ready?.reason || "NotProbedYet",
    message: ready?.status === "True" ? "" : (ready?.message ?? ""),
    resources: typeof count === "number" ? String(count) : "-",
    ...(spec.rolloutWindows !== undefined ? { windows: spec.rolloutWindows } : {}),
    ...(spec.rolloutWindowsPolicy === "Binding" ? { binding: true } : {}),
  };
}

/**
 * When a held change goes out, from the windows in effect (the resource's own, else its
 * connection's; both under a binding policy, read from the operator's message), as `2026-11-28T02:00:00Z (2026-11-28 03:00 Europe/Berlin (GMT+01:00))`; else
 * what the operator's message says; `now` ms since the epoch.
 */
export function heldUntil(
  held: NonNullable<ResourceView["held"]>,
  connections: ReadonlyMap<string, ConnectionView>,
  now: number,
): string {
  const connection = held.connection ? connections.get(held.connection) : undefined;
  // A connection's binding windows rule besides the resource's own: the operator's message,
  // which read both, says when.
  const windows =
    connection?.binding && held.windows !== undefined ? undefined : (held.windows ?? connection?.windows);
  if (Array.isArray(windows) && windows.length > 0) {
    try {
      const compiled = compileWindows(windows as RolloutWindowSpec[], "spec.rolloutWindows");
      const opening = nextOpening(compiled, now, { counter: workMs });
      if (opening.kind === "now") return "now (the operator rolls it out at its next reconcile)";
      if (opening.kind === "at")
        return `${new Date(opening.at).toISOString().replace(/\.000Z$/, "Z")} (${localTime(opening.at, opening.window.timeZone)})`;
    } catch {
      // An unreadable window: the operator's own message says why.
    }
  }
  const said = /it goes out at (\S+ \([^()]*(?:\([^()]*\))?\))/.exec(held.message)?.[1];
  return (
    said ?? (/no window opens within [^;]*/.exec(held.message)?.[0] || "unknown: see its Synced condition")
  );
}

/** `text` on one line with the printable rule (`printableLine`, `api/printable.ts`), cut to `width`. */
export function oneLine(text: string, width = MESSAGE_WIDTH): string {
  const flat = printableLine(text).trim();
  return cutToLength(flat, width);
}

/** `rows` as aligned columns (two spaces apart), each line indented by two, no trailing blanks. */
export function columns(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows)
    for (const [i, cell] of row.entries()) widths[i] = Math.max(widths[i] ?? 0, cell.length);
  return rows
    .map((row) =>
      `  ${row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join("  ")}`.trimEnd(),
    )
    .map((line) => `${line}\n`)
    .join("");
}

/** What one paged listing read: the items, and whether there were more than were read. */
export interface Listed {
  items: unknown[];
  truncated: boolean;
}
