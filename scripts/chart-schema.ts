/**
 * Part of `npm run generate`: writes the chart's `config` schema (charts/dms-operator/
 * values.schema.json, `properties.config`) from the table of settings (src/commands/settings.ts),
 * leaving the rest of the file as it is. test/tools/helm-chart.test.ts checks the file holds it.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { chartConfigSchema } from "../src/commands/settings.ts";

const file = join(import.meta.dirname, "..", "charts", "dms-operator", "values.schema.json");
const schema = JSON.parse(await readFile(file, "utf8")) as { properties: Record<string, unknown> };
schema.properties.config = chartConfigSchema();
await writeFile(file, `${JSON.stringify(schema, null, 2)}\n`);
process.stdout.write("wrote charts/dms-operator/values.schema.json (config)\n");
