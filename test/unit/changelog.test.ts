// The CHANGELOG's Unreleased section names what users see change, each item read from what
// implements it: a flag of the plugin's command tree, a chart value, a directory, a README
// section, a CRD rule. An item the code lacks fails here as surely as one the section leaves out.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { PLUGIN_COMPLETION } from "../../src/commands/completion-table.ts";
import { RESOURCE_PREFIX } from "../../src/commands/words.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const read = (path: string) => readFileSync(join(ROOT, path), "utf8");
const unreleased = read("CHANGELOG.md").split("\n## [Unreleased]")[1]?.split("\n## [")[0] ?? "";
const flagsOf = (path: string) =>
  PLUGIN_COMPLETION.find((n) => n.path.join(" ") === path)?.flags.flatMap((f) => [f.long, f.short]) ?? [];

describe("the CHANGELOG's Unreleased section", () => {
  it("names the simulator in the chart and the kustomize component, and the README's kind section", () => {
    const values = parse(read("charts/dms-operator/values.yaml")) as { simulator?: { enabled?: boolean } };
    expect(values.simulator?.enabled).toBe(false);
    expect(existsSync(join(ROOT, "manifests/components/simulator/kustomization.yaml"))).toBe(true);
    expect(read("README.md")).toContain("\n## Try it on kind\n");
    for (const item of ["`simulator.enabled`", "`manifests/components/simulator`", '"Try it on kind"'])
      expect(unreleased).toContain(item);
    expect(unreleased).toMatch(/not for production/i);
  });

  it("names plan --offline, the verbs' several names, --all and -l, status's formats, and --service", () => {
    expect(flagsOf("plan")).toContain("--offline");
    for (const verb of ["suspend", "resume", "reconcile", "rollout-now"])
      expect(flagsOf(verb)).toEqual(expect.arrayContaining(["--all", "--selector", "-l"]));
    expect(flagsOf("status")).toEqual(expect.arrayContaining(["--output", "--no-headers"]));
    for (const command of ["logs", "revisions"]) expect(flagsOf(command)).toContain("--service");
    for (const item of [
      "`plan --offline`",
      "`file:line:col",
      "`--all` or\n  `-l <selector>`",
      "`-o wide|name|json|yaml` and `--no-headers`",
      "`--service`",
      "**Behaviour change**: `logs` and `revisions`",
      `\`${RESOURCE_PREFIX}/<name>\``,
      "tables when piped",
    ])
      expect(unreleased.replace(/\n {2}/g, " ")).toContain(item.replace(/\n {2}/g, " "));
  });

  it("names the CEL rule for source: github as a change at apply, and the errors that name the fix", () => {
    expect(read("src/crd/schema.ts")).toContain(
      "self.managementPolicy == 'ObserveOnly') || has(self.github)",
    );
    const text = unreleased.replace(/\n {2}/g, " ");
    expect(text).toContain("**Behaviour change at `kubectl apply`**: a `source: github` resource");
    for (const item of [
      "drop /v2",
      "no API key",
      "refused connection said once",
      "did you mean `sourceConfig`?",
    ])
      expect(text).toContain(item);
    expect(text).toContain("`stacktrace` only at error level");
    expect(text).toContain("--health-probe-bind-address 0");
  });
});
