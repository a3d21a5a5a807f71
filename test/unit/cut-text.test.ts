import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { truncate } from "../../src/api/errors.ts";
import { cutToBytes, cutToLength } from "../../src/api/printable.ts";
import { redactAndTruncate } from "../../src/api/redact.ts";
import { unknownDeploymentValues } from "../../src/api/validate.ts";
import type { Deployment } from "../../src/api/wire.ts";
import { NOTE_LIMIT_BYTES, truncateNote } from "../../src/kube/events.ts";
import { fitNote } from "../../src/reconcile/failure-evidence.ts";

// One way to cut text to a budget: whole characters, `…` when cut and counted in the budget, in
// UTF-8 bytes (Event notes) or in UTF-16 code units (service details, condition messages).

const bytes = (s: string) => Buffer.byteLength(s);
/** Whether `s` holds a surrogate without its other half (a character cut in two). */
const split = (s: string) => /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);

describe("cutToBytes", () => {
  it("leaves text within the budget as it is", () => {
    expect(cutToBytes("héllo", 6)).toBe("héllo");
    expect(cutToBytes("", 0)).toBe("");
  });

  it("counts the ellipsis (3 bytes) in the budget", () => {
    const cut = cutToBytes("a".repeat(2000), 1024);
    expect(cut).toBe(`${"a".repeat(1021)}…`);
    expect(bytes(cut)).toBe(1024);
  });

  it("never splits a multi-byte character or a surrogate pair", () => {
    // é is 2 bytes: 510 of them fill 1020 of the 1021 left for text.
    expect(cutToBytes("é".repeat(600), 1024)).toBe(`${"é".repeat(510)}…`);
    // € is 3 bytes: 340 fill 1020.
    expect(cutToBytes("€".repeat(600), 1024)).toBe(`${"€".repeat(340)}…`);
    // 😀 is 4 bytes and two UTF-16 units: 255 fill 1020, none is halved.
    const emoji = cutToBytes("😀".repeat(300), 1024);
    expect(emoji).toBe(`${"😀".repeat(255)}…`);
    expect(split(emoji)).toBe(false);
    expect(cutToBytes("ab😀", 6)).toBe("ab😀");
    expect(cutToBytes("ab😀", 5)).toBe("ab…");
  });

  it("gives the mark alone when the budget cannot hold more", () => {
    expect(cutToBytes("abcdef", 3)).toBe("…");
    expect(cutToBytes("😀😀", 4)).toBe("…");
    expect(cutToBytes("😀😀", 6)).toBe("…");
    expect(cutToBytes("😀😀", 7)).toBe("😀…");
  });
});

describe("cutToLength", () => {
  it("counts the ellipsis (one unit) in the length", () => {
    expect(cutToLength("a".repeat(600), 500)).toBe(`${"a".repeat(499)}…`);
    expect(cutToLength("a".repeat(500), 500)).toBe("a".repeat(500));
  });

  it("steps back before a surrogate pair the cut would halve", () => {
    const text = `${"a".repeat(498)}😀${"b".repeat(10)}`;
    expect(cutToLength(text, 500)).toBe(`${"a".repeat(498)}…`);
    expect(cutToLength(`${"a".repeat(497)}😀${"b".repeat(10)}`, 500)).toBe(`${"a".repeat(497)}😀…`);
  });
});

describe.each([
  { cut: cutToBytes, unit: "UTF-8 bytes", size: bytes, least: 3 },
  { cut: cutToLength, unit: "UTF-16 units", size: (s: string) => s.length, least: 1 },
])("$cut.name, in $unit", ({ cut, size, least }) => {
  it("any text and budget: within it, a whole-character start of the text, the longest that fits", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "grapheme", maxLength: 60 }),
        fc.integer({ min: least, max: 120 }),
        (text, max) => {
          const out = cut(text, max);
          if (size(text) <= max) {
            expect(out).toBe(text);
            return;
          }
          expect(size(out)).toBeLessThanOrEqual(max);
          expect(out.endsWith("…")).toBe(true);
          const kept = out.slice(0, -1);
          expect(text.startsWith(kept)).toBe(true);
          expect(split(kept)).toBe(false);
          const next = String.fromCodePoint(text.codePointAt(kept.length) ?? 0);
          expect(size(kept) + size(next) + size("…")).toBeGreaterThan(max);
        },
      ),
    );
  });
});

describe("its users", () => {
  it("an Event's note, a service error's detail and a failure's note cut the one way", () => {
    const long = "ü".repeat(1000);
    expect(truncateNote(long)).toBe(cutToBytes(long, NOTE_LIMIT_BYTES));
    expect(bytes(truncateNote(long))).toBeLessThanOrEqual(NOTE_LIMIT_BYTES);
    expect(truncate(long)).toBe(`${"ü".repeat(499)}…`);
    expect(fitNote("😀".repeat(10), [], 12)).toBe("😀😀…");
  });

  it("redaction with no value to hide only cuts: a status without secrets skips it (status.ts)", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "grapheme", maxLength: 300 }),
        fc.integer({ min: 1, max: 120 }),
        fc.constantFrom([], [""]),
        (text, max, values) => {
          expect(redactAndTruncate(text, values, max)).toBe(cutToLength(text, max));
        },
      ),
    );
  });
});

describe("a cut that is kept", () => {
  it("holds only its own characters, not the whole text it was cut from (measured after a collection)", () => {
    // V8 keeps a slice of a long string as a view into the whole: 20 labels cut from 4 MiB
    // answers kept 80 MiB. An unknown value reported, an unreadable item's name, are kept. Five
    // answers are enough: cuts that kept their texts would hold 20 MiB, over twice the bound.
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    gc();
    const before = process.memoryUsage().heapUsed;
    const kept: string[] = [];
    for (let i = 0; i < 5; i++) {
      const answer = `${"s".repeat(4 << 20)}${i}`;
      kept.push(cutToLength(answer, 64), cutToBytes(answer, 64));
      kept.push(unknownDeploymentValues({ status: answer, source: answer } as Deployment)[0]?.value ?? "");
    }
    gc();
    const heldMiB = (process.memoryUsage().heapUsed - before) / (1 << 20);
    expect(kept.every((k) => k.length <= 64)).toBe(true);
    expect(heldMiB).toBeLessThan(8);
  });
});
