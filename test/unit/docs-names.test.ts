// The names a user meets in `kubectl describe`, `kubectl get` and on `/metrics` are the guide's:
// every condition reason the code writes, every event reason it records and every metric it
// registers is named in the page a user reads for it, and every metric the operating guide names
// is one the code registers. A reason or metric added to the code and to no page fails here.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { CONNECTION_REASON, OPEN_TO_ALL_NAMESPACES } from "../../src/connection/status.ts";
import { EXPORT_REASON } from "../../src/reconcile/export.ts";
import { REASON } from "../../src/reconcile/reasons.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const read = (path: string) => readFileSync(join(ROOT, path), "utf8");

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith(".ts") ? [relative(ROOT, join(ROOT, path))] : [];
  });
}
const SRC = sources("src").map((file) => ({ file, text: read(file) }));

/** The words of `text` written as code (`Name`, `name{labels}`): what a reader searches for. */
const codeWords = (text: string) =>
  new Set([...text.matchAll(/`([A-Za-z_][\w]*)/g)].map((m) => m[1] as string));

const OPERATING = read("docs/guide/operating.md");
const RESOURCE = read("docs/guide/resource.md");
const CONNECTIONS = read("docs/guide/connections.md");
const SHARDING = read("docs/guide/sharding.md");

/** The resource guide's Status section: its condition table names every reason a condition carries. */
const STATUS_SECTION = RESOURCE.slice(RESOURCE.indexOf("## Status"));
/** The operating guide's first section: the metrics and the events. */
const HEALTH_SECTION = OPERATING.slice(0, OPERATING.indexOf("## Scraping the metrics"));

/** Reasons only events carry, never a condition: named with the events. */
const EVENT_ONLY = new Set<string>([REASON.NotOwned, REASON.DeletionProtected, REASON.ExternalRevision]);

describe("condition reasons", () => {
  it("of a Deployment are each in the resource guide's condition table", () => {
    const named = codeWords(STATUS_SECTION);
    const missing = Object.values(REASON).filter((r) => !EVENT_ONLY.has(r) && !named.has(r));
    expect(missing).toEqual([]);
    expect(Object.values(EXPORT_REASON).filter((r) => r !== "ExportRemoved" && !named.has(r))).toEqual([]);
  });

  it("of a connection are each in the connections guide", () => {
    const named = codeWords(CONNECTIONS);
    const missing = [
      ...Object.values(CONNECTION_REASON),
      OPEN_TO_ALL_NAMESPACES.type,
      OPEN_TO_ALL_NAMESPACES.reason,
    ].filter((r) => !named.has(r));
    expect(missing).toEqual([]);
  });
});

describe("event reasons", () => {
  /**
   * The reasons the code records events with: `"Normal"|"Warning", <reason>` (an argument or a
   * `reason:` field), the reason a string or a constant of the reason tables. A reason read from a
   * variable (a condition's, a failure's) is a condition reason, checked above.
   */
  const TABLES: Record<string, Record<string, string>> = { REASON, EXPORT_REASON };
  const emitted = new Set<string>();
  for (const { text } of SRC) {
    for (const m of text.matchAll(
      /"(?:Normal|Warning)",\s*(?:reason:\s*)?(?:"([A-Z]\w+)"|(REASON|EXPORT_REASON)\.(\w+)|(OPEN_TO_ALL_NAMESPACES)\.reason)/g,
    )) {
      const [, literal, table, key, open] = m;
      if (literal) emitted.add(literal);
      else if (table && key) emitted.add(TABLES[table]?.[key] ?? `${table}.${key}`);
      else if (open) emitted.add(OPEN_TO_ALL_NAMESPACES.reason);
    }
  }

  it("are found (the pattern still matches how the code records them)", () => {
    expect(emitted.size).toBeGreaterThanOrEqual(15);
    expect(emitted).toContain("InsecureSkipTLSVerify");
  });

  it("are each named in the operating guide's events", () => {
    const named = codeWords(HEALTH_SECTION);
    expect([...emitted].filter((r) => !named.has(r)).sort()).toEqual([]);
  });
});

describe("metrics", () => {
  const METRIC = /^(?:dms|controller_runtime|workqueue|leader_election)_[a-z_]*[a-z]$/;
  const registered = new Set(
    SRC.flatMap(({ text }) => [...text.matchAll(/"([a-z_]+)"/g)].map((m) => m[1] as string)).filter((name) =>
      METRIC.test(name),
    ),
  );

  it("are found (the pattern still matches how the code names them)", () => {
    expect(registered).toContain("dms_resources");
    expect(registered).toContain("workqueue_depth");
  });

  it("registered are each in the operating guide, or the sharding guide's", () => {
    const named = new Set([...codeWords(HEALTH_SECTION), ...codeWords(SHARDING)]);
    expect([...registered].filter((m) => !named.has(m)).sort()).toEqual([]);
  });

  it("the operating guide names are each registered", () => {
    const named = [...codeWords(OPERATING)].filter((w) => METRIC.test(w));
    expect(named.length).toBeGreaterThan(20);
    expect(named.filter((m) => !registered.has(m)).sort()).toEqual([]);
  });
});
