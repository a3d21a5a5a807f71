// Onboarding on a real control plane: `import` from a seeded service, `kubectl apply` of its YAML
// (Secret included) into a fresh namespace, then the operator adopts every deployment, Ready,
// with ZERO writes to the service. `plan --kubeconfig` tells the same story before and after, and
// reads the cluster's Secrets without ever printing a value.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimulatorSeed } from "../../src/simulator/seed.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { manifestDir, resourceYaml, cli as runCli, SECRET_VALUE, SEED } from "../contract/gitops-fixture.ts";
import { freshNamespace, kubectl, kubectlOk, testKubeconfigPath } from "../support/cluster.ts";
import { startOperator, startTestSimulator, TEST_API_KEY, type TestOperator } from "../support/operator.ts";
import { ClusterUser } from "../support/resources.ts";

// plan --kubeconfig reads name claims cluster-wide, and other test files leave resources named
// after the sample deployments: names of this run only keep their claims out of this story.
const RUN = randomBytes(3).toString("hex");
const named = (base: string) => `${base}-${RUN}`;
const RUN_SEED: SimulatorSeed = {
  ...SEED,
  deployments: (SEED.deployments ?? []).map((d) => ({ ...d, name: named(d.name) })),
};
const NAMES = ["billing-agent", "intake", "lost-repo", "notes-agent", "summarizer", "support-agent"].map(
  named,
);
const INTAKE = named("intake");
const SUMMARIZER = named("summarizer");
const SUPPORT = named("support-agent");

let sim: RunningSimulator;
let namespace: string;
let imported: string;
let op: TestOperator | undefined;
const user = () => new ClusterUser();

/** The CLI in-process against the test simulator, with the test's API key. */
const cli = (args: string[]) => runCli(sim.url, args, { DMS_API_KEY: TEST_API_KEY });

interface JsonPlan {
  exitCode: number;
  clusterRead: boolean;
  protectedRemovals: { namespace: string; name: string; message: string }[] | null;
  resources: Array<{
    name: string;
    action: string;
    secrets: string;
    summary: string[];
    newRevision: boolean;
  }>;
}
async function planJson(args: string[]) {
  const run = await cli(["plan", "-o", "json", ...args]);
  expect(run.stderr).toBe("");
  expect(run.stdout).not.toContain(SECRET_VALUE);
  return { code: run.code, doc: JSON.parse(run.stdout) as JsonPlan };
}
const actions = (doc: JsonPlan) => Object.fromEntries(doc.resources.map((r) => [r.name, r.action]));

const writes = () => {
  const c = sim.counters();
  return { post: c["POST /v2/deployments"] ?? {}, patch: c["PATCH /v2/deployments/{deployment_id}"] ?? {} };
};

beforeAll(async () => {
  sim = await startTestSimulator({ seed: RUN_SEED, secretsInResponses: "values" });
  namespace = await freshNamespace("gitops-roundtrip");
});
afterAll(async () => {
  await op?.stop();
  await sim?.close();
});

describe("import → kubectl apply → operator", () => {
  it("import writes resources and a Secret that kubectl applies as they are", async () => {
    const run = await cli([
      "import",
      "--namespace",
      namespace,
      "--secrets-from",
      "agent-secrets",
      "--print-secret-values",
    ]);
    expect(run.code).toBe(0);
    imported = run.stdout;
    const applied = await kubectlOk(["apply", "-f", "-"], { input: imported });
    for (const name of NAMES) expect(applied).toContain(`deployment.dms.dev/${name} created`);
    expect(applied).toContain("secret/agent-secrets created");
  });

  it("before the operator runs, plan --kubeconfig reads the Secrets and shows only adoptions (exit 0)", async () => {
    const dir = await manifestDir({ "all.yaml": imported });
    const { code, doc } = await planJson(["-f", dir, "--kubeconfig", testKubeconfigPath()]);
    expect(doc.clusterRead).toBe(true);
    expect(actions(doc)).toEqual(Object.fromEntries(NAMES.map((n) => [n, "adopt"])));
    expect(doc.resources.find((r) => r.name === SUPPORT)?.secrets).toBe("checked");
    expect(code).toBe(0);
  });

  it("the operator adopts every deployment, Ready, with zero POST and zero PATCH", async () => {
    sim.resetCounters();
    op = startOperator({ simulator: sim, namespaces: [namespace] });
    for (const name of NAMES) {
      const obj = await user().waitReady(namespace, name);
      expect(obj.status?.deploymentId).toBe(sim.store.getByName(name)?.id);
    }
    expect(writes()).toEqual({ post: {}, patch: {} });
    const events = await user().events(namespace, SUPPORT);
    expect(events.map((e) => e.reason)).toEqual(["Adopted"]);
    expect(op.logs.text()).not.toContain(SECRET_VALUE);
  });

  it("after adoption, plan --kubeconfig finds nothing to do; a change in Git or a rotated Secret is planned", async () => {
    const dir = await manifestDir({ "all.yaml": imported });
    const steady = await planJson([
      "-f",
      dir,
      "--kubeconfig",
      testKubeconfigPath(),
      "--operator-namespace",
      namespace,
    ]);
    expect(actions(steady.doc)).toEqual(Object.fromEntries(NAMES.map((n) => [n, "noop"])));
    expect(steady.code).toBe(0);
    // Compared with the operator's keyed digest, not left unknown.
    expect(steady.doc.resources.find((r) => r.name === SUPPORT)?.secrets).toBe("checked");

    const changed = imported.replace("summarizer:2025-06-01", "summarizer:2025-07-01");
    const pr = await planJson([
      "-f",
      await manifestDir({ "all.yaml": changed }),
      "--kubeconfig",
      testKubeconfigPath(),
    ]);
    expect(pr.doc.resources.find((r) => r.name === SUMMARIZER)).toMatchObject({
      action: "patch",
      newRevision: true,
      summary: ["sourceRevisionConfig.imageUri: summarizer:2025-06-01 → summarizer:2025-07-01"],
    });
    expect(pr.code).toBe(2);

    // The CRD's immutability rules need the live object: plan reads it and says apply would fail.
    const resourced = imported.replace(
      `name: ${INTAKE}\n  source: internal_template`,
      `name: ${INTAKE}\n  source: internal_docker`,
    );
    expect(resourced).not.toBe(imported);
    const refused = await planJson([
      "-f",
      await manifestDir({ "all.yaml": resourced }),
      "--kubeconfig",
      testKubeconfigPath(),
    ]);
    const intake = refused.doc.resources.find((r) => r.name === INTAKE);
    expect(intake).toMatchObject({ action: "error", summary: [] });
    expect(JSON.stringify(intake)).toContain("kubectl apply would be refused: spec.source is immutable");
    expect(refused.code).toBe(1);

    // Stopped, so that plan sees the rotation before the operator applies it.
    await op?.stop();
    op = undefined;
    await kubectlOk(
      ["-n", namespace, "patch", "secret", "agent-secrets", "--type", "merge", "-p"].concat(
        JSON.stringify({ stringData: { [`${SUPPORT}.OPENAI_API_KEY`]: "sk-rotated-in-cluster" } }),
      ),
    );
    // The operator's install key is in its Lease's namespace, this test's: plan reads it there.
    const rotated = await planJson([
      "-f",
      dir,
      "--kubeconfig",
      testKubeconfigPath(),
      "--operator-namespace",
      namespace,
    ]);
    expect(rotated.doc.resources.find((r) => r.name === SUPPORT)).toMatchObject({
      action: "patch",
      newRevision: false,
      summary: ["secrets: rotated OPENAI_API_KEY"],
    });
    expect(JSON.stringify(rotated.doc)).not.toContain("sk-rotated-in-cluster");
  });

  it("import protects the prod deployments; plan --kubeconfig warns when a change drops one from the directory", async () => {
    // The simulator's deployments are prod, the service's default type: each is proposed protected.
    const docs = imported.split("---\n").filter((d) => d.includes("kind: Deployment"));
    expect(docs).toHaveLength(NAMES.length);
    for (const doc of docs) {
      expect(doc).toContain("  deletionProtection: true\n");
      expect(doc).toContain("# spec.deletionProtection: true because its deployment type is prod:");
    }
    const live = JSON.parse(await kubectlOk(["get", "dmsd", INTAKE, "-n", namespace, "-o", "json"]));
    expect(live.spec.deletionProtection).toBe(true);

    // A pull request that drops intake's file (a rename gone wrong): a prune would delete it.
    const dropped = imported
      .split("---\n")
      .filter((d) => !d.includes(`name: ${INTAKE}\n`))
      .join("---\n");
    const dir = await manifestDir({ "all.yaml": dropped });
    const { code, doc } = await planJson(["-f", dir, "--kubeconfig", testKubeconfigPath()]);
    const removals = doc.protectedRemovals ?? [];
    expect(removals.map((r) => `${r.namespace}/${r.name}`)).toEqual([`${namespace}/${INTAKE}`]);
    expect(removals[0]?.message).toContain(
      "the API server refuses the delete until spec.deletionProtection is cleared first",
    );
    const text = await cli(["plan", "-f", dir, "--kubeconfig", testKubeconfigPath()]);
    expect(text.stdout).toContain(
      `warning: ${namespace}/${INTAKE} has spec.deletionProtection: true and is no longer in the files (in a namespace of the files' resources): a GitOps sync that prunes would delete it`,
    );
    // The whole directory: nothing is missing, nothing to warn about.
    const whole = await planJson([
      "-f",
      await manifestDir({ "all.yaml": imported }),
      "--kubeconfig",
      testKubeconfigPath(),
    ]);
    expect(whole.doc.protectedRemovals).toEqual([]);
    // A warning: the exit status is the rest of the plan's (intake itself planned nothing).
    expect(code).toBe(whole.code);
  });

  it("plan --kubeconfig finds, by the files' Flux labels, a protected resource whose namespace lost its last file", async () => {
    // The files' resources, as Flux's Kustomization applied them; and one it applied elsewhere
    // whose file (its namespace's only one) the change drops.
    const marks = [
      `kustomize.toolkit.fluxcd.io/name=agents-${RUN}`,
      "kustomize.toolkit.fluxcd.io/namespace=flux-system",
    ];
    const other = await freshNamespace("gitops-dropped");
    const ledger = named("ledger");
    await kubectlOk(["label", "dmsd", "--all", "-n", namespace, ...marks]);
    try {
      await kubectlOk(["apply", "-f", "-"], {
        input: resourceYaml(
          ledger,
          { name: ledger, source: "internal_template", deletionProtection: true },
          { namespace: other, labels: Object.fromEntries(marks.map((m) => m.split("="))) },
        ),
      });
      const { doc } = await planJson([
        "-f",
        await manifestDir({ "all.yaml": imported }),
        "--kubeconfig",
        testKubeconfigPath(),
      ]);
      expect((doc.protectedRemovals ?? []).map((r) => `${r.namespace}/${r.name}`)).toEqual([
        `${other}/${ledger}`,
      ]);
      expect(doc.protectedRemovals?.[0]?.message).toContain(
        `(applied by the same Flux Kustomization flux-system/agents-${RUN} as the files' resources)`,
      );
    } finally {
      await kubectlOk([
        "label",
        "dmsd",
        "--all",
        "-n",
        namespace,
        ...marks.map((m) => `${m.split("=")[0]}-`),
      ]);
      await kubectl([
        "patch",
        "dmsd",
        ledger,
        "-n",
        other,
        "--type",
        "merge",
        "-p",
        '{"spec":{"deletionProtection":false}}',
      ]);
      await kubectl(["delete", "namespace", other, "--wait=false"]);
    }
  });

  it("plan --kubeconfig blocks a new resource claiming a service name an applied one holds", async () => {
    const other = await freshNamespace("gitops-claim");
    const copy = resourceYaml(
      "intake-copy",
      { name: INTAKE, source: "internal_template" },
      { namespace: other },
    );
    const { code, doc } = await planJson([
      "-f",
      await manifestDir({ "copy.yaml": copy }),
      "--kubeconfig",
      testKubeconfigPath(),
    ]);
    expect(doc.resources).toHaveLength(1);
    expect(doc.resources[0]?.action).toBe("blocked");
    expect(JSON.stringify(doc.resources[0])).toContain(
      `is already claimed by the older resource ${namespace}/${INTAKE} in the cluster`,
    );
    expect(code).toBe(1);
  });
});
