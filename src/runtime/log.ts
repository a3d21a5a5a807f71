/**
 * The operator's log: one JSON object per line for log pipelines (`--log-format=json`, the
 * default when stdout is not a terminal), or one readable line per entry for a person
 * (`--log-format=console`, the default on a terminal). Either way the level is named (`"info"`),
 * the time is ISO-8601 (UTC), and every line written while a reconcile runs carries
 * controller-runtime's fields: `controller`, `namespace`, `name` and `reconcileID` (one random id
 * per reconcile, so its lines can be found together), whichever component wrote it.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import { type DestinationStream, type Logger, pino } from "pino";
import { parseObjectKey } from "./keys.ts";
import { escapeAsUnicode } from "./unprintable.ts";

/** Accepted `--log-format` values. */
export const LOG_FORMATS = ["json", "console"] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** What every line of one reconcile says about it (controller-runtime's names). */
export interface ReconcileFields {
  controller: string;
  /** `""` for a cluster-scoped object, as controller-runtime logs it. */
  namespace: string;
  name: string;
  reconcileID: string;
}

const current = new AsyncLocalStorage<ReconcileFields>();

/**
 * Runs `fn` as the reconcile of `key` by `controller`: lines logged within it, by any logger
 * that {@link createLogger} made, carry the reconcile's fields and a new `reconcileID`.
 */
export function inReconcile<T>(controller: string, key: string, fn: () => T): T {
  const { namespace, name } = parseObjectKey(key);
  return current.run(new ReconcileScope(controller, namespace, name), fn);
}

/**
 * One reconcile's fields. Its id is drawn when first read: most reconciles log nothing, and a
 * resync pass runs 10,000 of them.
 */
class ReconcileScope implements ReconcileFields {
  readonly controller: string;
  readonly namespace: string;
  readonly name: string;
  #id: string | undefined;

  constructor(controller: string, namespace: string, name: string) {
    this.controller = controller;
    this.namespace = namespace;
    this.name = name;
  }

  get reconcileID(): string {
    this.#id ??= randomUUID();
    return this.#id;
  }
}

/** The fields of the reconcile under way in this async context, if any. */
export function reconcileFields(): ReconcileFields | undefined {
  return current.getStore();
}

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  level: string;
  format: LogFormat;
  /** Paths pino replaces with `[REDACTED]`, wherever they appear. */
  redact?: readonly string[];
  /** Where lines go. Default: stdout. */
  destination?: DestinationStream;
}

/** The format when none is asked for: a person's on a terminal, JSON otherwise. */
export function defaultLogFormat(stdoutIsTerminal: boolean | undefined): LogFormat {
  return stdoutIsTerminal === true ? "console" : "json";
}

/**
 * A root logger. The reconcile's fields come from a mixin, so a child that already binds one
 * of them (a controller's `controller`) does not write it twice.
 */
export function createLogger(options: LoggerOptions): Logger {
  const out = options.destination ?? pino.destination(1);
  const destination = options.format === "console" ? consoleLines(out) : out;
  return pino(
    {
      level: options.level,
      formatters: { level: (label) => ({ level: label }) },
      timestamp: pino.stdTimeFunctions.isoTime,
      ...(options.redact ? { redact: { paths: [...options.redact], censor: "[REDACTED]" } } : {}),
      mixin: (_object, _level, logger) => {
        const fields = current.getStore();
        if (fields === undefined) return {};
        const bound = logger.bindings();
        const extra: Partial<ReconcileFields> = {};
        for (const key of FIELD_ORDER) if (!(key in bound)) extra[key] = fields[key];
        return extra;
      },
    },
    destination,
  );
}

const FIELD_ORDER = ["controller", "namespace", "name", "reconcileID"] as const;

/** Fields the console line shows in its head, not among the `key=value` pairs. */
const HEAD = new Set(["level", "time", "msg", "pid", "hostname"]);

/**
 * A destination that turns pino's JSON lines into `TIME LEVEL message key=value …` lines (the
 * error's stack on lines of its own), written to `out`. Values are JSON, so a value's spaces
 * and line breaks cannot forge another field or line.
 */
function consoleLines(out: DestinationStream): DestinationStream {
  return {
    write(line: string) {
      let record: Record<string, unknown>;
      try {
        record = JSON.parse(line) as Record<string, unknown>;
      } catch {
        out.write(line);
        return;
      }
      out.write(formatConsoleLine(record));
    },
  };
}

/** One console line (newline included) for a parsed JSON log record. */
export function formatConsoleLine(record: Record<string, unknown>): string {
  const level = String(record.level ?? "").toUpperCase();
  let text = `${String(record.time ?? "")} ${level.padEnd(5)} ${escapeAsUnicode(String(record.msg ?? ""))}`;
  let stack: string | undefined;
  for (const [key, value] of Object.entries(record)) {
    if (HEAD.has(key) || value === undefined) continue;
    if (key === "err" && typeof value === "object" && value !== null && "stack" in value) {
      const { stack: s, ...rest } = value as { stack?: unknown };
      stack = typeof s === "string" ? s : undefined;
      text += ` err=${escapeAsUnicode(JSON.stringify(rest))}`;
      continue;
    }
    const plain = typeof value === "string" && /^[\w./:@-]+$/.test(value);
    text += ` ${key}=${plain ? value : escapeAsUnicode(JSON.stringify(value) ?? String(value))}`;
  }
  if (stack !== undefined) text += `\n    ${stack.split("\n").map(escapeAsUnicode).join("\n    ")}`;
  return `${text}\n`;
}
