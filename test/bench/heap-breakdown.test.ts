import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../controlplane/net.ts";
import { breakdownTable, type HeapSnapshotFile, heapBreakdown } from "./heap-breakdown.ts";
import { Inspector, inspectFlag } from "./inspector.ts";

/**
 * A snapshot of the given nodes (`[name, selfSize]`) and edges (`[from, to, name]`, a property
 * edge; `weak:` before the name makes it weak), node 0 the root.
 */
function snapshotOf(
  nodes: Array<[string, number]>,
  edges: Array<[number, number, string]>,
): HeapSnapshotFile {
  const strings: string[] = [];
  const str = (s: string) => {
    const at = strings.indexOf(s);
    return at >= 0 ? at : strings.push(s) - 1;
  };
  const flatNodes = nodes.flatMap(([name, size], i) => [
    // An object's name is its constructor's; the others are strings.
    name === "Map" || name === "Holder" || name === "(root)" ? 3 : 2,
    str(name),
    i + 1,
    size,
    edges.filter(([from]) => from === i).length,
  ]);
  const flatEdges = [...edges]
    .sort((a, b) => a[0] - b[0])
    .flatMap(([, to, name]) => [name.startsWith("weak:") ? 6 : 2, str(name.replace("weak:", "")), to * 5]);
  return {
    snapshot: {
      meta: {
        node_fields: ["type", "name", "id", "self_size", "edge_count"],
        node_types: [["hidden", "array", "string", "object", "code", "closure", "regexp", "number"]],
        edge_fields: ["type", "name_or_index", "to_node"],
        edge_types: [["context", "element", "property", "internal", "hidden", "shortcut", "weak"]],
      },
    },
    nodes: flatNodes,
    edges: flatEdges,
    strings,
  };
}

describe("the heap breakdown by structure", () => {
  it("counts what two structures share where their paths meet, and a weak edge as holding nothing", () => {
    // root → Holder; Holder.#a → Map A, Holder.#b → Map B; both hold `shared`; A alone holds `own`,
    // which a weak edge from B does not change.
    const file = snapshotOf(
      [
        ["(root)", 0],
        ["Holder", 100],
        ["Map", 1000],
        ["Map", 2000],
        ["shared", 5000],
        ["own", 700],
      ],
      [
        [0, 1, "holder"],
        [1, 2, "#a"],
        [1, 3, "#b"],
        [2, 4, "s"],
        [3, 4, "s"],
        [2, 5, "o"],
        [3, 5, "weak:o"],
      ],
    );
    const breakdown = heapBreakdown(file, { minBytes: 500, resources: 10 });
    expect(breakdown.totalBytes).toBe(8800);
    const byPath = Object.fromEntries(breakdown.rows.map((r) => [r.path, r.bytes]));
    // The shared string is the Holder's (it dominates both maps): neither map's.
    expect(byPath).toEqual({
      "(root).holder › Holder.#a": 1700,
      "(root).holder › Holder.#b": 2000,
      "(root).holder › (string)": 5000,
    });
    expect(breakdown.rows.find((r) => r.path.endsWith("Holder.#a"))?.bytesPerResource).toBe(170);
    expect(breakdownTable(breakdown)).toContain("| (root).holder › Holder.#a | Map | 2 | 2 | 170 | other |");
  });

  describe("of a live process", () => {
    let child: ChildProcess | undefined;
    const dir = mkdtempSync(join(tmpdir(), "dms-heap-breakdown-"));
    afterAll(() => {
      child?.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    });

    it("names a private Map of records by its holder and field, with its bytes per record", async () => {
      const port = await freePort();
      const CHILD = `
        class Holder { #cache = new Map(); fill(n) { for (let i = 0; i < n; i++) this.#cache.set("k" + i, { i, name: "record-" + i, spec: { image: "image-" + i } }); } }
        globalThis.holder = new Holder();
        globalThis.holder.fill(5000);
        setInterval(() => {}, 1000);
      `;
      child = spawn(process.execPath, [inspectFlag(port), "-e", CHILD], { stdio: "ignore" });
      const inspector = await Inspector.connectWhenUp(port);
      const path = join(dir, "a.heapsnapshot");
      await inspector.heapSnapshot(path);
      inspector.close();
      const breakdown = heapBreakdown(JSON.parse(readFileSync(path, "utf8")) as HeapSnapshotFile, {
        resources: 5000,
      });
      const cache = breakdown.rows.find((r) => r.path.endsWith("Holder.#cache"));
      expect(cache?.kind).toBe("Map");
      // Each record: its object, its spec's, two strings and the key, and the map's slot.
      expect(cache?.bytesPerResource).toBeGreaterThan(100);
      expect(cache?.bytesPerResource).toBeLessThan(400);
      expect(breakdown.rows[0]).toBe(cache);
      // By field of the entries: the keys, each record's own object, its fields and their parts.
      const fields = Object.fromEntries((cache?.fields ?? []).map((f) => [f.field, f.bytesPerResource ?? 0]));
      expect(Object.keys(fields)).toEqual(
        expect.arrayContaining(["key", "(record)", "name", "spec", "spec.image"]),
      );
      expect(fields["spec.image"]).toBeGreaterThan(16);
    }, 60_000);
  });
});
