// The README, the project's own Markdown files and docs/ name files as they are: every path they
// give under src/, test/ or scripts/ exists, every source file they name by its bare name
// (`resync.ts`) is one, and every relative link resolves, down to the heading it points at.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");

/** Every file below `dir`, relative to the root. */
function files(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" ? [] : files(path);
    return [relative(ROOT, join(ROOT, path))];
  });
}
const DOCS = [
  "README.md",
  "CHANGELOG.md",
  "CONTRIBUTING.md",
  "SECURITY.md",
  ...files("docs").filter((f) => f.endsWith(".md")),
];
const SOURCES = ["src", "test", "scripts"].flatMap(files);
const NAMES = new Set(SOURCES.map((path) => path.slice(path.lastIndexOf("/") + 1)));

/**
 * Pages linked from docs/README.md that another line of work adds: a link to one is not an error
 * while it is missing, and once it exists it must leave this list (the test below says so).
 */
const PENDING_LINKS = new Set<string>([]);

/** A Markdown file without its fenced code blocks (commands, not names or links). */
const withoutCode = (text: string) => text.replace(/```[\s\S]*?```/g, "");
const prose = (doc: string) => withoutCode(readFileSync(join(ROOT, doc), "utf8"));

/** The anchors GitHub gives the headings of a Markdown file (duplicates numbered -1, -2, …). */
function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, heading] of withoutCode(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const slug = (heading ?? "")
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** The relative link targets of a Markdown file's prose: `[text](target)`, no scheme. */
function links(text: string): string[] {
  // Code spans are not links, however they look (`([-a-z0-9]*)`).
  return [...text.replace(/`[^`\n]*`/g, "``").matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)]
    .map((m) => m[1] ?? "")
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

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

  it("links to files that exist, and to headings they have", () => {
    const broken: string[] = [];
    for (const target of links(text)) {
      const [file = "", anchor] = target.split("#");
      const path = file === "" ? doc : relative(ROOT, join(ROOT, dirname(doc), decodeURI(file)));
      if (!existsSync(join(ROOT, path))) {
        if (!PENDING_LINKS.has(path)) broken.push(`${target}: no file ${path}`);
        continue;
      }
      if (anchor === undefined || !path.endsWith(".md") || statSync(join(ROOT, path)).isDirectory()) continue;
      if (!anchorsOf(readFileSync(join(ROOT, path), "utf8")).has(anchor))
        broken.push(`${target}: ${path} has no heading #${anchor}`);
    }
    expect(broken).toEqual([]);
  });
});

describe("the documentation's index", () => {
  const index = prose("docs/README.md");
  const linked = new Set(links(index).map((t) => relative(ROOT, join(ROOT, "docs", t.split("#")[0] ?? ""))));

  it("links every page under docs/", () => {
    expect(
      files("docs").filter((f) => f.endsWith(".md") && f !== "docs/README.md" && !linked.has(f)),
    ).toEqual([]);
  });

  it("lists as pending only pages that do not exist yet", () => {
    const arrived = [...PENDING_LINKS].filter((path) => existsSync(join(ROOT, path)));
    expect(arrived, "these exist now: remove them from PENDING_LINKS").toEqual([]);
  });
});

describe("anchorsOf", () => {
  it("slugs headings as GitHub does", () => {
    const anchors = anchorsOf(
      "# Title\n## Configuration (`dms-operator run`)\n## Size: the largest, a test\n## Size: the largest, a test\n```sh\n# not a heading\n```\n",
    );
    expect([...anchors]).toEqual([
      "title",
      "configuration-dms-operator-run",
      "size-the-largest-a-test",
      "size-the-largest-a-test-1",
    ]);
  });
});
