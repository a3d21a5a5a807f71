// What docs/gitops-health.md tells users Argo CD, Flux and kubectl conclude about a `Deployment`
// resource, computed by those tools' own code: the health engines of Argo CD (gopher-lua, set up
// as Argo CD sets it up) and Flux (kstatus, fluxcd/pkg runtime/cel), built by
// test/controlplane/gitops-health, and the real kubectl. They judge the status the operator's
// status code writes in each situation of the doc's table, and the objects a real API server holds
// once the operator (against the simulator) has brought a resource into each situation. Every
// cell of the table that an engine contradicts fails the test, naming the situation, the tool and
// both answers.

import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import type { DeploymentObject } from "../../src/kube/object.ts";
import type { SeedDeployment } from "../../src/simulator/seed.ts";
import { type EngineVerdicts, gitopsHealthBinary, judge } from "../controlplane/gitops-health.ts";
import { freshNamespace, kubectl, testKubeconfigPath } from "../support/cluster.ts";
import {
  conditionsText,
  disagreements,
  docArgoScript,
  docFluxExprs,
  docTable,
  HEALTH_DOC,
  SITUATIONS,
  situationResource,
} from "../support/gitops-health-doc.ts";
import { startOperator, startTestSimulator } from "../support/operator.ts";
import { ClusterUser } from "../support/resources.ts";
import type { Scenario } from "../support/scenario.ts";

const table = docTable();

let bin: string;
beforeAll(async () => {
  // Built by `node test/controlplane/ensure.ts` before the run; built here (minutes) only if not.
  bin = await gitopsHealthBinary();
}, 1_200_000);

const judgeAll = (objects: unknown[]) =>
  judge(bin, { argocdHealthLua: docArgoScript(), fluxHealthCheckExprs: docFluxExprs(), objects });

describe("docs/gitops-health.md, on the status the operator's status code writes", () => {
  const names = Object.keys(SITUATIONS);
  let verdicts: EngineVerdicts[];
  beforeAll(async () => {
    verdicts = await judgeAll(names.map((name) => situationResource(SITUATIONS[name] ?? { generation: 1 })));
  });

  it("every tool's cell of every row is what that tool's engine computes", () => {
    const wrong = names.flatMap((name, i) => {
      const row = table.get(name);
      const v = verdicts[i];
      return row && v ? disagreements(row, v, "status code") : [`${name}: no row or verdict`];
    });
    expect(wrong).toEqual([]);
  });

  it("upstream kstatus and Flux's fork agree, so the doc's `wait: true` column holds for both", () => {
    expect(verdicts.map((v) => v.kstatus.status)).toEqual(verdicts.map((v) => v.fluxKstatus.status));
  });

  it("Argo CD's message names the condition that decided", () => {
    const message = (name: string) => verdicts[names.indexOf(name)]?.argocd?.message;
    expect(message("Stalled")).toBe('SecretNotFound: Secret "agent-secrets" has no key "token"');
    expect(message("ObserveOnly, drifted")).toContain("Drifted: ObserveOnly");
    expect(message("Edited, new generation not seen")).toBe(
      "Waiting for dms-operator to observe generation 2",
    );
    expect(message("Deleting")).toBe("Pending deletion");
  });
});

describe("the engines are set up as the tools set them up", () => {
  const resource = situationResource(SITUATIONS.Ready ?? { generation: 1 });

  it("Argo CD's Lua has no string library: a script that uses it fails, and Argo CD says Unknown", async () => {
    const [v] = await judge(bin, {
      argocdHealthLua: 'return { status = "Healthy", message = string.upper("ok") }',
      objects: [resource],
    });
    expect(v?.argocd?.status).toBe("Unknown");
    expect(v?.argocd?.message).toMatch(/attempt to index a non-table object\(nil\) with key 'upper'/);
  });

  it("Flux refuses a healthCheckExprs that does not parse, as the kustomize-controller does", async () => {
    await expect(
      judge(bin, {
        fluxHealthCheckExprs: { apiVersion: "dms.dev/v1alpha1", kind: "Deployment", current: "has(status)" },
        objects: [resource],
      }),
    ).rejects.toThrow(/invalid argument to has\(\) macro/);
  });
});

// One operator and one simulator bring a resource into each situation the cluster can reach, all
// at once; each is captured the moment the API server shows the conditions the doc's row lists.
const SPEC: DeploymentSpec = {
  source: "internal_docker",
  sourceConfig: { resourceSpec: { minScale: 1, maxScale: 2 } },
  sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
};
const LONG_AGO = "2025-01-01T00:00:00Z"; // seeded deployments are listed at once, whatever the lag
const seeded = (name: string, extra: Partial<SeedDeployment> = {}): SeedDeployment => ({
  name,
  created_at: LONG_AGO,
  source: "internal_docker",
  source_config: { resource_spec: { min_scale: 1, max_scale: 2 } },
  source_revision_config: { image_uri: "registry.example.com/agent:1" },
  ...extra,
});
const PATCH = "PATCH /v2/deployments/{deployment_id}";
/** Denies every instant: it starts each 1 January and lasts 366 days. */
const FROZEN = { kind: "deny" as const, schedule: "0 0 1 1 *", duration: "8784h" };
const IMAGE_2 = { sourceRevisionConfig: { imageUri: "registry.example.com/agent:2" } };

describe("docs/gitops-health.md and its kubectl recipes, on the objects a real cluster holds", () => {
  let s: Scenario;
  let idle: string;
  let fleet: string;
  let slow: string;
  const user = () => s.user;
  const captured = new Map<string, DeploymentObject>();

  /** Waits until `name` shows the conditions of `situation`'s row; returns that object. */
  async function reach(situation: string, name: string, namespace = s.namespace, timeoutMs = 30_000) {
    const row = table.get(situation);
    if (!row) throw new Error(`docs/gitops-health.md has no row "${situation}"`);
    try {
      return await user().waitFor(
        namespace,
        name,
        (o) => o !== undefined && conditionsText(o.metadata.generation, o.status) === row.conditions,
        `${situation}: ${row.conditions}`,
        timeoutMs,
      );
    } catch (error) {
      const last = await user().get(namespace, name);
      const seen = last ? conditionsText(last.metadata.generation, last.status) : "no object";
      throw new Error(`${(error as Error).message}; last seen: ${seen}`);
    }
  }

  /** {@link reach}, keeping the object as the one judged for `situation`. */
  async function capture(situation: string, name: string, namespace = s.namespace, timeoutMs = 30_000) {
    const obj = await reach(situation, name, namespace, timeoutMs);
    captured.set(situation, obj);
    return obj;
  }

  const flows: Record<string, () => Promise<unknown>> = {
    Ready: async () => {
      await user().create(s.namespace, "ready", SPEC);
      await capture("Ready", "ready");
    },
    "Creating, then Database being provisioned": async () => {
      await user().create(s.namespace, "fresh", SPEC);
      await capture("Creating", "fresh");
      await capture("Database being provisioned", "fresh");
    },
    "Rolling out a new revision": async () => {
      await user().create(s.namespace, "rolling", SPEC);
      await reach("Ready", "rolling");
      await user().patch(s.namespace, "rolling", {
        spec: { sourceRevisionConfig: { imageUri: "registry.example.com/agent:2" } },
      });
      await capture("Rolling out a new revision", "rolling");
    },
    "Retrying after a service error (first Ready)": async () => {
      await user().create(s.namespace, "retrying", SPEC);
      await reach("Ready", "retrying");
    },
    Stalled: async () => {
      await user().create(s.namespace, "stalled", SPEC);
      await reach("Ready", "stalled");
      await user().patch(s.namespace, "stalled", {
        spec: {
          secrets: [{ name: "API_KEY", valueFrom: { secretKeyRef: { name: "not-there", key: "token" } } }],
        },
      });
      await capture("Stalled", "stalled");
    },
    "A revision failed to build": async () => {
      await user().create(s.namespace, "failing", SPEC);
      await reach("Ready", "failing");
      await user().patch(s.namespace, "failing", {
        spec: { sourceRevisionConfig: { imageUri: "registry.example.com/agent:2" } },
      });
      await capture("A revision failed to build", "failing");
    },
    "A rollout past its timeout": async () => {
      // In a namespace of its own: the rollout goes live 6 s after it starts, when this resource
      // is Ready again, and the Stalled pipeline below must not depend on when it runs.
      await user().create(slow, "slow", SPEC);
      await reach("Ready", "slow", slow);
      await user().patch(slow, "slow", { spec: { ...IMAGE_2, rolloutTimeout: "1s" } });
      await capture("A rollout past its timeout", "slow", slow);
    },
    "Held outside the rollout windows": async () => {
      await user().create(s.namespace, "held", SPEC);
      await reach("Ready", "held");
      await user().patch(s.namespace, "held", { spec: { ...IMAGE_2, rolloutWindows: [FROZEN] } });
      await capture("Held outside the rollout windows", "held");
    },
    "Paused by annotation": async () => {
      await user().create(s.namespace, "paused", SPEC);
      await reach("Ready", "paused");
      await user().annotate(s.namespace, "paused", { "dms.dev/paused": "true" });
      await capture("Paused by annotation", "paused");
    },
    "ObserveOnly, in line": async () => {
      await user().create(s.namespace, "observed", { ...SPEC, managementPolicy: "ObserveOnly" });
      await capture("ObserveOnly, in line", "observed");
    },
    "ObserveOnly, drifted": async () => {
      await user().create(s.namespace, "drifted", { ...SPEC, managementPolicy: "ObserveOnly" });
      await capture("ObserveOnly, drifted", "drifted");
    },
    "driftPolicy Report, drifted": async () => {
      await user().create(s.namespace, "reported", { ...SPEC, driftPolicy: "Report" });
      const ready = await reach("Ready", "reported");
      // A change made on the service, outside Git: under Report it is recorded, never written back.
      s.sim.store.drift(ready.status?.deploymentId ?? "", {
        source_config: { resource_spec: { min_scale: 1, max_scale: 9 } },
      });
      await user().annotate(s.namespace, "reported", { "dms.dev/reconcile-requested-at": "look" });
      await capture("driftPolicy Report, drifted", "reported");
    },
    "ObserveOnly, no such deployment": async () => {
      await user().create(s.namespace, "absent", { ...SPEC, managementPolicy: "ObserveOnly" });
      await capture("ObserveOnly, no such deployment", "absent");
    },
    "Unused on the service": async () => {
      await user().create(s.namespace, "unused", SPEC);
      await capture("Unused on the service", "unused");
    },
    Deleting: async () => {
      await user().create(s.namespace, "deleting", { ...SPEC, deletionPolicy: "Delete" });
      await reach("Ready", "deleting");
      await user().delete(s.namespace, "deleting");
      await capture("Deleting", "deleting");
    },
    "Service reports an unknown state": async () => {
      await user().create(s.namespace, "unknown", SPEC);
      await capture("Service reports an unknown state", "unknown");
    },
    "Service reports an unlisted status": async () => {
      await user().create(s.namespace, "unlisted", SPEC);
      await capture("Service reports an unlisted status", "unlisted");
    },
    "Not reconciled yet": async () => {
      await user().create(idle, "waiting", SPEC);
      await capture("Not reconciled yet", "waiting", idle);
    },
  };

  beforeAll(async () => {
    idle = await freshNamespace("gitops-health-idle"); // no operator watches it
    fleet = await freshNamespace("gitops-health-fleet"); // every resource Ready, for `kubectl wait --all`
    slow = await freshNamespace("gitops-health-slow"); // a rollout past its timeout, for a while
    const namespace = await freshNamespace("gitops-health");
    const sim = await startTestSimulator({
      // Created deployments wait for their database for the whole test; a rollout lasts 6 s
      // (a failing build fails after about 4 s of it); a deletion lasts the whole test.
      timing: { readyAfterMs: 600_000, revisionActiveAfterMs: 6_000, deleteAfterMs: 600_000 },
      seed: {
        deployments: [
          seeded("ready"),
          seeded("rolling"),
          seeded("retrying"),
          seeded("stalled"),
          seeded("failing", { fail_revisions: "build" }),
          seeded("slow"),
          seeded("held"),
          seeded("paused"),
          seeded("observed"),
          seeded("reported"),
          seeded("drifted", { source_revision_config: { image_uri: "registry.example.com/agent:0" } }),
          seeded("unused", { status: "UNUSED" }),
          seeded("deleting"),
          seeded("unknown", { status: "UNKNOWN" }),
          seeded("unlisted", { status: "AWAITING_FINAL_DELETE" }),
          seeded("fleet-a"),
          seeded("fleet-b"),
        ],
      },
    });
    // The rollout windows' search on a counter that stands still: not timed by the machine.
    const op = startOperator({
      simulator: sim,
      namespaces: [namespace, fleet, slow],
      searchCounter: () => 0,
    });
    s = {
      namespace,
      sim,
      op,
      user: new ClusterUser(),
      stop: async () => {
        await op.stop();
        await sim.close();
      },
    };
    flows["kubectl wait --all"] = async () => {
      for (const name of ["fleet-a", "fleet-b"]) await user().create(fleet, name, SPEC);
      for (const name of ["fleet-a", "fleet-b"]) await reach("Ready", name, fleet);
    };
    // A new deployment stays out of the listing for 5 s: the operator says Creating meanwhile.
    const lag = { listingLagMs: 5_000 };
    s.sim.faults.set(lag);
    await s.op.started();
    const results: PromiseSettledResult<unknown>[] = await Promise.allSettled(
      Object.values(flows).map((flow) => flow()),
    );
    // Then, with every other PATCH done, the service refuses the one edit of "retrying".
    if (!results.some((r) => r.status === "rejected")) {
      s.sim.faults.set({ ...lag, errors: [{ route: PATCH, status: 503, rate: 1 }] });
      await user().patch(s.namespace, "retrying", {
        spec: { sourceConfig: { resourceSpec: { maxScale: 3 } } },
      });
      results.push(...(await Promise.allSettled([capture("Retrying after a service error", "retrying")])));
    }
    const failed = results.flatMap((r) => (r.status === "rejected" ? [String(r.reason)] : []));
    if (failed.length > 0) throw new Error(`situations not reached:\n${failed.join("\n")}`);
  }, 150_000);

  afterAll(async () => {
    await s?.stop();
  });

  it("reaches every situation of the table", () => {
    expect(
      [...table.keys()].filter((name) => !captured.has(name) && name !== "Edited, new generation not seen"),
    ).toEqual([]);
  });

  it("every tool's cell is what the engines compute for the objects the API server holds", async () => {
    const names = [...captured.keys()];
    const verdicts = await judgeAll(names.map((name) => captured.get(name)));
    const wrong = names.flatMap((name, i) => {
      const row = table.get(name);
      const v = verdicts[i];
      return row && v ? disagreements(row, v, "live object") : [`${name}: no row or verdict`];
    });
    expect(wrong).toEqual([]);
  });

  it("kubectl wait --for=condition=Ready returns for a Ready resource and times out for one still in progress", async () => {
    const ok = await kubectl([
      "wait",
      "--for=condition=Ready",
      "dmsd/ready",
      "-n",
      s.namespace,
      "--timeout=10s",
    ]);
    expect(ok.stderr).toBe("");
    expect(ok.code).toBe(0);
    const waiting = await kubectl([
      "wait",
      "--for=condition=Ready",
      "dmsd/fresh",
      "-n",
      s.namespace,
      "--timeout=1s",
    ]);
    expect(waiting.code).not.toBe(0);
    expect(waiting.stderr).toContain("timed out");
  });

  it("kubectl wait --all returns once every resource of the namespace is Ready, and fails while one is not", async () => {
    const ready = await kubectl([
      "wait",
      "--for=condition=Ready",
      "dmsd",
      "--all",
      "-n",
      fleet,
      "--timeout=10s",
    ]);
    expect(ready.stdout.trim().split("\n").sort()).toEqual([
      "deployment.dms.dev/fleet-a condition met",
      "deployment.dms.dev/fleet-b condition met",
    ]);
    expect(ready.code).toBe(0);
    const mixed = await kubectl([
      "wait",
      "--for=condition=Ready",
      "dmsd",
      "--all",
      "-n",
      s.namespace,
      "--timeout=1s",
    ]);
    expect(mixed.stderr).toContain("timed out");
    expect(mixed.code).not.toBe(0);
  });

  it("the doc's Stalled pipeline prints exactly the Stalled resources", async () => {
    const recipe = HEALTH_DOC.split("\n").find(
      (line) => line.startsWith("kubectl get dmsd") && line.includes("Stalled"),
    );
    expect(recipe, "the doc's `kubectl get dmsd ...` recipe for Stalled resources").toBeDefined();
    // The pipeline as a user runs it, with our kubectl, kubeconfig and namespace.
    const kubectlPath = inject("kubectlPath");
    const command = (recipe ?? "")
      .replace(/^kubectl /, `'${kubectlPath}' --kubeconfig='${testKubeconfigPath()}' `)
      .replace(" -n team-a ", ` -n ${s.namespace} `);
    const { stdout, stderr } = await promisify(execFile)("sh", ["-c", command]);
    expect(stderr).toBe("");
    expect(stdout.trim().split("\n").sort()).toEqual(["failing", "stalled"]);
  });

  it("Edited, new generation not seen: the engines and kubectl wait ignore the stale Ready=True", async () => {
    // With no operator running, an edit leaves the previous generation's status in place.
    await s.op.stop();
    await user().patch(s.namespace, "ready", { spec: { sourceConfig: { resourceSpec: { maxScale: 4 } } } });
    const edited = await capture("Edited, new generation not seen", "ready", s.namespace, 5_000);
    const [v] = await judgeAll([edited]);
    const row = table.get("Edited, new generation not seen");
    expect(row && v ? disagreements(row, v, "live object") : ["no row or verdict"]).toEqual([]);

    const stale = await kubectl([
      "wait",
      "--for=condition=Ready",
      "dmsd/ready",
      "-n",
      s.namespace,
      "--timeout=1s",
    ]);
    expect(stale.code).not.toBe(0);
    expect(stale.stderr).toContain("timed out");
  });
});
