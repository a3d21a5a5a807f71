/**
 * Answers of a hostile server, for the faults `oversized` and `endlessListing`: a body far larger
 * than any honest answer, written as a stream (gzip-encoded when asked: a few hundred KB that
 * inflate to hundreds of MiB) and never built in memory whole; and listing pages that never end.
 * What a tenant's own server could answer, so that tests can show the operator survives it.
 */
import type { ServerResponse } from "node:http";
import { constants, createGzip } from "node:zlib";
import type { Deployment } from "../api/wire.ts";
import type { ListQuery } from "./query.ts";

/** The `oversized` fault's rule (see `Faults`). */
export interface Oversized {
  route?: string;
  bytes: number;
  gzip?: boolean;
}

const HEAD = '{"padding":"';
const TAIL = '"}';
/** The smallest `bytes` an oversized body can have: the JSON around its padding. */
export const OVERSIZED_MIN_BYTES = HEAD.length + TAIL.length;
const CHUNK_BYTES = 64 * 1024;
// One chunk of padding, written again and again: the body is never held, only this.
const PADDING = Buffer.alloc(CHUNK_BYTES, "x");

/**
 * Writes a 200 whose body is `rule.bytes` bytes of JSON (`{"padding":"xxx…"}`) after
 * decompression, chunk by chunk as the client (or the gzip stream) takes them, with
 * `Content-Encoding: gzip` when `rule.gzip`, and no Content-Length: the client learns the size
 * only by reading. Stops as soon as the client closes the connection. `onClose` is told whether
 * the whole body was written by then.
 */
export function writeOversized(
  res: ServerResponse,
  rule: Oversized,
  onClose: (finished: boolean) => void,
): void {
  res.writeHead(200, {
    "content-type": "application/json",
    ...(rule.gzip === true ? { "content-encoding": "gzip" } : {}),
  });
  // Highest compression: 256 MiB of padding become about 250 KB on the wire.
  const gzip = rule.gzip === true ? createGzip({ level: constants.Z_BEST_COMPRESSION }) : undefined;
  gzip?.pipe(res);
  const sink = gzip ?? res;
  let closed = false;
  res.once("close", () => {
    closed = true;
    gzip?.destroy();
    onClose(res.writableFinished);
  });
  let left = rule.bytes - OVERSIZED_MIN_BYTES;
  let started = false;
  const pump = (): void => {
    while (!closed) {
      if (!started) {
        started = true;
        if (!sink.write(HEAD)) break;
        continue;
      }
      if (left <= 0) {
        sink.end(TAIL);
        return;
      }
      const size = Math.min(left, CHUNK_BYTES);
      left -= size;
      if (!sink.write(size === CHUNK_BYTES ? PADDING : PADDING.subarray(0, size))) break;
    }
    if (!closed) sink.once("drain", pump);
  };
  pump();
}

/** A deployment's id of the endless listing: a valid v4-shaped UUID from its position. */
const endlessId = (index: number, kind: number): string =>
  `e${kind}000000-0000-4000-8000-${index.toString(16).padStart(12, "0")}`;

/**
 * A page of the endless listing as JSON: `query.limit` distinct, valid deployments from
 * `query.offset` on (made up from their position: `endless-<n>`), and the next offset, always.
 * The filters are ignored, as a server that does not know them would.
 */
export function endlessPageJson(query: ListQuery, tenantId: string, now: number): string {
  const at = new Date(now).toISOString();
  const resources: Deployment[] = [];
  for (let i = query.offset; i < query.offset + query.limit; i++) {
    const revision = endlessId(i, 1);
    resources.push({
      name: `endless-${i}`,
      source: "github",
      source_config: {
        repo_url: `https://github.com/endless/agent-${i}`,
        integration_id: "6f1c1d2e-0000-4000-8000-00000000e0e0",
        build_on_push: false,
      },
      source_revision_config: { repo_ref: "main", graph_config_path: "langgraph.json" },
      secrets: [],
      id: endlessId(i, 0),
      tenant_id: tenantId,
      created_at: at,
      updated_at: at,
      status: "READY",
      latest_revision_id: revision,
      active_revision_id: revision,
    });
  }
  return JSON.stringify({ resources, offset: query.offset + query.limit });
}
