// The one output convention of the listing commands: kubectl's AGE format, short ids, the name
// format, --no-headers, and colour only where it can be seen (a terminal, FORCE_COLOR).
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  colorEnabled,
  displayWidth,
  humanDuration,
  type Listing,
  paint,
  renderDocument,
  renderRows,
  shortId,
  table,
  yamlText,
} from "../../src/commands/output.ts";

const s = 1000;
const m = 60 * s;
const h = 60 * m;
const d = 24 * h;
const y = 365 * d;

describe("humanDuration: kubectl's AGE (apimachinery duration.HumanDuration)", () => {
  it.each([
    [-3 * s, "<invalid>"],
    [-1 * s, "0s"],
    [0, "0s"],
    [5 * s, "5s"],
    [119 * s, "119s"],
    [2 * m, "2m"],
    [5 * m + 30 * s, "5m30s"],
    [9 * m + 59 * s, "9m59s"],
    [10 * m + 30 * s, "10m"],
    [179 * m, "179m"],
    [3 * h, "3h"],
    [5 * h + 10 * m, "5h10m"],
    [8 * h + 10 * m, "8h"],
    [47 * h, "47h"],
    [2 * d, "2d"],
    [3 * d + 4 * h, "3d4h"],
    [8 * d + 4 * h, "8d"],
    [729 * d, "729d"],
    [2 * y, "2y"],
    [2 * y + 40 * d, "2y40d"],
    [9 * y + 40 * d, "9y"],
  ])("%d ms is %s", (ms, shown) => {
    expect(humanDuration(ms)).toBe(shown);
  });
});

interface Row {
  name: string;
  id: string;
  status: string;
  at: string | null;
}
const listing: Listing<Row> = {
  columns: [
    { header: "NAME", value: (r) => r.name },
    { header: "ID", value: (r) => r.id, show: "id" },
    { header: "STATUS", value: (r) => r.status, show: "status" },
    { header: "AGE", wideHeader: "CREATED", value: (r) => r.at, show: "time" },
    { header: "EXTRA", value: () => "x", wide: true },
  ],
  name: (r) => `thing/${r.name}`,
  empty: "No things.",
};
const rows: Row[] = [
  { name: "a", id: "0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e", status: "READY", at: "2026-01-01T00:00:00Z" },
  { name: "bb", id: "not-a-uuid", status: "BUILD_FAILED", at: null },
];
const now = Date.parse("2026-01-01T00:05:30Z");

describe("renderRows", () => {
  it("table: short ids, ages, '-' for nothing; no wide column", () => {
    expect(renderRows(rows, listing, { format: "table", now })).toBe(
      [
        "NAME  ID          STATUS        AGE",
        "a     0b6f3c2e    READY         5m30s",
        "bb    not-a-uuid  BUILD_FAILED  -",
        "",
      ].join("\n"),
    );
  });

  it("wide: whole ids and times, the wide columns, the wide header", () => {
    const out = renderRows(rows, listing, { format: "wide", now });
    expect(out.split("\n")[0]).toBe(
      "NAME  ID                                    STATUS        CREATED               EXTRA",
    );
    expect(out).toContain("0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e");
    expect(out).toContain("2026-01-01T00:00:00Z");
  });

  it("--no-headers drops the header line only", () => {
    expect(renderRows(rows, listing, { format: "table", now, headers: false }).split("\n")[0]).toMatch(
      /^a\s+0b6f3c2e/,
    );
  });

  it("name: kind/name per line, nothing for no rows; table: no line, the empty text on stderr", () => {
    expect(renderRows(rows, listing, { format: "name" })).toBe("thing/a\nthing/bb\n");
    expect(renderRows([], listing, { format: "name" })).toBe("");
    // As kubectl's "No resources found": a script reading the table (--no-headers | awk) reads no row.
    for (const [format, headers] of [
      ["table", true],
      ["table", false],
      ["wide", true],
    ] as const) {
      const err: string[] = [];
      expect(renderRows([], listing, { format, headers, err: (text) => err.push(text) })).toBe("");
      expect(err).toEqual(["No things.\n"]);
    }
  });

  it("json and yaml keep whole values", () => {
    expect(JSON.parse(renderRows(rows, listing, { format: "json" }))).toEqual(rows);
    expect(renderRows(rows, listing, { format: "yaml" })).toContain(
      "id: 0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e",
    );
  });

  it("yaml writes the characters of the printable rule as escapes in double quotes, the data unchanged", () => {
    // A C1 CSI, a bidi override, zero-width and other invisible characters, a separator: the
    // YAML writer quotes some of these but leaves them raw; in keys and nested values too.
    const hostile = "a\x9b2Jb\u202ec\u200bd\u3164e\ufe0ff\u{e0100}g\u2028h\x85i\x7fj";
    const data = [{ message: hostile, nested: { "k\u202e": [hostile, "plain"] }, multi: "one\ntwo\u200b" }];
    const texts = [
      renderRows(data, listing as unknown as Listing<(typeof data)[number]>, { format: "yaml" }),
      renderDocument("yaml", data[0]),
      yamlText(data[0]),
    ];
    /** Raw in `text`: a control but a tab or a newline, or one of the characters of `hostile`. */
    const raw = (text: string) =>
      [...text].filter((c) => {
        const n = c.codePointAt(0) ?? 0;
        const listed = [0x202e, 0x200b, 0x3164, 0xfe0f, 0xe0100, 0x2028, 0x2029];
        return (n < 0x20 && n !== 0x09 && n !== 0x0a) || (n >= 0x7f && n <= 0x9f) || listed.includes(n);
      });
    for (const text of texts) {
      expect(raw(text)).toEqual([]);
      expect(text).toContain("\\u202e");
    }
    expect(parse(texts[0] ?? "")).toEqual(data);
    expect(parse(texts[1] ?? "")).toEqual(data[0]);
    // Strings without such characters keep the writer's own style.
    expect(yamlText({ a: "plain", b: "one\ntwo\n" })).toBe("a: plain\nb: |\n  one\n  two\n");
  });

  it("colours statuses without widening their column", () => {
    const out = renderRows(rows, listing, { format: "table", now, paint: paint(true) });
    expect(out).toContain("\u001b[32mREADY\u001b[39m         5m30s");
    expect(out).toContain("\u001b[31mBUILD_FAILED\u001b[39m  -");
  });

  it("shortId shortens uuids only", () => {
    expect(shortId("0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e")).toBe("0b6f3c2e");
    expect(shortId("acme/agent")).toBe("acme/agent");
  });
});

describe("table", () => {
  it("aligns columns by the width a terminal gives each cell: wide characters and emoji two, colours and combining marks none", () => {
    expect(displayWidth("agent")).toBe(5);
    expect(displayWidth("日本")).toBe(4);
    expect(displayWidth("ｆｕｌｌ")).toBe(8);
    expect(displayWidth("👍🏽")).toBe(2);
    expect(displayWidth("👨‍👩‍👧")).toBe(2);
    expect(displayWidth("e\u0301")).toBe(1);
    expect(displayWidth("\u001b[32mREADY\u001b[39m")).toBe(5);
    expect(
      table(
        ["NAME", "NOTE"],
        [
          ["日本", "x"],
          ["👍", "y  "],
          ["\u001b[31mab\u001b[39m", ""],
        ],
      ),
    ).toBe("NAME  NOTE\n日本  x\n👍    y\n\u001b[31mab\u001b[39m\n");
    expect(table(undefined, [["a", "b"]])).toBe("a  b\n");
  });
});

describe("colorEnabled", () => {
  it.each([
    [{}, true, true],
    [{}, false, false],
    [{ NO_COLOR: "1" }, true, false],
    [{ NO_COLOR: "" }, true, true],
    [{ TERM: "dumb" }, true, false],
    [{ FORCE_COLOR: "1" }, false, true],
    [{ FORCE_COLOR: "1", NO_COLOR: "1" }, false, true],
    [{ FORCE_COLOR: "0" }, true, false],
  ])("%o on a terminal: %s → %s", (env, tty, expected) => {
    expect(colorEnabled(env, tty)).toBe(expected);
  });
});
