/**
 * Reading manifest files for `plan -f`: a file as given, or a directory walked recursively for
 * `.yaml`, `.yml` and `.json` files, like `kubectl apply -f dir -R`.
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
 * The files under `paths`, each read once, in a stable order (paths in the order given; within a
 * directory, sorted by name). Hidden entries (`.git`, `.github`…) are skipped inside directories.
 * Throws an Error naming the path when one does not exist or cannot be read.
 */
export async function readManifestFiles(paths: readonly string[]): Promise<ManifestFile[]> {
  const found: string[] = [];
  for (const path of paths) {
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
    try {
      files.push({ path, text: await readFile(path, "utf8") });
    } catch (cause) {
      throw new Error(`${path}: cannot be read`, { cause });
    }
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
