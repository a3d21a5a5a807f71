/**
 * The operator's log: one JSON object per line for log pipelines (`--log-format=json`, the
 * default when stdout is not a terminal), or one readable line per entry for a person
 * (`--log-format=console`, the default on a terminal). Either way the level is named (`"info"`),
 * the time is ISO-8601 (UTC), and every line written while a reconcile runs carries
 * controller-runtime's fields: `controller`, `namespace`, `name` and `reconcileID` (one random id
 * per reconcile, so its lines can be found together), whichever component wrote it.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { type DestinationStream, type Logger, pino } from "pino";
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

/**
 * The fields of the reconcile under way, in its async context: the controller runs each reconcile
 * in its own (`inReconcile`, controller.ts), and every line logged within it carries them.
 */
export const currentReconcile = new AsyncLocalStorage<ReconcileFields>();

/**
 * Runs `fn` outside any reconcile's fields: for a line about a whole connection written from
 * inside one resource's reconcile, which must not name that resource.
 */
export function outsideReconcile<T>(fn: () => T): T {
  return currentReconcile.exit(fn);
}

/** The fields of the reconcile under way in this async context, if any. */
export function reconcileFields(): ReconcileFields | undefined {
  return currentReconcile.getStore();
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
  const hidden = redactedKeys(options.redact ?? []);
  return pino(
    {
      level: options.level,
      // controller-runtime's zap writes neither.
      base: undefined,
      formatters: { level: (label) => ({ level: label }) },
      hooks: {
        logMethod(args, method, level) {
          const [first] = args;
          if (first instanceof Error) {
            const rest = args.length > 1 ? args.slice(1) : [first.message];
            const fields = errorFields(first, level, hidden);
            return method.apply(this, [fields, ...rest] as Parameters<typeof method>);
          }
          if (typeof first === "object" && first !== null && "err" in first) {
            const { err, ...fields } = first as Record<string, unknown>;
            args[0] = { ...fields, ...errorFields(err, level, hidden) };
          }
          return method.apply(this, args);
        },
      },
      timestamp: pino.stdTimeFunctions.isoTime,
      ...(options.redact ? { redact: { paths: [...options.redact], censor: CENSOR } } : {}),
      mixin: (_object, _level, logger) => {
        const fields = currentReconcile.getStore();
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

/** What a redacted value is written as. */
const CENSOR = "[REDACTED]";

const FIELD_ORDER = ["controller", "namespace", "name", "reconcileID"] as const;

/** pino's number of the `error` level: a stack is written from it up, as zap's production config does. */
const ERROR_LEVEL = 50;

/**
 * The keys a redaction path names last (`*.apiKey` → `apiKey`, `headers['x-api-key']` →
 * `x-api-key`), lower-cased: an `err` that is not an Error is written as JSON text, out of pino's
 * reach, so those keys are censored in it at any depth and in any case (`X-Api-Key`, the
 * transport's header, as `x-api-key`): more than the paths say, never less.
 */
function redactedKeys(paths: readonly string[]): ReadonlySet<string> {
  const keys = new Set<string>();
  for (const path of paths) {
    const bracketed = /\[['"]([^'"]+)['"]\]$/.exec(path);
    keys.add((bracketed?.[1] ?? path.slice(path.lastIndexOf(".") + 1)).toLowerCase());
  }
  return keys;
}

/**
 * A logged error as controller-runtime's zap writes it: `error`, its message as a string, and
 * `stacktrace` only at error level and above (a warning, such as a list/watch retry, says what
 * failed in one line). Call sites pass it as `{ err }`, pino's name, or as the first argument.
 * An `err` that is not an Error becomes JSON text with the `hidden` keys censored at any depth.
 */
function errorFields(
  err: unknown,
  level: number,
  hidden: ReadonlySet<string>,
): { error: string; stacktrace?: string } {
  if (!(err instanceof Error)) {
    if (typeof err === "string") return { error: err };
    try {
      const censor = (key: string, value: unknown) => (hidden.has(key.toLowerCase()) ? CENSOR : value);
      return { error: JSON.stringify(err, censor) ?? String(err) };
    } catch {
      return { error: String(err) }; // a BigInt, a cycle
    }
  }
  const fields: { error: string; stacktrace?: string } = { error: err.message || err.name };
  if (level >= ERROR_LEVEL && typeof err.stack === "string") fields.stacktrace = err.stack;
  return fields;
}

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
    if (key === "stacktrace" && typeof value === "string") {
      stack = value;
      continue;
    }
    const plain = typeof value === "string" && /^[\w./:@-]+$/.test(value);
    text += ` ${key}=${plain ? value : escapeAsUnicode(JSON.stringify(value) ?? String(value))}`;
  }
  if (stack !== undefined) text += `\n    ${stack.split("\n").map(escapeAsUnicode).join("\n    ")}`;
  return `${text}\n`;
}
