/**
 * Reading revisions (routes not in the shared spec) tolerantly: the listing (GET
 * /v2/deployments/{deployment_id}/revisions) each item on its own, an odd one kept as an
 * unreadable row rather than failing the listing, and the rows put newest first; the single
 * revision route's answer read for what its callers rely on.
 */
import { isRecord } from "../runtime/json.ts";
import { cutToLength } from "./printable.ts";
import { type Answered, checkResponse, matchesWire } from "./validate.ts";
import type { Revision } from "./wire.ts";

/** Characters of a value of an unreadable row the listing shows, the mark of a cut included. */
const SHOWN_CHARS = 64;

/** An item of the listing that is not a revision the client can read: what is known of it. */
export interface UnreadableRevision {
  /** Its `id`, when it has a string one (cut to 64 characters). */
  id?: string;
  /** Its `created_at`, when it has a string one (cut to 64 characters): where it sorts. */
  created_at?: string;
  /** One line: which field is wrong and how. */
  message: string;
}

/** One row of the listing: a revision, or an item that could not be read. */
export type RevisionRow = { ok: true; revision: Revision } | { ok: false; unreadable: UnreadableRevision };

/** What {@link ServiceClient.listRevisions} answers. */
export interface RevisionListing {
  /** The rows, newest first (see {@link newestFirst}). */
  rows: RevisionRow[];
  /** True when the listing had more rows than the client reads (`maxItems`): the oldest may be missing. */
  truncated: boolean;
}

/**
 * `value` as a revision: the shape the single revision route answers (`id` and `status`
 * strings, the rest optional or `null`, and any unknown field kept).
 * Never rejects; never mutates `value`. TypeBox loads only to say what is wrong with an odd one.
 */
export async function readRevisionItem(value: unknown): Promise<RevisionRow> {
  // The schema already takes `null` for every optional field.
  if (matchesWire("Revision", value)) return { ok: true, revision: value as Revision };
  const { firstError } = await import("./wire-errors.ts");
  const first = firstError("Revision", value);
  const field = first ? first.path.replace(/^\//, "").replaceAll("/", ".") || "(the item)" : "(the item)";
  const problem = !isRecord(value) ? "is not an object" : first ? first.message : "does not match";
  const id =
    isRecord(value) && typeof value.id === "string" && value.id !== ""
      ? cutToLength(value.id, SHOWN_CHARS)
      : undefined;
  const created =
    isRecord(value) && typeof value.created_at === "string"
      ? cutToLength(value.created_at, SHOWN_CHARS)
      : undefined;
  return {
    ok: false,
    unreadable: {
      ...(id === undefined ? {} : { id }),
      ...(created === undefined ? {} : { created_at: created }),
      message: `the service's revision ${id ?? "(no id)"} cannot be read: ${field}: ${problem}`,
    },
  };
}

/**
 * `rows` sorted newest first by `created_at`, stably. When any row lacks a readable `created_at`
 * the service's own order is kept: a partial sort would put rows in an order nobody chose.
 */
export function newestFirst(rows: readonly RevisionRow[]): RevisionRow[] {
  const times = rows.map((row) => Date.parse(createdAt(row) ?? ""));
  if (times.some((t) => Number.isNaN(t))) return [...rows];
  return rows
    .map((row, i) => ({ row, time: times[i] ?? 0, i }))
    .sort((a, b) => b.time - a.time || a.i - b.i)
    .map(({ row }) => row);
}

/** The id a row is known by in the listing (an unreadable one without an id by its position). */
export function rowId(row: RevisionRow, position: number): string {
  if (row.ok) return row.revision.id;
  return row.unreadable.id ?? `(unreadable item ${position})`;
}

function createdAt(row: RevisionRow): string | undefined {
  return row.ok ? (row.revision.created_at ?? undefined) : row.unreadable.created_at;
}

/**
 * The answer of the single revision route as a revision: whole when it reads as one, else its
 * string `id` and `status` alone; without them, the `bad_response` naming the first odd field.
 */
export async function readSingleRevision(body: unknown, answered: Answered): Promise<Revision> {
  if (matchesWire("Revision", body)) return body as Revision;
  if (isRecord(body) && typeof body.id === "string" && body.id !== "" && typeof body.status === "string")
    return { id: body.id, status: body.status };
  return checkResponse("Revision", body, answered);
}
