/**
 * Throughput of the simulator's listing: the simulator runs in a child process (so the load
 * generator does not share its event loop) with 250 deployments; 32 keep-alive connections page
 * through GET /v2/deployments with limit=20, then limit=100.
 */
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { type Benchmark, type BenchRow, driveGet, spawnServing } from "./harness.ts";

const DEPLOYMENTS = 250;
const CONCURRENCY = 32;
const MAX_REQUESTS = 1_000_000;
const WARMUP_MS = 1000;

const offsets = (limit: number) =>
  Array.from({ length: Math.ceil(DEPLOYMENTS / limit) }, (_, i) => i * limit);

/** See the module comment. Target: at least 5,000 requests/s for the page of 20. */
export const benchmark: Benchmark = {
  name: "simulator",
  description: `GET /v2/deployments against the simulator (${DEPLOYMENTS} deployments, ${CONCURRENCY} connections)`,
  async run({ durationSeconds }) {
    const script = fileURLToPath(new URL("./simulator-server.ts", import.meta.url));
    const server = await spawnServing(script, ["--deployments", String(DEPLOYMENTS)]);
    const base = String(server.ready.url);
    const rows: BenchRow[] = [];
    try {
      for (const limit of [20, 100]) {
        const urls = offsets(limit).map((offset) => `${base}/v2/deployments?limit=${limit}&offset=${offset}`);
        const spec = { urls, concurrency: CONCURRENCY, maxRequests: MAX_REQUESTS };
        await driveGet({ ...spec, variant: "warm-up", durationMs: WARMUP_MS });
        rows.push(
          await driveGet({ ...spec, variant: `list limit=${limit}`, durationMs: durationSeconds * 1000 }),
        );
      }
    } finally {
      await server.stop();
    }
    return {
      rows,
      details: {
        deployments: DEPLOYMENTS,
        concurrency: CONCURRENCY,
        cpus: availableParallelism(),
        target: 5000,
      },
    };
  },
};
