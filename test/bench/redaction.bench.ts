/**
 * What redaction costs as a log grows: a failed build's tail as `formatTail` searches it (20
 * entries of 8 KiB, `partsCoverage`) and single texts of 1, 4 and 8 MiB (`redactSecrets`, an
 * error body's bound), all made of build lines behind time and step prefixes, with base64 wrapped
 * behind those prefixes and hex among them; the values: a password, a 20-line key and a short
 * one, and (last two variants) 1 MiB of values, `--max-secret-bytes`'s default, compiled once
 * or (a condition message's case, once per reconcile) a fresh list every time. Rounds are
 * interleaved so that the machine's load weighs on every variant alike; the figures are the
 * median and the minimum, and the time allowed (the redaction's budget). Reported, never asserted.
 */
import { randomBytes } from "node:crypto";
import { REDACT_BUDGET_MS, REDACT_MS_PER_MIB, RedactionBudget } from "../../src/api/redact/budget.ts";
import { partsCoverage } from "../../src/api/redact/parts.ts";
import { redactAndTruncate, redactSecrets } from "../../src/api/redact.ts";
import type { Benchmark, BenchTable } from "./harness.ts";

const SECRET = "s3cr3t-Passw0rd!-long-enough-value";
const KEY = Array.from({ length: 20 }, (_, i) => `line-${i}-${"k".repeat(50)}`).join("\n");
const VALUES = [SECRET, KEY, "hunter2-secret"];
/** 200 values of 5 KiB: about 1 MiB, the default of --max-secret-bytes. */
const MANY_VALUES = Array.from({ length: 200 }, () => randomBytes(3840).toString("base64"));
/** A condition message quoting a service's answer. */
const MESSAGE = `deployment failed: the service answered 422: ${"field x is invalid; ".repeat(100)}`;
/** The tail's budget (`TAIL_REDACTION_MS` of the failure evidence). */
const TAIL_BUDGET_MS = 250;

/** Build log lines of about `bytes` in all: time and step prefixes, wrapped base64 of the secret among them. */
function logLines(bytes: number): string[] {
  const blob = Buffer.from(`{"db":"${SECRET}","x":"${"y".repeat(400)}"}`).toString("base64");
  const wrapped = blob.match(/.{1,76}/g) ?? [];
  const lines: string[] = [];
  for (let n = 0, i = 0; n < bytes; i++) {
    const time = new Date(Date.UTC(2026, 4, 1, 12, 0, i % 60)).toISOString();
    const line =
      i % 50 < 8
        ? `${time} ${wrapped[i % wrapped.length]}`
        : `${time} #${i % 9} ${(i / 100).toFixed(2)} Step ${i}: compiling module_${i} with -O2 deadbeefcafe${i}`;
    lines.push(line);
    n += line.length + 1;
  }
  return lines;
}

interface Variant {
  name: string;
  kib: number;
  budgetMs: number;
  run: () => void;
}

const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[values.length >> 1] ?? 0;

/** See the module comment. */
export const benchmark: Benchmark = {
  name: "redaction",
  description:
    "ms to redact a failed build's tail (20 × 8 KiB) and texts of 1, 4 and 8 MiB of build lines with wrapped base64 behind line prefixes",
  async run({ durationSeconds }) {
    const tail = Array.from({ length: 20 }, () =>
      logLines(8 << 10)
        .join(" ")
        .slice(0, 8192),
    );
    const texts = [1, 4, 8].map((mib) => ({ mib, text: logLines(mib << 20).join("\n") }));
    const budgetOf = (bytes: number) =>
      Math.round(REDACT_BUDGET_MS + (bytes / (1 << 20)) * REDACT_MS_PER_MIB);
    const variants: Variant[] = [
      {
        name: "tail, 20 entries × 8 KiB",
        kib: 160,
        budgetMs: TAIL_BUDGET_MS,
        run: () => partsCoverage(tail, "\n", VALUES, new RedactionBudget(60_000)),
      },
      ...texts.map(({ mib, text }) => ({
        name: `one text of ${mib} MiB`,
        kib: mib << 10,
        budgetMs: budgetOf(text.length),
        run: () => void redactSecrets(text, VALUES),
      })),
      {
        name: "one text of 1 MiB, 1 MiB of values",
        kib: 1024,
        budgetMs: budgetOf(texts[0]?.text.length ?? 0),
        run: () => void redactSecrets(texts[0]?.text ?? "", MANY_VALUES),
      },
      {
        name: "a 2 KiB message, a fresh 1 MiB list of values",
        kib: 2,
        budgetMs: REDACT_BUDGET_MS,
        run: () => void redactAndTruncate(MESSAGE, [...MANY_VALUES], 4096),
      },
    ];
    for (const v of variants) v.run(); // compile the forms, warm the code
    const rounds = Math.max(5, Math.min(30, Math.round(durationSeconds)));
    const times = new Map<string, number[]>(variants.map((v) => [v.name, []]));
    for (let round = 0; round < rounds; round++)
      for (const v of variants) {
        const start = performance.now();
        v.run();
        times.get(v.name)?.push(performance.now() - start);
      }
    const figures = variants.map((v) => {
      const all = times.get(v.name) ?? [];
      return {
        variant: v.name,
        kib: v.kib,
        runs: all.length,
        medianMs: Math.round(median(all)),
        minMs: Math.round(Math.min(...all)),
        budgetMs: v.budgetMs,
      };
    });
    const table: BenchTable = {
      head: ["variant", "KiB", "runs", "median ms", "min ms", "budget ms"],
      rows: figures.map((f) => [f.variant, f.kib, f.runs, f.medianMs, f.minMs, f.budgetMs]),
    };
    return { rows: [], table, details: { figures } };
  },
};
