// Printable text: what the service or a build wrote reaches Event notes, condition messages and
// terminals without escape sequences, controls or bidirectional formatting characters, and the
// commands write them visibly escaped.
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  printableLine,
  printableNote,
  printableWords,
  REPLACEMENT,
  stripToLine,
} from "../../src/api/printable.ts";
import {
  escapeForTerminal,
  escapeJsonText,
  escapeYamlText,
  needsYamlEscapes,
} from "../../src/api/terminal-text.ts";
import { putConditions } from "../../src/crd/conventions.ts";
import type { KubeClient, KubeRequest } from "../../src/kube/client.ts";
import { KubeEventRecorder } from "../../src/kube/events.ts";
import { formatConsoleLine } from "../../src/runtime/log.ts";
import { escapeAsUnicode } from "../../src/runtime/unprintable.ts";
import { unsafeCharacters } from "../support/terminal-safe.ts";

const OSC52 = "\x1b]52;c;SGVsbG8=\x07";
const CLEAR = "\x1b[2J\x1b[H";
const C1_CSI = "\x9b2J";
const RLO = "\u202e";

describe("printable text", () => {
  const hostile = `a${OSC52}b${CLEAR}c${C1_CSI}d${RLO}e\u2066f\u200eg\r\nh\ti\x00j\x7fk\u2028l`;

  it("stripToLine takes escape sequences and controls out whole, line breaks and tabs as spaces", () => {
    expect(stripToLine(hostile)).toBe("abcdefg h ijk l");
    expect(stripToLine("\x1b[1;31mred\x1b[0m text")).toBe("red text");
    // An OSC cut short ends at the end of the line, not of the text.
    expect(stripToLine(`x\x1b]0;title\nnext`)).toBe("x next");
  });

  it("printableLine leaves one U+FFFD per run taken out: nothing apart is joined", () => {
    const line = printableLine(hostile);
    expect(unsafeCharacters(line)).toEqual([]);
    expect(line).not.toContain("\n");
    expect(line).toBe(
      `a${REPLACEMENT}b${REPLACEMENT}c${REPLACEMENT}d${REPLACEMENT}e${REPLACEMENT}f${REPLACEMENT}g h i${REPLACEMENT}j${REPLACEMENT}k l`,
    );
    expect(printableLine("hun\x1b[0mter2")).toBe(`hun${REPLACEMENT}ter2`);
  });

  it("printableNote keeps line breaks as newlines and takes the rest out", () => {
    const note = printableNote(`first\r\nsecond\rthird${CLEAR}`);
    expect(note).toBe(`first\nsecond\nthird${REPLACEMENT}`);
    expect(unsafeCharacters(printableNote(hostile))).toEqual([]);
  });

  it("escapeForTerminal writes each control and bidi character visibly", () => {
    expect(escapeForTerminal(`${OSC52}${CLEAR}${C1_CSI}${RLO}x\ny\tz`)).toBe(
      "\\x1b]52;c;SGVsbG8=\\x07\\x1b[2J\\x1b[H\\x9b2J\\u202ex\\ny\tz",
    );
    expect(unsafeCharacters(escapeForTerminal(hostile))).toEqual([]);
    expect(escapeForTerminal("plain text, é€😀")).toBe("plain text, é€😀");
  });

  it("escapeJsonText escapes what JSON.stringify leaves raw, and the value reads the same", () => {
    const json = escapeJsonText(JSON.stringify({ m: hostile }));
    expect(unsafeCharacters(json)).toEqual([]);
    expect(JSON.parse(json)).toEqual({ m: hostile });
  });
});

describe("format characters (Cf), not only the bidirectional ones", () => {
  // Zero-width space, joiners, soft hyphen, byte-order mark, a tag character (past U+FFFF), an
  // Arabic number sign: invisible, so two texts that read the same differ.
  const invisible = ["\u200b", "\u200c", "\u200d", "\u00ad", "\ufeff", "\u{e0041}", "\u0600", "\u2060"];
  const text = `pa${invisible.join("ss")}word`;

  it("each sanitizer takes every one out, the connection probe's included", () => {
    const plain = `pa${"ss".repeat(invisible.length - 1)}word`;
    expect(stripToLine(text)).toBe(plain);
    expect(printableWords(` ${text}\n`)).toBe(plain);
    expect(printableLine(text)).toBe(
      `pa${REPLACEMENT}${`ss${REPLACEMENT}`.repeat(invisible.length - 1)}word`,
    );
    expect(printableNote(text)).toBe(printableLine(text));
  });

  it("the terminal and JSON escapes write each visibly, a character past U+FFFF as its surrogate pair", () => {
    expect(escapeForTerminal("a\u200bb\u{e0041}c")).toBe("a\\u200bb\\udb40\\udc41c");
    const json = escapeJsonText(JSON.stringify({ m: text }));
    expect(json).not.toMatch(/\p{Cf}/u);
    expect(JSON.parse(json)).toEqual({ m: text });
  });
});

describe("invisible characters outside Cf, and the rest of the rule, at every sink for people", () => {
  // Hangul fillers, the combining grapheme joiner, variation selectors (both blocks): not format
  // characters, but as invisible; with a C1 CSI, bidi overrides, zero-width ones and separators.
  const outsideCf = [
    "\u3164",
    "\u115f",
    "\u1160",
    "\u034f",
    "\ufe00",
    "\ufe0f",
    "\u{e0100}",
    "\u{e01ef}",
    "\uffa0",
  ];
  const rule = [
    ...outsideCf,
    "\x9b",
    "\x85",
    "\x7f",
    "\u202e",
    "\u2066",
    "\u200b",
    "\u200d",
    "\ufeff",
    "\u{e0041}",
    "\u2028",
    "\u2029",
    "\x1b",
    "\r",
  ];
  /** Every character of the rule, by code point, written independently of the module's classes. */
  const ruled = (text: string) =>
    [...text].filter((c) => rule.includes(c) || (c !== "\t" && c !== "\n" && (c.codePointAt(0) ?? 0) < 0x20));
  const text = `ad${rule.join("mi")}n`;

  it("the sanitizers of status and Events take each out", () => {
    expect(ruled(printableLine(text))).toEqual([]);
    expect(ruled(printableNote(text))).toEqual([]);
    expect(ruled(stripToLine(text))).toEqual([]);
    expect(printableWords(`x${outsideCf.join("")}y`)).toBe("xy");
    expect(printableLine(`x${outsideCf.join("")}y`)).toBe(`x${REPLACEMENT}y`);
  });

  it("the terminal, JSON and console-log escapes write each visibly, and JSON reads back the same", () => {
    expect(ruled(escapeForTerminal(text))).toEqual([]);
    expect(ruled(escapeAsUnicode(text))).toEqual([]);
    const json = escapeJsonText(JSON.stringify({ m: text }));
    expect(ruled(json)).toEqual([]);
    expect(JSON.parse(json)).toEqual({ m: text });
    expect(escapeForTerminal("\u3164\ufe0f\u{e0100}")).toBe("\\u3164\\ufe0f\\udb40\\udd00");
  });

  it("the console log format escapes them in the message, in values and in a stack", () => {
    const line = formatConsoleLine({
      level: "warn",
      time: "2030-01-01T00:00:00.000Z",
      msg: `build ${text}`,
      detail: text,
      stacktrace: `Error: ${text}\n    at f`,
    });
    expect(ruled(line)).toEqual([]);
    expect(line).toContain("\\u202e");
    expect(line).toContain("\\u3164");
    expect(line).toContain("\\udb40\\udd00");
    expect(line.split("\n")).toHaveLength(4);
  });

  it("YAML: each string holding one is double-quoted with them as escapes, and parses back the same", () => {
    expect(needsYamlEscapes("plain é€😀\ttab\nline")).toBe(false);
    for (const c of rule) expect(needsYamlEscapes(`a${c}b`), JSON.stringify(c)).toBe(true);
    // What a YAML writer gives for a double-quoted scalar with the characters raw.
    const yaml = `m: "${text.replaceAll("\x1b", "\\e").replaceAll("\r", "\\r")}"\n`;
    const escaped = escapeYamlText(yaml);
    expect(ruled(escaped)).toEqual([]);
    expect(escaped).toContain("\\x9b");
    expect(escaped).toContain("\\u3164");
    expect(escaped).toContain("\\U000e0100");
    expect(parse(escaped)).toEqual({ m: text });
  });
});

describe("the sinks", () => {
  it("every condition message leaves putConditions as one printable line, whatever the kind's cleaning", () => {
    const [condition] = putConditions(
      [],
      [{ type: "Ready", value: { status: "False", reason: "Failed", message: `refused:${CLEAR}\n${RLO}x` } }],
      { now: new Date(0), observedGeneration: 1, message: (m) => m },
    );
    expect(condition?.message).toBe(`refused:${REPLACEMENT} ${REPLACEMENT}x`);
  });

  it("an Event's note is written printable, its lines kept", async () => {
    const sent: KubeRequest[] = [];
    const client = { request: async (req: KubeRequest) => void sent.push(req) } as unknown as KubeClient;
    const events = new KubeEventRecorder({ client, reportingInstance: "test" });
    const regarding = { apiVersion: "dms.dev/v1alpha1", kind: "Deployment", namespace: "ns", name: "a" };
    await events.record(regarding, {
      type: "Warning",
      reason: "RevisionFailed",
      action: "Rollout",
      note: `build failed; last lines:\n${OSC52}done${RLO}\r\nerror`,
    });
    const note = (sent[0]?.body as { note?: string } | undefined)?.note;
    expect(note).toBe(`build failed; last lines:\n${REPLACEMENT}done${REPLACEMENT}\nerror`);
  });
});
