/**
 * `npm run generate`: writes every CRD rendered from the schemas (`schema.ts`,
 * `connection-schema.ts`) to `crds/`. The one impure step of CRD generation; everything it writes
 * comes from `renderCrd()`.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CRDS, crdFile, renderCrd } from "./render.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
for (const crd of CRDS) {
  const target = join(root, crdFile(crd));
  await mkdir(dirname(target), { recursive: true });
  await writeFile(target, renderCrd(crd));
  process.stdout.write(`wrote ${crdFile(crd)}\n`);
}
