/**
 * A pino logger whose every line a test can read: to assert what was logged, and that a secret
 * value never was.
 */
import { Writable } from "node:stream";
import pino from "pino";

/** One captured log line: the raw JSON text and its parsed record. */
export interface LogLine {
  text: string;
  record: { level: number; time: number; msg?: string; [key: string]: unknown };
}

/** Every line a pino logger wrote, in order. */
export class LogCapture {
  readonly lines: LogLine[] = [];
  readonly logger: pino.Logger;

  constructor(level: pino.Level = "debug") {
    const sink = new Writable({
      write: (chunk: Buffer, _encoding, done) => {
        for (const text of chunk.toString("utf8").split("\n")) {
          if (text.trim() !== "") this.lines.push({ text, record: JSON.parse(text) });
        }
        done();
      },
    });
    this.logger = pino({ level }, sink);
  }

  /** All lines as one string, to search for what must never appear. */
  text(): string {
    return this.lines.map((l) => l.text).join("\n");
  }

  /** Every line's message, in order. */
  messages(): string[] {
    return this.lines.map((l) => l.record.msg ?? "");
  }

  /** Lines whose message contains `fragment`. */
  find(fragment: string): LogLine[] {
    return this.lines.filter((l) => l.record.msg?.includes(fragment));
  }
}

/** A debug-level logger and the messages it wrote so far. */
export function capturingLogger(): { logger: pino.Logger; messages: () => string[] } {
  const capture = new LogCapture();
  return { logger: capture.logger, messages: () => capture.messages() };
}
