// Child processes of the control plane, and the guarantee that none outlives the Node process.
//
// Each server runs in its own process group (so a kill reaches anything it forked). Three layers
// make sure nothing is left behind: stop() for the orderly case; synchronous handlers on `exit`,
// SIGINT, SIGTERM and SIGHUP for an interrupted run; and a tiny `sh` watchdog, outside our process
// tree, for a parent that dies without running any handler (SIGKILL, OOM killer, crash).
import { type ChildProcess, spawn } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/** One long-running server (etcd or kube-apiserver) with its recent output kept for error messages. */
export class ServerProcess {
  readonly name: string;
  readonly pid: number;
  /** Resolves with the exit code (or signal name) once the process has exited. */
  readonly exited: Promise<string>;
  #child: ChildProcess;
  #tail: string[] = [];

  private constructor(name: string, child: ChildProcess, pid: number, log: (line: string) => void) {
    this.name = name;
    this.pid = pid;
    this.#child = child;
    const onLine = (line: string) => {
      if (!line.trim()) return;
      this.#tail.push(line);
      if (this.#tail.length > 40) this.#tail.shift();
      log(`[${name}] ${line}`);
    };
    for (const stream of [child.stdout, child.stderr]) {
      let buffered = "";
      stream?.on("data", (chunk: Buffer) => {
        const lines = (buffered + chunk.toString()).split("\n");
        buffered = lines.pop() ?? "";
        for (const line of lines) onLine(line);
      });
    }
    this.exited = new Promise((resolve) => {
      child.on("exit", (code, signal) => resolve(signal ?? String(code)));
    });
  }

  /** Starts `binary args` in a new process group; throws when it cannot be spawned at all. */
  static async start(
    name: string,
    binary: string,
    args: string[],
    opts: { env: NodeJS.ProcessEnv; log: (line: string) => void },
  ): Promise<ServerProcess> {
    const child = spawn(binary, args, { detached: true, env: opts.env, stdio: ["ignore", "pipe", "pipe"] });
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", (cause) => reject(new Error(`cannot start ${name} (${binary})`, { cause })));
    });
    if (child.pid === undefined) throw new Error(`${name} started without a pid`);
    return new ServerProcess(name, child, child.pid, opts.log);
  }

  /** The last lines the process printed, for error messages. */
  tail(): string {
    return this.#tail.join("\n");
  }

  /** Whether the process has not exited yet. */
  get running(): boolean {
    return this.#child.exitCode === null && this.#child.signalCode === null;
  }

  /** SIGTERM to the group, SIGKILL after `graceMs`; resolves once the process has exited. Idempotent. */
  async stop(graceMs: number): Promise<void> {
    if (!this.running) return;
    killGroup(this.pid, "SIGTERM");
    const timer = setTimeout(() => killGroup(this.pid, "SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(timer);
    killGroup(this.pid, "SIGKILL"); // anything the server forked that ignored SIGTERM
  }
}

/** Signals a whole process group; a group that is already gone is not an error. */
export function killGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: already gone
  }
}

/** What must be torn down if the Node process goes away before stop(). */
export interface EmergencyCleanup {
  /** Process groups to SIGKILL. */
  pgids(): number[];
  /** Directories to remove. */
  dirs: string[];
}

const live = new Set<EmergencyCleanup>();
let handlersInstalled = false;

function cleanupAllSync(): void {
  for (const entry of live) {
    for (const pgid of entry.pgids()) killGroup(pgid, "SIGKILL");
    for (const dir of entry.dirs) rmSync(dir, { recursive: true, force: true });
  }
  live.clear();
}

function onSignal(signal: NodeJS.Signals): void {
  cleanupAllSync();
  // Our listener suppressed Node's default "die on signal"; restore it unless someone else (vitest)
  // handles the signal and exits on its own.
  if (process.listenerCount(signal) === 1) {
    process.removeListener(signal, onSignal);
    process.kill(process.pid, signal);
  }
}

/** Registers `entry` for synchronous cleanup on exit or a terminating signal; returns the unregister. */
export function registerEmergencyCleanup(entry: EmergencyCleanup): () => void {
  if (!handlersInstalled) {
    handlersInstalled = true;
    process.on("exit", cleanupAllSync);
    for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, onSignal);
  }
  live.add(entry);
  return () => {
    live.delete(entry);
  };
}

/**
 * Starts a detached watchdog that, once this Node process is gone, SIGKILLs the process groups
 * listed in `<dir>/pgids` (one per line; keep the file current) and removes `removeDirs`.
 * Returns a function that retires the watchdog after an orderly stop.
 */
export function startWatchdog(
  dir: string,
  removeDirs: string[],
): { pgidFile: string; pid: number | undefined; retire: () => void } {
  const pgidFile = join(dir, "pgids");
  writeFileSync(pgidFile, "");
  const script = [
    'parent="$1"; pgids="$2"; shift 2',
    'while kill -0 "$parent" 2>/dev/null; do sleep 1; done',
    // `-s KILL --` is the spelling dash's kill builtin accepts for a process group.
    'for p in $(cat "$pgids" 2>/dev/null); do kill -s KILL -- "-$p" 2>/dev/null; done',
    'rm -rf -- "$@"',
  ].join("\n");
  const child = spawn(
    "sh",
    ["-c", script, "dms-controlplane-watchdog", String(process.pid), pgidFile, ...removeDirs],
    {
      detached: true,
      stdio: "ignore",
    },
  );
  child.on("error", () => {}); // no sh: the in-process handlers still cover every orderly case
  child.unref();
  return {
    pgidFile,
    pid: child.pid,
    retire: () => {
      if (child.pid !== undefined) killGroup(child.pid, "SIGKILL");
    },
  };
}

/** A server exited while we waited for it to become ready. */
export class ServerExitedError extends Error {
  override readonly name = "ServerExitedError";
}

/**
 * Polls `ready` every 100 ms until it resolves true. Throws {@link ServerExitedError} (with the
 * server's last output) as soon as `proc` exits, or an Error after `timeoutMs`.
 */
export async function waitUntil(
  proc: ServerProcess,
  timeoutMs: number,
  ready: () => Promise<boolean>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    if (!proc.running) {
      throw new ServerExitedError(
        `${proc.name} exited (${await proc.exited}) before it was ready:\n${proc.tail()}`,
      );
    }
    try {
      if (await ready()) return;
    } catch (error) {
      lastError = error; // connection refused until it listens
    }
    await sleep(100);
  }
  throw new Error(`${proc.name} not ready after ${timeoutMs} ms; last output:\n${proc.tail()}`, {
    cause: lastError,
  });
}
