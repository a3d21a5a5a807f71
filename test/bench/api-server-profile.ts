/**
 * Where the API server's CPU goes in a phase of a benchmark, by kind of work: its own CPU
 * profiles (Go's `net/http/pprof`, on when the server runs with `--profiling=true`), taken one
 * after another through the phase, each sample's stack classified by the frames it holds
 * ({@link classifyStack}). What a sharded start's creates or a join cost the server, per kind
 * of request: the share of time each takes, where `/proc` gives only the total.
 *
 * The profiles are read with the Go toolchain's own reader (`go tool pprof -traces`): the tests
 * already need Go to build the control plane, and a profile read by hand would be a second
 * decoder of its format to keep right.
 *
 * A stack is classified by the request it serves, not by what it spends on it: the decoding,
 * validation, field tracking and garbage a status write allocates are the status write's. The
 * collector's own goroutines (`gcBgMarkWorker`, the sweeper, the scavenger) have their kind:
 * the garbage every request leaves, collected later; so has what serves any request before its
 * handler runs (TLS, HTTP, the filter chain), and the etcd client's connection.
 */
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import type { RequestOptions } from "node:https";
import { join } from "node:path";
import { httpsBytes } from "./probes.ts";

/** What each profile covers, in seconds: short enough for the server's request timeout (60 s). */
export const PROFILE_SECONDS = 30;

/** The kinds a sample is counted under, in the order they are tried (see {@link classifyStack}). */
export const KINDS = [
  "status writes",
  "other writes",
  "creates",
  "deletes",
  "reads",
  "watches served",
  "changes read from etcd",
  "request handling",
  "etcd client",
  "garbage collection",
  "other",
] as const;
export type Kind = (typeof KINDS)[number];

/**
 * The kind of one stack (frames from the leaf to the root, function names as `go tool pprof`
 * prints them): the first rule that matches, most specific first. A write's handler runs in a
 * goroutine of its own (`finishRequest`), below which the frames name what it is: the status
 * subresource's storage, an update or patch, a create, a delete.
 */
export function classifyStack(frames: readonly string[]): Kind {
  const has = (part: string) => frames.some((f) => f.includes(part));
  if (has("customresource.(*StatusREST)")) return "status writes";
  if (has("handlers.(*patcher)") || has("handlers.PatchResource") || has("handlers.UpdateResource"))
    return "other writes";
  if (has("handlers.createHandler") || has("registry.(*Store).Create")) return "creates";
  if (has("handlers.DeleteResource") || has("registry.(*Store).Delete")) return "deletes";
  if (has("handlers.ListResource") || has("handlers.GetResource") || has("handlers.getResourceHandler"))
    return "reads";
  if (has("handlers.serveWatch") || has("cacher.(*cacheWatcher)") || has("cacher.(*Cacher).dispatch"))
    return "watches served";
  if (has("etcd3.(*watchChan)") || has("cacher.(*watchCache)") || has("cacher.(*Cacher).processEvent"))
    return "changes read from etcd";
  if (has("runtime.gcBgMarkWorker") || has("runtime.bgsweep") || has("runtime.bgscavenge"))
    return "garbage collection";
  // What every request costs before and after its handler: TLS, HTTP/1 and 2, the filter chain
  // (authentication, authorization, priority and fairness), whatever request it is.
  if (
    has("net/http.(*conn).serve") ||
    has("http2.(*serverConn)") ||
    has("crypto/tls.") ||
    has("filters.(*timeoutHandler)") ||
    has("k8s.io/apiserver/pkg/server.DefaultBuildHandlerChain")
  )
    return "request handling";
  if (has("go.etcd.io/etcd/client") || has("google.golang.org/grpc")) return "etcd client";
  return "other";
}

/** Seconds in one of the units `go tool pprof` prints a sample's value in. */
const UNIT_SECONDS: Readonly<Record<string, number>> = { ns: 1e-9, us: 1e-6, µs: 1e-6, ms: 1e-3, s: 1 };

/** CPU seconds by {@link Kind}, from `go tool pprof -traces` text: every sample's value to its stack's kind. */
export function cpuByKind(traces: string): Record<Kind, number> {
  const sums = Object.fromEntries(KINDS.map((k) => [k, 0])) as Record<Kind, number>;
  // Each stack is a block between separator lines: its value and leaf on the first line, callers below.
  for (const block of traces.split(/^-+\+-+$/m).slice(1)) {
    const lines = block.split("\n").filter((l) => l.trim() !== "");
    const first = /^\s*([\d.]+)(ns|us|µs|ms|s)\s+(.*)$/.exec(lines[0] ?? "");
    if (first === null) continue;
    const unit = UNIT_SECONDS[first[2] ?? ""] ?? 0;
    const frames = [first[3] ?? "", ...lines.slice(1).map((l) => l.trim())];
    const kind = classifyStack(frames);
    sums[kind] += Number(first[1]) * unit;
  }
  return sums;
}

/** The text `go tool pprof -traces` prints for the profile `file`; throws when Go cannot read it. */
export function tracesOf(file: string): string {
  const result = spawnSync("go", ["tool", "pprof", "-traces", file], {
    encoding: "utf8",
    maxBuffer: 512 * 1024 * 1024,
  });
  if (result.status !== 0)
    throw new Error(`go tool pprof -traces ${file}: ${result.stderr || result.error?.message || "failed"}`);
  return result.stdout;
}

/** One CPU profile of `seconds`; rejects unless 200, or when the server goes quiet past it. */
async function fetchProfile(server: string, tls: RequestOptions, seconds: number): Promise<Buffer> {
  const url = `${server}/debug/pprof/profile?seconds=${seconds}`;
  // The server answers once the profile is taken: the socket is idle that long, and a little more.
  const { status, body } = await httpsBytes(url, tls, (seconds + 30) * 1000);
  if (status !== 200) throw new Error(`GET ${url}: ${status} ${body.toString("utf8").slice(0, 200)}`);
  return body;
}

/**
 * Profiles of the API server at `server` one after another from {@link start} to {@link stop},
 * each written to `dir` as `<name>-<k>.pb.gz` (open them with `go tool pprof`).
 */
export class ApiServerProfiles {
  readonly #server: string;
  readonly #tls: RequestOptions;
  readonly #dir: string;
  #running: Promise<string[]> | undefined;
  #stopping = false;

  constructor(server: string, tls: RequestOptions, dir: string) {
    this.#server = server;
    this.#tls = tls;
    this.#dir = dir;
  }

  /** Starts profiling the phase `name`. */
  start(name: string): void {
    this.#stopping = false;
    const running = (async () => {
      const files: string[] = [];
      while (!this.#stopping) {
        const profile = await fetchProfile(this.#server, this.#tls, PROFILE_SECONDS);
        const file = join(this.#dir, `${name}-${files.length + 1}.pb.gz`);
        writeFileSync(file, profile);
        files.push(file);
      }
      return files;
    })();
    // A profile that fails is reported by stop(); a phase that fails first never calls it, and
    // the server's stop then ends the loop: no rejection left unhandled meanwhile.
    running.catch(() => {});
    this.#running = running;
  }

  /**
   * Ends the phase once the profile under way ends (up to {@link PROFILE_SECONDS} later: the
   * tail past the phase is counted too), and returns its CPU seconds by kind, summed over its
   * profiles, with the files.
   */
  async stop(): Promise<{ cpuSeconds: Record<Kind, number>; files: string[] }> {
    this.#stopping = true;
    const files = (await this.#running) ?? [];
    this.#running = undefined;
    const cpuSeconds = Object.fromEntries(KINDS.map((k) => [k, 0])) as Record<Kind, number>;
    for (const file of files)
      for (const [kind, seconds] of Object.entries(cpuByKind(tracesOf(file))))
        cpuSeconds[kind as Kind] += seconds;
    for (const kind of KINDS) cpuSeconds[kind] = Math.round(cpuSeconds[kind] * 10) / 10;
    return { cpuSeconds, files };
  }
}
