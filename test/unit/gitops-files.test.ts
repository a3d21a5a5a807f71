// plan -f reads at most MAX_MANIFEST_BYTES per file or from standard input: a file in a pull
// request cannot hold the gate for the time and memory of parsing it.
import { mkdtemp, rm, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { MAX_MANIFEST_BYTES, readManifestFiles, STDIN_PATH } from "../../src/gitops/files.ts";

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

describe("readManifestFiles: a bound per file", () => {
  it("refuses a file over the bound, naming it and the bound, without reading it", async () => {
    const dir = await mkdtemp(join(tmpdir(), "dms-files-"));
    dirs.push(dir);
    const big = join(dir, "big.yaml");
    await writeFile(big, "");
    await truncate(big, MAX_MANIFEST_BYTES + 1);
    await writeFile(join(dir, "ok.yaml"), "a: 1\n");
    await expect(readManifestFiles([dir])).rejects.toThrow(
      `${big}: ${MAX_MANIFEST_BYTES + 1} bytes, more than the ${MAX_MANIFEST_BYTES} a manifest file may hold`,
    );
    await truncate(big, MAX_MANIFEST_BYTES);
    expect((await readManifestFiles([dir])).map((f) => f.path)).toEqual([big, join(dir, "ok.yaml")]);
  });

  it("refuses standard input over the bound, reading no further than past it", async () => {
    const chunk = Buffer.alloc(64 * 1024, "x");
    let given = 0;
    // Endless, as `yes | dms-operator plan -f -`: only a read that stops can answer.
    async function* endless() {
      for (;;) {
        given += chunk.length;
        yield chunk;
      }
    }
    await expect(readManifestFiles([STDIN_PATH], endless)).rejects.toThrow(
      `<stdin>: more than the ${MAX_MANIFEST_BYTES} bytes a manifest file may hold`,
    );
    expect(given).toBeLessThanOrEqual(MAX_MANIFEST_BYTES + chunk.length);
    async function* exactly() {
      yield "a: 1\n";
      yield Buffer.alloc(MAX_MANIFEST_BYTES - 5, " ");
    }
    const [read] = await readManifestFiles([STDIN_PATH], exactly);
    expect(read?.text.length).toBe(MAX_MANIFEST_BYTES);
  });
});
