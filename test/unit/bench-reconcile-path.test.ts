import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import type { ScriptCoverage } from "../bench/inspector.ts";
import {
  executedFiles,
  executedFunctions,
  executedSpans,
  lineCount,
  linesWithin,
  type PathRun,
  pathFigures,
  pathListing,
  pathOfEdits,
  savePathRun,
} from "../bench/reconcile-path-report.ts";
import {
  linesLeft,
  packByFolder,
  takeableFunctions,
  unenteredLine,
  unenteredOut,
} from "../bench/unentered-functions.ts";

// `npm run bench -- reconcile-path` counts the src/ files with a function executed in a window of
// V8 coverage; these are the rules it counts by, on coverage written by hand.

const SRC = "/repo/src";
const fn = (count: number, name = "f") => ({
  functionName: name,
  ranges: [
    { startOffset: 0, endOffset: 10, count },
    { startOffset: 2, endOffset: 4, count: 0 },
  ],
});
const script = (path: string, ...functions: ReturnType<typeof fn>[]): ScriptCoverage => ({
  url: pathToFileURL(path).href,
  functions,
});

describe("the files of the reconcile path", () => {
  it("counts over several edits' windows the files most of them ran; the others are beside", () => {
    const windows = [
      ["kube/reflector.ts", "reconcile/decide.ts", "runtime/heap-tuning.ts"],
      ["kube/reflector.ts", "reconcile/decide.ts"],
      ["reconcile/decide.ts", "kube/reflector.ts", "runtime/lease.ts", "runtime/lease.ts"],
    ];
    expect(pathOfEdits(windows)).toEqual({
      files: ["kube/reflector.ts", "reconcile/decide.ts"],
      beside: [
        { file: "runtime/heap-tuning.ts", edits: 1 },
        { file: "runtime/lease.ts", edits: 1 },
      ],
    });
    // Of two windows, a file in one only is beside (not more than half).
    expect(pathOfEdits([["a.ts", "b.ts"], ["a.ts"]]).files).toEqual(["a.ts"]);
    expect(pathOfEdits([["a.ts"]])).toEqual({ files: ["a.ts"], beside: [] });
  });

  it("counts a src/ file when one of its functions ran in the window, not its top level alone", () => {
    const coverage = [
      script(`${SRC}/reconcile/apply.ts`, fn(0, ""), fn(2, "apply")),
      // Imported before the window: its top level ran then, nothing since.
      script(`${SRC}/kube/config.ts`, fn(0, ""), fn(0, "load")),
      script(`${SRC}/json.ts`, fn(1)),
      script("/repo/node_modules/pino/lib/pino.js", fn(5)),
      script("/repo/test/bench/harness.ts", fn(5)),
      { url: "node:internal/timers", functions: [fn(9)] },
      { url: "", functions: [fn(9)] },
    ];
    expect(executedFiles(coverage, SRC)).toEqual(["json.ts", "reconcile/apply.ts"]);
    // And which functions ran, with their calls: where to look when a file enters the path.
    expect(executedFunctions(coverage, SRC)).toEqual({
      "reconcile/apply.ts": ["apply@0 ×2"],
      "json.ts": ["f@0 ×1"],
    });
    // And where they are: each function's own range, not its blocks.
    expect(executedSpans(coverage, SRC)).toEqual({ "reconcile/apply.ts": [[0, 10]], "json.ts": [[0, 10]] });
  });

  it("counts the lines the functions that ran span, each line once", () => {
    const text = [
      "// a comment",
      "function f() {",
      "  return g();",
      "  function g() {",
      "    return 1;",
      "  }",
      "}",
      "",
      "function h() {}",
      "",
    ].join("\n");
    const span = (first: string, last: string) =>
      [text.indexOf(first), text.indexOf(last) + last.length] as const;
    const f = span("function f", "}\n\nfunction h");
    const g = span("function g", "  }");
    const h = span("function h", "{}");
    // f spans its 6 lines (its comment above is not in it), from its first character to its brace.
    expect(linesWithin(text, [[f[0], f[1] - "\n\nfunction h".length]])).toBe(6);
    // g within f counts once; f again (another window) counts once.
    const fOnly = [f[0], f[1] - "\n\nfunction h".length] as const;
    expect(linesWithin(text, [fOnly, g, fOnly])).toBe(6);
    expect(linesWithin(text, [g])).toBe(3);
    expect(linesWithin(text, [g, h])).toBe(4);
    // A span that ends at a line's start does not reach that line; an empty span reaches none.
    expect(linesWithin(text, [[0, text.indexOf("function f")]])).toBe(1);
    expect(linesWithin(text, [[5, 5]])).toBe(0);
    expect(linesWithin("", [])).toBe(0);
  });

  it("groups by folder, counts every directory and the top-level ones, flags files over 400 lines", () => {
    const lines: Record<string, number> = {
      "cli.ts": 20,
      "reconcile/apply.ts": 338,
      "reconcile/plan/plan.ts": 401,
      "kube/client.ts": 400,
      "reconcile/run.ts": 278,
    };
    const figures = pathFigures(Object.keys(lines), (file) => lines[file] ?? 0);
    expect(figures.files).toBe(5);
    expect(figures.folders).toBe(4);
    expect(figures.topFolders).toBe(3);
    expect(figures.longFiles).toEqual(["reconcile/plan/plan.ts"]);
    expect(figures.byFolder.map((f) => [f.folder, f.files.map((x) => x.file)])).toEqual([
      [".", ["cli.ts"]],
      ["kube", ["kube/client.ts"]],
      ["reconcile", ["reconcile/apply.ts", "reconcile/run.ts"]],
      ["reconcile/plan", ["reconcile/plan/plan.ts"]],
    ]);
    const listing = pathListing(figures);
    expect(listing[0]).toBe(
      "5 files in 4 folders, 3 of them at the top of src/ (goal ≤ 25 files in ≤ 7 folders)",
    );
    // 1,437 lines: no fewer than 4 files of 400 lines could hold them.
    expect([figures.lines, figures.fewestFiles, figures.ranLines]).toEqual([1_437, 4, undefined]);
    expect(listing[1]).toBe("1437 lines in these files: 4 files of ≤ 400 lines at the fewest");
    expect(listing).toContain("src/reconcile/plan/ (1)");
    expect(listing.find((l) => l.includes("plan.ts"))).toMatch(/^ {2}plan\.ts +401 {2}over 400 lines$/);
    expect(listing.find((l) => l.includes("client.ts"))).not.toContain("over");

    // With the lines that ran, file by file and together.
    const ran: Record<string, number> = { "cli.ts": 5, "reconcile/apply.ts": 100 };
    const measured = pathFigures(
      Object.keys(lines),
      (file) => lines[file] ?? 0,
      (file) => ran[file] ?? 0,
    );
    expect(measured.ranLines).toBe(105);
    expect(measured.byFolder[0]?.files).toEqual([{ file: "cli.ts", lines: 20, ran: 5 }]);
    const listed = pathListing(measured);
    expect(listed[1]).toBe(
      "1437 lines in these files: 4 files of ≤ 400 lines at the fewest; 105 lines in the functions that ran",
    );
    expect(listed.find((l) => l.includes("apply.ts"))).toMatch(/^ {2}apply\.ts +338 {2}ran {2}100$/);
  });

  it("counts lines as wc -l does, an unterminated last line included", () => {
    expect(lineCount("")).toBe(0);
    expect(lineCount("a\nb\n")).toBe(2);
    expect(lineCount("a\nb")).toBe(2);
    expect(lineCount("\n")).toBe(1);
  });
});

describe("what would stay were every function an edit never enters taken out", () => {
  // Each line of a file with what the bound does with it: goes with a function taken out, or stays.
  const lines: Array<[string, "goes" | "stays"]> = [
    ["/** The module: its comment is no function's. */", "stays"],
    ["", "stays"],
    ['import { x } from "./x.ts";', "stays"],
    ["", "goes"], // the blank line before a function taken out goes with it
    ["/** Never called: its comment goes with it. */", "goes"],
    ["export function never(): number {", "goes"],
    ["  return helper();", "goes"],
    ["  function helper() { return x; }", "goes"],
    ["}", "goes"],
    ["", "stays"],
    ["/** Called. */", "stays"],
    ["export function ran(): number {", "stays"],
    ["  return 2;", "stays"],
    ["}", "stays"],
    ["", "stays"],
    ["export function overload(a: string): string;", "stays"], // a signature, no function
    ["export function overload(a: string): string {", "goes"],
    ["  return a;", "goes"],
    ["}", "goes"],
    ["", "stays"],
    ["// made before the window, what it made called in it", "stays"],
    ["export const maker = () => {", "stays"],
    ["  return () => 3;", "stays"],
    ["};", "stays"],
    ["export const idle = (n: number) => n + 1;", "goes"],
    ["export const checked = ((s: string) => s) as (s: string) => string;", "goes"],
    ["export const table = [1].map((n) => {", "stays"], // a callback bound to no name
    ["  const twice = () => n * 2;", "stays"], // and what is inside it
    ["  return twice();", "stays"],
    ["});", "stays"],
    ["interface Shape { area(): number; }", "stays"],
    ["", "stays"],
    ["export class Box {", "stays"],
    ["  #field = () => 4;", "goes"], // its initializer ran (V8 reports it), the function did not
    ["  constructor() {", "stays"],
    ["    this.count = 1;", "stays"],
    ["  }", "stays"],
    ["", "goes"],
    ["  /** Read by nobody. */", "goes"],
    ["  get size(): number {", "goes"],
    ["    return this.count;", "goes"],
    ["  }", "goes"],
    ["", "stays"],
    ["  static open(): Box {", "stays"],
    ["    return new Box();", "stays"],
    ["  }", "stays"],
    ["}", "stays"],
    ["", "stays"],
    ["export const port = {", "stays"],
    ["  read() {", "stays"],
    ["    return 5;", "stays"],
    ["  },", "stays"],
    ["  // never asked", "goes"],
    ["  write: (v: number) => v,", "goes"],
    ["  close() {", "goes"],
    ["    return 6;", "goes"],
    ["  },", "goes"],
    ["};", "stays"],
  ];
  const text = `${lines.map(([line]) => line).join("\n")}\n`;
  /** A span as V8 reports a function's: from `first` (its first token as V8 starts it) to the end of `last`. */
  const span = (first: string, last: string) => {
    const start = text.indexOf(first);
    return [start, text.indexOf(last, start) + last.length] as const;
  };
  const ran = [
    span("function ran", "2;\n}"),
    span("() => 3", "3"), // the function maker made, called in the window
    span("#field", "() => 4"), // V8's <instance_members_initializer>: from the first field to the last
    span("constructor", "  }"),
    span("open()", "  }"), // V8 starts a static method at its name
    span("read()", "  }"),
    [0, text.length] as const, // a span that holds functions (the module's own) enters none of them
  ];

  it("finds the functions that can be taken out: declared, bound to a name, methods of classes and objects", () => {
    const functions = takeableFunctions({ "a/mod.ts": text })["a/mod.ts"] ?? [];
    expect(functions.map((f) => f.name)).toEqual([
      "never",
      "ran",
      "overload",
      "maker",
      "idle",
      "checked",
      "#field",
      "constructor",
      "size",
      "open",
      "read",
      "write",
      "close",
    ]);
    // The function itself, from its first token: a span V8 reports for it falls within.
    const never = functions[0];
    expect(text.slice(never?.start, never?.end)).toMatch(/^export function never\(\): number \{[\s\S]*\n\}$/);
    // What goes with it: from the blank line before its comment to its end.
    expect(text.slice(never?.from, never?.to)).toMatch(/^\n\/\*\* Never called[\s\S]*\n\}$/);
    // An object's property takes its comma.
    const write = functions.find((f) => f.name === "write");
    expect(text.slice(write?.from, write?.to)).toBe("  // never asked\n  write: (v: number) => v,");
  });

  it("takes out what no function that ran falls within, its comment and the blank line before it", () => {
    const functions = takeableFunctions({ "mod.ts": text })["mod.ts"] ?? [];
    const left = linesLeft(text, functions, ran);
    expect(left.takenOut).toEqual([
      "never",
      "overload",
      "idle",
      "checked",
      "#field",
      "size",
      "write",
      "close",
    ]);
    expect(left.lines).toBe(lines.filter(([, what]) => what === "stays").length);
    expect(lineCount(text) - left.lines).toBe(lines.filter(([, what]) => what === "goes").length);
    // Nothing ran: every function goes, the module's comment, imports, types and values stay.
    expect(linesLeft(text, functions, []).takenOut).toHaveLength(functions.length);
    // Every function ran: every line stays.
    expect(
      linesLeft(
        text,
        functions,
        functions.map((f) => [f.start, f.end] as const),
      ).lines,
    ).toBe(lineCount(text));
  });

  it("packs each folder on its own, a subfolder apart from its parent", () => {
    const packed = packByFolder({
      "api/a.ts": 300,
      "api/b.ts": 150,
      "kube/c.ts": 400,
      "reconcile/d.ts": 10,
      "reconcile/service/e.ts": 10,
      "cli.ts": 5,
    });
    // 875 lines would fit in 3 files of 400 together; folder by folder they need 6.
    expect(packed).toEqual({
      lines: 875,
      fewestFiles: 6,
      byFolder: {
        ".": { lines: 5, files: 1 },
        api: { lines: 450, files: 2 },
        kube: { lines: 400, files: 1 },
        reconcile: { lines: 10, files: 1 },
        "reconcile/service": { lines: 10, files: 1 },
      },
    });
    expect(unenteredLine(packed)).toBe(
      "were every function an edit never enters taken out of its file: 875 lines would stay, 6 files of ≤ 400 at the fewest, folder by folder (src/ 1, api/ 2, kube/ 1, reconcile/ 1, reconcile/service/ 1)",
    );
  });

  it("measures the path's files together: parse, take out, pack", () => {
    const other = "export function f() {\n  return 1;\n}\n\nexport function g() {\n  return 2;\n}\n";
    const texts: Record<string, string> = { "api/mod.ts": text, "api/other.ts": other };
    const g = other.indexOf("function g");
    const out = unenteredOut(
      Object.keys(texts),
      (file) => texts[file] ?? "",
      (file) => (file === "api/mod.ts" ? ran : [[g, other.length - 1]]),
    );
    const stays = lines.filter(([, what]) => what === "stays").length;
    // f goes (its three lines); the blank line after it is g's, which ran, and stays.
    expect(out.takenOut).toEqual({
      "api/mod.ts": ["never", "overload", "idle", "checked", "#field", "size", "write", "close"],
      "api/other.ts": ["f"],
    });
    expect(out.byFolder).toEqual({ api: { lines: stays + 4, files: 1 } });
    expect([out.lines, out.fewestFiles]).toEqual([stays + 4, 1]);
  });
});

describe("the report file", () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("keeps one run per commit, a new run of the same commit replacing the old", () => {
    dir = mkdtempSync(join(tmpdir(), "dms-reconcile-path-"));
    const out = join(dir, "reconcile-path.json");
    const run = (commit: string, files: number): PathRun => ({
      commit,
      date: "2026-12-01T00:00:00.000Z",
      node: "v24",
      files,
      folders: 1,
      topFolders: 1,
      longFiles: [],
      byFolder: [],
      serviceCallsByRoute: {},
      statusWrites: 1,
    });
    savePathRun(out, "d", run("aaa", 71));
    savePathRun(out, "d", run("bbb", 30));
    const report = savePathRun(out, "d", run("aaa", 72));
    expect(report.runs.map((r) => [r.commit, r.files])).toEqual([
      ["bbb", 30],
      ["aaa", 72],
    ]);
    expect(JSON.parse(readFileSync(out, "utf8"))).toEqual(report);
    expect(report.goal).toEqual({ files: 25, folders: 7, longFileLines: 400 });
  });
});
