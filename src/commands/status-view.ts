/**
 * `status [-n ns | -A]`: one screen of the operator's work, read from the cluster alone (no call
 * to the service): the Deployment resources grouped by their conditions (Stalled, not Ready,
 * Reconciling, Ready) with the reason and message of each, the changes held outside the rollout
 * windows and when they go out, the revisions that failed, and the connections with their
 * readiness. Under `run --sharded`, the replica that owns each resource (its
 * `shard.dms.dev/owner` label) and a drain under way.
 *
 * Bounded: at most {@link MAX_RESOURCES} resources and as many connections of each kind are read
 * (pages of {@link PAGE_SIZE}, each call under the client's timeout, all of them within
 * {@link STATUS_DEADLINE_MS}), at most {@link SECTION_ROWS} rows are printed per section (and the
 * opening of a held change is computed for those only), and each message is cut to one line of
 * {@link MESSAGE_WIDTH} characters with the printable rule (`api/printable.ts`).
 *
 * This module reads and renders, loaded when `status` runs; status.ts registers the command.
 */
import { cutToLength, printableLine } from "../api/printable.ts";
import { FAILED_REVISION_STATUSES } from "../api/wire.ts";
import { ANNOTATION_PAUSED } from "../crd/schema.ts";
import type { KubeClient } from "../kube/client.ts";
import { CLUSTER_SERVICE_CONNECTIONS, SERVICE_CONNECTIONS } from "../kube/connections.ts";
import { DEPLOYMENTS } from "../kube/deployments.ts";
import { KubeApiError } from "../kube/errors.ts";
import { collectionPath, listItems, listMeta, type ResourceType } from "../kube/object.ts";
import { DRAIN_LABEL, OWNER_LABEL } from "../kube/shards.ts";
import {
  compileWindows,
  localTime,
  nextOpening,
  type RolloutWindowSpec,
} from "../reconcile/rollout/rollout-windows.ts";
import { isRecord } from "../runtime/json.ts";
import type { CliContext } from "./context.ts";
import { type Column, type OutputFlags, renderDocument, renderRows } from "./output.ts";
import { listingError, pluginCluster } from "./plugin-cluster.ts";
import type { KubectlFlags } from "./plugin-flags.ts";
import { RESOURCE_PREFIX } from "./words.ts";

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

const connectionKey = (kind: string, namespace: string, name: string) => `${kind}/${namespace}/${name}`;

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
      const opening = nextOpening(compileWindows(windows as RolloutWindowSpec[], "spec.rolloutWindows"), now);
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
interface Listed {
  items: unknown[];
  truncated: boolean;
}

/** The objects of `type` (in `namespace`, or all), page after page, at most {@link MAX_RESOURCES}. */
async function listAll(
  client: KubeClient,
  type: ResourceType,
  namespace: string | undefined,
  signal: AbortSignal,
): Promise<Listed> {
  const items: unknown[] = [];
  let token: string | undefined;
  do {
    const page = await client.request({
      method: "GET",
      path: collectionPath(type, namespace),
      query: { limit: PAGE_SIZE, continue: token },
      signal,
    });
    items.push(...listItems(page));
    token = listMeta(page).continue;
  } while (token !== undefined && items.length < MAX_RESOURCES);
  return {
    items: items.slice(0, MAX_RESOURCES),
    truncated: token !== undefined || items.length > MAX_RESOURCES,
  };
}

/** A listing, or the line saying why it could not be read (not allowed, kind not installed). */
async function listOrSay(list: () => Promise<Listed>, what: string): Promise<Listed | string> {
  try {
    return await list();
  } catch (error) {
    if (error instanceof KubeApiError && (error.status === 403 || error.status === 404))
      return `cannot list ${what}: ${error.status === 403 ? "forbidden" : "not found (are the CRDs installed?)"}`;
    throw error;
  }
}

/** The text `status` prints. `now`: ms since the epoch. */
export function renderStatus(input: {
  scope: string;
  allNamespaces: boolean;
  resources: Listed;
  connections: ConnectionView[];
  notes: string[];
  now: number;
}): string {
  const { allNamespaces } = input;
  const views = input.resources.items.flatMap((i) => resourceView(i) ?? []);
  const byConnection = new Map(input.connections.map((c) => [connectionKey(c.kind, c.namespace, c.name), c]));
  const name = (v: { namespace: string; name: string }) =>
    allNamespaces && v.namespace ? `${v.namespace}/${v.name}` : v.name;
  const out: string[] = [];
  out.push(summaryLine(input, views));
  const section = (title: string, head: string[], rows: string[][], hint?: string) => {
    if (rows.length === 0) return;
    out.push(`\n${title} (${rows.length}):\n`);
    out.push(columns([head, ...rows.slice(0, SECTION_ROWS)]));
    if (rows.length > SECTION_ROWS) out.push(`  … and ${rows.length - SECTION_ROWS} more\n`);
    if (hint) out.push(`  ${hint}\n`);
  };
  // Sharded (some resource carries a shard label): which replica owns each, and a pending drain.
  const sharded = views.some((v) => v.owner !== undefined || v.draining);
  if (sharded) out.push(ownersLine(views));
  const ownerCell = (v: ResourceView) => `${v.owner ?? "-"}${v.draining ? " (draining)" : ""}`;
  for (const group of ["Stalled", "NotReady", "Reconciling", "Ready"] as const) {
    const rows = views
      .filter((v) => v.group === group)
      .map((v) => [
        name(v),
        ...(sharded ? [ownerCell(v)] : []),
        v.paused ? `${v.reason || "-"} (suspended)` : v.reason || "-",
        oneLine(v.message) || "-",
      ]);
    section(GROUP_TITLE[group], ["NAME", ...(sharded ? ["OWNER"] : []), "REASON", "MESSAGE"], rows);
  }
  // Openings are computed for the rows printed only: each is a search over tenants' schedules.
  const held = views
    .filter((v) => v.held)
    .map((v, i) => [name(v), v.held && i < SECTION_ROWS ? heldUntil(v.held, byConnection, input.now) : ""]);
  section(
    "Held outside the rollout windows",
    ["NAME", "GOES OUT AT"],
    held,
    held.length > 0 ? "kubectl dms rollout-now <name> lets one go out now" : undefined,
  );
  const failed = views.flatMap((v) =>
    v.failed
      ? [
          [
            name(v),
            v.failed.revision.slice(0, 8) || "-",
            v.failed.status,
            oneLine(v.failed.excerpt, 100) || "-",
          ],
        ]
      : [],
  );
  section(
    "Failed revisions",
    ["NAME", "REVISION", "STATUS", "LOG (LAST LINE)"],
    failed,
    failed.length > 0 ? "kubectl dms logs <name> prints the whole log" : undefined,
  );
  const connectionRows = input.connections.map((c) => [
    c.kind === SERVICE_CONNECTIONS.kind
      ? `${c.kind}/${allNamespaces ? `${c.namespace}/` : ""}${c.name}`
      : `${c.kind}/${c.name}`,
    c.ready,
    c.reason,
    c.resources,
    oneLine(c.message) || "-",
  ]);
  section("Connections", ["CONNECTION", "READY", "REASON", "RESOURCES", "MESSAGE"], connectionRows);
  if (input.connections.length === 0) out.push("\nConnections: none\n");
  for (const note of input.notes) out.push(`note: ${note}\n`);
  return out.join("");
}

/** `Deployment resources in namespace a (3): 2 Ready, 0 Reconciling, 1 not Ready, 0 Stalled`. */
function summaryLine(input: { scope: string; resources: Listed }, views: readonly ResourceView[]): string {
  const counts = (["Ready", "Reconciling", "NotReady", "Stalled"] as const).map(
    (g) => `${views.filter((v) => v.group === g).length} ${GROUP_TITLE[g]}`,
  );
  const more = input.resources.truncated ? `; the first ${MAX_RESOURCES} read, narrow with -n` : "";
  return `Deployment resources in ${input.scope} (${views.length}${more}): ${counts.join(", ")}\n`;
}

/**
 * `Owners (run --sharded): ring-0 67, ring-1 66; 3 draining, 1 not assigned yet`: the resources
 * per owner label, most first, at most {@link OWNERS_NAMED} named.
 */
function ownersLine(views: readonly ResourceView[]): string {
  const counts = new Map<string, number>();
  for (const v of views) if (v.owner !== undefined) counts.set(v.owner, (counts.get(v.owner) ?? 0) + 1);
  const sorted = [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  const named = sorted.slice(0, OWNERS_NAMED).map(([owner, n]) => `${owner} ${n}`);
  if (sorted.length > OWNERS_NAMED) named.push(`and ${sorted.length - OWNERS_NAMED} more`);
  const draining = views.filter((v) => v.draining).length;
  const unowned = views.filter((v) => v.owner === undefined).length;
  const extra = [
    ...(draining > 0 ? [`${draining} draining`] : []),
    ...(unowned > 0 ? [`${unowned} not assigned yet`] : []),
  ];
  return `Owners (run --sharded): ${named.join(", ") || "none"}${extra.length > 0 ? `; ${extra.join(", ")}` : ""}\n`;
}

/**
 * What `status -o json|yaml` prints: every resource read (not only the rows a section shows),
 * with when a held change goes out, and the connections.
 */
export function statusDocument(input: Parameters<typeof renderStatus>[0]): Record<string, unknown> {
  const views = input.resources.items.flatMap((i) => resourceView(i) ?? []);
  const byConnection = new Map(input.connections.map((c) => [connectionKey(c.kind, c.namespace, c.name), c]));
  return {
    scope: input.scope,
    truncated: input.resources.truncated,
    resources: views.map(({ held, failed, ...view }) => ({
      ...view,
      ...(held
        ? { held: { message: held.message, goesOutAt: heldUntil(held, byConnection, input.now) } }
        : {}),
      ...(failed ? { failed } : {}),
    })),
    connections: input.connections.map(({ windows: _windows, ...connection }) => connection),
    notes: input.notes,
  };
}

const GROUP_TITLE = {
  Stalled: "Stalled",
  NotReady: "not Ready",
  Reconciling: "Reconciling",
  Ready: "Ready",
} as const;

/** The flags of `status`, as commander parses them. */
export type StatusFlags = KubectlFlags & OutputFlags;

/** Runs `status` (see the module comment). */
export async function runStatus(flags: StatusFlags, ctx: CliContext): Promise<void> {
  const cluster = pluginCluster(flags, ctx.env, "kubectl-dms-status");
  const all = flags.allNamespaces === true;
  const namespace = all ? undefined : cluster.namespace;
  const deadline = AbortSignal.timeout(STATUS_DEADLINE_MS);
  const signal = AbortSignal.any([ctx.stopSignal, deadline]);
  const notes: string[] = [];
  const [resources, namespaced, clusterWide] = await Promise.all([
    listAll(cluster.client, DEPLOYMENTS, namespace, signal),
    listOrSay(() => listAll(cluster.client, SERVICE_CONNECTIONS, namespace, signal), "ServiceConnections"),
    listOrSay(
      () => listAll(cluster.client, CLUSTER_SERVICE_CONNECTIONS, undefined, signal),
      "ClusterServiceConnections",
    ),
  ]).catch((error: unknown) => {
    if (!deadline.aborted || ctx.stopSignal.aborted) throw listingError(error, cluster);
    throw new Error(
      `the API server did not list the resources and connections within ${STATUS_DEADLINE_MS / 1000} s (${cluster.description}): narrow with -n, or check the cluster`,
      { cause: error },
    );
  });
  const connections: ConnectionView[] = [];
  for (const [kind, listed] of [
    [SERVICE_CONNECTIONS.kind, namespaced],
    [CLUSTER_SERVICE_CONNECTIONS.kind, clusterWide],
  ] as const) {
    if (typeof listed === "string") notes.push(listed);
    else connections.push(...listed.items.flatMap((i) => connectionView(kind, i) ?? []));
  }
  const input = {
    scope: all ? "every namespace" : `namespace ${cluster.namespace}`,
    allNamespaces: all,
    resources,
    connections,
    notes,
    now: Date.now(),
  };
  ctx.out(renderStatusAs(flags, input, ctx));
}

/** The columns of `status`'s table of resources (`-o wide`, `--no-headers`). */
function resourceColumns(
  allNamespaces: boolean,
  connections: ReadonlyMap<string, ConnectionView>,
  now: number,
): Column<ResourceView>[] {
  return [
    ...(allNamespaces ? [{ header: "NAMESPACE", value: (v: ResourceView) => v.namespace }] : []),
    { header: "NAME", value: (v) => v.name },
    { header: "STATE", value: (v) => GROUP_STATE[v.group], show: "status" },
    { header: "REASON", value: (v) => v.reason },
    { header: "SUSPENDED", value: (v) => (v.paused ? "true" : "false"), wide: true },
    {
      header: "OWNER",
      value: (v) => (v.owner ? `${v.owner}${v.draining ? " (draining)" : ""}` : ""),
      wide: true,
    },
    { header: "GOES OUT AT", value: (v) => (v.held ? heldUntil(v.held, connections, now) : ""), wide: true },
    { header: "FAILED REVISION", value: (v) => v.failed?.revision, wide: true },
    { header: "MESSAGE", value: (v) => oneLine(v.message) },
  ];
}

/** A state as the table shows it (kstatus' words, one token each). */
const GROUP_STATE = {
  Stalled: "Stalled",
  NotReady: "NotReady",
  Reconciling: "Reconciling",
  Ready: "Ready",
} as const;

/**
 * What `status` prints for `flags`: the screen of sections (a table without `-o`); a table of
 * the resources, one line each, under `-o wide` or `--no-headers` (the summary line then on
 * stderr); `deployment.dms.dev/<name>` lines under `-o name`; the whole document under `-o json`
 * and `-o yaml`.
 */
export function renderStatusAs(
  flags: OutputFlags,
  input: Parameters<typeof renderStatus>[0],
  ctx: Pick<CliContext, "err">,
): string {
  const format = flags.output === "text" ? "table" : (flags.output ?? "table");
  if (format === "json" || format === "yaml") return renderDocument(format, statusDocument(input));
  const views = input.resources.items.flatMap((i) => resourceView(i) ?? []);
  if (format === "name") return views.map((v) => `${RESOURCE_PREFIX}/${oneLine(v.name, 253)}\n`).join("");
  if (format === "table" && flags.headers !== false) return renderStatus(input);
  const byConnection = new Map(input.connections.map((c) => [connectionKey(c.kind, c.namespace, c.name), c]));
  if (flags.headers !== false) ctx.err(summaryLine(input, views));
  return renderRows(
    views,
    {
      columns: resourceColumns(input.allNamespaces, byConnection, input.now),
      name: (v) => `${RESOURCE_PREFIX}/${v.name}`,
      empty: `No Deployment resources in ${input.scope}.`,
    },
    { format, headers: flags.headers !== false, now: input.now, err: ctx.err },
  );
}
