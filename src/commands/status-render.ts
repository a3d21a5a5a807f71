/**
 * How `status` prints what it read (status-view.ts reads it): the screen of sections, the table of
 * resources (`-o wide`, `--no-headers`), `-o name`, and the document of `-o json` and `-o yaml`.
 */
import { SERVICE_CONNECTIONS } from "../kube/connections.ts";
import { isRecord } from "../runtime/json.ts";
import type { CliContext } from "./context.ts";
import { type Column, type OutputFlags, renderDocument, renderRows } from "./output.ts";
import {
  type ConnectionView,
  columns,
  connectionKey,
  heldUntil,
  type Listed,
  MAX_RESOURCES,
  OWNERS_NAMED,
  oneLine,
  type ResourceView,
  resourceView,
  SECTION_ROWS,
} from "./status-resource.ts";
import { RESOURCE_PREFIX } from "./words.ts";

/** The text `status` prints (with no resource, no summary line). `now`: ms since the epoch. */
export function renderStatus(input: {
  scope: string;
  allNamespaces: boolean;
  /** The namespace read (without -A), for kubectl's `No resources found in <ns> namespace.` */
  namespace?: string;
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
  // No resource: no summary of zeros (renderStatusAs says kubectl's No resources found).
  if (views.length > 0) out.push(summaryLine(input, views));
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
  if (input.connections.length === 0 && views.length > 0) out.push(noConnections(input.resources.items));
  for (const note of input.notes) out.push(`note: ${note}\n`);
  return views.length > 0 ? out.join("") : out.join("").replace(/^\n/, "");
}

/**
 * `Connections: none`, and which connection the resources use then: those without
 * `spec.connectionRef` use the default one, the operator's own settings, which no object shows.
 */
function noConnections(items: readonly unknown[]): string {
  const onDefault = items.filter(
    (i) =>
      resourceView(i) !== undefined &&
      !(isRecord(i) && isRecord(i.spec) && i.spec.connectionRef !== undefined),
  ).length;
  if (onDefault === 0) return "\nConnections: none\n";
  const who = onDefault === 1 ? "1 resource uses" : `${onDefault} resources use`;
  return `\nConnections: none (${who} the default connection: the operator's own --base-url and API key)\n`;
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
 * and `-o yaml`. With no resource read, a table says kubectl's `No resources found in <ns>
 * namespace.` (`No resources found` with -A) on stderr and prints no summary (the screen: only
 * the connections' section and notes, when there are any); `-o name` prints nothing.
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
  // No resource read: kubectl's line on stderr, as `kubectl get` says it.
  const none =
    !input.allNamespaces && input.namespace
      ? `No resources found in ${input.namespace} namespace.`
      : "No resources found";
  if (format === "table" && flags.headers !== false) {
    if (views.length === 0) ctx.err(`${none}\n`);
    return renderStatus(input);
  }
  const byConnection = new Map(input.connections.map((c) => [connectionKey(c.kind, c.namespace, c.name), c]));
  if (flags.headers !== false && views.length > 0) ctx.err(summaryLine(input, views));
  return renderRows(
    views,
    {
      columns: resourceColumns(input.allNamespaces, byConnection, input.now),
      name: (v) => `${RESOURCE_PREFIX}/${v.name}`,
      empty: none,
    },
    { format, headers: flags.headers !== false, now: input.now, err: ctx.err },
  );
}
