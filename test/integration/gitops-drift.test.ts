// GitOps without drift, on a real control plane: a Git copy of Deployment resources and a
// ServiceConnection, applied as Argo CD (client-side apply, or server-side) and Flux (server-side
// apply under its own field manager, with force, after taking over kubectl's fields) apply it, is
// still in sync once the operator has made everything Ready, and a re-apply neither fails nor
// undoes the operator's work: its finalizers and a shard label stay, nothing is sent to the
// service. What the `kubectl dms` verbs write survives a Flux sync, as a `kubectl annotate` does not.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerResumeCommand, registerSuspendCommand } from "../../src/commands/annotate.ts";
import { patchShardLabels } from "../../src/kube/shards.ts";
import { OWNER_LABEL } from "../../src/sharding/labels.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { runCli } from "../support/cli.ts";
import { freshNamespace, kubectl, kubectlOk, testKubeconfigPath } from "../support/cluster.ts";
import { startOperator, startTestSimulator, TEST_API_KEY, type TestOperator } from "../support/operator.ts";
import { ClusterUser } from "../support/resources.ts";

// The service's deployment names are the simulator's own, but this run's all the same.
const RUN = randomBytes(3).toString("hex");
const CLEANED = `cleaned-${RUN}`;
const WRITER = `writer-${RUN}`;
const FLUX = "kustomize-controller";

let sim: RunningSimulator;
let namespace: string;
let op: TestOperator | undefined;
let git: string;

/** The Git copy: what a platform team commits (the API key's Secret is sealed elsewhere). */
const gitCopy = (ns: string) => `apiVersion: dms.dev/v1alpha1
kind: ServiceConnection
metadata:
  name: prod
  namespace: ${ns}
spec:
  baseUrl: ${sim.url}
  apiKeySecretRef:
    name: dms-key
    key: api-key
  qps: 5
  burst: 10
---
apiVersion: dms.dev/v1alpha1
kind: Deployment
metadata:
  name: ${CLEANED}
  namespace: ${ns}
  labels:
    app.kubernetes.io/instance: agents
spec:
  source: internal_docker
  deletionPolicy: Delete
  sourceRevisionConfig:
    imageUri: cleaned:2025-06-01
  sourceConfig:
    resourceSpec:
      minScale: 1
      maxScale: 3
---
apiVersion: dms.dev/v1alpha1
kind: Deployment
metadata:
  name: ${WRITER}
  namespace: ${ns}
spec:
  source: internal_docker
  connectionRef:
    kind: ServiceConnection
    name: prod
  sourceRevisionConfig:
    imageUri: writer:2025-06-01
`;

interface ManagedEntry {
  manager: string;
  operation: string;
  subresource?: string;
  fieldsV1?: Record<string, unknown>;
  [key: string]: unknown;
}
interface Live {
  metadata: {
    resourceVersion: string;
    finalizers?: string[];
    annotations?: Record<string, string>;
    managedFields?: ManagedEntry[];
  };
}

const live = async (kind: string, name: string): Promise<Live> =>
  JSON.parse(await kubectlOk(["get", kind, name, "-n", namespace, "-o", "json", "--show-managed-fields"]));
const versions = async () => ({
  connection: (await live("dmsconn", "prod")).metadata.resourceVersion,
  cleaned: (await live("dmsd", CLEANED)).metadata.resourceVersion,
  writer: (await live("dmsd", WRITER)).metadata.resourceVersion,
});
const writes = () => {
  const c = sim.counters();
  return { post: c["POST /v2/deployments"] ?? {}, patch: c["PATCH /v2/deployments/{deployment_id}"] ?? {} };
};

/** `b` merged into `a` (FieldsV1 sets are nested objects). */
const mergeFields = (a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> => {
  const out = { ...a };
  for (const [key, value] of Object.entries(b)) {
    const mine = out[key];
    out[key] =
      typeof mine === "object" && mine !== null && typeof value === "object" && value !== null
        ? mergeFields(mine as Record<string, unknown>, value as Record<string, unknown>)
        : value;
  }
  return out;
};

/**
 * What Flux's kustomize-controller does before it applies an object (fluxcd/pkg/ssa's cleanup):
 * the managedFields entries of the managers it takes over, matched by name PREFIX and operation
 * (`kubectl` Apply and Update, `before-first-apply` Update, its own Update; never a subresource's),
 * become its own Apply entry, and kubectl's last-applied annotation goes. Its apply then removes
 * every field of those entries that Git does not declare.
 */
async function fluxTakeOver(kind: string, name: string): Promise<void> {
  const taken = (e: ManagedEntry) =>
    !e.subresource &&
    ((e.manager.startsWith("kubectl") && (e.operation === "Apply" || e.operation === "Update")) ||
      (e.manager.startsWith("before-first-apply") && e.operation === "Update") ||
      (e.manager.startsWith(FLUX) && e.operation === "Update"));
  const entries = (await live(kind, name)).metadata.managedFields ?? [];
  if (!entries.some(taken)) return;
  const own = entries.find((e) => e.manager === FLUX && e.operation === "Apply");
  let fields = own?.fieldsV1 ?? {};
  for (const e of entries.filter(taken)) fields = mergeFields(fields, e.fieldsV1 ?? {});
  const kept = entries.filter((e) => e !== own && !taken(e));
  const flux = { ...(own ?? entries.find(taken)), manager: FLUX, operation: "Apply", fieldsV1: fields };
  await kubectlOk([
    "patch",
    kind,
    name,
    "-n",
    namespace,
    "--type=json",
    "-p",
    JSON.stringify([{ op: "replace", path: "/metadata/managedFields", value: [...kept, flux] }]),
  ]);
}

/** `kubectl dms <name> <resource>` in the namespace. */
const verb = (name: "suspend" | "resume", resource: string) =>
  runCli([name, resource, "-n", namespace, "--kubeconfig", testKubeconfigPath()], {
    commands: [name === "suspend" ? registerSuspendCommand : registerResumeCommand],
  });

/** A Flux sync of the Git copy: the take-over, then its forced server-side apply. */
async function fluxSync(): Promise<string> {
  for (const [kind, name] of [
    ["dmsconn", "prod"],
    ["dmsd", CLEANED],
    ["dmsd", WRITER],
  ] as const)
    await fluxTakeOver(kind, name);
  return kubectlOk(["apply", "--server-side", "--force-conflicts", `--field-manager=${FLUX}`, "-f", "-"], {
    input: git,
  });
}

beforeAll(async () => {
  sim = await startTestSimulator({});
  namespace = await freshNamespace("gitops-drift");
  git = gitCopy(namespace);
  await new ClusterUser().putSecret(namespace, "dms-key", { "api-key": TEST_API_KEY });
});
afterAll(async () => {
  await op?.stop();
  await sim?.close();
});

describe("a Git copy applied as Argo CD and Flux apply it stays in sync after the operator's work", () => {
  it("applied client-side, reconciled Ready: the operator's finalizers are on the objects, in no file", async () => {
    await kubectlOk(["apply", "-f", "-"], { input: git });
    op = startOperator({ simulator: sim, namespaces: [namespace] });
    await new ClusterUser().waitReady(namespace, CLEANED);
    await new ClusterUser().waitReady(namespace, WRITER);
    expect((await live("dmsd", CLEANED)).metadata.finalizers).toEqual(["dms.dev/finalizer"]);
    const connection = await live("dmsconn", "prod");
    expect(connection.metadata.finalizers).toEqual(["dms.dev/connection-in-use"]);
    // Written by the operator's own field manager, which no GitOps tool takes over.
    const finalizerOwners = (connection.metadata.managedFields ?? [])
      .filter((e) => JSON.stringify(e.fieldsV1 ?? {}).includes("f:finalizers"))
      .map((e) => `${e.manager}/${e.operation}`);
    expect(finalizerOwners).toEqual(["dms-operator/Update"]);
  });

  it("kubectl diff (a server-side dry run, as Argo CD's server-side diff) shows nothing; client-side apply says unchanged", async () => {
    const before = await versions();
    sim.resetCounters();
    const diff = await kubectl(["diff", "-f", "-"], { input: git });
    expect(diff.stderr).toBe("");
    expect(diff.stdout).toBe("");
    expect(diff.code).toBe(0);
    const applied = await kubectlOk(["apply", "-f", "-"], { input: git });
    expect(applied.trim().split("\n")).toEqual([
      "serviceconnection.dms.dev/prod unchanged",
      `deployment.dms.dev/${CLEANED} unchanged`,
      `deployment.dms.dev/${WRITER} unchanged`,
    ]);
    expect(await versions()).toEqual(before);
  });

  it("server-side apply (kubectl's manager, Argo CD's ServerSideApply=true) needs no --force-conflicts and changes nothing twice", async () => {
    const first = await kubectl(["apply", "--server-side", "-f", "-"], { input: git });
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    const settled = await versions();
    const diff = await kubectl(["diff", "--server-side", "-f", "-"], { input: git });
    expect(diff.stdout).toBe("");
    expect(diff.code).toBe(0);
    await kubectlOk(["apply", "--server-side", "-f", "-"], { input: git });
    expect(await versions()).toEqual(settled);
    expect((await live("dmsd", CLEANED)).metadata.finalizers).toEqual(["dms.dev/finalizer"]);
  });

  it("a Flux sync (its take-over, then a forced apply) keeps the finalizers; the operator sends nothing", async () => {
    sim.resetCounters();
    await fluxSync();
    const settled = await versions();
    await fluxSync();
    expect(await versions()).toEqual(settled);
    expect((await live("dmsd", CLEANED)).metadata.finalizers).toEqual(["dms.dev/finalizer"]);
    expect((await live("dmsconn", "prod")).metadata.finalizers).toEqual(["dms.dev/connection-in-use"]);
    const diff = await kubectl(["diff", "--server-side", `--field-manager=${FLUX}`, "-f", "-"], {
      input: git,
    });
    expect(diff.stdout).toBe("");
    await new ClusterUser().waitReady(namespace, CLEANED);
    expect(writes()).toEqual({ post: {}, patch: {} });
  });

  it("a shard label written as a sharded operator writes it survives a Flux sync", async () => {
    // The sharder's own write (a merge patch from a client of the operator's user agent).
    const rv = (await live("dmsd", WRITER)).metadata.resourceVersion;
    const ref = { namespace, name: WRITER };
    const signal = AbortSignal.timeout(10_000);
    expect(
      await patchShardLabels(new ClusterUser().client, ref, rv, { [OWNER_LABEL]: "replica-0" }, signal),
    ).toBe("written");
    await fluxSync();
    const labels = JSON.parse(await kubectlOk(["get", "dmsd", WRITER, "-n", namespace, "-o", "json"]))
      .metadata.labels;
    expect(labels?.[OWNER_LABEL]).toBe("replica-0");
    await kubectlOk(["label", "dmsd", WRITER, "-n", namespace, `${OWNER_LABEL}-`]);
  });

  it("kubectl dms suspend survives a Flux sync: its annotation is not kubectl's, which Flux takes over and removes", async () => {
    expect(await verb("suspend", CLEANED)).toMatchObject({ code: 0, stderr: "" });
    await fluxSync();
    expect((await live("dmsd", CLEANED)).metadata.annotations?.["dms.dev/paused"]).toBe("true");
    // Not in Git, and no difference for a diff of the Git copy.
    expect(
      (await kubectl(["diff", "--server-side", `--field-manager=${FLUX}`, "-f", "-"], { input: git })).stdout,
    ).toBe("");

    // What the verb spares: kubectl annotate writes under a manager Flux takes over.
    await kubectlOk(["annotate", "dmsd", WRITER, "-n", namespace, "dms.dev/paused=true"]);
    await fluxSync();
    expect((await live("dmsd", WRITER)).metadata.annotations?.["dms.dev/paused"]).toBeUndefined();
  });

  it("kubectl dms suspend of a resource already paused by kubectl annotate makes it survive a Flux sync too", async () => {
    // The merge patch of an unchanged value leaves kubectl-annotate its only manager.
    await kubectlOk(["annotate", "dmsd", WRITER, "-n", namespace, "dms.dev/paused=true"]);
    expect(await verb("suspend", WRITER)).toMatchObject({ code: 0, stderr: "" });
    await fluxSync();
    expect((await live("dmsd", WRITER)).metadata.annotations?.["dms.dev/paused"]).toBe("true");

    // resume removes it, whoever wrote it, under any operation.
    expect(await verb("resume", WRITER)).toMatchObject({ code: 0 });
    expect((await live("dmsd", WRITER)).metadata.annotations?.["dms.dev/paused"]).toBeUndefined();
  });
});
