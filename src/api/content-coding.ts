/**
 * The content codings of the service's answers (`Content-Encoding`): which this process accepts,
 * how many one answer may have applied, and the decoding of a body as it arrives. Entered only
 * for an answer that names a coding: one sent as is reads straight from the socket (exchange.ts).
 * `node:zlib` is loaded at the first answer to decode.
 */
import type { IncomingMessage } from "node:http";
import type { Readable } from "node:stream";

/** The codings this process decodes, as `accept-encoding` lists them. */
const ENCODINGS = [
  "gzip",
  "deflate",
  ...(typeof process.versions.brotli === "string" ? ["br"] : []),
  ...(typeof process.versions.zstd === "string" ? ["zstd"] : []),
];
export const ACCEPT_ENCODING = ENCODINGS.join(", ");

/**
 * The most codings one answer may have applied (`Content-Encoding: gzip, gzip, …`). Each is a
 * decoder of its own, with its window and buffers, and the work grows faster than their number: a
 * 23 KB answer gzipped 1,000 times over took 2.3 s to decode (past its 1.5 s timeout), 2,000 times
 * (a 16 KiB header holds 3,000) 47 s. An honest server applies one.
 */
export const MAX_CODINGS = 5;

/**
 * The codings of a `Content-Encoding`, in the order they were applied, when this process decodes
 * every one of them (`identity` and empty members left out, `x-gzip` read as `gzip`); none when it
 * names one it does not: the body is then read as sent.
 */
export function codingsOf(header: string | undefined): string[] {
  const codings = (header ?? "")
    .toLowerCase()
    .split(",")
    .map((coding) => coding.trim())
    .filter((coding) => coding !== "" && coding !== "identity")
    .map((coding) => (coding === "x-gzip" ? "gzip" : coding));
  return codings.every((coding) => ENCODINGS.includes(coding)) ? codings : [];
}

/** `response` decoded of `codings` (the last applied, the first undone). */
export function decoded(
  response: IncomingMessage,
  codings: readonly string[],
  streams: Readable[],
  fail: (error: Error) => void,
): Readable {
  let stream: Readable = response;
  for (const coding of codings.toReversed()) {
    stream = decodedOnce(stream, coding, fail);
    streams.push(stream);
  }
  return stream;
}

/**
 * `source` decoded of `coding`. The decoder is made at the first chunk (an empty body stays
 * empty, not a truncated stream); `deflate` is read as a zlib stream, or as raw deflate when its
 * first byte says so, as browsers do.
 */
function decodedOnce(source: Readable, coding: string, fail: (error: Error) => void): Readable {
  const zlib = process.getBuiltinModule("node:zlib") as typeof import("node:zlib");
  const { PassThrough } = process.getBuiltinModule("node:stream") as typeof import("node:stream");
  const out = new PassThrough();
  let decoder: import("node:stream").Transform | undefined;
  source.on("data", (chunk: Buffer) => {
    if (decoder === undefined) {
      decoder =
        coding === "br"
          ? zlib.createBrotliDecompress()
          : coding === "zstd"
            ? zlib.createZstdDecompress()
            : coding === "deflate" && (chunk[0] ?? 0) & 0x08
              ? zlib.createUnzip()
              : coding === "deflate"
                ? zlib.createInflateRaw()
                : zlib.createUnzip();
      decoder.on("error", (error) => {
        out.destroy(error);
        fail(error);
      });
      decoder.pipe(out);
      out.once("close", () => decoder?.destroy());
    }
    if (!decoder.write(chunk)) {
      source.pause();
      decoder.once("drain", () => source.resume());
    }
  });
  source.once("end", () => (decoder === undefined ? out.end() : decoder.end()));
  source.once("error", (error) => out.destroy(error));
  return out;
}
