/**
 * A live table: read the resources, draw them, repeat until a condition holds or time runs out.
 * On a terminal the table is redrawn in place; otherwise (a log, a pipe, CI) a table is appended
 * only when it changed, so the output stays readable after the fact.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { type ResourceRow, renderTable } from "./status.ts";

/** Where the table goes: a stream that may be a terminal. */
export interface Screen {
  write(text: string): unknown;
  readonly isTTY?: boolean;
  /** Terminal width: a line wider than this takes more than one row to erase. */
  readonly columns?: number;
}

/** Options of {@link watchTable}. */
export interface WatchTableOptions {
  screen: Screen;
  /** Reads the rows once; a thrown error is shown under the table and the next read retried. */
  read: (signal: AbortSignal) => Promise<ResourceRow[]>;
  /** Stops watching, successfully, when it returns true for the rows just read. */
  until: (rows: readonly ResourceRow[]) => boolean;
  /** Called before each read; throw to stop watching (e.g. the operator process died). */
  check?: () => void;
  timeoutMs: number;
  /** Pause between reads; default 1 s. */
  intervalMs?: number;
  signal: AbortSignal;
  now?: () => number;
  wait?: (ms: number, signal: AbortSignal) => Promise<unknown>;
}

/** How watching ended: `done` when `until` held, else the time ran out; `rows` as last read. */
export interface WatchResult {
  done: boolean;
  rows: ResourceRow[];
}

/**
 * Draws the table until `until(rows)` or `timeoutMs` passes. Rejects when `signal` aborts or
 * `check` throws; read errors never end the watch by themselves (the API server may be busy).
 */
export async function watchTable(options: WatchTableOptions): Promise<WatchResult> {
  const now = options.now ?? Date.now;
  const wait = options.wait ?? ((ms: number, signal: AbortSignal) => sleep(ms, undefined, { signal }));
  const started = now();
  const tty = options.screen.isTTY === true;
  let drawnLines = 0;
  let lastDrawn = "";
  let rows: ResourceRow[] = [];
  for (;;) {
    options.signal.throwIfAborted();
    options.check?.();
    let problem = "";
    try {
      rows = await options.read(options.signal);
    } catch (error) {
      options.signal.throwIfAborted();
      problem = `(reading the resources failed, retrying: ${error instanceof Error ? error.message : String(error)})\n`;
    }
    const done = problem === "" && options.until(rows);
    const elapsed = Math.round((now() - started) / 1000);
    const table = renderTable(rows) + problem;
    if (tty) {
      // Move up over the previous drawing and clear it, then draw again: a table that updates in place.
      const erase = drawnLines > 0 ? `\x1b[${drawnLines}A\r\x1b[J` : "";
      const frame = `${table}${done ? "" : `waiting… ${elapsed} s\n`}`;
      options.screen.write(erase + frame);
      drawnLines = screenRows(frame, options.screen.columns);
    } else if (table !== lastDrawn) {
      options.screen.write(`after ${elapsed} s:\n${table}`);
      lastDrawn = table;
    }
    if (done) return { done: true, rows };
    if (now() - started >= options.timeoutMs) return { done: false, rows };
    await wait(options.intervalMs ?? 1_000, options.signal);
  }
}

/** Terminal rows `frame` (ending with a newline) occupies when lines wrap at `columns`. */
export function screenRows(frame: string, columns: number | undefined): number {
  const width = columns && columns > 0 ? columns : Number.POSITIVE_INFINITY;
  return frame
    .split("\n")
    .slice(0, -1)
    .reduce((rows, line) => rows + Math.max(1, Math.ceil(line.length / width)), 0);
}
