// A lock file between processes that may build the same binaries at the same time.
import { closeSync, openSync, readFileSync, rmSync, statSync, writeSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

/** Options of {@link acquireLock}. */
export interface LockOptions {
  /** Give up (throwing) after waiting this long for a live owner. */
  timeoutMs: number;
  /** Receives one line when we start waiting, and one per stale lock taken over. */
  log: (line: string) => void;
  /** What the owner is doing, for the waiting message. */
  waitingFor: string;
}

/** A lock file without a pid this old is debris of a process that died between create and write. */
const EMPTY_LOCK_STALE_MS = 10_000;

/**
 * Takes the exclusive lock file `path` (created with O_EXCL, holding our pid) and returns its release.
 * A lock whose owner is no longer alive is taken over. Throws after `timeoutMs` of waiting.
 */
export async function acquireLock(path: string, options: LockOptions): Promise<() => void> {
  const deadline = Date.now() + options.timeoutMs;
  let announced = false;
  for (;;) {
    try {
      const fd = openSync(path, "wx");
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => removeIfOwnedBy(path, process.pid);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    const owner = readPid(path);
    if (owner === undefined ? olderThan(path, EMPTY_LOCK_STALE_MS) : !processAlive(owner)) {
      options.log(`taking over the stale lock ${path} of process ${owner ?? "?"}, which is gone`);
      removeIfOwnedBy(path, owner);
      continue;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out waiting for the lock ${path} held by process ${owner ?? "?"}; remove the file if that process is gone`,
      );
    }
    if (!announced) options.log(`waiting for process ${owner ?? "?"} that is ${options.waitingFor}`);
    announced = true;
    await sleep(500);
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

function olderThan(path: string, ms: number): boolean {
  try {
    return Date.now() - statSync(path).mtimeMs > ms;
  } catch {
    return true; // gone already: just try again
  }
}

function readPid(path: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(path, "utf8"), 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Removes the lock only while `owner` still holds it, narrowing the race between two stale-lock takers. */
function removeIfOwnedBy(path: string, owner: number | undefined): void {
  if (readPid(path) === owner) rmSync(path, { force: true });
}
