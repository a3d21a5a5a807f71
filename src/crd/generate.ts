/**
 * `npm run generate`: writes every CRD rendered from the schemas (`schema.ts`,
 * `connection-schema.ts`) to `crds/`, the same text to the Helm chart's copy
 * (`charts/dms-operator/files/crds/`: a chart holds only files under its own directory), and each
 * kind's reference page to `docs/reference/`; it copies the deletion protection policy shipped
 * with the CRDs (`manifests/crd/deletion-protection-policy.yaml`) and the policy narrowing the
 * operator's ConfigMap writes (`manifests/rbac/export-configmap-policy.yaml`) into the chart's
 * files too. The
 * one impure step of CRD generation; everything it writes comes from `renderCrd()`,
 * `renderReference()` and those two manifests.
 */
import { copyFile, mkdir, writeFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { referenceFile, renderReference } from "./reference.ts";
import { CRDS, crdFile, renderCrd } from "./render.ts";

/** Where the chart keeps its copy of crds/ (its templates/crds.yaml reads every file there). */
const CHART_CRDS = join("charts", "dms-operator", "files", "crds");
/** The deletion protection policy, and the chart's copy (templates/deletion-protection-policy.yaml reads it). */
const DELETION_PROTECTION_POLICY = join("manifests", "crd", "deletion-protection-policy.yaml");
/** The export ConfigMap policy (templates/export-configmap-policy.yaml reads the chart's copy). */
const EXPORT_CONFIG_MAP_POLICY = join("manifests", "rbac", "export-configmap-policy.yaml");
/** The chart's copy of a policy manifest. */
const chartFile = (manifest: string) => join("charts", "dms-operator", "files", basename(manifest));
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
for (const policy of [DELETION_PROTECTION_POLICY, EXPORT_CONFIG_MAP_POLICY]) {
  await copyFile(join(root, policy), join(root, chartFile(policy)));
  process.stdout.write(`wrote ${chartFile(policy)}\n`);
}
