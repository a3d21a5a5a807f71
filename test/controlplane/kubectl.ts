// Running kubectl as a user would, with output captured for assertions.
import { spawn } from "node:child_process";

/** Outcome of one kubectl invocation. */
export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a kubectl binary; resolves with its exit code and output, killing it after `timeoutMs` (default 60 s). */
export function runKubectl(
  kubectl: string,
  args: string[],
  opts: {
    kubeconfig: string;
    input?: string;
    timeoutMs?: number;
    cacheDir?: string;
    env?: NodeJS.ProcessEnv;
  },
): Promise<KubectlResult> {
  const global = [
    `--kubeconfig=${opts.kubeconfig}`,
    ...(opts.cacheDir ? [`--cache-dir=${opts.cacheDir}`] : []),
  ];
  return runCaptured(kubectl, [...global, ...args], {
    ...(opts.env ? { env: opts.env } : {}),
    input: opts.input ?? "",
    timeoutMs: opts.timeoutMs ?? 60_000,
  });
}

/**
 * Runs `binary` with `args`, `input` on its standard input; resolves with its exit code and both
 * outputs (a signal that ended it is said at the end of stderr), killing it after `timeoutMs`.
 */
export function runCaptured(
  binary: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; input: string; timeoutMs: number },
): Promise<KubectlResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, {
      env: opts.env ?? process.env,
      stdio: ["pipe", "pipe", "pipe"],
      timeout: opts.timeoutMs,
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on("error", reject);
    child.on("close", (code, signal) =>
      resolve({ code: code ?? 128, stdout, stderr: signal ? `${stderr}killed by ${signal}` : stderr }),
    );
    // A child that exits before reading its input (one that fails at once) closes the pipe: the
    // write's EPIPE is no failure of the run, whose exit code and output say what happened.
    child.stdin.on("error", () => {});
    child.stdin.end(opts.input);
  });
}
