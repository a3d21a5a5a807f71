/**
 * The versions a test compares a file with. The package and the chart carry the version being
 * made (between releases the next one with a pre-release tag, `0.2.0-dev`); what names a published
 * artifact — the docs' install commands, the image tag of manifests/default — names the last
 * release: the newest version CHANGELOG.md has a section for (`## [0.1.0]`).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dirname, "..", "..");

/** package.json's `version`: what `--version` prints and the chart carries. */
export const PACKAGE_VERSION = (
  JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }
).version;

/** The last release: the first `## [x.y.z]` heading of CHANGELOG.md (not `[Unreleased]`). */
export const LAST_RELEASE = lastRelease(readFileSync(join(ROOT, "CHANGELOG.md"), "utf8"));

/** The version of the first released section of a changelog's text. */
export function lastRelease(changelog: string): string {
  const version = /^## \[(\d+\.\d+\.\d+)\]/m.exec(changelog)?.[1];
  if (version === undefined) throw new Error("CHANGELOG.md has no section of a release (## [x.y.z])");
  return version;
}
