import { describe, expect, it } from "vitest";
import { parseManifests } from "../../src/gitops/manifests.ts";
import { objectNameFor } from "../../src/gitops/names.ts";
import { RULES_NOT_CHECKED } from "../../src/gitops/validate.ts";

const ok = `apiVersion: dms.dev/v1alpha1
kind: Deployment
metadata:
  name: support-agent
spec:
  source: internal_template
`;

/** `file:line:column message` of each problem, for compact expectations. */
const problems = (text: string) =>
  parseManifests(text, "f.yaml").problems.map((p) => `${p.line}:${p.column} ${p.message}`);

describe("parseManifests", () => {
  it("keeps only dms.dev Deployments, with the line their document starts at", () => {
    const text = [
      "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 1}",
      "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {a: b}",
      `# a comment before the resource\n${ok}`,
      "",
    ].join("\n---\n");
    const parsed = parseManifests(text, "f.yaml");
    expect(parsed.problems).toEqual([]);
    expect(parsed.resources.map((r) => [r.file, r.line, r.resource.metadata.name])).toEqual([
      ["f.yaml", 12, "support-agent"],
    ]);
  });

  it("reads JSON manifests too", () => {
    const json = JSON.stringify({
      apiVersion: "dms.dev/v1alpha1",
      kind: "Deployment",
      metadata: { name: "a" },
      spec: { source: "internal_template" },
    });
    expect(parseManifests(json, "a.json").resources).toHaveLength(1);
  });

  const cases: Array<{ reason: string; text: string; expected: unknown[] }> = [
    {
      reason: "a wrong type is reported at the value's key, naming the field",
      text: `${ok}  sourceConfig:\n    resourceSpec:\n      cpu: "two"\n`,
      expected: ["9:7 spec.sourceConfig.resourceSpec.cpu: Expected number", `9:7 ${RULES_NOT_CHECKED}`],
    },
    {
      reason: "an enum lists its allowed values",
      text: ok.replace("source: internal_template", "source: gitlab"),
      expected: [
        "6:3 spec.source: must be one of github, external_docker, internal_docker, internal_source, internal_template",
        `6:3 ${RULES_NOT_CHECKED}`,
      ],
    },
    {
      reason: "a missing required field is reported at its parent",
      text: "apiVersion: dms.dev/v1alpha1\nkind: Deployment\nmetadata:\n  name: a\nspec:\n  name: x\n",
      expected: ["5:1 spec.source: required field is missing", `5:1 ${RULES_NOT_CHECKED}`],
    },
    {
      reason: "a typo in a field name is an unknown field, as kubectl's strict validation says",
      text: `${ok}  sourceConfig:\n    repoURL: https://x\n`,
      expected: [
        "8:5 spec.sourceConfig.repoURL: unknown field (did you mean `repoUrl`? known here: integrationId, repoUrl, buildOnPush, customUrl, listenerId, listenerConfig, installCommand, buildCommand, resourceSpec, deploymentType)",
      ],
    },
    {
      reason: "CEL rule: source github without its repository, naming both ways to give it",
      text: ok.replace("source: internal_template", "source: github"),
      expected: [
        "6:3 spec.source github needs its repository: set spec.github (repository owner/name and integrationId), or sourceConfig.repoUrl and sourceConfig.integrationId",
      ],
    },
    {
      reason:
        "CEL rule: source github with sourceConfig.repoUrl and integrationId, or ObserveOnly, is accepted",
      text: `${ok.replace("source: internal_template", "source: github")}  managementPolicy: ObserveOnly\n---\n${ok.replace("source: internal_template", "source: github")}  sourceConfig:\n    repoUrl: https://github.com/acme/a\n    integrationId: 0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e\n`,
      expected: [],
    },
    {
      reason: "a misspelt field names the one it is nearest to",
      text: `${ok}  sourcConfig:\n    repoUrl: https://x\n`,
      expected: [
        expect.stringMatching(
          /^7:3 spec\.sourcConfig: unknown field \(did you mean `sourceConfig`\? known here: /,
        ),
      ],
    },
    {
      reason: "a field nothing is near gets the list alone",
      text: `${ok}  flavour: vanilla\n`,
      expected: [expect.stringMatching(/^7:3 spec\.flavour: unknown field \(known here: /)],
    },
    {
      reason: "fields of Kubernetes-shaped objects are kept as given, never unknown",
      text: `${ok}  sourceConfig:\n    resourceSpec:\n      volumes:\n        - name: v\n          emptyDir: {medium: Memory, anything: 1}\n`,
      expected: [],
    },
    {
      reason: "CEL rule: value and valueFrom together, at the list item",
      text: `${ok}  secrets:\n    - name: A\n      value: x\n      valueFrom: {secretKeyRef: {name: s, key: k}}\n`,
      expected: ["8:7 spec.secrets[0]: set exactly one of value or valueFrom.secretKeyRef"],
    },
    {
      reason: "CEL rule: a request above its limit, at the request",
      text: `${ok}  sourceConfig:\n    resourceSpec:\n      cpu: 4\n      cpuLimit: 2\n`,
      expected: [
        "9:7 spec.sourceConfig.resourceSpec.cpu must not exceed spec.sourceConfig.resourceSpec.cpuLimit: lower cpu or raise cpuLimit",
      ],
    },
    {
      reason: "CEL rule: secretReferences only with external_docker",
      text: `${ok}  secretReferences:\n    - {name: A, secretName: s, secretKey: k}\n`,
      expected: [
        "7:3 spec.secretReferences is allowed only with spec.source external_docker: remove it or use spec.secrets",
      ],
    },
    {
      reason: "list-map keys: a duplicate secret name, at the duplicate",
      text: `${ok}  secrets:\n    - {name: A, value: x}\n    - {name: A, value: y}\n`,
      expected: ['9:8 spec.secrets[1].name: duplicate name "A" (also at spec.secrets[0])'],
    },
    {
      reason: "metadata.name must be a Kubernetes name",
      text: ok.replace("name: support-agent", "name: Support_Agent"),
      expected: [
        `4:3 "Support_Agent" is not a valid Kubernetes object name (lower-case letters, digits, '-' and '.', at most 253 characters); keep the service's name in spec.name`,
      ],
    },
    {
      reason: "a resource without metadata.name cannot be applied",
      text: "apiVersion: dms.dev/v1alpha1\nkind: Deployment\nspec:\n  source: internal_template\n",
      expected: ["1:1 metadata.name is required"],
    },
    {
      reason: "another version of the group is not silently ignored",
      text: ok.replace("v1alpha1", "v1beta1"),
      expected: ["1:1 apiVersion must be dms.dev/v1alpha1"],
    },
    {
      reason: "a YAML syntax error is reported at its position",
      text: `${ok}---\na: [\nb: c\n`,
      expected: [
        "9:1 document 2 (from line 7): Flow sequence in block collection must be sufficiently indented and end with a ]",
      ],
    },
    {
      reason: "a duplicate key is a syntax error (the API server would keep only one)",
      text: `${ok}  source: internal_docker\n`,
      expected: ["7:3 document 1 (from line 1): Map keys must be unique"],
    },
  ];
  it.each(cases)("$reason", ({ text, expected }) => {
    expect(problems(text)).toEqual(expected);
  });

  it("reports every problem of a document in line order and plans none of it", () => {
    const text = `${ok.replace("name: support-agent", "name: BAD")}  sourceConfig:\n    resourceSpec:\n      cpu: "x"\n`;
    const parsed = parseManifests(text, "f.yaml");
    expect(parsed.resources).toEqual([]);
    expect(parsed.problems.map((p) => p.line)).toEqual([4, 9, 9]);
    expect(parsed.problems.at(-1)?.message).toBe(RULES_NOT_CHECKED);
  });
});

describe("objectNameFor", () => {
  it("keeps a valid name and derives a distinct valid one otherwise", () => {
    expect(objectNameFor("support-agent")).toBe("support-agent");
    const a = objectNameFor("My_Agent");
    const b = objectNameFor("my-agent");
    expect(a).toMatch(/^my-agent-[0-9a-f]{6}$/);
    expect(a).not.toBe(b);
    expect(objectNameFor("日本語")).toMatch(/^deployment-[0-9a-f]{6}$/);
    expect(objectNameFor("x".repeat(300))).toHaveLength(253);
    expect(objectNameFor("support-agent", "-secrets")).toBe("support-agent-secrets");
  });
});
