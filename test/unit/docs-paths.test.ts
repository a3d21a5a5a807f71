// The README and docs/ name files as they are: every path they give under src/, test/ or
// scripts/ exists, and every source file they name by its bare name (`resync.ts`) is one.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");
const DOCS = [
  "README.md",
  ...readdirSync(join(ROOT, "docs")).flatMap((f) => (f.endsWith(".md") ? [`docs/${f}`] : [])),
];

/** Every file below `dir`, relative to the root. */
function files(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" ? [] : files(path);
    return [relative(ROOT, join(ROOT, path))];
  });
}
const SOURCES = ["src", "test", "scripts"].flatMap(files);
const NAMES = new Set(SOURCES.map((path) => path.slice(path.lastIndexOf("/") + 1)));

/** The prose of a Markdown file: its fenced code blocks (commands, not names) left out. */
const prose = (doc: string) => readFileSync(join(ROOT, doc), "utf8").replace(/```[\s\S]*?```/g, "");

describe.each(DOCS)("%s", (doc) => {
  const text = prose(doc);

  it("gives paths under src/, test/ and scripts/ that exist", () => {
    const paths = [...text.matchAll(/\b(?:src|test|scripts)\/[A-Za-z0-9_./-]*[A-Za-z0-9_/]/g)].map(
      (m) => m[0],
    );
    expect(paths.filter((p) => !existsSync(join(ROOT, p)))).toEqual([]);
  });

  it("names source files by names that exist", () => {
    const names = [...text.matchAll(/`([A-Za-z0-9_-]+\.(?:ts|mjs))`/g)].map((m) => m[1] ?? "");
    expect(names.filter((n) => !NAMES.has(n))).toEqual([]);
  });
});
