/**
 * The build and deploy logs of a simulated revision
 * (`GET /v2/deployments/{id}/revisions/{revision_id}/logs`): lines written as the revision walks
 * through its phases, each visible once the clock has passed its time, ending in the error of a
 * revision made to fail (`fail_revisions`). Like a careless build script, a failing revision's
 * log prints the deployment's secret values, so tests can check that whoever shows the log
 * redacts them. Derived from timestamps when read: no revision owns a timer or a buffer.
 */
import { LOG_ORDERS, LOG_TYPES, type LogOrder, type LogType, MAX_LOG_LIMIT } from "../api/revision-logs.ts";
import { ServiceError } from "./errors.ts";
import type { DeploymentRecord, RevisionRecord } from "./record.ts";

/** One line of a simulated log. */
export interface SimLogLine {
  timestamp: string;
  level: "INFO" | "WARNING" | "ERROR";
  message: string;
}

/** The query of the logs route, checked. */
export interface LogsQuery {
  type: LogType;
  order: LogOrder;
  limit: number;
  offset: number;
}

/** Entries per page when the request names no `limit`. */
export const DEFAULT_LOG_LIMIT = 100;

const bad = (detail: string) => new ServiceError(400, detail);

/**
 * The route's query string checked: `type` (required, `build` or `deploy`), `order` (`asc`,
 * default, or `desc`), `limit` (1–1000, default 100), `offset` (the cursor: entries to skip in
 * that order, default 0). 400 naming the parameter otherwise.
 */
export function parseLogsQuery(search: string): LogsQuery {
  const params = new URLSearchParams(search);
  const type = params.get("type");
  if (type === null || type === "") throw bad("query parameter 'type' is required: build or deploy");
  if (!LOG_TYPES.some((t) => t === type))
    throw bad(`query parameter 'type' must be build or deploy, got '${type}'`);
  const order = params.get("order") ?? "asc";
  if (!LOG_ORDERS.some((o) => o === order))
    throw bad(`query parameter 'order' must be asc or desc, got '${order}'`);
  const integer = (name: string, fallback: number, min: number, max: number) => {
    const raw = params.get(name);
    if (raw === null) return fallback;
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || n < min || n > max)
      throw bad(`query parameter '${name}' must be an integer from ${min} to ${max}, got '${raw}'`);
    return n;
  };
  return {
    type: type as LogType,
    order: order as LogOrder,
    limit: integer("limit", DEFAULT_LOG_LIMIT, 1, MAX_LOG_LIMIT),
    offset: integer("offset", 0, 0, Number.MAX_SAFE_INTEGER),
  };
}

/** A line due at `at` ms. */
type Due = { at: number; level: SimLogLine["level"]; message: string };

/** Spreads `messages` evenly over `[from, to)`. */
function spread(from: number, to: number, messages: readonly string[], level: Due["level"] = "INFO"): Due[] {
  const step = messages.length === 0 ? 0 : Math.max(0, to - from) / messages.length;
  return messages.map((message, i) => ({ at: Math.round(from + step * i), level, message }));
}

/** The secret values of `record` as a build script that dumps its environment prints them. */
function environmentDump(record: DeploymentRecord): string[] {
  return record.secrets.map((s) => `env: ${s.name}=${s.value}`);
}

/** Every line of `type` the revision will ever write, in time order (the clock is not applied). */
export function revisionLogLines(record: DeploymentRecord, revision: RevisionRecord, type: LogType): Due[] {
  // The six phases of a revision (record.ts) spread evenly from createdAt to settlesAt.
  const span = revision.settlesAt - revision.createdAt;
  const phase = (n: number) => revision.createdAt + (span * n) / 6;
  const failure = revision.failure;
  const source = revision.revisionSource ?? record.source;
  const what =
    revision.sourceRevisionConfig.image_uri ??
    revision.sourceRevisionConfig.repo_ref ??
    revision.sourceRevisionConfig.source_tarball_path ??
    "the source";
  if (type === "build") {
    const resolve = spread(phase(0), phase(1), [
      `revision ${revision.id}: resolving ${source} source ${what}`,
    ]);
    if (failure === "create")
      return [
        ...resolve,
        ...spread(
          phase(1) - 1,
          phase(1),
          [
            ...environmentDump(record),
            `error: could not resolve ${what}: not found or not accessible with the configured credentials`,
          ],
          "ERROR",
        ),
      ];
    const steps = spread(phase(3), phase(4), [
      `Step 1/4 : FROM python:3.12-slim`,
      `Step 2/4 : COPY . /app`,
      `Step 3/4 : RUN pip install --no-cache-dir -r requirements.txt`,
      `Collecting langgraph>=0.2`,
      `Step 4/4 : CMD ["python", "-m", "agent"]`,
    ]);
    if (failure === "build")
      return [
        ...resolve,
        ...steps.slice(0, 4),
        ...spread(
          phase(4) - 1,
          phase(4),
          [
            ...environmentDump(record),
            `ERROR: Could not find a version that satisfies the requirement langgraph>=0.2 (from versions: none)`,
            `error: build failed: RUN pip install --no-cache-dir -r requirements.txt exited with code 1`,
          ],
          "ERROR",
        ),
      ];
    return [
      ...resolve,
      ...steps,
      ...spread(phase(4), phase(4), [`build of revision ${revision.id} succeeded`]),
    ];
  }
  // The deploy log starts once the build is done; a revision that failed before has none.
  if (failure === "create" || failure === "build") return [];
  const deploy = spread(phase(5), phase(6), [
    `scheduling revision ${revision.id}`,
    `pulling image for revision ${revision.id}`,
    `starting container agent`,
  ]);
  if (failure === "deploy")
    return [
      ...deploy,
      ...spread(
        phase(6) - 1,
        phase(6),
        [
          ...environmentDump(record),
          `Traceback (most recent call last): ConnectionRefusedError: [Errno 111] Connection refused`,
          `error: container agent exited with code 1; readiness probe failed: revision ${revision.id} not deployed`,
        ],
        "ERROR",
      ),
    ];
  return [...deploy, ...spread(phase(6), phase(6), [`revision ${revision.id} is live`])];
}

/**
 * One page of the revision's `query.type` log at `now`: the lines written so far, in
 * `query.order`, from `query.offset` on, at most `query.limit`; `next_offset` is the cursor of the
 * next page while more lines are written already, else null.
 */
export function logPage(
  record: DeploymentRecord,
  revision: RevisionRecord,
  query: LogsQuery,
  now: number,
): { logs: SimLogLine[]; next_offset: string | null } {
  const written = revisionLogLines(record, revision, query.type).filter((line) => line.at <= now);
  if (query.order === "desc") written.reverse();
  const page = written.slice(query.offset, query.offset + query.limit);
  const end = query.offset + page.length;
  return {
    logs: page.map((line) => ({
      timestamp: new Date(line.at).toISOString(),
      level: line.level,
      message: line.message,
    })),
    next_offset: end < written.length ? String(end) : null,
  };
}
