// A build log must not publish its secrets: the forms a build prints a value in (as given,
// trimmed, line by line, base64 at every alignment, hex, percent-encoded, JSON-escaped, embedded,
// over several entries) are all redacted from the three texts the `view` role reads — the
// Warning Event's note, `status.failedRevisionLog.excerpt` and the `Stalled` message — by the
// functions that write them; and the redaction has a time bound that withholds, never shows.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { printableNote } from "../../src/api/printable.ts";
import { RedactionBudget, RedactionBudgetError, UNSEARCHED } from "../../src/api/redact/budget.ts";
import { MIN_LINE_CHARS } from "../../src/api/redact/forms.ts";
import { partsCoverage } from "../../src/api/redact/parts.ts";
import { REDACTED, redactAndTruncate, redactSecrets } from "../../src/api/redact.ts";
import type { LogEntry } from "../../src/api/revision-logs.ts";
import { truncateNote } from "../../src/kube/events.ts";
import { excerptOf, fitNote, formatTail } from "../../src/reconcile/failure-evidence.ts";
import { statusFrom } from "../../src/reconcile/status.ts";
import { LATEST, rolloutDeployment } from "../support/failed-rollout.ts";

const deployment = rolloutDeployment();

/** The three texts a failed build's log reaches, written by the functions that write them. */
function evidence(entries: readonly LogEntry[], values: readonly string[]) {
  // What is redacted is the point here, not how fast (the time bound has tests of its own): a
  // budget no loaded machine runs out of.
  const lines = formatTail(entries, values, 60_000);
  if (lines === undefined) throw new Error("the tail was withheld");
  const note = truncateNote(
    printableNote(
      fitNote(`revision ${LATEST} BUILD_FAILED: it will not go live; last build log lines:`, lines),
    ),
  );
  const excerpt = excerptOf(lines);
  const status = statusFrom({
    generation: 1,
    observed: deployment,
    sync: { kind: "synced" },
    now: new Date("2030-01-01T00:00:00Z"),
    secretValues: values,
    revision: { id: LATEST, status: "BUILD_FAILED" },
    rollout: {
      startedAt: "2030-01-01T00:00:00Z",
      log: { revisionId: LATEST, reason: "RevisionFailed", type: "build", excerpt },
    },
  });
  const message = status.conditions?.find((c) => c.type === "Stalled")?.message ?? "";
  expect(message).toContain("Last build log lines:");
  return { note, excerpt, message, lines };
}

const b64 = (text: string) => Buffer.from(text, "utf8").toString("base64");
const hexBytes = (text: string) => [...Buffer.from(text, "utf8")].map((b) => b.toString(16).padStart(2, "0"));
/** Every UTF-16 unit of `text` as a `\uNNNN` escape. */
const unicodeEscaped = (text: string) =>
  Array.from(
    { length: text.length },
    (_, i) => `\\u${text.charCodeAt(i).toString(16).padStart(4, "0")}`,
  ).join("");
/** Line prefixes build tools print, each made of base64 characters (and others), for line `i`. */
const LINE_PREFIXES: Record<string, (i: number) => string> = {
  timestamp: (i) => `2026-05-01T12:00:${String(10 + i).padStart(2, "0")}.000Z `,
  buildkit: (i) => `#8 ${(9.9 + i * 0.05).toFixed(2)} `,
  clock: (i) => `[12:00:0${i % 10}] `,
  stage: () => "stage-1 | ",
};
/**
 * `value` inside a longer JSON text, base64 of it wrapped at `width` behind `prefix(i)` on line
 * `i`: the printed lines, and for each line the base64 characters in it that carry only bits of
 * the value (what must not show).
 */
function wrappedBehind(value: string, prefix: (i: number) => string, width = 76) {
  const before = Buffer.from('{"db":"');
  const bytes = Buffer.concat([
    before,
    Buffer.from(value, "utf8"),
    Buffer.from(`","x":"${"y".repeat(40)}"}`),
  ]);
  const text = bytes.toString("base64");
  const lines = text.match(new RegExp(`.{1,${width}}`, "g")) ?? [];
  const first = Math.ceil((before.length * 8) / 6);
  const last = Math.floor(((before.length + Buffer.byteLength(value)) * 8) / 6);
  const core = lines
    .map((_, i) => text.slice(Math.max(first, i * width), Math.min(last, (i + 1) * width)))
    .filter((piece) => piece !== "");
  return { messages: lines.map((line, i) => `${prefix(i)}${line}`), core };
}
const b64url = (text: string) => Buffer.from(text, "utf8").toString("base64url");
const hex = (text: string) => Buffer.from(text, "utf8").toString("hex");
const entriesOf = (...messages: string[]): LogEntry[] => [
  { message: "Step 1/4 : FROM python:3.12", level: "INFO", time: "2030-01-01T00:00:00Z" },
  ...messages.map((message) => ({ message, level: "INFO", time: "2030-01-01T00:00:01Z" })),
  { message: "error: build failed (exit code 1)", level: "ERROR", time: "2030-01-01T00:00:02Z" },
];

describe("the forms a build prints a value in", () => {
  const password = "correct-horse-battery";
  const key = [
    "-----BEGIN PRIVATE KEY-----",
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
    "VJTUt9Us8cKjMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDu",
    "-----END PRIVATE KEY-----",
    "",
  ].join("\n");

  it.each([
    ["a value read from a file (a trailing newline) printed trimmed", `${password}\n`, `pw=${password}`],
    ["as JSON escapes it", 'p"w\\x-long-value', `{"pw":${JSON.stringify('p"w\\x-long-value')}}`],
    ["base64, padded", password, `data: ${b64(password)}`],
    ["base64 URL-safe without padding", `${password}?>~`, `t=${b64url(`${password}?>~`)}`],
    ["base64 of the value with its newline", `${password}\n`, `blob ${b64(`${password}\n`)}`],
    ["hex, lower case", password, `hex:${hex(password)}`],
    ["hex, upper case", password, `HEX:${hex(password).toUpperCase()}`],
    [
      "percent-encoded in a connection string",
      "p@ss w/rd:é!",
      `postgres://u:${encodeURIComponent("p@ss w/rd:é!")}@db/x`,
    ],
    [
      "form-encoded (+ for a space)",
      "p@ss w0rd long",
      `body: pw=${encodeURIComponent("p@ss w0rd long").replace(/%20/g, "+")}`,
    ],
    ["inside an escape sequence's colors", password, `pw=correct-\x1b[31mhorse\x1b[0m-battery`],
    ["hex bytes apart, with spaces", password, `key: ${hexBytes(password).join(" ")}`],
    ["hex bytes apart, with colons", password, `fingerprint ${hexBytes(password).join(":").toUpperCase()}`],
    [
      "hex bytes as \\x escapes",
      password,
      `printf '${hexBytes(password)
        .map((b) => `\\x${b}`)
        .join("")}'`,
    ],
    [
      "hex bytes as 0x, comma-separated",
      password,
      `{ ${hexBytes(password)
        .map((b) => `0x${b}`)
        .join(", ")} }`,
    ],
    ["an ASCII value as \\u escapes", password, `{"pw":"${unicodeEscaped(password)}"}`],
    [
      "hex in xxd's groups of two bytes",
      password,
      `00000000: ${(hex(password).match(/.{1,4}/g) ?? []).join(" ")}`,
    ],
    ["cut into words shorter than a piece found alone", password, "pw= correct -horse- battery end"],
    ["spaced out", password, `pw=${[...password].join(" ")} end`],
  ])("%s", (_what, value, message) => {
    const { note, excerpt, message: stalled } = evidence(entriesOf(message), [value]);
    for (const text of [note, excerpt, stalled]) {
      expect(text).not.toContain("horse");
      expect(text).not.toContain(message.slice(-12));
      expect(text).toContain(REDACTED);
    }
  });

  it("a value split mid-value over two entries", () => {
    const secret = "s3cr3t-Passw0rd!é/+x";
    const {
      note,
      excerpt,
      message: stalled,
    } = evidence(entriesOf("pw=s3cr3t-Pa", "ssw0rd!é/+x end"), [secret]);
    for (const text of [note, excerpt, stalled]) {
      expect(text).not.toContain("s3cr3t");
      expect(text).not.toContain("ssw0rd");
      expect(text).toContain(REDACTED);
    }
  });

  it.each([
    ["a carriage return (CRLF output)", "pw=s3cr3t-Pa\r", "ssw0rd!é/+x end\r"],
    [
      "a color reset at the end of the first",
      "\x1b[31mpw=s3cr3t-Pa\x1b[0m",
      "\x1b[31mssw0rd!é/+x end\x1b[0m",
    ],
    ["a trailing space", "pw=s3cr3t-Pa ", "ssw0rd!é/+x end"],
    ["a zero-width space", "pw=s3cr3t-Pa\u200b", "ssw0rd!é/+x end"],
  ])("a value split over two entries at %s, with or without entries between them", (_what, first, second) => {
    const secret = "s3cr3t-Passw0rd!é/+x";
    for (const messages of [
      [first, second],
      [first, "Step 3/9 : RUN make", second],
    ]) {
      const { note, excerpt, message: stalled, lines } = evidence(entriesOf(...messages), [secret]);
      for (const text of [note, excerpt, stalled, lines.join("\n")]) {
        expect(text).not.toContain("s3cr3t");
        expect(text).not.toContain("ssw0rd");
      }
    }
  });

  it.each([
    ["a newline", "\n"],
    ["a carriage return", "\r"],
    ["CRLF", "\r\n"],
    ["a color reset and a newline", "\x1b[0m\n"],
    ["a line separator", "\u2028"],
  ])("a value split over two lines of one entry, at %s", (_what, lineBreak) => {
    const secret = "s3cr3t-Passw0rd!é/+x";
    const {
      note,
      excerpt,
      message: stalled,
      lines,
    } = evidence(entriesOf(`pw=s3cr3t-Pa${lineBreak}ssw0rd!é/+x end`), [secret]);
    for (const text of [note, excerpt, stalled, lines.join("\n")]) {
      expect(text).not.toContain("s3cr3t");
      expect(text).not.toContain("ssw0rd");
      expect(text).toContain(REDACTED);
    }
  });

  it.each(Object.entries(LINE_PREFIXES))(
    "base64 wrapped behind a %s prefix on each line, a value straddling two lines: its bits hidden, the prefixes shown",
    (_name, prefix) => {
      const value = "s3cr3t-Passw0rd!-for-the-database";
      // Placed so that the value's base64 starts on the first line and ends on the second.
      const { messages, core } = wrappedBehind(`${"a".repeat(40)}${value}`, prefix);
      const secretOnly = wrappedBehind(value, prefix, 20);
      for (const [printed, parts] of [
        [messages, core],
        [secretOnly.messages, secretOnly.core],
      ] as const) {
        const { lines } = evidence(entriesOf(...printed), [value]);
        const shown = lines.join("\n");
        for (const part of parts.filter((p) => p.length >= 4)) expect(shown).not.toContain(part);
        for (const [i] of printed.entries()) expect(shown).toContain(prefix(i).trim());
      }
    },
  );

  it("a value split over two entries with other entries between them", () => {
    const secret = "s3cr3t-Passw0rd!é/+x";
    const { lines } = evidence(
      entriesOf("pw=s3cr3t-Pa", "Step 3/9 : RUN make", "[12:00:01] ssw0rd!é/+x end"),
      [secret],
    );
    const shown = lines.join("\n");
    expect(shown).not.toContain("s3cr3t");
    expect(shown).not.toContain("ssw0rd");
    expect(shown).toContain("Step 3/9 : RUN make");
    expect(shown).toContain("[12:00:01]");
    // Two entries that do not make a value together are left as they are.
    const apart = evidence(entriesOf("pw=s3cr3t-Pa", "Step 3/9 : RUN make", "ssw0rd!é/+y end"), [secret]);
    expect(apart.lines.join("\n")).toContain("ssw0rd!é/+y");
  });

  it("a line showing 12 characters or more of a value, the rest of it cut off, is covered", () => {
    const secret = "s3cr3t-Passw0rd!-for-the-database";
    const { lines } = evidence(entriesOf(`pw=${secret.slice(0, 14)}`, `${secret.slice(-12)} end`), [secret]);
    const shown = lines.join("\n");
    expect(shown).not.toContain(secret.slice(0, 14));
    expect(shown).not.toContain(secret.slice(-12));
    // 11 characters are not a piece of it: found only with the rest.
    expect(redactSecrets(`x ${secret.slice(0, 11)} y`, [secret])).toBe(`x ${secret.slice(0, 11)} y`);
  });

  it.each([
    ["a text longer than the values (the values' samples)", 1],
    ["a text shorter than the values (the text's samples)", 400],
  ])("every piece of 12 characters or more is covered, however often the text repeats it: %s", (_what, n) => {
    const piece = "Xq7-long-piece-of-a-key";
    // Values of `n` times 100 characters, one of them holding the piece in its middle.
    const values = Array.from({ length: n }, (_, i) =>
      `${`${i}`.padEnd(50, "v")}${i === 0 ? piece : ""}`.padEnd(100, "w"),
    );
    const text = Array.from(
      { length: 80 },
      (_, i) => `line ${i}: ${piece.slice(0, 12 + (i % 8))} and more`,
    ).join("\n");
    // What is covered is the point, not how fast: the search's budget reads a counter that
    // stands still (400 values of 100 characters take a loaded machine past it otherwise).
    const redacted = redactSecrets(text, values, REDACTED, new RedactionBudget(undefined, () => 0));
    expect(redacted).not.toContain(piece.slice(0, 12));
    expect(redacted.match(/\*\*\* and more/g)).toHaveLength(80);
    expect(redacted).toContain("line 79: ");
  });

  it.each(["step 2: ", "#", "12:00:01 "])(
    "base64 wrapped over entries behind a prefix (%j), its last line a few bytes long",
    (prefix) => {
      // 63 bytes: one line of 76 characters and a last one of 8 (6 bytes, under the 12 a piece
      // needs alone): covered as the continuation of the line before it.
      const value = `${"k9-Zq".repeat(13).slice(0, 62)}\n`;
      expect(Buffer.byteLength(value)).toBe(63);
      const lines = b64(value).match(/.{1,76}/g) ?? [];
      expect(lines.map((l) => l.length)).toEqual([76, 8]);
      const { note, excerpt, message } = evidence(entriesOf(...lines.map((l) => `${prefix}${l}`)), [value]);
      for (const text of [note, excerpt, message])
        for (const line of lines) expect(text).not.toContain(line.replace(/=+$/, "").slice(0, 8));
    },
  );

  it.each([0, 1, 2])(
    "a password in a Basic header, its offset %i bytes from a base64 group: every bit of it covered",
    (pad) => {
      const user = `${"u".repeat(3 + pad)}ser`;
      const header = b64(`${user}:${password}`);
      const { lines } = evidence(entriesOf(`Authorization: Basic ${header}`), [password]);
      const shown = lines.find((l) => l.includes("Authorization")) ?? "";
      const kept = /Basic (\S*)\*\*\*(\S*)/.exec(shown);
      expect(kept).not.toBeNull();
      // What shows of the header is its start, and only characters that carry no bit of the password.
      const before = kept?.[1] ?? "";
      expect(header.startsWith(before)).toBe(true);
      expect(before.length * 6).toBeLessThanOrEqual((user.length + 1) * 8);
      expect(kept?.[2]).toMatch(/^=*$/);
    },
  );

  it("a private key printed one line per entry, or base64 wrapped at 76 columns over entries", () => {
    const perLine = evidence(
      entriesOf(
        ...key
          .trimEnd()
          .split("\n")
          .map((l) => `  ${l}`),
      ),
      [key],
    );
    const wrapped = b64(key).match(/.{1,76}/g) ?? [];
    const asBase64 = evidence(entriesOf(...wrapped), [key]);
    for (const { note, excerpt, message } of [perLine, asBase64])
      for (const text of [note, excerpt, message]) {
        expect(text).not.toContain("MIIEvQ");
        expect(text).not.toContain("VJTUt9");
        for (const chunk of wrapped) expect(text).not.toContain(chunk.slice(8, 24));
      }
    // A line shorter than the minimum is not searched alone: it is everywhere.
    expect(perLine.note).toContain("-----BEGIN PRIVATE KEY-----".length >= MIN_LINE_CHARS ? REDACTED : "");
    expect(redactSecrets("a ----- b", ["x-long-value\n-----\ny-long-value"])).toBe("a ----- b");
  });

  it("a multi-line value printed verbatim over entries whatever its lines' length", () => {
    const value = "ab\ncd\nef-secret\n";
    const { note } = evidence(entriesOf("ab", "cd", "ef-secret"), [value]);
    expect(note).not.toMatch(/\bab\b|\bcd\b|ef-secret/);
  });
});

describe("no form of a generated value survives into the note, the excerpt or the Stalled message", () => {
  // Realistic secrets: printable characters, JSON- and URL-special ones, non-ASCII, spaces inside.
  const char = fc.constantFrom(
    ..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    ..."\"\\/<>&'%+=:@?#[]{}$!^~-_.,;| ",
    "é",
    "€",
    "😀",
  );
  const edge = char.filter((c) => c !== " ");
  /** Characters between `min` and `max`, neither the first nor the last a space: trimmed as long. */
  const word = (min: number, max: number) =>
    fc
      .tuple(edge, fc.array(char, { minLength: min - 2, maxLength: max - 2 }), edge)
      .map(([a, cs, b]) => `${a}${cs.join("")}${b}`);
  /** A value whose trimmed lines are each at least MIN_LINE_CHARS long. */
  const value = fc.oneof(
    word(MIN_LINE_CHARS, 40),
    word(MIN_LINE_CHARS, 40).map((v) => `${v}\n`),
    fc.array(word(MIN_LINE_CHARS, 30), { minLength: 2, maxLength: 5 }).map((ls) => `${ls.join("\n")}\n`),
    fc.tuple(word(MIN_LINE_CHARS, 20), word(MIN_LINE_CHARS, 20)).map(([a, b]) => ` ${a}\r\n${b} `),
  );
  /** `continued`: the messages are one line of output cut in pieces, the prefix on the first only. */
  type Print = (v: string) => { messages: string[]; core: string[]; continued?: boolean };
  const trimmed = (v: string) => v.trim();
  const lineList = (v: string) =>
    v
      .trim()
      .split(/\r\n|\n/)
      .map((l) => l.trim());
  /** Ways builds print a value: the printed messages, and the texts no part of which may show. */
  const prints: Record<string, Print> = {
    verbatim: (v) => ({ messages: [`value: ${v}`], core: [trimmed(v)] }),
    trimmed: (v) => ({ messages: [`value=${trimmed(v)};`], core: [trimmed(v)] }),
    linePerEntry: (v) => ({ messages: lineList(v).map((l) => `+ echo ${l}`), core: lineList(v) }),
    verbatimOverEntries: (v) => ({ messages: v.split("\n"), core: lineList(v) }),
    // A line cut by the log's transport mid-value: `pw=s3cr3t-Pa`, then `ssw0rd!é/+x end`.
    splitMidValue: (v) => {
      const t = trimmed(v);
      const half = Math.ceil(t.length / 2);
      return { messages: [`pw=${t.slice(0, half)}`, `${t.slice(half)} end`], core: [t], continued: true };
    },
    base64: (v) => ({ messages: [`config: ${b64(v)}`], core: [b64(v).replace(/=+$/, "")] }),
    base64Trimmed: (v) => ({
      messages: [`config: ${b64(trimmed(v))}`],
      core: [b64(trimmed(v)).replace(/=+$/, "")],
    }),
    base64Url: (v) => ({ messages: [`token ${b64url(trimmed(v))}.sig`], core: [b64url(trimmed(v))] }),
    base64Wrapped: (v) => {
      const lines = b64(v).match(/.{1,76}/g) ?? [];
      return { messages: lines, core: lines.map((l) => l.replace(/=+$/, "")) };
    },
    percent: (v) => ({
      messages: [`DATABASE_URL=postgres://app:${encodeURIComponent(trimmed(v))}@db:5432/app`],
      core: [encodeURIComponent(trimmed(v))],
    }),
    hexLower: (v) => ({ messages: [`key=${hex(trimmed(v))}`], core: [hex(trimmed(v))] }),
    hexUpper: (v) => ({
      messages: [`KEY=${hex(trimmed(v)).toUpperCase()}`],
      core: [hex(trimmed(v)).toUpperCase()],
    }),
    json: (v) => ({
      messages: [`{"password":${JSON.stringify(v)}}`],
      core: [JSON.stringify(trimmed(v)).slice(1, -1)],
    }),
    unicodeEscaped: (v) => ({
      messages: [`{"password":"${unicodeEscaped(trimmed(v))}"}`],
      core: [unicodeEscaped(trimmed(v))],
    }),
    hexSpaced: (v) => ({
      messages: [`key: ${hexBytes(trimmed(v)).join(" ")}`],
      core: [hexBytes(trimmed(v)).join(" ")],
    }),
    hexColons: (v) => ({
      messages: [`fp=${hexBytes(trimmed(v)).join(":").toUpperCase()}`],
      core: [hexBytes(trimmed(v)).join(":").toUpperCase()],
    }),
    hexGroups: (v) => {
      const groups = (hex(trimmed(v)).match(/.{1,4}/g) ?? []).join(" ");
      return { messages: [`00000010: ${groups}`], core: [groups] };
    },
    hexEscaped: (v) => {
      const escaped = hexBytes(trimmed(v))
        .map((b) => `\\x${b}`)
        .join("");
      return { messages: [`printf '${escaped}'`], core: [escaped] };
    },
    // Cut by the log's transport, with another entry between the halves.
    splitAroundOther: (v) => {
      const t = trimmed(v);
      const half = Math.ceil(t.length / 2);
      return {
        messages: [`pw=${t.slice(0, half)}`, "Step 3/9 : RUN make", `${t.slice(half)} end`],
        core: [t],
        continued: true,
      };
    },
    ...Object.fromEntries(
      Object.entries(LINE_PREFIXES).map(([name, prefix]): [string, Print] => [
        `base64Behind_${name}`,
        (v) => wrappedBehind(v, prefix),
      ]),
    ),
    base64NarrowBehindTimestamps: (v) => wrappedBehind(trimmed(v), LINE_PREFIXES.timestamp ?? String, 16),
  };
  const basic: (pad: number) => Print = (pad) => (v) => {
    const prefix = `${"u".repeat(pad + 1)}:`;
    const header = b64(`${prefix}${trimmed(v)}`);
    // Characters from the first that holds only bits of the value.
    const first = Math.ceil((Buffer.byteLength(prefix) * 8) / 6) + 1;
    return { messages: [`Authorization: Basic ${header}`], core: [header.slice(first).replace(/=+$/, "")] };
  };
  const ways = fc.constantFrom(
    ...Object.entries(prints),
    ["basic0", basic(0)],
    ["basic1", basic(1)],
    ["basic2", basic(2)],
  );

  /** Each window of `size` characters of `text` (the whole of it when shorter). */
  const windows = (text: string, size: number) => {
    if (text.length <= size) return text === "" ? [] : [text];
    return Array.from({ length: text.length - size + 1 }, (_, i) => text.slice(i, i + size));
  };

  it("for every value and every way it is printed, embedded in a log among other lines", () => {
    fc.assert(
      fc.property(
        value,
        ways,
        fc.constantFrom("", "  ", "step 2: ", "#"),
        fc.integer({ min: 0, max: 6 }),
        (v, [_name, print], prefix, before) => {
          const { messages, core, continued } = print(v);
          const filler = Array.from({ length: before }, (_, i) => `Step ${i + 2}/9 : RUN make stage-${i}`);
          const printed = messages.map((m, i) => (continued && i > 0 ? m : `${prefix}${m}`));
          const entries = entriesOf(...filler, ...printed).slice(-20);
          const { note, excerpt, message } = evidence(entries, [v]);
          // A piece shorter than 8 characters (under 6 bytes decoded) is not searched alone.
          for (const text of [note, excerpt, message])
            for (const part of core.filter((c) => c.length >= 8))
              for (const w of windows(part, 10))
                if (!/^\s*$/.test(w))
                  expect(text.includes(w), `${JSON.stringify(w)} in ${JSON.stringify(text)}`).toBe(false);
        },
      ),
      { numRuns: 400 },
    );
  }, 120_000);
});

describe("the time bound", () => {
  it("a crafted tail and value set is cut at the budget, after a bounded number of steps, and withheld, not shown", () => {
    // Many lines sharing their first characters, and a log of those characters: each position
    // is a candidate for every line. Unbounded, this takes minutes.
    const lines = Array.from({ length: 20_000 }, (_, i) => `${"a".repeat(40)}${i}`);
    const values = [lines.join("\n")];
    const entries = Array.from({ length: 20 }, () => ({ message: "a".repeat(8192) }));
    // A counter the budget reads every few thousand steps, one unit a reading: a budget of 25 is
    // 25 readings after the first, whatever the machine's speed. One reading past the end of
    // the budget is an error of its own, not the budget's: the search went on after it.
    const BUDGET = 25;
    let readings = 0;
    const counter = () => {
      if (readings > BUDGET + 1) throw new Error("the search went on past its budget");
      return readings++;
    };
    const tail = formatTail(entries, values, new RedactionBudget(BUDGET, counter));
    expect(tail).toBeUndefined();
    // Cut at the first reading past the deadline: the construction's, BUDGET within, that one.
    expect(readings).toBe(BUDGET + 2);
  }, 30_000);

  it("a message past the budget is not shown: redactAndTruncate says so, partsCoverage throws", () => {
    const lines = Array.from({ length: 20_000 }, (_, i) => `${"b".repeat(40)}${i}`);
    const values = [lines.join("\n")];
    const text = "b".repeat(100_000);
    expect(redactAndTruncate(text, values, 4096)).toBe(UNSEARCHED);
    expect(() => partsCoverage([text], "\n", values, new RedactionBudget(10))).toThrow(RedactionBudgetError);
  }, 30_000);

  it("an ordinary tail is far inside the budget", () => {
    const key = Array.from({ length: 30 }, (_, i) => `line-${i}-${"k".repeat(58)}`).join("\n");
    const entries = entriesOf(...Array.from({ length: 17 }, (_, i) => `Step ${i}: compiling module ${i}`));
    expect(formatTail(entries, [key, "hunter2-secret", "x".repeat(4096)], 10_000)).toBeDefined();
  });

  it("counts the thread's CPU time, not the time it waited for a core", () => {
    // A thread blocked (as one waits for a core on a busy machine) spends no CPU time: the budget
    // is not spent by it. Read on a wall clock, 200 ms blocked would spend a 50 ms budget.
    const budget = new RedactionBudget(50);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    expect(() => budget.step(4096)).not.toThrow();
  });
});
