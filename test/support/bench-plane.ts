/**
 * A control plane of a benchmark's own: started, the CRDs installed, a client on it (see
 * `planeClient`, bench/operator-run.ts) and a work directory; `stop()` stops the plane and
 * removes the directory. A start that fails half-way stops what it started.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { planeClient } from "../bench/operator-run.ts";
import { ControlPlane } from "../controlplane/harness.ts";

/** Starts it for the benchmark `name` (the work directory `dms-<name>-…`, the client's agent `dms-<name>-bench`). */
export async function startBenchPlane(name: string) {
  const plane = await ControlPlane.start();
  const work = mkdtempSync(join(tmpdir(), `dms-${name}-`));
  const stop = async () => {
    await plane.stop();
    rmSync(work, { recursive: true, force: true });
  };
  try {
    await plane.installCrds();
    const { client, apiMetrics } = await planeClient(plane, `dms-${name}-bench`);
    return { plane, client, apiMetrics, work, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
