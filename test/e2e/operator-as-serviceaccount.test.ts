// The operator installed by manifests/default, as a user's GitOps tool drives it: `dms-operator
// run` with the container's own arguments and the token of the manifests' ServiceAccount
// dms-system/dms-operator, leader election on (its Lease in dms-system), against the simulator.
// Sample YAML is applied, edited (a changed file applied again), its Secret rotated, and deleted
// with kubectl; `kubectl wait --for=condition=Ready` must succeed. A permission missing from
// manifests/rbac makes a step time out here and leaves an HTTP 403 in the operator's log.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { loadSeed } from "../../src/simulator/seed.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { startSimulator } from "../../src/simulator/server.ts";
import { freshNamespace, kubectl, kubectlOk, waitFor } from "../support/cluster.ts";
import { simulatorSample, simulatorSampleObjects } from "../support/samples.ts";
import {
  containerArgs,
  forbiddenLines,
  MANIFESTS,
  type StartedOperator,
  serviceAccountKubeconfig,
  startOperatorAs,
} from "./install-support.ts";

const SAMPLES = join(MANIFESTS, "samples");
const SEED = join(import.meta.dirname, "..", "..", "src", "simulator", "seed.example.yaml");
const API_KEY = "e2e-key-0123456789abcdef";
const POD_NAME = "dms-operator-e2e-0";

/** A sample file with the simulator's values and `edit` applied to each of its documents, as YAML text. */
function editedSample(file: string, edit: (doc: Record<string, unknown>) => void): string {
  return simulatorSampleObjects(file)
    .map((value) => {
      edit(value);
      return stringify(value);
    })
    .join("---\n");
}

describe("the operator as ServiceAccount dms-system/dms-operator", () => {
  let simulator: RunningSimulator;
  let operator: StartedOperator;
  let ns: string;
  let work: string;
  const get = async (name: string, path: string) =>
    kubectlOk(["get", "dmsd", name, "-n", ns, "-o", `jsonpath={${path}}`]);
  const onService = (name: string) => simulator.store.list().find((d) => d.name === name);

  beforeAll(async () => {
    await kubectlOk(["apply", "-k", join(MANIFESTS, "default")]);
    work = await mkdtemp(join(tmpdir(), "dms-e2e-gitops-"));
    simulator = await startSimulator({
      apiKey: API_KEY,
      seed: await loadSeed(SEED),
      timing: { readyAfterMs: 300, revisionActiveAfterMs: 300, deleteAfterMs: 300 },
    });
    const [command, ...args] = await containerArgs(join(MANIFESTS, "default"), {
      POD_NAMESPACE: "dms-system",
    });
    expect(command).toBe("run");
    expect(args).toContain("--leader-elect");
    operator = await startOperatorAs({
      args,
      kubeconfig: await serviceAccountKubeconfig("dms-system", "dms-operator", work),
      serviceUrl: simulator.url,
      apiKey: API_KEY,
      podNamespace: "dms-system",
      podName: POD_NAME,
      dir: work,
    });
    ns = await freshNamespace("e2e-gitops");
  });

  afterAll(async () => {
    // Leave no resources behind: other files read the cluster as a whole (name claims, plan).
    if (ns) await kubectl(["delete", "dmsd", "--all", "-n", ns, "--timeout=30s"]);
    await operator?.process.stop(10_000);
    await simulator?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("takes the leader Lease in its own namespace and becomes ready", async () => {
    const holder = await waitFor(
      async () => {
        operator.process.assertRunning();
        const lease = await kubectl(
          [
            "get",
            "lease",
            "dms-operator-leader",
            "-n",
            "dms-system",
            "-o",
            "jsonpath={.spec.holderIdentity}",
          ],
          {},
        );
        return lease.code === 0 && lease.stdout.startsWith(POD_NAME) ? lease.stdout : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 300, description: "the operator to hold the Lease" },
    );
    expect(holder).toMatch(new RegExp(`^${POD_NAME}_`));
    // /readyz needs both informers synced (list+watch of resources and Secrets) and the service reachable.
    await waitFor(async () => (await fetch(`${operator.probesUrl}/readyz`)).status === 200, {
      timeoutMs: 20_000,
      intervalMs: 300,
      description: "/readyz to answer 200",
    });
  });

  it("makes applied sample YAML Ready: kubectl wait --for=condition=Ready succeeds", async () => {
    for (const file of ["github.yaml", "secret-by-reference.yaml", "internal-docker.yaml"])
      await kubectlOk(["apply", "-n", ns, "-f", "-"], { input: simulatorSample(file) });
    const waited = await kubectl(
      [
        "wait",
        "--for=condition=Ready",
        "dmsd/research-agent",
        "dmsd/triage-bot",
        "dmsd/summarizer",
        "-n",
        ns,
        "--timeout=45s",
      ],
      { timeoutMs: 50_000 },
    );
    expect(waited.stderr).toBe("");
    expect(waited.code).toBe(0);
    expect(onService("research-agent")?.source_revision_config.repo_ref).toBe("main");
    expect(
      onService("triage-bot")
        ?.secrets.map((s) => s.name)
        .sort(),
    ).toEqual(["LOG_LEVEL", "OPENAI_API_KEY", "WEBHOOK_SECRET"]);
    expect(await get("summarizer", ".status.deploymentId")).toBe(onService("summarizer")?.id);
    // Events are written as the ServiceAccount too (events.k8s.io create/patch).
    const events = await kubectlOk([
      "get",
      "events.events.k8s.io",
      "-n",
      ns,
      "-o",
      "jsonpath={.items[*].regarding.name}",
    ]);
    expect(events.split(" ")).toEqual(expect.arrayContaining(["research-agent", "triage-bot", "summarizer"]));
  });

  it("rolls out a new revision when a changed file is applied", async () => {
    const before = await get("summarizer", ".status.latestRevisionId");
    const changed = editedSample("internal-docker.yaml", (doc) => {
      (doc.spec as { sourceRevisionConfig: { imageUri: string } }).sourceRevisionConfig.imageUri =
        "summarizer:2025-07-01";
    });
    expect(await kubectlOk(["apply", "-n", ns, "-f", "-"], { input: changed })).toContain("configured");
    const waited = await kubectl(
      ["wait", "--for=jsonpath={.status.observedGeneration}=2", "dmsd/summarizer", "-n", ns, "--timeout=30s"],
      { timeoutMs: 35_000 },
    );
    expect(waited.code).toBe(0);
    expect(
      (await kubectl(["wait", "--for=condition=Ready", "dmsd/summarizer", "-n", ns, "--timeout=30s"])).code,
    ).toBe(0);
    const after = await get("summarizer", ".status.latestRevisionId");
    expect(after).not.toBe(before);
    expect(await get("summarizer", ".status.activeRevisionId")).toBe(after);
    expect(onService("summarizer")?.source_revision_config.image_uri).toBe("summarizer:2025-07-01");
  });

  it("keeps the ConfigMap of spec.export with the live revision, owned by the resource", async () => {
    await kubectlOk([
      "patch",
      "dmsd",
      "summarizer",
      "-n",
      ns,
      "--type=merge",
      "-p",
      '{"spec":{"export":{"configMapName":"summarizer-endpoint"}}}',
    ]);
    const cm = (path: string) =>
      kubectl(["get", "configmap", "summarizer-endpoint", "-n", ns, "-o", `jsonpath={${path}}`], {});
    const active = await get("summarizer", ".status.activeRevisionId");
    await waitFor(async () => (await cm(".data.activeRevisionId")).stdout === active, {
      timeoutMs: 30_000,
      intervalMs: 300,
      description: "the ConfigMap summarizer-endpoint with the active revision",
    });
    expect((await cm(".data.imageUri")).stdout).toBe("summarizer:2025-07-01");
    expect((await cm(".metadata.ownerReferences[0].name")).stdout).toBe("summarizer");
    expect((await cm(".metadata.ownerReferences[0].controller")).stdout).toBe("true");
    expect(await get("summarizer", '.status.conditions[?(@.type=="Exported")].reason')).toBe("Exported");
  });

  it("follows a rotated Secret (watched through the ServiceAccount) with a new revision", async () => {
    const before = await get("triage-bot", ".status.latestRevisionId");
    const rotated = editedSample("secret-by-reference.yaml", (doc) => {
      if (doc.kind === "Secret") (doc.stringData as Record<string, string>)["webhook-secret"] = "rotated-e2e";
    });
    await kubectlOk(["apply", "-n", ns, "-f", "-"], { input: rotated });
    await waitFor(
      async () => {
        const latest = await get("triage-bot", ".status.latestRevisionId");
        return latest !== before && latest === (await get("triage-bot", ".status.activeRevisionId"));
      },
      { timeoutMs: 30_000, intervalMs: 300, description: "triage-bot to roll out the rotated Secret" },
    );
    // What a user sees: a new revision, live, and the resource Ready on it.
    const latest = await get("triage-bot", ".status.latestRevisionId");
    expect(latest).not.toBe(before);
    expect(await get("triage-bot", ".status.activeRevisionId")).toBe(latest);
    expect(await get("triage-bot", '.status.conditions[?(@.type=="Ready")].status')).toBe("True");
  });

  it("on kubectl delete, deletes the service's deployment only under deletionPolicy Delete", async () => {
    // kubectl delete waits until the resource is gone, i.e. until the operator released its finalizer.
    const deleted = await kubectl(["delete", "-n", ns, "-f", join(SAMPLES, "github.yaml"), "--timeout=30s"], {
      timeoutMs: 35_000,
    });
    expect(deleted.code).toBe(0);
    await waitFor(() => onService("research-agent") === undefined, {
      timeoutMs: 10_000,
      description: "research-agent (deletionPolicy Delete) to be gone from the service",
    });
    await kubectlOk(["delete", "-n", ns, "-f", join(SAMPLES, "internal-docker.yaml"), "--timeout=30s"]);
    expect(onService("summarizer")?.status).toBe("READY"); // deletionPolicy Orphan (the default)
  });

  it("was never refused anything by the API server", () => {
    operator.process.assertRunning();
    expect(forbiddenLines(operator.logText())).toEqual([]);
  });
});
