// `dms-operator run` with no socket of its own (--metrics-bind-address=0
// --health-probe-bind-address=0) and an API server out of reach (a closed loopback port): it
// stays up, retrying and logging each failure with the error as a string, as it does with its
// probes on, until SIGTERM ends it with status 0. (Before, only unref'd backoff timers were
// pending and Node ended it with status 13, "unsettled top-level await", and no word of why.)
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { freePort } from "../controlplane/net.ts";
import { nodeCacheEnv } from "../support/node-env.ts";

const CLI = join(import.meta.dirname, "..", "..", "src", "cli.ts");

describe("dms-operator run without probes, its API server unreachable", () => {
  let dir: string | undefined;
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("keeps retrying with a warning per failure, and stops cleanly on SIGTERM", async () => {
    dir = await mkdtemp(join(tmpdir(), "dms-run-unreachable-"));
    const port = await freePort(); // free a moment ago, and nothing listens on it
    const kubeconfig = join(dir, "kubeconfig");
    await writeFile(
      kubeconfig,
      stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [{ name: "closed", cluster: { server: `https://127.0.0.1:${port}` } }],
        users: [{ name: "u", user: { token: "t" } }],
        contexts: [{ name: "closed", context: { cluster: "closed", user: "u" } }],
        "current-context": "closed",
      }),
      { mode: 0o600 },
    );
    const child = spawn(
      process.execPath,
      [
        CLI,
        "run",
        `--kubeconfig=${kubeconfig}`,
        "--metrics-bind-address=0",
        "--health-probe-bind-address=0",
        "--no-leader-elect",
        "--log-format=json",
        `--base-url=http://127.0.0.1:${port}`,
      ],
      {
        env: { PATH: process.env.PATH ?? "", ...nodeCacheEnv(), DMS_API_KEY: "unused" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on("exit", (code, signal) => resolve({ code, signal })),
    );
    let stdout = "";
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const records = () =>
      stdout
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    // The second failure of one list/watch: the process outlived the first backoff.
    const retried = new Promise<Record<string, unknown>>((resolve, reject) => {
      child.stdout.on("data", (chunk: Buffer) => {
        stdout += chunk.toString();
        const again = records().find(
          (r) => r.msg === "list/watch failed; retrying with backoff" && r.attempt === 2,
        );
        if (again) resolve(again);
      });
      void exited.then((exit) =>
        reject(
          new Error(`the operator exited (${JSON.stringify(exit)}) before retrying:\n${stdout}${stderr}`),
        ),
      );
    });
    const line = await retried;
    expect(line.level).toBe("warn");
    expect(line.error).toEqual(expect.stringContaining(`ECONNREFUSED 127.0.0.1:${port}`));
    expect(line).not.toHaveProperty("stacktrace");
    child.kill("SIGTERM");
    expect(await exited).toEqual({ code: 0, signal: null });
    expect(records().at(-1)?.msg).toBe("dms-operator stopped");
    expect(stderr).toBe("");
  }, 30_000);
});
