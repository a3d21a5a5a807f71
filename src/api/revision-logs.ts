/**
 * The logs of a revision: `GET /v2/deployments/{deployment_id}/revisions/{revision_id}/logs`.
 *
 * The route is not in the shared spec: it comes from the service's public documentation
 * (`?type=build|deploy` required, `order=asc|desc`, `limit`, `offset`; answered
 * `{"logs": [...], "next_offset": string | null}`). Its entries are read tolerantly: a message
 * under `message`, `msg`, `text` or `log` (or an entry that is a plain string), a time under
 * `timestamp` or `time`, a level under `level` or `severity` when present. An entry without a
 * message is skipped, never a failure of the whole answer.
 */
import { isRecord } from "../runtime/json.ts";
import { RouteMissingError, type ServiceError } from "./errors.ts";

/** The route template, as errors and metrics name it. */
export const REVISION_LOGS_ROUTE = "/v2/deployments/{deployment_id}/revisions/{revision_id}/logs";

/** The kinds of log a revision has: its build, and its deploy. */
export const LOG_TYPES = ["build", "deploy"] as const;
export type LogType = (typeof LOG_TYPES)[number];

/** The orders the route sorts entries in (by time). */
export const LOG_ORDERS = ["asc", "desc"] as const;
export type LogOrder = (typeof LOG_ORDERS)[number];

/** The most entries one request asks for (the command pages past it). */
export const MAX_LOG_LIMIT = 1000;

/** One log line as read. */
export interface LogEntry {
  message: string;
  /** As the service wrote it (an RFC 3339 string, or epoch seconds/ms rendered as a string). */
  time?: string;
  level?: string;
}

/** One answer of the route: its entries read, the cursor of the next page, and how many were skipped. */
export interface LogPage {
  entries: LogEntry[];
  /** Pass as `offset` to read on; null when the service says there is no more (for now). */
  nextOffset: string | null;
  /** Items of the answer that held no message (or were not entries at all), or were not read. */
  skipped: number;
}

/** What to ask the route for. */
export interface LogQuery {
  type: LogType;
  order?: LogOrder;
  limit?: number;
  /** A cursor from a previous page's {@link LogPage.nextOffset}. */
  offset?: string;
}

const MESSAGE_KEYS = ["message", "msg", "text", "log"] as const;
const TIME_KEYS = ["timestamp", "time"] as const;
const LEVEL_KEYS = ["level", "severity"] as const;

/** The first of `keys` of `item` holding a string (or a finite number, rendered), else undefined. */
function firstText(item: Record<string, unknown>, keys: readonly string[]): string | undefined {
  for (const key of keys) {
    const value = item[key];
    if (typeof value === "string") return value;
    if (typeof value === "number" && Number.isFinite(value)) return String(value);
  }
  return undefined;
}

/** One item of `logs` read as an entry, or undefined when it holds no message. */
export function readLogEntry(item: unknown): LogEntry | undefined {
  if (typeof item === "string") return { message: item };
  if (!isRecord(item)) return undefined;
  const message = MESSAGE_KEYS.map((key) => item[key]).find((v): v is string => typeof v === "string");
  if (message === undefined) return undefined;
  const time = firstText(item, TIME_KEYS);
  const level = firstText(item, LEVEL_KEYS);
  return { message, ...(time === undefined ? {} : { time }), ...(level === undefined ? {} : { level }) };
}

/**
 * An answer of the route read tolerantly: `{"logs": [...], "next_offset": ...}`, or a bare array
 * of entries. Undefined when the body is neither (the caller reports it as a bad answer). At most
 * {@link MAX_LOG_LIMIT} items are read, the most one request asks for: of a longer answer (a
 * service that ignored `limit`: an 8 MiB answer holds ~300,000 empty entries, which took a second
 * of the shared event loop to read and sort for a tail of 20) its first and last halves of that,
 * where the newest entries are whichever order the service wrote them in.
 */
export function readLogPage(body: unknown): LogPage | undefined {
  const answered = Array.isArray(body)
    ? body
    : isRecord(body) && Array.isArray(body.logs)
      ? body.logs
      : undefined;
  if (answered === undefined) return undefined;
  const half = MAX_LOG_LIMIT / 2;
  const items =
    answered.length <= MAX_LOG_LIMIT ? answered : [...answered.slice(0, half), ...answered.slice(-half)];
  const entries: LogEntry[] = [];
  for (const item of items) {
    const entry = readLogEntry(item);
    if (entry) entries.push(entry);
  }
  const next = isRecord(body) ? body.next_offset : undefined;
  const nextOffset =
    typeof next === "string" && next !== ""
      ? next
      : typeof next === "number" && Number.isFinite(next)
        ? String(next)
        : null;
  return { entries, nextOffset, skipped: answered.length - entries.length };
}

/**
 * The time of an entry in ms since the epoch, or undefined: an RFC 3339 string, or a number of
 * seconds (up to 10^11, i.e. until the year 5138) or of milliseconds.
 */
export function entryTimeMs(entry: LogEntry): number | undefined {
  if (entry.time === undefined) return undefined;
  if (/^\d+(\.\d+)?$/.test(entry.time)) {
    const n = Number(entry.time);
    return n < 1e11 ? n * 1000 : n;
  }
  const ms = Date.parse(entry.time);
  return Number.isNaN(ms) ? undefined : ms;
}

/**
 * The service has no logs route: a caller should stop asking and say the status without a tail.
 */
export class LogsRouteMissingError extends RouteMissingError {
  override readonly name = "LogsRouteMissingError";
  constructor(cause: ServiceError) {
    super("revision logs", cause);
  }
}
