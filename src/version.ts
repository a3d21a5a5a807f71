/**
 * The operator's version: the `version` of the package.json shipped next to `src/` and `dist/`
 * (one level up from either), read once at start-up. Printed by `--version` and in the
 * start-up log line, so a running pod says which release it is.
 */

function readVersion(): string {
  const text = process
    .getBuiltinModule("node:fs")
    .readFileSync(new URL("../package.json", import.meta.url), "utf8");
  const version = (JSON.parse(text) as { version?: unknown }).version;
  if (typeof version !== "string" || version === "") throw new Error("package.json has no version");
  return version;
}

/** The package version, e.g. `0.1.0`. */
export const VERSION: string = readVersion();
