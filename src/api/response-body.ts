/**
 * Reading one response body within its bounds: the decompressed bytes, and the weight the
 * process's answers in flight may hold together (see response-memory.ts). The reading stops at
 * the first chunk past a bound, so that nothing ever holds more than the bound and one chunk:
 * a gzip bomb is cut while it inflates, a huge body while it arrives.
 */
import { JsonWeigher, type MemoryAccount, OverflowError } from "./response-memory.ts";

/** The bounds of one body. */
export interface BodyBounds {
  /** Bytes the body may have after decompression. */
  maxBytes: number;
  /** The answer's account of the shared budget; the caller closes it once done with the body. */
  account: MemoryAccount;
  signal?: AbortSignal;
}

/**
 * The whole body of `chunks` (already decompressed), or an {@link OverflowError} as soon as it
 * is known to exceed a bound: at once when `declaredLength` (an uncompressed body's
 * Content-Length) says so, else at the chunk that crosses it. The caller destroys the stream.
 */
export async function readBody(
  chunks: AsyncIterable<Buffer>,
  declaredLength: number | undefined,
  bounds: BodyBounds,
): Promise<Buffer> {
  if (declaredLength !== undefined && declaredLength > bounds.maxBytes)
    throw new OverflowError({ bound: "bytes", limit: bounds.maxBytes });
  const weigher = new JsonWeigher();
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of chunks) {
    size += chunk.length;
    if (size > bounds.maxBytes) throw new OverflowError({ bound: "bytes", limit: bounds.maxBytes });
    await bounds.account.take(weigher.weigh(chunk), bounds.signal);
    parts.push(chunk);
  }
  return Buffer.concat(parts, size);
}

/** A Content-Length header's value, when it is one non-negative integer. */
export function contentLength(value: string | string[] | undefined): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  return text !== undefined && /^\d+$/.test(text.trim()) ? Number(text.trim()) : undefined;
}
