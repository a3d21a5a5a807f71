import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { unprintableIn } from "../../src/api/printable.ts";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import {
  type PlanReport,
  planCounts,
  planDocument,
  planExitStatus,
  renderPlanJson,
  renderPlanText,
} from "../../src/gitops/plan-report.ts";
import {
  type ReviewAction,
  type ReviewEntry,
  type ReviewInputs,
  reviewResource,
  skippedEntry,
} from "../../src/gitops/review.ts";
import { NO_SECRETS_HASH, revisionConfigHash } from "../../src/reconcile/revision-history.ts";
import { hashSecrets, keyedSecretDigest } from "../../src/reconcile/secret-hash.ts";

const INSTALL_KEY = Buffer.alloc(32, 7);

import { remote } from "./plan-fixtures.ts";

const SECRET_VALUE = "sk-do-not-print-4f1e";

const deployed = remote({
  name: "agent",
  source: "external_docker",
  source_config: { resource_spec: { cpu: 1 } },
  source_revision_config: { image_uri: "r/agent:1" },
  secrets: [{ name: "API_KEY", value: "********" }],
});

const spec = (over: Partial<DeploymentSpec> = {}): DeploymentSpec => ({
  source: "external_docker",
  sourceConfig: { resourceSpec: { cpu: 1 } },
  sourceRevisionConfig: { imageUri: "r/agent:1" },
  ...over,
});

const inputs = (s: DeploymentSpec, over: Partial<ReviewInputs> = {}): ReviewInputs => ({
  file: "deploy/agent.yaml",
  line: 1,
  resource: { metadata: { name: "agent" }, spec: s },
  namespace: "team",
  observed: deployed,
  adopted: false,
  warnings: [],
  ...over,
});

const byRef = { name: "API_KEY", valueFrom: { secretKeyRef: { name: "agent-secrets", key: "API_KEY" } } };
const secretData = { "agent-secrets": { API_KEY: SECRET_VALUE } };
/** A masked secret beside one whose value the service shows. */
const withLiteral = remote({
  ...deployed,
  secrets: [
    { name: "API_KEY", value: "********" },
    { name: "MODE", value: "fast" },
  ],
});

const cases: Array<{
  reason: string;
  input: ReviewInputs;
  action: ReviewAction;
  newRevision?: boolean;
  summary?: string[];
  check?: (e: ReturnType<typeof reviewResource>) => void;
}> = [
  {
    reason: "no deployment of that name: create, listing what is set",
    input: inputs(spec(), { observed: null }),
    action: "create",
    summary: [
      "create deployment agent (source external_docker)",
      "sourceConfig.resourceSpec.cpu: (unset) → 1",
      "sourceRevisionConfig.imageUri: (unset) → r/agent:1",
    ],
    // -o json lists them as changes too, field by field.
    check: (e) =>
      expect(e.changes).toEqual([
        {
          group: "source_config",
          field: "sourceConfig.resourceSpec.cpu",
          line: "sourceConfig.resourceSpec.cpu: (unset) → 1",
        },
        {
          group: "source_revision_config",
          field: "sourceRevisionConfig.imageUri",
          line: "sourceRevisionConfig.imageUri: (unset) → r/agent:1",
        },
      ]),
  },
  {
    reason: "found by name, nothing differs: adopt with no write",
    input: inputs(spec(), { adopted: true }),
    action: "adopt",
    check: (e) => expect(e.adopt).toBe(true),
  },
  {
    reason: "already managed and equal: nothing to do",
    input: inputs(spec()),
    action: "noop",
  },
  {
    reason: "a resource_spec change needs no new revision",
    input: inputs(spec({ sourceConfig: { resourceSpec: { cpu: 2 } } })),
    action: "patch",
    newRevision: false,
    summary: ["sourceConfig.resourceSpec.cpu: 1 → 2"],
  },
  {
    reason: "an image change makes a new revision",
    input: inputs(spec({ sourceRevisionConfig: { imageUri: "r/agent:2" } })),
    action: "patch",
    newRevision: true,
    summary: ["sourceRevisionConfig.imageUri: r/agent:1 → r/agent:2"],
  },
  {
    reason: "adopting a deployment that differs: adopt and patch",
    input: inputs(spec({ sourceConfig: { resourceSpec: { cpu: 2 } } }), { adopted: true }),
    action: "patch",
    check: (e) => expect(e.adopt).toBe(true),
  },
  {
    reason: "secrets read from the cluster, matching the applied hash: nothing to do",
    input: inputs(spec({ secrets: [byRef] }), {
      secretData,
      live: { appliedSecretsHash: hashSecrets([{ name: "API_KEY", value: SECRET_VALUE }]) },
    }),
    action: "noop",
    check: (e) => expect(e.secrets).toBe("checked"),
  },
  {
    reason: "secrets read, rotated since the applied hash: patch secrets, no new revision",
    input: inputs(spec({ secrets: [byRef] }), {
      secretData,
      live: { appliedSecretsHash: hashSecrets([{ name: "API_KEY", value: "old" }]) },
    }),
    action: "patch",
    newRevision: false,
    summary: ["secrets: rotated API_KEY"],
  },
  {
    reason: "a keyed applied digest, the install key read: compared, nothing to do",
    input: inputs(spec({ secrets: [byRef] }), {
      secretData,
      secretDigest: keyedSecretDigest(INSTALL_KEY),
      live: {
        appliedSecretsHash: keyedSecretDigest(INSTALL_KEY).digest([{ name: "API_KEY", value: SECRET_VALUE }]),
      },
    }),
    action: "noop",
    check: (e) => expect(e.secrets).toBe("checked"),
  },
  {
    reason: "a keyed applied digest, the install key read, values rotated: patch secrets",
    input: inputs(spec({ secrets: [byRef] }), {
      secretData,
      secretDigest: keyedSecretDigest(INSTALL_KEY),
      live: {
        appliedSecretsHash: keyedSecretDigest(INSTALL_KEY).digest([{ name: "API_KEY", value: "old" }]),
      },
    }),
    action: "patch",
    summary: ["secrets: rotated API_KEY"],
  },
  {
    reason: "a keyed applied digest without the install key: the values' equality is unknown, not a rotation",
    input: inputs(spec({ secrets: [byRef] }), {
      secretData,
      live: {
        appliedSecretsHash: keyedSecretDigest(INSTALL_KEY).digest([{ name: "API_KEY", value: SECRET_VALUE }]),
      },
    }),
    action: "noop",
    check: (e) => {
      expect(e.secrets).toBe("not-checked");
      expect(e.warnings.join()).toMatch(
        /values are not checked \(status.appliedSecretsHash is keyed with the operator's install key/,
      );
    },
  },
  {
    reason: "a plain digest recorded before the key, read without it: still compared",
    input: inputs(spec({ secrets: [byRef] }), {
      secretData,
      live: { appliedSecretsHash: hashSecrets([{ name: "API_KEY", value: "old" }]) },
    }),
    action: "patch",
    summary: ["secrets: rotated API_KEY"],
  },
  {
    reason: "masked values and no applied hash: the operator sends once, and plan says why",
    input: inputs(spec({ secrets: [byRef] }), { secretData }),
    action: "patch",
    check: (e) => expect(e.warnings.join()).toMatch(/does not show secret values/),
  },
  {
    reason: "secrets not read (no kubeconfig), same names: nothing certain to send",
    input: inputs(spec({ secrets: [byRef] })),
    action: "noop",
    check: (e) => {
      expect(e.secrets).toBe("not-checked");
      expect(e.warnings.join()).toMatch(/values are not checked/);
    },
  },
  {
    reason: "secrets not read, a name added: a certain change",
    input: inputs(spec({ secrets: [byRef, { ...byRef, name: "NEW" }] })),
    action: "patch",
    summary: ["secrets: added NEW (values not checked: pass --kubeconfig to read the referenced Secrets)"],
  },
  {
    reason: "secrets not read, a literal value other than the one the service shows: a certain change",
    input: inputs(spec({ secrets: [byRef, { name: "MODE", value: "slow" }] }), { observed: withLiteral }),
    action: "patch",
    summary: [
      "secrets: literal value of MODE changed (values not checked: pass --kubeconfig to read the referenced Secrets)",
    ],
  },
  {
    reason: "secrets not read, a literal value the service shows as it is: nothing certain to send",
    input: inputs(spec({ secrets: [byRef, { name: "MODE", value: "fast" }] }), { observed: withLiteral }),
    action: "noop",
    check: (e) => expect(e.secrets).toBe("not-checked"),
  },
  {
    reason: "a Secret missing from the cluster: error naming it, nothing sent",
    input: inputs(spec({ secrets: [byRef] }), { secretData: {} }),
    action: "error",
    check: (e) => expect(e.error).toMatch(/key "API_KEY" of Secret "agent-secrets"/),
  },
  {
    reason: "another source than the service's: blocked",
    input: inputs(spec({ source: "internal_docker" })),
    action: "blocked",
    check: (e) => expect(e.problems[0]?.reason).toBe("Immutable"),
  },
  {
    reason: "another deployment type than the service's: blocked, the type never in a PATCH",
    input: inputs(spec({ sourceConfig: { resourceSpec: { cpu: 2 }, deploymentType: "dev" } }), {
      observed: { ...deployed, source_config: { ...deployed.source_config, deployment_type: "prod" } },
    }),
    action: "blocked",
    check: (e) =>
      expect(e.problems[0]).toMatchObject({
        reason: "DeploymentTypeMismatch",
        field: "spec.sourceConfig.deploymentType",
        message: expect.stringContaining("a new type means a new deployment"),
      }),
  },
  {
    reason: "no deployment type in the spec: the service's is accepted",
    input: inputs(spec(), {
      observed: { ...deployed, source_config: { ...deployed.source_config, deployment_type: "dev_zero" } },
    }),
    action: "noop",
  },
  {
    reason: "an empty secret list is sent once, to clear the service's secrets",
    input: inputs(spec({ secrets: [] })),
    action: "patch",
  },
  {
    reason: "an empty secret list sent before that the service did not take: reported, not sent again",
    input: inputs(spec({ secrets: [] }), { live: { appliedSecretsHash: hashSecrets([]) } }),
    action: "noop",
    check: (e) => expect(e.problems[0]?.reason).toBe("CannotClearSecrets"),
  },
  {
    reason: "a name claimed by another resource: blocked (NameConflict)",
    input: inputs(spec(), { nameConflict: "claimed by x.yaml:1" }),
    action: "blocked",
  },
  {
    reason: "ObserveOnly never writes: the differences are drift",
    input: inputs(spec({ managementPolicy: "ObserveOnly", sourceConfig: { resourceSpec: { cpu: 3 } } })),
    action: "noop",
    check: (e) => {
      expect(e.observeOnly).toBe(true);
      expect(e.drift).toEqual(["sourceConfig.resourceSpec.cpu: 1 → 3"]);
    },
  },
  {
    reason: "ObserveOnly with masked values: names compared only, as the controller does (no drift)",
    input: inputs(spec({ managementPolicy: "ObserveOnly", secrets: [byRef] }), { secretData }),
    action: "noop",
    check: (e) => expect(e.drift).toEqual([]),
  },
];

describe("reviewResource", () => {
  it.each(cases)("$reason", ({ input, action, newRevision, summary, check }) => {
    const entry = reviewResource(input);
    expect(entry.action).toBe(action);
    if (newRevision !== undefined) expect(entry.newRevision).toBe(newRevision);
    if (summary) expect(entry.summary).toEqual(summary);
    check?.(entry);
    expect(JSON.stringify(entry)).not.toContain(SECRET_VALUE);
  });
});

describe("plan report", () => {
  const entry = (i: ReviewInputs) => reviewResource(i);
  const report = (
    entries: ReturnType<typeof reviewResource>[],
    fileErrors: PlanReport["fileErrors"] = [],
  ) => ({
    entries,
    fileErrors,
    clusterRead: true,
  });

  it("docs/gitops.md's JSON section names every field of the document and of a resource", () => {
    // Every field a resource entry may have (the type makes this list complete).
    const every: Required<ReviewEntry> = {
      ...entry(inputs(spec())),
      deploymentId: "id",
      held: { windows: "w", fields: [], when: "now" },
      redeploy: { revisionId: "r", reason: "why" },
      error: "e",
      skipReason: "s",
    };
    const document = planDocument({
      ...report([every]),
      protection: { removals: [], unchecked: "why" },
    });
    const text = readFileSync(new URL("../../docs/gitops.md", import.meta.url), "utf8");
    const section = text.slice(text.indexOf("### JSON"), text.indexOf("### A CI gate"));
    const named = (key: string) => section.includes(`"${key}"`) || section.includes(`\`${key}\``);
    expect([...Object.keys(document), ...Object.keys(every)].filter((k) => !named(k))).toEqual([]);
  });

  it("exit status: 0 nothing or adopt, 2 create or patch, 1 errors, blocked or problems", () => {
    expect(planExitStatus(report([entry(inputs(spec())), entry(inputs(spec(), { adopted: true }))]))).toBe(0);
    expect(planExitStatus(report([entry(inputs(spec(), { observed: null }))]))).toBe(2);
    const patch = entry(inputs(spec({ sourceConfig: { resourceSpec: { cpu: 2 } } })));
    expect(planExitStatus(report([patch]))).toBe(2);
    expect(planExitStatus(report([patch, entry(inputs(spec({ source: "internal_docker" })))]))).toBe(1);
    const kept = { live: { appliedSecretsHash: hashSecrets([]) } };
    expect(planExitStatus(report([entry(inputs(spec({ secrets: [] }), kept))]))).toBe(1);
    expect(
      planExitStatus(report([], [{ file: "a.yaml", line: 3, column: 1, document: 1, message: "x" }])),
    ).toBe(1);
  });

  it("a skipped resource (another connection than --connection's) leaves the exit status as it is", () => {
    const skipped = skippedEntry(inputs(spec({ source: "internal_docker" })), "uses another connection");
    expect(skipped).toMatchObject({ action: "skipped", skipReason: "uses another connection", problems: [] });
    expect(planExitStatus(report([entry(inputs(spec())), skipped]))).toBe(0);
    expect(planExitStatus(report([entry(inputs(spec(), { observed: null })), skipped]))).toBe(2);
    expect(planCounts([skipped, skipped])).toMatchObject({ skipped: 2, noop: 0, error: 0 });
  });

  it("colours the text on a terminal: + green, ~ yellow, ! red; none without colours", () => {
    const colours = {
      green: (t: string) => `<g>${t}</g>`,
      yellow: (t: string) => `<y>${t}</y>`,
      red: (t: string) => `<r>${t}</r>`,
    };
    const create = entry(inputs(spec(), { observed: null }));
    const patch = entry(inputs(spec({ sourceConfig: { resourceSpec: { cpu: 2 } } })));
    const text = renderPlanText(
      report([create, patch], [{ file: "a.yaml", line: 3, column: 1, document: 1, message: "x" }]),
      colours,
    );
    expect(text).toMatch(/: <g>create<\/g>\n {4}<g>\+ /);
    expect(text).toMatch(/<y>patch [^<]*<\/y>\n {4}<y>~ /);
    expect(text).toContain("a.yaml:3:1: <r>error</r>: x");
    expect(renderPlanText(report([create, patch]))).not.toMatch(/<[gyr]>/);
  });

  it("a resource on a connection is named with it; the default connection is not named", () => {
    const through = entry(inputs(spec({ connectionRef: { kind: "ClusterServiceConnection", name: "eu" } })));
    expect(through.connection).toBe("ClusterServiceConnection/eu");
    expect(renderPlanText(report([through]))).toContain("team/agent via ClusterServiceConnection/eu [");
    const plain = entry(inputs(spec()));
    expect(plain.connection).toBe("default");
    expect(renderPlanText(report([plain]))).toContain("team/agent [");
  });

  it("text names each resource, its file and line, the action and each change; JSON holds the same", () => {
    const r = report(
      [
        entry(
          inputs(spec({ sourceRevisionConfig: { imageUri: "r/agent:2" }, secrets: [byRef] }), { secretData }),
        ),
      ],
      [
        {
          file: "bad.yaml",
          line: 7,
          column: 3,
          document: 1,
          message: "spec.source: required field is missing",
        },
      ],
    );
    const text = renderPlanText(r);
    expect(text).toContain(
      "team/agent [deploy/agent.yaml:1]: patch 9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a, NEW REVISION",
    );
    expect(text).toContain("    ~ sourceRevisionConfig.imageUri: r/agent:1 → r/agent:2");
    expect(text).toContain("bad.yaml:7:3: error: spec.source: required field is missing");
    expect(text).toContain(
      "Plan: 0 to create, 0 to adopt, 1 to patch (1 with a new revision), 0 unchanged, 0 blocked, 1 error.",
    );
    expect(text).not.toContain(SECRET_VALUE);
    const json = JSON.parse(renderPlanJson(r)) as {
      exitCode: number;
      resources: { action: string; changes: { field: string }[] }[];
    };
    expect(json.exitCode).toBe(1);
    expect(json.resources[0]?.action).toBe("patch");
    expect(json.resources[0]?.changes.map((c) => c.field)).toEqual([
      "sourceRevisionConfig.imageUri",
      "secrets",
    ]);
    expect(renderPlanJson(r)).not.toContain(SECRET_VALUE);
  });

  it("text writes the service's and the files' controls as escapes: a value cannot drive the terminal", () => {
    const hostile = "Evil\x1b]0;TITLE\x07\x1b[2J\u202e";
    const e = entry(
      inputs(spec({ displayName: "Good" }), {
        observed: { ...deployed, display_name: hostile },
        file: "deploy/\x1b[31magent.yaml",
      }),
    );
    const colours = { green: (t: string) => t, yellow: (t: string) => t, red: (t: string) => `<r>${t}</r>` };
    const text = renderPlanText(
      report(
        [e],
        [
          {
            file: "bad\x9b.yaml",
            line: 7,
            column: 3,
            document: 1,
            message: "spec.sourc\x1b[31mConfig: unknown field",
          },
        ],
      ),
      colours,
    );
    expect(text).toContain("displayName: Evil\\x1b]0;TITLE\\x07\\x1b[2J\\u202e → Good");
    expect(text).toContain("[deploy/\\x1b[31magent.yaml:1]");
    expect(text).toContain("bad\\x9b.yaml:7:3: <r>error</r>: spec.sourc\\x1b[31mConfig: unknown field");
    expect(unprintableIn(text.replaceAll("\n", ""))).toBeUndefined();
  });

  it("service names that differ from metadata.name are shown", () => {
    const e = entry({ ...inputs(spec({ name: "Agent One" }), { observed: null }) });
    expect(renderPlanText(report([e]))).toContain('team/agent (service name "Agent One")');
  });
});

describe("reviewResource: a switch back pending", () => {
  const R1 = "11111111-1111-4111-8111-111111111111";
  const R2 = "22222222-2222-4222-8222-222222222222";
  const A = `r/agent@sha256:${"a".repeat(64)}`;
  const B = `r/agent@sha256:${"b".repeat(64)}`;
  const latestB = remote({
    source: "external_docker",
    source_revision_config: { image_uri: B },
    latest_revision_id: R2,
    active_revision_id: R1,
  });
  const revisions = [
    { id: R2, status: "DEPLOYED", source: "external_docker", source_revision_config: { image_uri: B } },
    { id: R1, status: "DEPLOYED", source: "external_docker", source_revision_config: { image_uri: A } },
  ];
  const entryOf = (redeployedAt?: string) =>
    reviewResource(
      inputs(
        { source: "external_docker", sourceRevisionConfig: { imageUri: A } },
        {
          observed: latestB,
          revisions,
          live: {
            revisionHistory: [
              {
                id: R1,
                secretsHash: NO_SECRETS_HASH,
                configHash: revisionConfigHash({ image_uri: A }, "external_docker"),
                deployed: true,
                ...(redeployedAt ? { redeployedAt } : {}),
              },
              { id: R2, secretsHash: NO_SECRETS_HASH, deployed: true },
            ],
          },
        },
      ),
    );

  it("going back to A: redeploy revision R1", () => {
    expect(entryOf()).toMatchObject({ action: "patch", redeploy: { revisionId: R1 } });
  });

  it("A switched back to already: nothing to send, nothing redeployed", () => {
    const e = entryOf("2030-01-01T00:00:00Z");
    expect(e.action).toBe("noop");
    expect(e.redeploy).toBeUndefined();
    expect(e.newRevision).toBe(false);
  });
});
