import { tmpdir } from "node:os";
import { join } from "node:path";
import { defineConfig } from "vitest/config";

// Node's compile cache for the test workers and the Node processes the tests start (the CLI, the
// operator, npm): a start reuses what an earlier one compiled. Entries are checked against the
// source, so a changed file is compiled again.
process.env.NODE_COMPILE_CACHE ??= join(tmpdir(), "dms-operator-node-compile-cache");

// Five projects: `unit` and `contract` need nothing but Node; `bench` checks the benchmarks' own
// tools against a live process (profiles of a child's CPU and heap: real samples, so it stays out
// of `unit`, whose files are deterministic); `tools` runs the Go-built tools (helm, promtool,
// kubectl) that test/controlplane/binaries.ts builds on first use, without a cluster; `cluster`
// runs against a real kube-apiserver + etcd that the global setup starts once per run (see
// test/controlplane/).
export default defineConfig({
  test: {
    // A worker per core for the unit, contract and tools files (vitest's default leaves one core to
    // itself, which on two cores runs them one at a time). The cluster project still runs one
    // file at a time: fileParallelism: false below.
    maxWorkers: "100%",
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
        },
      },
      {
        test: {
          name: "contract",
          include: ["test/contract/**/*.test.ts"],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: "bench",
          include: ["test/bench/**/*.test.ts"],
          testTimeout: 60_000,
        },
      },
      {
        test: {
          name: "tools",
          include: ["test/tools/**/*.test.ts"],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: "cluster",
          include: ["test/integration/**/*.test.ts", "test/e2e/**/*.test.ts"],
          globalSetup: ["test/controlplane/global-setup.ts"],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
