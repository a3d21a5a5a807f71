// The ValidatingAdmissionPolicies the install paths ship (manifests/ and the chart) spell out the
// field the API server defaults inside their atomic lists: `scope: "*"` of every rule of
// `matchConstraints.resourceRules`. A rule without it differs from the live one, so a second
// `kubectl apply` patches the policy again ("configured") and Argo CD, whose diff replaces an
// atomic list with the manifest's, shows the policy OutOfSync after every sync.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";

const ROOT = join(import.meta.dirname, "..", "..");
const CHART_TEMPLATES = join(ROOT, "charts", "dms-operator", "templates");

/** Every `.yaml` file under `dir`, recursively. */
function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return yamlFiles(path);
    return entry.name.endsWith(".yaml") ? [path] : [];
  });
}

/**
 * A chart template's YAML with its template actions taken out: a line holding only actions is
 * dropped, an action inside a line becomes `x`. Enough for the templates that spell a policy out.
 */
function templateYaml(text: string): string {
  return text
    .split("\n")
    .filter((line) => !/^\s*(\{\{.*?\}\}\s*)+$/.test(line))
    .map((line) => line.replace(/\{\{.*?\}\}/g, "x"))
    .join("\n");
}

interface Rule {
  scope?: unknown;
}
interface Policy {
  kind?: string;
  metadata?: { name?: string };
  spec?: { matchConstraints?: { resourceRules?: Rule[]; excludeResourceRules?: Rule[] } };
}

/** The ValidatingAdmissionPolicies of a YAML text, each with where it came from. */
function policiesIn(text: string, file: string): { where: string; policy: Policy }[] {
  return parseAllDocuments(text)
    .map((doc) => doc.toJS() as Policy | null)
    .filter((o): o is Policy => o?.kind === "ValidatingAdmissionPolicy")
    .map((policy) => ({ where: `${relative(ROOT, file)} ${policy.metadata?.name}`, policy }));
}

const policies = [
  ...[join(ROOT, "manifests"), join(ROOT, "charts", "dms-operator", "files")]
    .flatMap(yamlFiles)
    .flatMap((file) => policiesIn(readFileSync(file, "utf8"), file)),
  ...yamlFiles(CHART_TEMPLATES)
    .map((file) => ({ file, text: readFileSync(file, "utf8") }))
    .filter(({ text }) => /^kind: ValidatingAdmissionPolicy$/m.test(text))
    .flatMap(({ file, text }) => policiesIn(templateYaml(text), file)),
];

describe("the admission policies shipped", () => {
  it("are found: deletion protection, export ConfigMaps, shard labels (manifests and chart)", () => {
    const names = policies.map((p) => p.where);
    expect(names).toEqual(
      expect.arrayContaining([
        "manifests/crd/deletion-protection-policy.yaml dms-operator-deletion-protection",
        "manifests/rbac/export-configmap-policy.yaml dms-operator-export-configmaps",
        "manifests/components/sharding/shard-label-policy.yaml dms-operator-shard-labels",
        "charts/dms-operator/templates/shard-label-policy.yaml x-shard-labels",
      ]),
    );
  });

  it("spell out every rule's scope, the API server's default, so that a second apply changes nothing", () => {
    const missing = policies.flatMap(({ where, policy }) => {
      const match = policy.spec?.matchConstraints ?? {};
      return [...(match.resourceRules ?? []), ...(match.excludeResourceRules ?? [])]
        .filter((rule) => rule.scope === undefined)
        .map(() => where);
    });
    expect(missing, 'resourceRules without scope: "*"').toEqual([]);
  });
});
