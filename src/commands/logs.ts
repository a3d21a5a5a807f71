/**
 * `dms-operator logs <resource>`: the build or deploy log of a deployment's revision, as the
 * service keeps it (GET /v2/deployments/{id}/revisions/{revision_id}/logs, from the service's
 * public documentation), printed as `time level message` lines or, with `-o json`, one JSON
 * object per line.
 *
 * Where `<resource>` is looked up (resource-flags.ts; the cluster is found as kubectl finds it:
 * `--kubeconfig`, else `KUBECONFIG`, else `~/.kube/config`):
 * - by default: a Deployment resource (`-n`, else the context's namespace), read from the
 *   cluster, through its own connection (`spec.connectionRef`, or the default one from the service
 *   flags and environment), its deployment found as `revisions` finds it (resource-deployment.ts:
 *   `status.deploymentId` only when that deployment carries the resource's name, else by name);
 * - with `--connection <kind/name>`: a deployment of that name on the connection's tenant;
 * - with `--service`: a deployment of that name on the service the flags and environment name.
 *
 * logs-command.ts registers the command; this module, loaded when it runs, does the work.
 *
 * The revision is the deployment's latest unless `--revision` names one; the log is the build
 * log while the revision is being built or failed to be, else the deploy log, unless `--type`
 * says. `--follow` polls for new entries until the revision ends (live, skipped or failed) or
 * Ctrl-C; `--since 10m` shows only entries of the last ten minutes.
 */
import { createHash } from "node:crypto";
import type { ServiceClient } from "../api/client.ts";
import { RevisionsRouteMissingError } from "../api/errors.ts";
import { entryTimeMs, type LogEntry, type LogType } from "../api/revision-logs.ts";
import { escapeForTerminal, escapeJsonText } from "../api/terminal-text.ts";
import { type Deployment, DONE_REVISION_STATUSES, FAILED_REVISION_STATUSES } from "../api/wire.ts";
import type { CliContext, ConnectionFlags } from "./context.ts";
import { type OutputFlags, type OutputFormat, outputFormat, yamlText } from "./output.ts";
import { CommandExit, EXIT } from "./program.ts";
import { commandTarget } from "./resource-deployment.ts";
import type { ResourceLookupFlags } from "./resource-flags.ts";

/** The flags of `logs`, as commander parses them. */
export interface LogsFlags extends ConnectionFlags, ResourceLookupFlags, OutputFlags {
  type?: LogType;
  revision?: string;
  follow?: boolean;
  since?: number;
  verbose?: boolean;
}

/** Entries asked for per request (the route's largest page). */
const PAGE = 1000;
/** Pages one listing reads at most: a log longer than a million lines is cut there. */
const MAX_PAGES = 1000;
/** Time between two looks for new entries under `--follow`. */
export const FOLLOW_POLL_MS = 1000;

/** Runs `logs <resource>` (see the module comment). */
export async function runLogs(resource: string, flags: LogsFlags, ctx: CliContext): Promise<void> {
  const signal = ctx.stopSignal;
  const { client, deployment } = await commandTarget(resource, flags, ctx, "dms-operator-logs", byName);
  const revisionId = flags.revision ?? deployment.latest_revision_id;
  if (!revisionId) throw new Error(`the service's deployment ${deployment.id} has no revision yet`);
  const status = await revisionStatus(client, deployment.id, revisionId, signal);
  const type = flags.type ?? defaultLogType(status);
  const since = flags.since === undefined ? undefined : Date.now() - flags.since;
  const format = outputFormat(flags);
  const print = (entry: LogEntry) => {
    if (since !== undefined) {
      const at = entryTimeMs(entry);
      if (at !== undefined && at < since) return;
    }
    ctx.out(renderEntry(entry, format));
  };
  const reader = new LogFollower(client, deployment.id, revisionId, type, signal);
  const complete = await reader.readAll(print);
  if (!flags.follow) {
    if (!complete)
      ctx.err(`note: the log was cut after ${MAX_PAGES} pages of ${PAGE} entries (--follow reads on)\n`);
    return;
  }
  if (status === "missing")
    ctx.err(
      "note: the service has no revisions route: following until Ctrl-C (the end of the revision cannot be seen)\n",
    );
  let ended = isEnded(status);
  while (!ended && !signal.aborted) {
    if (!(await pause(FOLLOW_POLL_MS, signal))) break;
    // Looked at before reading: entries written up to the end are read after it.
    ended = isEnded(await revisionStatus(client, deployment.id, revisionId, signal));
    await reader.readAll(print);
  }
  // Ctrl-C before the end: no error line, the status of an interruption (as every command's).
  if (!ended) throw new CommandExit(EXIT.interrupted);
}

/** One entry as `format` prints it, ending with a newline. */
function renderEntry(entry: LogEntry, format: OutputFormat): string {
  // The service's text with its controls escaped: JSON's raw ones too; YAML's as double-quoted escapes.
  if (format === "json") return `${escapeJsonText(JSON.stringify(entry))}\n`;
  if (format === "yaml") return `---\n${yamlText(entry)}`;
  return `${escapeForTerminal(formatEntry(entry))}\n`;
}

/** An entry as one line: `time level message`, the parts it lacks left out. */
export function formatEntry(entry: LogEntry): string {
  return [entry.time, entry.level, entry.message].filter((p) => p !== undefined && p !== "").join(" ");
}

/**
 * The log to show by default: the build log while the revision is created, queued or built, or
 * failed at that, else the deploy log (also when its status is unknown).
 */
export function defaultLogType(status: string | undefined): LogType {
  return status !== undefined && /CREAT|QUEUED|BUILD/.test(status) ? "build" : "deploy";
}

/** Whether a revision with `status` will write no more: live, skipped, or failed. */
function isEnded(status: string | undefined): boolean {
  const ended: readonly string[] = [...DONE_REVISION_STATUSES, ...FAILED_REVISION_STATUSES];
  return status !== undefined && ended.includes(status);
}

/** The revision's status, `missing` when the service has no revisions route, undefined when unknown. */
async function revisionStatus(
  client: ServiceClient,
  deploymentId: string,
  revisionId: string,
  signal: AbortSignal,
): Promise<string | undefined> {
  try {
    const revision = await client.getRevision(deploymentId, revisionId, { signal });
    if (!revision) throw new Error(`the service's deployment ${deploymentId} has no revision ${revisionId}`);
    return revision.status;
  } catch (error) {
    if (error instanceof RevisionsRouteMissingError) return "missing";
    throw error;
  }
}

/** Waits `ms`; false when `signal` aborted meanwhile (Ctrl-C ends a follow quietly). */
function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", stop);
      resolve(true);
    }, ms);
    const stop = () => {
      clearTimeout(timer);
      resolve(false);
    };
    signal.addEventListener("abort", stop, { once: true });
  });
}

/**
 * Reads a revision's log oldest first, page by page, and on each later call only what was
 * written since: the cursor of the last page read is kept with the number of its entries
 * already printed, so an opaque `next_offset` works as well as a numeric one.
 */
export class LogFollower {
  readonly #client: ServiceClient;
  readonly #deploymentId: string;
  readonly #revisionId: string;
  readonly #type: LogType;
  readonly #signal: AbortSignal;
  /** Cursor of the page being read (undefined: the first page). */
  #cursor: string | undefined;
  /** Entries of that page already handed out. */
  #seen = 0;
  /**
   * Digests of the cursors of the last {@link MAX_PAGES} pages read and left behind: a
   * `next_offset` naming one again leads back (a service's cursors running in a circle), and is
   * read as the end, not as new entries. Digests, so that a service's long cursors are not kept.
   */
  readonly #left = new Set<string>();

  constructor(
    client: ServiceClient,
    deploymentId: string,
    revisionId: string,
    type: LogType,
    signal: AbortSignal,
  ) {
    this.#client = client;
    this.#deploymentId = deploymentId;
    this.#revisionId = revisionId;
    this.#type = type;
    this.#signal = signal;
  }

  /**
   * Hands every entry not handed out before to `each`, following `next_offset` to the end, or
   * {@link MAX_PAGES} pages: false when it stopped there (a later call reads on from that page).
   */
  async readAll(each: (entry: LogEntry) => void): Promise<boolean> {
    for (let pages = 0; pages < MAX_PAGES; pages++) {
      const page = await this.#client.getRevisionLogs(
        this.#deploymentId,
        this.#revisionId,
        {
          type: this.#type,
          order: "asc",
          limit: PAGE,
          ...(this.#cursor === undefined ? {} : { offset: this.#cursor }),
        },
        { signal: this.#signal },
      );
      if (!page)
        throw new Error(`the service's deployment ${this.#deploymentId} has no revision ${this.#revisionId}`);
      for (const entry of page.entries.slice(this.#seen)) each(entry);
      const next = page.nextOffset;
      if (next === null || next === this.#cursor || this.#left.has(digest(next))) {
        this.#seen = Math.max(this.#seen, page.entries.length);
        return true;
      }
      if (this.#cursor !== undefined) this.#leave(this.#cursor);
      this.#cursor = next;
      this.#seen = 0;
    }
    return false;
  }

  /** Remembers `cursor` as left behind, forgetting the oldest past {@link MAX_PAGES}. */
  #leave(cursor: string): void {
    this.#left.add(digest(cursor));
    if (this.#left.size > MAX_PAGES) {
      const oldest = this.#left.values().next().value;
      if (oldest !== undefined) this.#left.delete(oldest);
    }
  }
}

/** A cursor's digest, as {@link LogFollower} remembers the cursors it left. */
function digest(cursor: string): string {
  return createHash("sha256").update(cursor).digest("base64");
}

/** The deployment named exactly `name` (a listing with `name_contains`, then an exact match). */
async function byName(client: ServiceClient, name: string, signal: AbortSignal): Promise<Deployment> {
  const found = (await client.listAllDeployments({ name_contains: name }, { signal })).filter(
    (d) => d.name === name,
  );
  const [first, second] = found;
  if (!first) throw new Error(`the service has no deployment named "${name}"`);
  if (second)
    throw new Error(
      `the service has ${found.length} deployments named "${name}" (${found.map((d) => d.id).join(", ")}): cannot tell which one's log to show`,
    );
  return first;
}
