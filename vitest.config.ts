import { defineConfig } from "vitest/config";

// Three projects: `unit` and `contract` need nothing but Node; `cluster` runs against a real
// kube-apiserver + etcd that the global setup starts once per run (see test/controlplane/).
export default defineConfig({
  test: {
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
