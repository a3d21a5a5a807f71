/**
 * `npm run generate`: writes the CRD rendered from `schema.ts` to `crds/`. The one impure step
 * of CRD generation; everything it writes comes from `renderCrd()`.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CRD_FILE, renderCrd } from "./render.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const target = join(root, CRD_FILE);
await mkdir(dirname(target), { recursive: true });
await writeFile(target, renderCrd());
process.stdout.write(`wrote ${CRD_FILE}\n`);
