/**
 * The operator under measurement seen through Node's inspector (the Chrome DevTools Protocol over
 * a WebSocket on loopback): a CPU profile of a span of its work and a heap snapshot, written as
 * `.cpuprofile` and `.heapsnapshot` files that Chrome DevTools (Memory and Performance panels) or
 * VS Code open. `scale --profile` uses it to say where a pass's CPU time and the memory per
 * resource go, instead of guessing from a diff.
 */

import { once } from "node:events";
import { createWriteStream } from "node:fs";

/** A `--inspect` flag for the operator's NODE_OPTIONS: loopback only, at `port`. */
export const inspectFlag = (port: number) => `--inspect=127.0.0.1:${port}`;

/** The coverage of one script, as `Profiler.takePreciseCoverage` returns it. */
export interface ScriptCoverage {
  url: string;
  functions: Array<{
    functionName: string;
    /** The function's own range first (its call count), then its blocks (with `detailed`). */
    ranges: Array<{ startOffset: number; endOffset: number; count: number }>;
  }>;
}

/** What the protocol answers to one call. */
interface Reply {
  id?: number;
  method?: string;
  params?: { chunk?: string };
  result?: unknown;
  error?: { message: string };
}

/** A session with one process's inspector. */
export class Inspector {
  readonly #ws: WebSocket;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  #next = 0;
  /** Receives the chunks of a heap snapshot while one is taken. */
  #onChunk: ((chunk: string) => void) | undefined;

  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.addEventListener("message", (event) => {
      const reply = JSON.parse(String(event.data)) as Reply;
      if (reply.method === "HeapProfiler.addHeapSnapshotChunk") this.#onChunk?.(reply.params?.chunk ?? "");
      if (reply.id === undefined) return;
      const waiting = this.#pending.get(reply.id);
      this.#pending.delete(reply.id);
      if (reply.error) waiting?.reject(new Error(reply.error.message));
      else waiting?.resolve(reply.result);
    });
  }

  /** Connects to the inspector listening at `127.0.0.1:port` (the first target it lists). */
  static async connect(port: number): Promise<Inspector> {
    const response = await fetch(`http://127.0.0.1:${port}/json/list`);
    const [target] = (await response.json()) as Array<{ webSocketDebuggerUrl: string }>;
    if (target === undefined) throw new Error(`the inspector at port ${port} lists no target`);
    const ws = new WebSocket(target.webSocketDebuggerUrl);
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener("open", () => resolve(), { once: true });
      ws.addEventListener("error", () => reject(new Error(`no inspector session at port ${port}`)), {
        once: true,
      });
    });
    return new Inspector(ws);
  }

  /**
   * {@link connect} once the process's inspector listens: a process just started opens it a
   * moment after it runs, so a refused connection is tried again every 50 ms for `timeoutMs`.
   */
  static async connectWhenUp(port: number, timeoutMs = 10_000): Promise<Inspector> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      try {
        return await Inspector.connect(port);
      } catch (err) {
        if (performance.now() > deadline) throw err;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  }

  #call(method: string, params: object = {}): Promise<unknown> {
    const id = ++this.#next;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#ws.send(JSON.stringify({ id, method, params }));
    });
  }

  /** Evaluates `expression` in the process (its global scope) and resolves its value. */
  async evaluate(expression: string): Promise<unknown> {
    const { result, exceptionDetails } = (await this.#call("Runtime.evaluate", {
      expression,
      returnByValue: true,
    })) as { result?: { value?: unknown }; exceptionDetails?: { text?: string } };
    if (exceptionDetails) throw new Error(`${expression}: ${exceptionDetails.text ?? "threw"}`);
    return result?.value;
  }

  /** Starts sampling the CPU every `intervalUs` microseconds. */
  async startCpuProfile(intervalUs = 1_000): Promise<void> {
    await this.#call("Profiler.enable");
    await this.#call("Profiler.setSamplingInterval", { interval: intervalUs });
    await this.#call("Profiler.start");
  }

  /** Stops sampling and writes the profile to `path` (a `.cpuprofile`). */
  async stopCpuProfile(path: string): Promise<void> {
    const { profile } = (await this.#call("Profiler.stop")) as { profile: unknown };
    await this.#call("Profiler.disable");
    const out = createWriteStream(path);
    out.end(JSON.stringify(profile));
    await once(out, "finish");
  }

  /**
   * Starts V8's sampling heap profiler: one allocation in about every `intervalBytes` is recorded
   * with its stack. With `keepMajor`, samples of objects a full collection freed are kept (those a
   * young-generation collection freed are not), so the profile shows what reached the old
   * generation, live or not: the garbage that makes the old generation's sawtooth.
   */
  async startHeapSampling(intervalBytes = 64 * 1024, keepMajor = true): Promise<void> {
    await this.#call("HeapProfiler.enable");
    await this.#call("HeapProfiler.startSampling", {
      samplingInterval: intervalBytes,
      includeObjectsCollectedByMajorGC: keepMajor,
      includeObjectsCollectedByMinorGC: false,
    });
  }

  /** Stops the sampling heap profiler and writes its profile to `path` (a `.heapprofile`). */
  async stopHeapSampling(path: string): Promise<void> {
    const { profile } = (await this.#call("HeapProfiler.stopSampling")) as { profile: unknown };
    const out = createWriteStream(path);
    out.end(JSON.stringify(profile));
    await once(out, "finish");
  }

  /** Takes a heap snapshot (after a full garbage collection) and streams it to `path`. */
  async heapSnapshot(path: string): Promise<void> {
    const out = createWriteStream(path);
    this.#onChunk = (chunk) => out.write(chunk);
    try {
      await this.#call("HeapProfiler.enable");
      await this.#call("HeapProfiler.collectGarbage");
      await this.#call("HeapProfiler.takeHeapSnapshot", { reportProgress: false });
      await this.#call("HeapProfiler.disable");
    } finally {
      this.#onChunk = undefined;
      out.end();
      await once(out, "finish");
    }
  }

  /**
   * Starts V8's precise coverage with call counts and block detail. Counts start at zero for what
   * runs from now on; {@link takePreciseCoverage} reads them and sets them to zero again.
   */
  async startPreciseCoverage(): Promise<void> {
    await this.#call("Profiler.enable");
    await this.#call("Profiler.startPreciseCoverage", { callCount: true, detailed: true });
  }

  /** The functions executed since coverage started or was last taken, per script; resets the counts. */
  async takePreciseCoverage(): Promise<ScriptCoverage[]> {
    const { result } = (await this.#call("Profiler.takePreciseCoverage")) as { result: ScriptCoverage[] };
    return result;
  }

  /** Stops precise coverage. */
  async stopPreciseCoverage(): Promise<void> {
    await this.#call("Profiler.stopPreciseCoverage");
    await this.#call("Profiler.disable");
  }

  close(): void {
    this.#ws.close();
  }
}
