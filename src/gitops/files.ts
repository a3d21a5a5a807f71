/**
 * Reading manifest files for `plan -f`: a file as given, a directory walked recursively for
 * `.yaml`, `.yml` and `.json` files, like `kubectl apply -f dir -R`, or `-` for standard input
 * (multi-document YAML, e.g. `kubectl kustomize overlays/prod | dms-operator plan -f -`).
 */
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";

/** A manifest file and its text. */
export interface ManifestFile {
  /** The path as given or as found under a given directory. */
  path: string;
  text: string;
}

const MANIFEST = /\.(ya?ml|json)$/i;

/**
 * Most bytes one manifest file (or standard input) may hold: 16 MiB, thirty times the largest
 * valid Deployment resource (512 KiB, `crd-size.test.ts`) and far above any rendered overlay;
 * past it, a file in a pull request would hold the gate for the time and memory of its parsing.
 */
export const MAX_MANIFEST_BYTES = 16 * 1024 * 1024;

/** The path that stands for standard input, and the name its problems are reported under. */
export const STDIN_PATH = "-";
export const STDIN_NAME = "<stdin>";

/** Standard input, chunk by chunk (`process.stdin`). */
export type StdinChunks = () => AsyncIterable<string | Uint8Array>;

/**
 * The files under `paths`, each read once, in a stable order (paths in the order given; within a
 * directory, sorted by name). Hidden entries (`.git`, `.github`…) are skipped inside directories.
 * `-` is standard input, read from `readStdin`, at most once, reported as `<stdin>`, and no
 * further than the bound.
 * Throws an Error naming the path when one does not exist, cannot be read or holds more than
 * {@link MAX_MANIFEST_BYTES}.
 */
export async function readManifestFiles(
  paths: readonly string[],
  readStdin?: StdinChunks,
): Promise<ManifestFile[]> {
  const stdinCount = paths.filter((p) => p === STDIN_PATH).length;
  if (stdinCount > 1) throw new Error("-f - (standard input) may be given once");
  if (stdinCount === 1 && !readStdin) throw new Error("-f -: standard input cannot be read here");
  const found: string[] = [];
  for (const path of paths) {
    if (path === STDIN_PATH) {
      found.push(path);
      continue;
    }
    let info: Awaited<ReturnType<typeof stat>>;
    try {
      info = await stat(path);
    } catch (cause) {
      throw new Error(`${path}: no such file or directory`, { cause });
    }
    if (info.isDirectory()) found.push(...(await walk(path)));
    else found.push(path);
  }
  const files: ManifestFile[] = [];
  for (const path of [...new Set(found)]) {
    if (path === STDIN_PATH && readStdin) {
      files.push({ path: STDIN_NAME, text: await readBounded(readStdin()) });
      continue;
    }
    let text: string;
    try {
      checkSize(path, (await stat(path)).size);
      text = await readFile(path, "utf8");
    } catch (cause) {
      if (cause instanceof ManifestTooLargeError) throw cause;
      throw new Error(`${path}: cannot be read`, { cause });
    }
    files.push({ path, text });
  }
  return files;
}

async function walk(dir: string): Promise<string[]> {
  const entries = (await readdir(dir, { withFileTypes: true }))
    .filter((e) => !e.name.startsWith("."))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const out: string[] = [];
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await walk(path)));
    else if (entry.isFile() && MANIFEST.test(entry.name)) out.push(path);
  }
  return out;
}

/** The text of `chunks`, read only until it holds more than {@link MAX_MANIFEST_BYTES}. */
async function readBounded(chunks: AsyncIterable<string | Uint8Array>): Promise<string> {
  const read: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of chunks) {
    const buffer = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : Buffer.from(chunk);
    bytes += buffer.length;
    if (bytes > MAX_MANIFEST_BYTES)
      throw new ManifestTooLargeError(
        `${STDIN_NAME}: more than the ${MAX_MANIFEST_BYTES} bytes a manifest file may hold: split it, or plan the rendered resources alone`,
      );
    read.push(buffer);
  }
  return Buffer.concat(read).toString("utf8");
}

/** A manifest file over {@link MAX_MANIFEST_BYTES}. */
class ManifestTooLargeError extends Error {
  override readonly name = "ManifestTooLargeError";
}

function checkSize(path: string, bytes: number): void {
  if (bytes > MAX_MANIFEST_BYTES)
    throw new ManifestTooLargeError(
      `${path}: ${bytes} bytes, more than the ${MAX_MANIFEST_BYTES} a manifest file may hold: split it, or plan the rendered resources alone`,
    );
}
