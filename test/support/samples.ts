/**
 * The samples of `manifests/samples` as the simulator overlay (`manifests/samples-simulator`)
 * renders them: each sample's documents with the overlay's patches merged in, the tenant's values
 * (`# replace:`) replaced by the simulator seed's. Tests that run a sample against the simulator
 * apply these, as `npm run demo` applies the overlay itself with kubectl.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse, parseAllDocuments, stringify } from "yaml";

const ROOT = join(import.meta.dirname, "..", "..");
export const SAMPLES_DIR = join(ROOT, "manifests", "samples");
export const SIMULATOR_OVERLAY_DIR = join(ROOT, "manifests", "samples-simulator");

type Obj = Record<string, unknown>;

/** `patch` merged into `base` as kustomize merges a patch into a custom resource: maps merged, anything else replaced. */
export function merged(base: unknown, patch: unknown): unknown {
  const isMap = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
  if (!isMap(base) || !isMap(patch)) return patch;
  const out: Obj = { ...base };
  for (const [key, value] of Object.entries(patch)) out[key] = merged(out[key], value);
  return out;
}

/** The overlay's patches, each an object naming its target by kind and `metadata.name`. */
export function overlayPatches(): Obj[] {
  const kustomization = parse(readFileSync(join(SIMULATOR_OVERLAY_DIR, "kustomization.yaml"), "utf8"));
  return (kustomization.patches as { patch: string }[]).map((p) => parse(p.patch) as Obj);
}

const key = (o: Obj) => `${o.kind}/${(o.metadata as { name?: string } | undefined)?.name}`;

/** One object of a sample with the overlay's patch for it, if any. */
export function withSimulatorValues(object: Obj, patches: Obj[] = overlayPatches()): Obj {
  const patch = patches.find((p) => key(p) === key(object));
  return patch ? (merged(object, patch) as Obj) : object;
}

/** The objects of a sample file (`internal-docker.yaml`) with the simulator's values. */
export function simulatorSampleObjects(file: string): Obj[] {
  const patches = overlayPatches();
  return parseAllDocuments(readFileSync(join(SAMPLES_DIR, file), "utf8")).map((doc) =>
    withSimulatorValues(doc.toJS() as Obj, patches),
  );
}

/** A sample file with the simulator's values, as YAML text for `kubectl apply -f -`. */
export const simulatorSample = (file: string): string =>
  simulatorSampleObjects(file)
    .map((o) => stringify(o))
    .join("---\n");
