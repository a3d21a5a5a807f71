/**
 * The operator as a child process, run exactly as a user would (`node src/cli.ts run …`), its
 * output in a log file. It gets a process group of its own so a terminal's Ctrl-C reaches the
 * demo only and the demo stops the operator in order; a watchdog SIGKILLs that group if the demo
 * itself is killed, so no operator is left running against a vanished control plane.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { killGroup, startWatchdog } from "../../test/controlplane/process.ts";

const CLI = join(import.meta.dirname, "..", "..", "src", "cli.ts");

/** Options of {@link OperatorProcess.start}. */
export interface OperatorProcessOptions {
  /** Arguments after `run`. */
  args: string[];
  /** Where stdout and stderr go (truncated at start); its directory is created. */
  logPath: string;
  /** A private directory for the watchdog's bookkeeping; removed by stop() or by the watchdog. */
  workDir: string;
  /** Environment of the child; default: {@link operatorEnv}(). */
  env?: NodeJS.ProcessEnv;
  /** The CLI script to run; default `src/cli.ts` (a benchmark runs the compiled `dist/cli.js`). */
  entry?: string;
}

/** This process's environment without DMS_* and KUBECONFIG (the flags alone configure the child), plus `extra`. */
export function operatorEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const own = Object.entries(process.env).filter(([k]) => !k.startsWith("DMS_") && k !== "KUBECONFIG");
  return { ...Object.fromEntries(own), ...extra };
}

/** How the process ended. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A running `dms-operator run`; call stop() (an exit handler SIGKILLs it otherwise). */
export class OperatorProcess {
  readonly logPath: string;
  readonly exited: Promise<Exit>;
  readonly #child: ChildProcess;
  readonly #pid: number;
  readonly #workDir: string;
  readonly #retireWatchdog: () => void;
  readonly #onExit: () => void;
  #exit: Exit | undefined;

  private constructor(child: ChildProcess, pid: number, options: OperatorProcessOptions, retire: () => void) {
    this.#child = child;
    this.#pid = pid;
    this.logPath = options.logPath;
    this.#workDir = options.workDir;
    this.#retireWatchdog = retire;
    this.exited = new Promise((resolve) =>
      child.once("exit", (code, signal) => {
        this.#exit = { code, signal };
        resolve(this.#exit);
      }),
    );
    this.#onExit = () => {
      killGroup(pid, "SIGKILL");
      rmSync(options.workDir, { recursive: true, force: true });
    };
    process.on("exit", this.#onExit);
  }

  /** Spawns the operator; throws when it cannot be spawned at all (not when it fails later). */
  static start(options: OperatorProcessOptions): OperatorProcess {
    mkdirSync(dirname(options.logPath), { recursive: true });
    mkdirSync(options.workDir, { recursive: true });
    const log = openSync(options.logPath, "w");
    const env = options.env ?? operatorEnv();
    const entry = options.entry ?? CLI;
    let child: ChildProcess;
    try {
      child = spawn(process.execPath, [entry, "run", ...options.args], {
        detached: true,
        stdio: ["ignore", log, log],
        env,
      });
    } finally {
      closeSync(log);
    }
    if (child.pid === undefined)
      throw new Error(`could not start the operator (${process.execPath} ${entry})`);
    const watchdog = startWatchdog(options.workDir, [options.workDir]);
    writeFileSync(watchdog.pgidFile, `${child.pid}\n`);
    return new OperatorProcess(child, child.pid, options, watchdog.retire);
  }

  /** The operator's process id (it is the node process itself, so /proc/<pid> describes it). */
  get pid(): number {
    return this.#pid;
  }

  /** Whether it is still running. */
  get running(): boolean {
    return this.#exit === undefined;
  }

  /** Throws an Error quoting the end of the log when the operator has exited. */
  assertRunning(): void {
    if (!this.#exit) return;
    const how = this.#exit.signal
      ? `was killed by ${this.#exit.signal}`
      : `exited with code ${this.#exit.code}`;
    throw new Error(`the operator ${how}; the end of ${this.logPath}:\n${this.logTail(15)}`);
  }

  /** The last `lines` lines of the log. */
  logTail(lines: number): string {
    try {
      return readFileSync(this.logPath, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
    } catch {
      return "(no log)";
    }
  }

  /** SIGTERM (a graceful shutdown), SIGKILL after `graceMs`; then removes the work dir. Idempotent. */
  async stop(graceMs: number): Promise<Exit> {
    if (this.running) {
      killGroup(this.#pid, "SIGTERM");
      const timer = setTimeout(() => killGroup(this.#pid, "SIGKILL"), graceMs);
      await this.exited;
      clearTimeout(timer);
    }
    killGroup(this.#pid, "SIGKILL"); // anything it forked that outlived it
    this.#child.removeAllListeners();
    this.#retireWatchdog();
    rmSync(this.#workDir, { recursive: true, force: true });
    process.removeListener("exit", this.#onExit);
    return this.exited;
  }
}
