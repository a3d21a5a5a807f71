/**
 * `npm run generate`: writes every CRD rendered from the schemas (`schema.ts`,
 * `connection-schema.ts`) to `crds/`, and the same text to the Helm chart's copy
 * (`charts/dms-operator/files/crds/`: a chart holds only files under its own directory). The one
 * impure step of CRD generation; everything it writes comes from `renderCrd()`.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
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
}
