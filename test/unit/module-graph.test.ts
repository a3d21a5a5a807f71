// The folders of src/ and its files import each other without cycles: each folder is a layer
// that can be read, tested and changed knowing only the layers below it. The graph comes from
// TypeScript's parser (test/support/module-graph.ts), type-only and dynamic imports included.
// The root files of src/ are nodes of their own; of them `cli.ts` (the process) and `main.ts`
// (the operator, started by the `run` command) compose the rest: nothing imports `cli.ts`, and
// only `commands/` imports `main.ts` and `wiring/`. The README's layout table is the map of the
// folders: every folder of src/ has a row, every row a folder, and every import between two of
// them is one its importer's row allows.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { type LayoutRow, layoutProblems, partsOf, readLayoutTable } from "../support/layout-table.ts";
import {
  cycles,
  describeCycle,
  fileEdges,
  folderOf,
  type Graph,
  graphOf,
  ROOT,
  readSpecifiers,
  sourceFiles,
} from "../support/module-graph.ts";

const FORMS = "test/fixtures/import-forms.ts";
const SOURCES = sourceFiles();
const specifiers = readSpecifiers([...SOURCES, FORMS]);
specifiers.delete(FORMS);
const forms = readSpecifiers([FORMS]).get(FORMS);
const edges = fileEdges(specifiers);
const folders = graphOf(edges, folderOf, false);
const files = graphOf(edges, (file) => file, true);

/**
 * Which folders (or root files) may import each part of the composition: `wiring/` joins the
 * folders below it (adapters from a concrete client to a port of `reconcile/`, the watches that
 * feed the controllers' queues), so only what composes the operator may use it.
 */
const IMPORTERS_ALLOWED: Record<string, readonly string[]> = {
  "cli.ts": [],
  "main.ts": ["commands"],
  wiring: ["main.ts", "commands"],
};

describe("the module graph of src/", () => {
  it("has no folder that reaches itself", () => {
    expect(cycles(folders).map((path) => describeCycle(folders, path))).toEqual([]);
  });

  it("has no file that reaches itself", () => {
    expect(cycles(files).map((path) => describeCycle(files, path))).toEqual([]);
  });

  it.each(Object.entries(IMPORTERS_ALLOWED))("lets only %s's composers import it", (root, allowed) => {
    const importers = [...folders].flatMap(([from, out]) =>
      out.has(root) && !allowed.includes(from)
        ? (out.get(root) ?? []).map((e) => `${e.from} imports ${e.to}`)
        : [],
    );
    expect(importers).toEqual([]);
  });

  // The composition root builds the parts and joins them; what grows it (a feature's wiring, a
  // setting's default) has its home in wiring/ or the settings' table.
  it("keeps main.ts to construction: at most 160 lines", () => {
    const lines = readFileSync(join(ROOT, "src", "main.ts"), "utf8")
      .trimEnd()
      .split("\n").length;
    expect(lines).toBeLessThanOrEqual(160);
  });

  it("reads every file of src/", () => {
    expect(SOURCES.length).toBeGreaterThan(100);
    expect([...specifiers.keys()]).toEqual(SOURCES);
    expect(folders.has("reconcile") && folders.has("main.ts") && folders.has("wiring")).toBe(true);
  });
});

describe("the README's layout table", () => {
  const rows = readLayoutTable(readFileSync(join(ROOT, "README.md"), "utf8"));

  it("agrees with the code: every folder a row, every row a folder, every import allowed", () => {
    expect(rows.length).toBeGreaterThan(10);
    expect(layoutProblems(rows, SOURCES, edges)).toEqual([]);
  });

  it("has a row for each subfolder of reconcile/", () => {
    const subfolders = [...partsOf(SOURCES)].filter((p) => /^reconcile\/.+\//.test(p));
    expect(subfolders.length).toBeGreaterThan(1);
    expect(subfolders.filter((p) => !rows.some((r) => r.parts.includes(p)))).toEqual([]);
  });
});

/** A table from `part: allowed, allowed` lines. */
function table(...lines: string[]): LayoutRow[] {
  return lines.map((line) => {
    const [parts = "", allowed = ""] = line.split(":");
    const names = (list: string) =>
      list
        .split(",")
        .map((n) => n.trim())
        .filter(Boolean);
    return { parts: names(parts), mayImport: names(allowed) };
  });
}
const edge = (from: string, to: string) => ({ from: `src/${from}`, to: `src/${to}` });

describe("checking the code against a layout table", () => {
  const files = ["src/main.ts", "src/a/x.ts", "src/b/y.ts", "src/b/sub/z.ts", "src/c/w.ts"];
  const rows = table("main.ts: a/, b/", "a/:", "b/: a/", "b/sub/: b/, a/", "c/:");

  it("finds nothing when they agree", () => {
    const edges = [edge("main.ts", "b/sub/z.ts"), edge("b/y.ts", "b/sub/z.ts"), edge("b/sub/z.ts", "b/y.ts")];
    expect(layoutProblems(rows, files, [...edges, edge("b/sub/z.ts", "a/x.ts")])).toEqual([]);
  });

  it.each([
    {
      case: "a folder without a row",
      rows: table("main.ts: a/, b/", "a/:", "b/: a/", "b/sub/: b/"),
      edges: [],
      problems: ["src/c/ has no row"],
    },
    {
      case: "a row for no folder",
      rows: [...rows, ...table("gone/: a/")],
      edges: [],
      problems: ["the row of gone/ names nothing in src/"],
    },
    {
      case: "an import the row does not allow",
      rows,
      edges: [edge("a/x.ts", "b/y.ts"), edge("c/w.ts", "b/sub/z.ts"), edge("main.ts", "a/x.ts")],
      problems: [
        "src/a/x.ts imports src/b/y.ts: a/ may not import b/",
        "src/c/w.ts imports src/b/sub/z.ts: c/ may not import b/sub/",
      ],
    },
    {
      case: "a subfolder importing a sibling by its folder's name",
      rows: table("main.ts: a/, b/", "a/:", "b/: a/", "b/sub/: a/", "b/other/: b/", "c/:"),
      edges: [edge("b/sub/z.ts", "b/y.ts")],
      problems: [
        "the row of b/other/ names nothing in src/",
        "src/b/sub/z.ts imports src/b/y.ts: b/sub/ may not import b/",
      ],
    },
    {
      case: "a subfolder allowed what its folder is not, a name without a row, a part twice",
      rows: table("main.ts: a/, b/", "a/: nowhere/", "b/:", "b/sub/: a/", "c/:", "c/:"),
      edges: [],
      problems: [
        "c/ has two rows",
        "a/ may import nowhere/, which has no row",
        "b/sub/ may import a/, which its folder b/ may not",
      ],
    },
  ])("names $case", ({ rows, edges, problems }) => {
    expect(layoutProblems(rows, files, edges)).toEqual(problems);
  });
});

describe("reading the layout table", () => {
  it("takes the names of the first and last columns below the heading", () => {
    const markdown = [
      "## Layout",
      "",
      "Text.",
      "",
      "| Folder | Holds | May import |",
      "| --- | --- | --- |",
      "| `a/`, `x.ts` | things, `not-a-name/` | nothing |",
      "| `b/sub/` | more | `a/`, `x.ts` |",
      "",
      "| other | table |",
    ].join("\n");
    expect(readLayoutTable(markdown)).toEqual([
      { parts: ["a/", "x.ts"], mayImport: [] },
      { parts: ["b/sub/"], mayImport: ["a/", "x.ts"] },
    ]);
  });

  it("fails without its heading, its table, or with a row of other than three columns", () => {
    expect(() => readLayoutTable("# Other\n| a | b | c |")).toThrow('no heading "Layout"');
    expect(() =>
      readLayoutTable("## Layout\ntext\n## Next\n| a | b | c |\n| - | - | - |\n| `x/` | y | |"),
    ).toThrow('no table under "Layout"');
    expect(() => readLayoutTable("## Layout\n| a | b | c |\n| - | - | - |\n| `x/` | y |")).toThrow(
      "2 columns",
    );
  });
});

describe("reading imports", () => {
  it("sees every form of import, and nothing in comments or strings", () => {
    expect(forms).toEqual([
      "../../src/runtime/clock.ts",
      "../../src/runtime/json.ts",
      "../../src/version.ts",
      "../../src/runtime/backoff.ts",
      "../../src/runtime/clock.ts",
      "../../src/runtime/queue-records.ts",
      "../../src/runtime/queue.ts",
      "../../src/runtime/shared-call.ts",
    ]);
  });

  it("keeps the files of src/ and resolves them from their importer", () => {
    const read = new Map([
      ["src/a/x.ts", ["./y.ts", "../b/z.ts", "node:fs", "pino", "../../test/support/cli.ts"]],
      ["src/main.ts", ["./a/x.ts"]],
    ]);
    expect(fileEdges(read, "/repo")).toEqual([
      { from: "src/a/x.ts", to: "src/a/y.ts" },
      { from: "src/a/x.ts", to: "src/b/z.ts" },
      { from: "src/main.ts", to: "src/a/x.ts" },
    ]);
  });
});

/** A graph of single-file folders from `a>b` pairs: `src/a/f.ts` imports `src/b/f.ts`. */
function folderGraph(pairs: readonly string[]): Graph {
  const edges = pairs.map((pair) => {
    const [a, b] = pair.split(">");
    return { from: `src/${a}/f.ts`, to: `src/${b}/f.ts` };
  });
  return graphOf(edges, folderOf, false);
}

describe("finding cycles", () => {
  it.each([
    { edges: [], found: [] },
    { edges: ["a>b", "b>c"], found: [] },
    { edges: ["a>a"], found: [] },
    { edges: ["a>b", "b>a"], found: [["a", "b", "a"]] },
    { edges: ["a>b", "b>c", "c>a", "c>d"], found: [["a", "b", "c", "a"]] },
    {
      edges: ["a>b", "b>a", "b>c", "c>b", "x>y", "y>x"],
      found: [
        ["a", "b", "a"],
        ["b", "c", "b"],
        ["x", "y", "x"],
      ],
    },
    { edges: ["a>b", "b>c", "c>d", "d>b"], found: [["b", "c", "d", "b"]] },
  ])("$edges → $found", ({ edges, found }) => {
    expect(cycles(folderGraph(edges))).toEqual(found);
  });

  it("keeps a file that imports itself, and the files of one folder, in the file graph", () => {
    const self = [{ from: "src/a/x.ts", to: "src/a/x.ts" }];
    expect(cycles(graphOf(self, (f) => f, true))).toEqual([["src/a/x.ts", "src/a/x.ts"]]);
    const within = [
      { from: "src/a/x.ts", to: "src/a/y.ts" },
      { from: "src/a/y.ts", to: "src/a/x.ts" },
    ];
    expect(cycles(graphOf(within, (f) => f, true))).toEqual([["src/a/x.ts", "src/a/y.ts", "src/a/x.ts"]]);
    expect(cycles(graphOf(within, folderOf, false))).toEqual([]);
  });

  it("names each step of a cycle with the imports that make it", () => {
    const graph = folderGraph(["a>b", "b>a"]);
    expect(describeCycle(graph, ["a", "b", "a"])).toBe(
      ["a → b → a", "  a → b: src/a/f.ts imports src/b/f.ts", "  b → a: src/b/f.ts imports src/a/f.ts"].join(
        "\n",
      ),
    );
  });
});
