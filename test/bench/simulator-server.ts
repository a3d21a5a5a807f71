/**
 * The simulator as the benchmark's child process: seeds N deployments, prints `{"url": ...}` on
 * one line, and exits when stdin closes (so it never outlives the benchmark that spawned it).
 *
 *   node test/bench/simulator-server.ts [--deployments 250]
 */
import { parseArgs } from "node:util";
import type { SeedDeployment } from "../../src/simulator/seed.ts";
import { startSimulator } from "../../src/simulator/server.ts";

const { values } = parseArgs({ options: { deployments: { type: "string", default: "250" } } });
const count = Number(values.deployments);
const sources = ["github", "external_docker", "internal_docker", "internal_source"] as const;

const deployments: SeedDeployment[] = Array.from({ length: count }, (_, i) => {
  const source = sources[i % sources.length] ?? "github";
  return {
    name: `bench-agent-${String(i).padStart(4, "0")}`,
    source,
    source_config: {
      repo_url: source === "github" ? `https://github.com/acme/agent-${i}` : null,
      resource_spec: {
        min_scale: 1,
        max_scale: 2 + (i % 3),
        cpu: 1,
        memory_mb: 1024,
        labels: { team: "bench" },
      },
    },
    source_revision_config:
      source === "github"
        ? { repo_ref: "main", graph_config_path: "langgraph.json" }
        : { image_uri: `img:${i}` },
    secrets: [{ name: "API_TOKEN", value: `token-${i}` }],
    image_version: "0.4.2",
  };
});

const sim = await startSimulator({ seed: { deployments } });
process.stdout.write(`${JSON.stringify({ url: sim.url, deployments: count })}\n`);
process.stdin.resume();
process.stdin.on("end", () => {
  sim.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
