// Helpers for tests of the `cluster` project (test/integration, test/e2e), which run against the
// control plane started by test/controlplane/global-setup.ts. Each test file isolates itself in
// namespaces of its own; nothing here deletes namespaces, because without a controller manager a
// deleted namespace stays Terminating forever (the whole control plane is discarded after the run).
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { inject } from "vitest";
import { KubeClient } from "../../src/kube/client.ts";
import { loadKubeConfig } from "../../src/kube/config.ts";
import { type KubectlResult, runKubectl } from "../controlplane/kubectl.ts";

export type { KubectlResult } from "../controlplane/kubectl.ts";

/** Admin kubeconfig of the run's control plane (cluster-admin through group system:masters). */
export function testKubeconfigPath(): string {
  return inject("kubeconfigPath");
}

/** `https://127.0.0.1:<port>` of the run's kube-apiserver. */
export function testServer(): string {
  return inject("server");
}

/**
 * Runs kubectl against the run's control plane, as admin unless `opts.kubeconfig` says otherwise.
 * Resolves with the exit code and output; a non-zero exit is a result, not an exception.
 */
export function kubectl(
  args: string[],
  opts: { input?: string; kubeconfig?: string; timeoutMs?: number } = {},
): Promise<KubectlResult> {
  return runKubectl(inject("kubectlPath"), args, {
    ...opts,
    kubeconfig: opts.kubeconfig ?? testKubeconfigPath(),
    cacheDir: inject("kubectlCacheDir"),
  });
}

/** Like {@link kubectl} but throws (with kubectl's stderr) unless it exits 0; returns stdout. */
export async function kubectlOk(args: string[], opts: { input?: string; kubeconfig?: string } = {}) {
  const result = await kubectl(args, opts);
  if (result.code !== 0)
    throw new Error(`kubectl ${args.join(" ")} exited ${result.code}: ${result.stderr.trim()}`);
  return result.stdout;
}

/** The admin's client for {@link freshNamespace}, made on first use (the run's kubeconfig is injected). */
let admin: KubeClient | undefined;

/**
 * Creates a namespace named `<prefix>-<random>` (labelled `dms.dev/test=true`) and returns its name.
 * `prefix` is lower-cased and trimmed so the result is a valid DNS label.
 */
export async function freshNamespace(prefix: string): Promise<string> {
  const base = prefix
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 50);
  const name = `${base || "test"}-${randomBytes(4).toString("hex")}`;
  // Created labelled, by one request rather than kubectl processes: most tests start with one or
  // more of these, and starting kubectl costs more than what it asks.
  admin ??= new KubeClient(loadKubeConfig({ kubeconfig: testKubeconfigPath() }).config);
  await admin.request({
    method: "POST",
    path: "/api/v1/namespaces",
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name, labels: { "dms.dev/test": "true" } } },
  });
  return name;
}

/** Options of {@link waitFor}. */
export interface WaitForOptions {
  /** Give up after this long; default 10 s. */
  timeoutMs?: number;
  /** Pause between attempts; default 100 ms. */
  intervalMs?: number;
  /** What is awaited, for the timeout message; a function is asked at the timeout (what is still missing). */
  description?: string | (() => string);
}

const described = (d: WaitForOptions["description"]): string =>
  (typeof d === "function" ? d() : d) ?? "a condition";

/**
 * Calls `fn` until it returns something other than `undefined`, `null` or `false` without throwing,
 * and returns that. On timeout throws an Error whose message names `description` and whose cause
 * is the last error `fn` threw.
 */
export async function waitFor<T>(
  fn: () => T | Promise<T>,
  opts: WaitForOptions = {},
): Promise<Exclude<T, undefined | null | false>> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await fn();
      if (value !== undefined && value !== null && value !== false) {
        return value as Exclude<T, undefined | null | false>;
      }
    } catch (error) {
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const last = lastError instanceof Error ? `; last error: ${lastError.message}` : "";
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${described(opts.description)}${last}`, {
        cause: lastError,
      });
    }
    await sleep(opts.intervalMs ?? 100);
  }
}
