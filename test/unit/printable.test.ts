// Printable text: what the service or a build wrote reaches Event notes, condition messages and
// terminals without escape sequences, controls or bidirectional formatting characters, and the
// commands write them visibly escaped.
import { describe, expect, it } from "vitest";
import {
  escapeForTerminal,
  escapeJsonText,
  printableLine,
  printableNote,
  REPLACEMENT,
  stripToLine,
} from "../../src/api/printable.ts";
import { putConditions } from "../../src/conditions/kstatus.ts";
import type { KubeClient, KubeRequest } from "../../src/kube/client.ts";
import { KubeEventRecorder } from "../../src/kube/events.ts";
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
