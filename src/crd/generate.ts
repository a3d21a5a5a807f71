/**
 * `npm run generate`: writes every CRD rendered from the schemas (`schema.ts`,
 * `connection-schema.ts`) to `crds/`, the same text to the Helm chart's copy
 * (`charts/dms-operator/files/crds/`: a chart holds only files under its own directory), and each
 * kind's reference page to `docs/reference/`. The one impure step of CRD generation; everything it
 * writes comes from `renderCrd()` and `renderReference()`.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { referenceFile, renderReference } from "./reference.ts";
import { CRDS, crdFile, renderCrd } from "./render.ts";

/** Where the chart keeps its copy of crds/ (its templates/crds.yaml reads every file there). */
const CHART_CRDS = join("charts", "dms-operator", "files", "crds");
const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
for (const crd of CRDS) {
  const target = join(root, crdFile(crd));
  await mkdir(dirname(target), { recursive: true });
  await writeFile(target, renderCrd(crd));
  process.stdout.write(`wrote ${crdFile(crd)}\n`);
  const chartCopy = join(CHART_CRDS, basename(crdFile(crd)));
  await mkdir(dirname(join(root, chartCopy)), { recursive: true });
  await writeFile(join(root, chartCopy), renderCrd(crd));
  process.stdout.write(`wrote ${chartCopy}\n`);
  const reference = join(root, referenceFile(crd));
  await mkdir(dirname(reference), { recursive: true });
  await writeFile(reference, renderReference(crd));
  process.stdout.write(`wrote ${referenceFile(crd)}\n`);
}
