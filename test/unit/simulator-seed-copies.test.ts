// The seed the chart's `simulator.enabled` and manifests/components/simulator start the simulator
// with: the two copies (a chart reads only its own files, kustomize only files under its
// kustomization) are src/simulator/seed.example.yaml plus the deployment manifests/samples'
// ObserveOnly sample observes, as `npm run demo` seeds it, and the simulator loads them.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { loadSeed } from "../../src/simulator/seed.ts";
import { SAMPLES_DIR, simulatorSampleObjects } from "../support/samples.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const EXAMPLE = join(ROOT, "src", "simulator", "seed.example.yaml");
const COPIES = [
  join(ROOT, "charts", "dms-operator", "files", "simulator-seed.yaml"),
  join(ROOT, "manifests", "components", "simulator", "seed.yaml"),
];

/** The names of the samples' deployments the operator only observes (managementPolicy: ObserveOnly). */
function observedNames(): string[] {
  const kustomization = parse(readFileSync(join(SAMPLES_DIR, "kustomization.yaml"), "utf8")) as {
    resources: string[];
  };
  return kustomization.resources
    .flatMap((file) => simulatorSampleObjects(file))
    .filter(
      (o) =>
        o.kind === "Deployment" &&
        (o.spec as { managementPolicy?: string }).managementPolicy === "ObserveOnly",
    )
    .map((o) => (o.metadata as { name: string }).name);
}

describe("the simulator seed of the chart and of manifests/components/simulator", () => {
  it.each(COPIES)(
    "%s is the example seed and the deployments the ObserveOnly samples observe",
    async (copy) => {
      const observed = observedNames();
      expect(observed.length).toBeGreaterThan(0);
      const example = parse(readFileSync(EXAMPLE, "utf8")) as { deployments: unknown[] };
      expect(parse(readFileSync(copy, "utf8"))).toEqual({
        ...example,
        deployments: [
          ...example.deployments,
          ...observed.map((name) => ({ name, source: "internal_template" })),
        ],
      });
      const seed = await loadSeed(copy);
      expect(seed.deployments?.map((d) => d.name)).toEqual(expect.arrayContaining(observed));
    },
  );
});
