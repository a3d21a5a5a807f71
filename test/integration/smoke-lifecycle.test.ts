// The harness's own promises: a restarted API server keeps its data, and neither stop() nor an
// interrupted run leaves a process or a temp dir behind. Each case runs a control plane of its own.
import { execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, describe, it } from "vitest";
import { ControlPlane } from "../controlplane/harness.ts";
import { waitFor } from "../support/cluster.ts";

/** Processes whose command line mentions `dir` (etcd's data dir and the API server's certs live there). */
function processesUsing(dir: string): string[] {
  return execFileSync("ps", ["-eo", "pid=,args="], { encoding: "utf8" })
    .split("\n")
    .filter((line) => line.includes(dir) && !line.includes("dms-controlplane-watchdog"));
}

// Each test starts a control plane of its own (or a process holding one) and looks only at its
// processes and directory: they run at once, their start-ups overlapping.
describe.concurrent("control plane lifecycle", () => {
  const planes: ControlPlane[] = [];
  afterAll(async () => {
    await Promise.all(planes.map((plane) => plane.stop()));
  });

  it("keeps data across an API server restart, on the same address and credentials", async ({ expect }) => {
    const plane = await ControlPlane.start();
    planes.push(plane);
    const ok = async (args: string[]) => {
      const result = await plane.kubectl(args);
      expect(result.stderr).toBe("");
      return result.stdout;
    };
    await ok(["create", "namespace", "restart"]);
    await ok(["create", "configmap", "kept", "-n", "restart", "--from-literal=answer=42"]);
    const before = await ok(["get", "configmap", "kept", "-n", "restart", "-o", "jsonpath={.metadata.uid}"]);

    await plane.restartApiServer();

    const after = await ok([
      "get",
      "configmap",
      "kept",
      "-n",
      "restart",
      "-o",
      "jsonpath={.metadata.uid} {.data.answer}",
    ]);
    expect(after).toBe(`${before} 42`);
  });

  it("stop() removes every process and the temp dir, and is idempotent", async ({ expect }) => {
    const plane = await ControlPlane.start();
    planes.push(plane);
    const dir = dirname(plane.kubeconfigPath);
    expect(processesUsing(dir)).toHaveLength(2); // etcd and kube-apiserver

    await Promise.all([plane.stop(), plane.stop()]);

    expect(processesUsing(dir)).toEqual([]);
    expect(existsSync(dir)).toBe(false);
    await expect(plane.stop()).resolves.toBeUndefined();
  });

  for (const signal of ["SIGINT", "SIGKILL"] as const) {
    it(`leaves no process or temp dir behind when the test process gets ${signal}`, async ({ expect }) => {
      const child = spawn(
        process.execPath,
        [join(import.meta.dirname, "..", "support", "hold-control-plane.ts")],
        {
          stdio: ["ignore", "pipe", "inherit"],
        },
      );
      const exited = new Promise<string | null>((resolve) => child.on("exit", (_code, sig) => resolve(sig)));
      let output = "";
      child.stdout.on("data", (chunk: Buffer) => {
        output += chunk.toString();
      });
      const started = await waitFor(
        () => {
          const line = output.split("\n")[0];
          return output.includes("\n") && line ? (JSON.parse(line) as { kubeconfigPath: string }) : undefined;
        },
        { timeoutMs: 30_000, description: "the child's control plane" },
      );
      const dir = dirname(started.kubeconfigPath);
      expect(processesUsing(dir)).toHaveLength(2);

      child.kill(signal);

      expect(await exited).toBe(signal); // Ctrl-C still ends the run
      // SIGKILL runs no handler: the out-of-tree watchdog notices within about a second.
      await waitFor(() => processesUsing(dir).length === 0 && !existsSync(dir), {
        timeoutMs: 10_000,
        description: `no process and no directory left of ${dir}`,
      });
    });
  }
});
