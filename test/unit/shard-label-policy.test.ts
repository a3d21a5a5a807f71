// `--shard-label-policy`: which name a sharded replica requires, and what the check makes of the
// API server's answers (a stub of the one call it makes; the real API server's answers are
// test/integration/sharding-label-policy.test.ts's).
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { runConfigFrom } from "../../src/commands/run-config.ts";
import type { KubeClient, KubeRequest } from "../../src/kube/client.ts";
import { apiErrorFrom } from "../../src/kube/errors.ts";
import { POLICY_RECHECK_MS, requireLabelPolicy, watchLabelPolicy } from "../../src/sharding/label-policy.ts";
import {
  bindingProblem,
  checkShardLabelPolicy,
  ownServiceAccount,
} from "../../src/wiring/shard-label-policy.ts";
import { ManualClock } from "../support/manual-clock.ts";

const base = { baseUrl: "http://127.0.0.1:8090" };
const logger = pino({ level: "silent" });

function configOf(flags: Record<string, unknown>, env: Record<string, string> = {}) {
  const result = runConfigFrom({ ...base, ...flags }, env);
  if (!result.ok) throw new Error(result.problems.join("\n"));
  return result.config;
}

/** A client answering each path from `answers` (an Error is thrown), recording the paths. */
function clientOf(answers: (path: string) => unknown) {
  const paths: string[] = [];
  const client = {
    request: async (req: KubeRequest) => {
      paths.push(req.path);
      const answer = answers(req.path);
      if (answer instanceof Error) throw answer;
      return answer;
    },
  } as unknown as KubeClient;
  return { client, paths };
}

/** The component's paramRef: the operator's ServiceAccount, denying when it is missing. */
const PARAM_REF = { name: "dms-operator", namespace: "dms-system", parameterNotFoundAction: "Deny" };
const binding = (spec: Record<string, unknown>) => ({ spec: { paramRef: PARAM_REF, ...spec } });
/** The policy `dms-operator-shard-labels` as the replica reads it through `client`. */
const policyOf = (client: KubeClient) => ({
  name: "dms-operator-shard-labels",
  check: (signal: AbortSignal) => checkShardLabelPolicy(client, "dms-operator-shard-labels", signal),
});
const run = (client: KubeClient, signal = new AbortController().signal, clock = new ManualClock()) =>
  requireLabelPolicy(policyOf(client), signal, clock, logger);

describe("--shard-label-policy", () => {
  it("requires the component's policy by default when sharded, another name when given, none when unenforced", () => {
    expect(configOf({}).shardLabelPolicy).toBeUndefined();
    expect(configOf({ sharded: true }).shardLabelPolicy).toBe("dms-operator-shard-labels");
    expect(configOf({ sharded: true, shardLabelPolicyName: "ops-shard-labels" }).shardLabelPolicy).toBe(
      "ops-shard-labels",
    );
    expect(
      configOf({ sharded: true }, { DMS_SHARD_LABEL_POLICY: "unenforced" }).shardLabelPolicy,
    ).toBeUndefined();
    const wrong = runConfigFrom({ ...base, sharded: true, shardLabelPolicy: "off" }, {});
    expect(wrong.ok ? [] : wrong.problems.join("\n")).toMatch(/--shard-label-policy.*required, unenforced/);
  });
});

describe("the shard label policy check", () => {
  it("passes when the policy and a binding of it with Deny exist", async () => {
    const { client, paths } = clientOf((path) =>
      path.includes("bindings")
        ? binding({ policyName: "dms-operator-shard-labels", validationActions: ["Deny"] })
        : {},
    );
    await run(client);
    expect(paths).toEqual([
      "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/dms-operator-shard-labels",
      "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/dms-operator-shard-labels",
    ]);
  });

  it("refuses, naming the fix and the way to accept the risk, when one is missing, does not deny, or cannot be read", async () => {
    const missing = clientOf(() => apiErrorFrom(404, { reason: "NotFound" }, "GET policy"));
    await expect(run(missing.client)).rejects.toThrow(
      /must exist.*shard-label-policy\.yaml.*--shard-label-policy=unenforced/,
    );
    const warnOnly = clientOf((path) =>
      path.includes("bindings")
        ? binding({ policyName: "dms-operator-shard-labels", validationActions: ["Warn"] })
        : {},
    );
    await expect(run(warnOnly.client)).rejects.toThrow(/validationActions \[Deny\]/);
    const other = clientOf((path) =>
      path.includes("bindings") ? binding({ policyName: "something-else", validationActions: ["Deny"] }) : {},
    );
    await expect(run(other.client)).rejects.toThrow(/must bind the policy/);
    const forbidden = clientOf(() => apiErrorFrom(403, { reason: "Forbidden" }, "GET policy"));
    await expect(run(forbidden.client)).rejects.toThrow(
      /may not read.*get on validatingadmissionpolicies.*unenforced/,
    );
  });

  it("tries again after an answer that says nothing about the policy, until it is read or the replica stops", async () => {
    let failures = 2;
    const { client, paths } = clientOf((path) => {
      if (failures-- > 0) return apiErrorFrom(503, {}, "GET policy");
      return path.includes("bindings")
        ? binding({ policyName: "dms-operator-shard-labels", validationActions: ["Deny"] })
        : {};
    });
    const clock = new ManualClock({ sleepsInstantly: true });
    await run(client, new AbortController().signal, clock);
    expect(paths).toHaveLength(4);
    expect(clock.sleeps).toEqual([2_000, 2_000]);
    const stopping = new AbortController();
    const down = clientOf(() => new Error("connect ECONNREFUSED 127.0.0.1:6443"));
    const checking = run(down.client, stopping.signal, new ManualClock());
    await Promise.resolve();
    stopping.abort();
    await checking;
  });
});

describe("the binding's matchResources and paramRef", () => {
  const spec = (more: Record<string, unknown>) => ({
    policyName: "dms-operator-shard-labels",
    validationActions: ["Deny"],
    paramRef: PARAM_REF,
    ...more,
  });
  const self = { serviceAccount: { namespace: "dms-system", name: "dms-operator" } };

  it("accepts the component's binding, and one that selects everything explicitly", () => {
    expect(bindingProblem(spec({}), self)).toBeUndefined();
    expect(
      bindingProblem(
        spec({ matchResources: { namespaceSelector: {}, objectSelector: {}, matchPolicy: "Equivalent" } }),
        self,
      ),
    ).toBeUndefined();
  });

  it("accepts a namespace selector naming every watched namespace, and only when the operator watches some", () => {
    const byName = (values: string[]) => ({
      matchResources: {
        namespaceSelector: {
          matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "In", values }],
        },
      },
    });
    expect(
      bindingProblem(spec(byName(["team-a", "team-b"])), { namespaces: ["team-a", "team-b"] }),
    ).toBeUndefined();
    expect(bindingProblem(spec(byName(["team-a"])), { namespaces: ["team-a", "team-b"] })).toMatch(
      /namespaceSelector must select every namespace the operator watches \(team-a, team-b\)/,
    );
    expect(bindingProblem(spec(byName(["team-a"])), {})).toMatch(/all of them/);
    const one = {
      matchResources: { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "team-a" } } },
    };
    expect(bindingProblem(spec(one), { namespaces: ["team-a"] })).toBeUndefined();
    const other = { matchResources: { namespaceSelector: { matchLabels: { tier: "tenant" } } } };
    expect(bindingProblem(spec(other), { namespaces: ["team-a"] })).toMatch(/namespaceSelector/);
  });

  it("refuses a binding that narrows the policy to some objects or resources", () => {
    for (const matchResources of [
      { objectSelector: { matchLabels: { audited: "true" } } },
      {
        excludeResourceRules: [
          { apiGroups: ["dms.dev"], apiVersions: ["*"], operations: ["UPDATE"], resources: ["deployments"] },
        ],
      },
      {
        resourceRules: [
          {
            apiGroups: ["dms.dev"],
            apiVersions: ["v1alpha1"],
            operations: ["CREATE"],
            resources: ["deployments"],
          },
        ],
      },
    ])
      expect(bindingProblem(spec({ matchResources }), self), JSON.stringify(matchResources)).toMatch(
        /matchResources/,
      );
  });

  it("refuses a paramRef that is missing, a selector, lets a missing ServiceAccount through, or names another account", () => {
    expect(bindingProblem(spec({ paramRef: undefined }), self)).toMatch(/paramRef must name/);
    expect(bindingProblem(spec({ paramRef: { ...PARAM_REF, name: undefined, selector: {} } }), self)).toMatch(
      /paramRef/,
    );
    expect(bindingProblem(spec({ paramRef: { ...PARAM_REF, selector: { matchLabels: {} } } }), self)).toMatch(
      /not a selector/,
    );
    expect(
      bindingProblem(spec({ paramRef: { ...PARAM_REF, parameterNotFoundAction: "Allow" } }), self),
    ).toMatch(/parameterNotFoundAction must be Deny/);
    expect(bindingProblem(spec({ paramRef: { ...PARAM_REF, name: "tenant-bot" } }), self)).toMatch(
      /operator's ServiceAccount dms-system\/dms-operator \(it names dms-system\/tenant-bot\)/,
    );
    // Run as a user that is no ServiceAccount (a kubeconfig's): the shape is all that is checked.
    expect(bindingProblem(spec({ paramRef: { ...PARAM_REF, name: "tenant-bot" } }), {})).toBeUndefined();
  });

  it("is the check's refusal, naming the fix", async () => {
    const { client } = clientOf((path) =>
      path.includes("bindings")
        ? binding(spec({ paramRef: { ...PARAM_REF, parameterNotFoundAction: "Allow" } }))
        : {},
    );
    await expect(run(client)).rejects.toThrow(
      /parameterNotFoundAction must be Deny.*shard-label-policy\.yaml/,
    );
  });
});

describe("whom the binding must exempt", () => {
  const review = (username: string) => ({ status: { userInfo: { username } } });
  it("is the ServiceAccount the operator runs as, read with a SelfSubjectReview; nobody in particular otherwise", async () => {
    const signal = new AbortController().signal;
    const sa = clientOf(() => review("system:serviceaccount:dms-system:dms-operator"));
    expect(await ownServiceAccount(sa.client, signal)).toEqual({
      namespace: "dms-system",
      name: "dms-operator",
    });
    expect(sa.paths).toEqual(["/apis/authentication.k8s.io/v1/selfsubjectreviews"]);
    expect(
      await ownServiceAccount(clientOf(() => review("kubernetes-admin")).client, signal),
    ).toBeUndefined();
    const refused = clientOf(() => apiErrorFrom(403, { reason: "Forbidden" }, "POST selfsubjectreviews"));
    expect(await ownServiceAccount(refused.client, signal)).toBeUndefined();
    const down = clientOf(() => apiErrorFrom(503, {}, "POST selfsubjectreviews"));
    await expect(ownServiceAccount(down.client, signal)).rejects.toThrow(/503/);
  });
});

describe("the leader's check of the policy while the ring runs", () => {
  it("reports it gone (an error naming the fix), and back, every minute, without stopping anything", async () => {
    let state: "ok" | "gone" | "down" = "ok";
    const { client } = clientOf((path) => {
      if (state === "gone") return apiErrorFrom(404, { reason: "NotFound" }, "GET policy");
      if (state === "down") return apiErrorFrom(503, {}, "GET policy");
      return path.includes("bindings")
        ? binding({ policyName: "dms-operator-shard-labels", validationActions: ["Deny"] })
        : {};
    });
    const lines: { level: number; msg: string }[] = [];
    const log = pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const clock = new ManualClock();
    const stopping = new AbortController();
    const reports: boolean[] = [];
    const checking = watchLabelPolicy(policyOf(client), stopping.signal, clock, log, (ok) =>
      reports.push(ok),
    );
    const minute = async (next: typeof state) => {
      state = next;
      clock.advance(POLICY_RECHECK_MS);
      for (let i = 0; i < 20; i++) await Promise.resolve();
    };
    await minute("ok");
    await minute("gone");
    await minute("gone");
    await minute("down");
    await minute("ok");
    stopping.abort();
    await checking;
    // A failed read says nothing: no report for it.
    expect(reports).toEqual([true, false, false, true]);
    const errors = lines.filter((l) => l.level === 50);
    expect(errors).toHaveLength(1);
    expect(errors[0]?.msg).toMatch(/gone while the ring runs.*shard-label-policy\.yaml.*relabel/);
    expect(lines.some((l) => l.msg === "the shard label policy is in place again")).toBe(true);
  });
});
