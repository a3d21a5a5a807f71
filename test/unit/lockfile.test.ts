// `npm ci` on a clean clone, on any platform the dev tools support, installs exactly what
// package-lock.json records; it refuses a lockfile that disagrees with package.json, and a
// lockfile that lacks a platform's optional binary (Biome's, Rolldown's…) fails on that
// platform only. Both are caught here, on any machine, before a contributor or CI meets them.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "..", "..");
const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as Record<string, unknown>;
interface Locked {
  version?: string;
  dev?: boolean;
  optional?: boolean;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}
const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as {
  name: string;
  version: string;
  lockfileVersion: number;
  packages: Record<string, Locked>;
};

/** Whether `version` satisfies `range` for the forms package.json uses: exact, ^x.y.z, ~x.y.z. */
function satisfies(version: string, range: string): boolean {
  const parse = (v: string) => v.split("-")[0]?.split(".").map(Number) ?? [];
  const m = /^([~^]?)(\d+\.\d+\.\d+(?:-[\w.]+)?)$/.exec(range);
  if (!m?.[2]) throw new Error(`unsupported range ${range} in package.json: use x.y.z, ^x.y.z or ~x.y.z`);
  const [op, base] = [m[1], m[2]];
  if (op === "") return version === base;
  const [a = 0, b = 0, c = 0] = parse(version);
  const [x = 0, y = 0, z = 0] = parse(base);
  const atLeast = a > x || (a === x && (b > y || (b === y && c >= z)));
  if (!atLeast) return false;
  if (op === "~") return a === x && b === y;
  return x > 0 ? a === x : y > 0 ? a === 0 && b === y : a === 0 && b === 0 && c === z;
}

/** Where npm resolves `name` from the package at `from` (nested node_modules first, then up). */
function resolveFrom(from: string, name: string): string | undefined {
  for (let dir = from; ; ) {
    const candidate = `${dir ? `${dir}/` : ""}node_modules/${name}`;
    if (lock.packages[candidate]) return candidate;
    if (!dir) return undefined;
    const cut = dir.lastIndexOf("/node_modules/");
    dir = cut < 0 ? "" : dir.slice(0, cut);
  }
}

describe("package-lock.json", () => {
  it("records package.json's name, version and every dependency range as they are", () => {
    const top = lock.packages[""] ?? {};
    expect(lock.lockfileVersion).toBe(3);
    expect({ name: lock.name, version: lock.version }).toEqual({
      name: manifest.name,
      version: manifest.version,
    });
    for (const field of ["dependencies", "devDependencies", "optionalDependencies"] as const)
      expect(top[field] ?? {}, `package-lock.json ${field}: run npm install`).toEqual(manifest[field] ?? {});
  });

  it("pins, for every direct dependency, a version its range accepts", () => {
    const ranges = {
      ...(manifest.dependencies as Record<string, string>),
      ...(manifest.devDependencies as Record<string, string>),
    };
    for (const [name, range] of Object.entries(ranges)) {
      const locked = lock.packages[`node_modules/${name}`]?.version;
      expect(locked, `${name} is not in package-lock.json: run npm install`).toBeDefined();
      expect(satisfies(locked ?? "", range), `${name}@${locked} does not satisfy ${range}`).toBe(true);
    }
  });

  it("records every platform's optional package of every locked package (npm ci works on any of them)", () => {
    const missing: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages)) {
      for (const [name, range] of Object.entries(entry.optionalDependencies ?? {})) {
        const at = resolveFrom(path, name);
        const version = at ? lock.packages[at]?.version : undefined;
        // A range npm cannot check here (a tag, a URL) only has to be present.
        const checkable = /^[~^]?\d+\.\d+\.\d+(-[\w.]+)?$/.test(range);
        if (!version || (checkable && !satisfies(version, range)))
          missing.push(`${name}@${range} (of ${path || "the project"})`);
      }
    }
    expect(missing, "pick versions whose platform packages all exist, then npm install").toEqual([]);
  });

  it("the range check used above accepts and refuses as npm does", () => {
    expect(satisfies("2.5.15", "2.5.15")).toBe(true);
    expect(satisfies("2.6.8", "2.5.15")).toBe(false);
    expect(satisfies("2.9.0", "^2.5.1")).toBe(true);
    expect(satisfies("3.0.0", "^2.5.1")).toBe(false);
    expect(satisfies("0.34.60", "^0.34.52")).toBe(true);
    expect(satisfies("0.35.0", "^0.34.52")).toBe(false);
    expect(satisfies("1.2.9", "~1.2.3")).toBe(true);
    expect(satisfies("1.3.0", "~1.2.3")).toBe(false);
  });
});
