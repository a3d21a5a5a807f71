// Every complete Deployment resource the docs show (a ```yaml block with `kind: Deployment` in
// group dms.dev) passes the checks `plan --offline` makes: the CRD's schema and its CEL rules.
// A field renamed, a value no longer allowed or a rule added fails here, not for a reader.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { parseManifests } from "../../src/gitops/manifests.ts";

const ROOT = join(import.meta.dirname, "..", "..");

function markdown(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return markdown(path);
    return entry.name.endsWith(".md") ? [relative(ROOT, join(ROOT, path))] : [];
  });
}

interface Example {
  file: string;
  line: number;
  text: string;
}

const EXAMPLES: Example[] = ["README.md", ...markdown("docs"), ...markdown("charts")].flatMap((file) => {
  const text = readFileSync(join(ROOT, file), "utf8");
  return [...text.matchAll(/```ya?ml\n([\s\S]*?)```/g)]
    .map((m) => ({ file, line: text.slice(0, m.index).split("\n").length + 1, text: m[1] ?? "" }))
    .filter((e) => /^kind:\s*Deployment\b/m.test(e.text) && /^apiVersion:\s*dms\.dev\//m.test(e.text));
});

describe("the docs' Deployment examples", () => {
  it("are found (the pattern still matches how the docs write them)", () => {
    expect(EXAMPLES.length).toBeGreaterThanOrEqual(5);
  });

  it.each(EXAMPLES.map((e) => [`${e.file}:${e.line}`, e] as const))(
    "%s passes the CRD's schema and rules",
    (_, example) => {
      const parsed = parseManifests(example.text, example.file);
      expect(parsed.problems.map((p) => `line ${p.line}: ${p.message}`)).toEqual([]);
      expect(parsed.resources.length).toBeGreaterThan(0);
    },
  );
});
