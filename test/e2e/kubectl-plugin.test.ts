// `kubectl dms <verb>` as users run it: the real kubectl (the control plane's) finds the plugin
// `kubectl-dms` on PATH (a link to bin/kubectl-dms.mjs, as npm installs it) and runs it against the
// real API server, with the cluster and namespace taken as kubectl takes them (KUBECONFIG, the
// context's namespace, -n, -A). The verbs change one annotation each and nothing else; `status`
// prints what the resources' and connections' statuses say; `version` finds the operator by its
// label; `completion` writes scripts the shells accept and that complete resource names.
// Each `kubectl dms` starts Node from the sources: seconds on a loaded machine, hence the limits.
import { copyFileSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { VERSION } from "../../src/version.ts";
import { type KubectlResult, runCaptured } from "../controlplane/kubectl.ts";
import { freshNamespace, kubectlOk, testKubeconfigPath, waitFor } from "../support/cluster.ts";

const ROOT = join(import.meta.dirname, "..", "..");

let bin: string;
let kubeconfig: string;

/** Runs `script` in bash with the plugin and kubectl on PATH and KUBECONFIG set, as a user's shell. */
function shell(script: string, env: Record<string, string> = {}): Promise<KubectlResult> {
  return runCaptured("bash", ["-e", "-o", "pipefail", "-c", `cd "$HOME"\n${script}`], {
    env: {
      PATH: [bin, dirname(process.execPath), "/usr/bin", "/bin"].join(delimiter),
      HOME: bin,
      KUBECONFIG: kubeconfig,
      ...env,
    },
    input: "",
    timeoutMs: 60_000,
  });
}

/** `kubectl dms <args>`, which must succeed; its stdout. */
async function dms(args: string, env: Record<string, string> = {}): Promise<string> {
  const run = await shell(`kubectl dms ${args}`, env);
  if (run.code !== 0) throw new Error(`kubectl dms ${args} exited ${run.code}: ${run.stderr}`);
  return run.stdout;
}

const resource = (name: string, spec: object = {}, annotations: Record<string, string> = {}) =>
  JSON.stringify({
    apiVersion: "dms.dev/v1alpha1",
    kind: "Deployment",
    metadata: { name, annotations },
    spec: {
      source: "internal_docker",
      sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
      ...spec,
    },
  });

const annotations = async (ns: string, name: string): Promise<Record<string, string>> =>
  JSON.parse((await kubectlOk(["get", "dmsd", name, "-n", ns, "-o", "json"])) || "{}").metadata.annotations ??
  {};

const condition = (type: string, status: string, reason: string, message: string) => ({
  type,
  status,
  reason,
  message,
  lastTransitionTime: "2026-01-01T00:00:00Z",
});

/** Writes `status` through the status subresource, as the operator does. */
const setStatus = (ns: string, kind: string, name: string, status: object) =>
  kubectlOk([
    "patch",
    kind,
    name,
    "-n",
    ns,
    "--subresource=status",
    "--type=merge",
    "-p",
    JSON.stringify({ status }),
  ]);

beforeAll(() => {
  bin = mkdtempSync(join(tmpdir(), "dms-plugin-"));
  symlinkSync(join(ROOT, "bin", "kubectl-dms.mjs"), join(bin, "kubectl-dms"));
  symlinkSync(join(ROOT, "bin", "kubectl_complete-dms.mjs"), join(bin, "kubectl_complete-dms"));
  symlinkSync(inject("kubectlPath"), join(bin, "kubectl"));
  // A kubeconfig of the user's own, so that setting its context's namespace touches no other test.
  kubeconfig = join(bin, "config");
  copyFileSync(testKubeconfigPath(), kubeconfig);
});

afterAll(() => {
  if (bin) rmSync(bin, { recursive: true, force: true });
});

/** Waits until the clock is past the time `stamp` (an ISO time) says: a value set now differs from it. */
const clockPast = (stamp: string | undefined) =>
  waitFor(() => Date.now() > Date.parse(stamp ?? ""), { description: `the clock past ${stamp}` });

describe("kubectl dms: the annotation verbs", { timeout: 120_000 }, () => {
  let ns: string;
  beforeAll(async () => {
    ns = await freshNamespace("plugin-verbs");
    await kubectlOk(["apply", "-n", ns, "-f", "-"], {
      input: resource("web", {}, { "team.example.com/owner": "a" }),
    });
  });

  it("reconcile sets dms.dev/reconcile-requested-at to a new time, and leaves the other annotations", async () => {
    expect(await dms(`reconcile web -n ${ns}`)).toBe("deployment.dms.dev/web reconcile requested\n");
    const first = (await annotations(ns, "web"))["dms.dev/reconcile-requested-at"];
    expect(first).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    await clockPast(first);
    await dms(`reconcile web -n ${ns}`);
    const after = await annotations(ns, "web");
    expect(after["dms.dev/reconcile-requested-at"]).not.toBe(first);
    expect(after["team.example.com/owner"]).toBe("a");
  });

  it("suspend sets dms.dev/paused=true and resume removes it; the other verbs say when it is suspended", async () => {
    expect(await dms(`suspend web -n ${ns}`)).toBe("deployment.dms.dev/web suspended\n");
    expect((await annotations(ns, "web"))["dms.dev/paused"]).toBe("true");
    const whileSuspended = await shell(`kubectl dms rollout-now web -n ${ns}`);
    expect(whileSuspended.code).toBe(0);
    expect(whileSuspended.stderr).toBe(
      `note: deployment.dms.dev/web is suspended (dms.dev/paused=true): the operator acts on it once resumed (kubectl dms resume web -n ${ns})\n`,
    );
    expect(await dms(`resume web -n ${ns}`)).toBe("deployment.dms.dev/web resumed\n");
    const after = await annotations(ns, "web");
    expect(after).not.toHaveProperty(["dms.dev/paused"]);
    expect(after["team.example.com/owner"]).toBe("a");
  });

  it("rollout-now sets dms.dev/rollout-now to a new value each time", async () => {
    expect(await dms(`rollout-now web -n ${ns}`)).toBe("deployment.dms.dev/web rollout-now requested\n");
    const first = (await annotations(ns, "web"))["dms.dev/rollout-now"];
    expect(first).toBeTruthy();
    await clockPast(first);
    await dms(`rollout-now web -n ${ns}`);
    expect((await annotations(ns, "web"))["dms.dev/rollout-now"]).not.toBe(first);
  });

  it("takes the namespace of the kubeconfig's context when -n is not given", async () => {
    const own = join(bin, "config-ns");
    copyFileSync(kubeconfig, own);
    await shell(`kubectl config set-context --current --namespace=${ns}`, { KUBECONFIG: own });
    expect(await dms("suspend web", { KUBECONFIG: own })).toBe("deployment.dms.dev/web suspended\n");
    expect((await annotations(ns, "web"))["dms.dev/paused"]).toBe("true");
    await dms("resume web", { KUBECONFIG: own });
  });

  it("takes several names, --all or -l <selector>, a line each; one that fails fails alone", async () => {
    await kubectlOk(["apply", "-n", ns, "-f", "-"], { input: `${resource("api")}\n${resource("worker")}` });
    await kubectlOk(["label", "dmsd", "api", "worker", "-n", ns, "tier=back"]);
    expect(await dms(`suspend web api -n ${ns}`)).toBe(
      "deployment.dms.dev/web suspended\ndeployment.dms.dev/api suspended\n",
    );
    expect(await dms(`resume --all -n ${ns}`)).toBe(
      "deployment.dms.dev/api resumed\ndeployment.dms.dev/web resumed\ndeployment.dms.dev/worker resumed\n",
    );
    expect(await dms(`suspend -l tier=back -n ${ns}`)).toBe(
      "deployment.dms.dev/api suspended\ndeployment.dms.dev/worker suspended\n",
    );
    expect((await annotations(ns, "web"))["dms.dev/paused"]).toBeUndefined();
    expect((await annotations(ns, "worker"))["dms.dev/paused"]).toBe("true");
    const partly = await shell(`kubectl dms resume api nothing-here worker -n ${ns}`);
    expect(partly.code).toBe(1);
    expect(partly.stdout).toBe("deployment.dms.dev/api resumed\ndeployment.dms.dev/worker resumed\n");
    expect(partly.stderr).toContain(
      `error: deployment.dms.dev/nothing-here: Deployment resource ${ns}/nothing-here not found`,
    );
    const none = await shell(`kubectl dms suspend -n ${ns}`);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain("give the names of Deployment resources, --all, or -l <selector>");
    const unmatched = await shell(`kubectl dms suspend -l tier=nothing -n ${ns}`);
    expect(unmatched).toMatchObject({ code: 0, stdout: "" });
    expect(unmatched.stderr).toBe(
      `No Deployment resources found in namespace ${ns} matching tier=nothing.\n`,
    );
  });

  it("says how to list the resources when the one named does not exist", async () => {
    const run = await shell(`kubectl dms suspend nothing-here -n ${ns}`);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      `error: Deployment resource ${ns}/nothing-here not found: list them with kubectl get dmsd -n ${ns}`,
    );
  });

  it("rebuild sets dms.dev/rebuild-requested-at to an RFC 3339 time, a new one each time, for several names", async () => {
    await kubectlOk(["apply", "-n", ns, "-f", "-"], { input: resource("tracker") });
    expect(await dms(`rebuild web tracker -n ${ns}`)).toBe(
      "deployment.dms.dev/web rebuild requested\ndeployment.dms.dev/tracker rebuild requested\n",
    );
    const first = (await annotations(ns, "web"))["dms.dev/rebuild-requested-at"];
    expect(first).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect((await annotations(ns, "tracker"))["dms.dev/rebuild-requested-at"]).toMatch(/Z$/);
    await clockPast(first);
    expect(await dms(`rebuild -l tier=back -n ${ns}`)).toBe(
      "deployment.dms.dev/api rebuild requested\ndeployment.dms.dev/worker rebuild requested\n",
    );
    await dms(`rebuild web -n ${ns}`);
    const after = await annotations(ns, "web");
    expect(after["dms.dev/rebuild-requested-at"]).not.toBe(first);
    expect(after["team.example.com/owner"]).toBe("a");
  });

  it.each([
    { verb: "reconcile", annotation: "dms.dev/reconcile-requested-at", field: "lastHandledReconcileAt" },
    { verb: "rebuild", annotation: "dms.dev/rebuild-requested-at", field: "lastHandledRebuildAt" },
  ])("$verb --wait waits until status.$field is the value it set", async ({ verb, annotation, field }) => {
    const previous = (await annotations(ns, "web"))[annotation];
    await clockPast(previous);
    const waiting = shell(`kubectl dms ${verb} web -n ${ns} --wait --timeout 45s`);
    // The operator's part, played here: acknowledge the value the annotation was set to.
    const requested = await waitFor(
      async () => {
        const value = (await annotations(ns, "web"))[annotation];
        return value !== previous && value;
      },
      { description: `the annotation ${verb} --wait sets`, timeoutMs: 20_000 },
    );
    await setStatus(ns, "dmsd", "web", {
      [field]: requested,
      conditions: [condition("Ready", "True", "Available", "the service's deployment is READY")],
    });
    const run = await waiting;
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(
      `deployment.dms.dev/web ${verb} requested\ndeployment.dms.dev/web acknowledged by the operator: Ready=True Available: the service's deployment is READY\n`,
    );
  });

  /** The operator's part, played here: waits for `annotation` on `name` to change from `previous`, and acknowledges it. */
  const acknowledge = async (
    name: string,
    annotation: string,
    field: string,
    previous: string | undefined,
  ) => {
    const requested = await waitFor(
      async () => {
        const value = (await annotations(ns, name))[annotation];
        return value !== previous && value;
      },
      { description: `the annotation --wait sets on ${name}`, timeoutMs: 20_000 },
    );
    await setStatus(ns, "dmsd", name, {
      [field]: requested,
      conditions: [condition("Ready", "True", "Available", `${name} is READY`)],
    });
  };

  it("--wait with several names, --all or -l waits for each; one never acknowledged fails alone", async () => {
    const valuesNow = async (annotation: string, ...names: string[]) => {
      const values = await Promise.all(names.map(async (n) => (await annotations(ns, n))[annotation]));
      for (const value of values) if (value !== undefined) await clockPast(value);
      return values;
    };
    const reconcileAt = "dms.dev/reconcile-requested-at";
    const [web, api] = await valuesNow(reconcileAt, "web", "api");
    const both = shell(`kubectl dms reconcile web api -n ${ns} --wait --timeout 45s`);
    // Acknowledged one after the other: the command waits for the second after the first.
    await acknowledge("web", reconcileAt, "lastHandledReconcileAt", web);
    await acknowledge("api", reconcileAt, "lastHandledReconcileAt", api);
    const run = await both;
    expect(run).toMatchObject({ code: 0, stderr: "" });
    expect(run.stdout.split("\n").sort()).toEqual(
      [
        "",
        "deployment.dms.dev/web reconcile requested",
        "deployment.dms.dev/api reconcile requested",
        "deployment.dms.dev/web acknowledged by the operator: Ready=True Available: web is READY",
        "deployment.dms.dev/api acknowledged by the operator: Ready=True Available: api is READY",
      ].sort(),
    );

    const rolloutNow = "dms.dev/rollout-now";
    const selected = ["api", "worker"];
    const previous = await valuesNow(rolloutNow, ...selected);
    const bySelector = shell(`kubectl dms rollout-now -l tier=back -n ${ns} --wait --timeout 45s`);
    await Promise.all(
      selected.map((n, i) => acknowledge(n, rolloutNow, "lastHandledRolloutNow", previous[i])),
    );
    const labelled = await bySelector;
    expect(labelled).toMatchObject({ code: 0, stderr: "" });
    for (const n of selected)
      expect(labelled.stdout).toContain(`deployment.dms.dev/${n} acknowledged by the operator: Ready=True`);

    // --all, of which only web is acknowledged: the others time out, each said, and the command fails.
    const all = ["api", "tracker", "web", "worker"];
    const [webNow] = await valuesNow(reconcileAt, "web", ...all);
    const partly = shell(`kubectl dms reconcile --all -n ${ns} --wait --timeout 6s`);
    await acknowledge("web", reconcileAt, "lastHandledReconcileAt", webNow);
    const failed = await partly;
    expect(failed.code).toBe(1);
    for (const n of all) expect(failed.stdout).toContain(`deployment.dms.dev/${n} reconcile requested\n`);
    expect(failed.stdout).toContain("deployment.dms.dev/web acknowledged by the operator: Ready=True");
    for (const n of ["api", "tracker", "worker"]) {
      expect(failed.stdout).not.toContain(`deployment.dms.dev/${n} acknowledged`);
      expect(failed.stderr).toContain(
        `error: deployment.dms.dev/${n}: the operator did not acknowledge lastHandledReconcileAt=`,
      );
    }
    expect(failed.stderr).not.toContain("deployment.dms.dev/web:");
  });

  it("rebuild --wait that times out says what the resource's Synced condition says (a refused rebuild)", async () => {
    const refusal =
      "dms.dev/rebuild-requested-at asks for a new revision, but the service has no rebuild route (POST /v2/deployments/{deployment_id}/revisions)";
    await setStatus(ns, "dmsd", "tracker", {
      conditions: [condition("Synced", "False", "RebuildRouteMissing", refusal)],
    });
    const run = await shell(`kubectl dms rebuild tracker -n ${ns} --wait --timeout 1s`);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("error: the operator did not acknowledge lastHandledRebuildAt=");
    expect(run.stderr).toContain(
      `within 1s; the resource says Synced=False RebuildRouteMissing: ${refusal}: is it running`,
    );
  });

  it("reconcile --wait fails, saying what to check, when nothing acknowledges it in time", async () => {
    const run = await shell(`kubectl dms reconcile web -n ${ns} --wait --timeout 1s`);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("error: the operator did not acknowledge lastHandledReconcileAt=");
    expect(run.stderr).toContain("within 1s: is it running");
  });
});

describe("kubectl dms status", { timeout: 120_000 }, () => {
  let ns: string;
  beforeAll(async () => {
    ns = await freshNamespace("plugin-status");
    // One hour a week, three days from today in Berlin: never open while the test runs, whatever
    // the day or hour CI runs it (a fixed weekday made this fail for that hour every week).
    const today = new Intl.DateTimeFormat("en-US", { timeZone: "Europe/Berlin", weekday: "short" }).format();
    const weekday = (["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"].indexOf(today) + 3) % 7;
    const windows = [
      { kind: "allow", schedule: `0 3 * * ${weekday}`, duration: "1h", timeZone: "Europe/Berlin" },
    ];
    const connection = JSON.stringify({
      apiVersion: "dms.dev/v1alpha1",
      kind: "ServiceConnection",
      metadata: { name: "prod" },
      spec: { baseUrl: "https://dms.example.com", apiKeySecretRef: { name: "prod-key", key: "api-key" } },
    });
    const manifests = [
      resource("ready-one"),
      resource("stalled-one"),
      resource("held-one", { rolloutWindows: windows }),
      resource("failed-one"),
      resource("new-one"),
    ];
    await kubectlOk(["apply", "-n", ns, "-f", "-"], { input: [...manifests, connection].join("\n") });
    await setStatus(ns, "dmsd", "ready-one", {
      conditions: [
        condition("Ready", "True", "Available", "the service's deployment is READY"),
        condition("Synced", "True", "ReconcileSuccess", "in line"),
      ],
    });
    await setStatus(ns, "dmsd", "stalled-one", {
      conditions: [
        condition("Ready", "False", "InvalidSpec", "spec.secrets[0]: bad\u001b[31m name"),
        condition("Stalled", "True", "InvalidSpec", "spec.secrets[0]: bad\u001b[31m name"),
      ],
    });
    const held = "the change that makes a new revision (image) is held: outside the rollout windows";
    await setStatus(ns, "dmsd", "held-one", {
      conditions: [
        condition("Ready", "True", "Available", "the service's deployment is READY"),
        condition("Synced", "False", "OutsideRolloutWindow", held),
        condition("Reconciling", "True", "OutsideRolloutWindow", held),
      ],
    });
    await setStatus(ns, "dmsd", "failed-one", {
      latestRevisionId: "4f1c2b3a-0000-4000-8000-000000000001",
      latestRevisionStatus: "BUILD_FAILED",
      failedRevisionLog: {
        revisionId: "4f1c2b3a-0000-4000-8000-000000000001",
        reason: "RevisionFailed",
        type: "build",
        excerpt: "step 1/3\nERROR: pip install failed",
      },
      conditions: [
        condition("Ready", "False", "RevisionFailed", "the latest revision 4f1c2b3a failed: BUILD_FAILED"),
        condition("Stalled", "True", "RevisionFailed", "the latest revision 4f1c2b3a failed: BUILD_FAILED"),
      ],
    });
    await setStatus(ns, "serviceconnection", "prod", {
      conditions: [
        condition("Ready", "False", "Unauthorized", "the service answered 401: check the API key"),
      ],
      deployments: 2,
    });
  });

  it("shows the resources by condition, the held change and when it goes out, the failed revision and the connection", async () => {
    const out = await dms(`status -n ${ns}`);
    expect(out).toContain(
      `Deployment resources in namespace ${ns} (5): 1 Ready, 1 Reconciling, 1 not Ready, 2 Stalled\n`,
    );
    const section = (title: string) => out.split(`\n${title} (`)[1]?.split("\n\n")[0] ?? "";
    expect(section("Stalled")).toMatch(
      /^\s+stalled-one\s+InvalidSpec\s+spec\.secrets\[0\]: bad\ufffd name$/m,
    );
    expect(section("Stalled")).toMatch(
      /^\s+failed-one\s+RevisionFailed\s+the latest revision 4f1c2b3a failed/m,
    );
    expect(section("not Ready")).toMatch(
      /^\s+new-one\s+NotReconciledYet\s+the operator has not written a status/m,
    );
    expect(section("Reconciling")).toMatch(/^\s+held-one\s+OutsideRolloutWindow\s+the change that makes/m);
    expect(section("Ready")).toMatch(/^\s+ready-one\s+Available\s+the service's deployment is READY$/m);
    expect(section("Held outside the rollout windows")).toMatch(
      /^\s+held-one\s+\d{4}-\d\d-\d\dT\d\d:00:00Z \(\d{4}-\d\d-\d\d 03:00 Europe\/Berlin \(GMT\+0[12]:00\)\)$/m,
    );
    expect(section("Failed revisions")).toMatch(
      /^\s+failed-one\s+4f1c2b3a\s+BUILD_FAILED\s+ERROR: pip install failed$/m,
    );
    expect(section("Connections")).toMatch(
      /^\s+ServiceConnection\/prod\s+False\s+Unauthorized\s+2\s+the service answered 401: check the API key$/m,
    );
    // No terminal escape reaches the screen.
    expect(out).not.toContain("\u001b");
  });

  it("-o wide and --no-headers: a table of the resources, a line each; -o name: their names", async () => {
    const wide = await shell(`kubectl dms status -n ${ns} -o wide`);
    expect(wide.code).toBe(0);
    expect(wide.stdout.split("\n")[0]).toMatch(
      /^NAME\s+STATE\s+REASON\s+SUSPENDED\s+OWNER\s+GOES OUT AT\s+FAILED REVISION\s+MESSAGE$/,
    );
    expect(wide.stdout).toMatch(/^held-one\s+Reconciling\s+OutsideRolloutWindow\s+false\s+-\s+\d{4}-/m);
    // The summary line is for the reader: on stderr, off the table a script reads.
    expect(wide.stderr).toContain(`Deployment resources in namespace ${ns} (5)`);
    const bare = await shell(`kubectl dms status -n ${ns} --no-headers`);
    expect(bare).toMatchObject({ code: 0, stderr: "" });
    const names = ["failed-one", "held-one", "new-one", "ready-one", "stalled-one"];
    expect(
      bare.stdout
        .trimEnd()
        .split("\n")
        .map((line) => line.split(/\s+/)[0])
        .sort(),
    ).toEqual(names);
    expect(await dms(`status -n ${ns} -o name`)).toBe(names.map((n) => `deployment.dms.dev/${n}\n`).join(""));
  });

  it("-A shows every namespace, each resource with its namespace", async () => {
    const out = await dms("status -A");
    expect(out).toMatch(/^Deployment resources in every namespace \(\d+\): /);
    // Other files' namespaces share this API server: their resources may fill a section's 30 rows
    // or add an OWNER column (sharded ones). The table lists every resource, a line each.
    const table = await dms("status -A --no-headers");
    expect(table).toMatch(new RegExp(`^${ns}\\s+ready-one\\s+Ready\\s+Available\\s`, "m"));
    expect(table).toMatch(new RegExp(`^${ns}\\s+stalled-one\\s+Stalled\\s`, "m"));
  });

  it("says kubectl's No resources found when the namespace has no resources", async () => {
    const empty = await freshNamespace("plugin-status-empty");
    // As kubectl get: the line on stderr, exit 0, no summary of zeros (other files' cluster-wide
    // connections may still be listed on stdout).
    const run = await shell(`kubectl dms status -n ${empty}`);
    expect(run.code).toBe(0);
    expect(run.stderr).toBe(`No resources found in ${empty} namespace.\n`);
    expect(run.stdout).not.toContain("Deployment resources in");
    expect(await dms(`status -n ${empty} -o name`)).toBe("");
  });
});

describe("kubectl dms version", { timeout: 120_000 }, () => {
  it("prints the client's version, and the operator's from its Deployment's label or image tag", async () => {
    const ns = await freshNamespace("plugin-version");
    const none = await dms(`version --operator-namespace ${ns}`);
    expect(none).toBe(
      `Client Version: ${VERSION}\nOperator Version: not found (no Deployment labelled app.kubernetes.io/name=dms-operator in namespace ${ns})\n`,
    );
    await kubectlOk([
      "create",
      "deployment",
      "dms-operator",
      "-n",
      ns,
      "--image=registry.example.com/dms-operator:9.8.7",
    ]);
    await kubectlOk(["label", "deployment", "dms-operator", "-n", ns, "app.kubernetes.io/name=dms-operator"]);
    expect(await dms(`version --operator-namespace ${ns}`)).toBe(
      `Client Version: ${VERSION}\nOperator Version: 9.8.7 (${ns}/dms-operator, 0/1 ready, image registry.example.com/dms-operator:9.8.7)\n`,
    );
    await kubectlOk(["label", "deployment", "dms-operator", "-n", ns, "app.kubernetes.io/version=1.2.3"]);
    expect(await dms(`version --operator-namespace ${ns}`)).toContain("Operator Version: 1.2.3 (");
    expect(await dms("version --client")).toBe(`Client Version: ${VERSION}\n`);
  });
});

describe("kubectl dms completion", { timeout: 120_000 }, () => {
  it("writes a bash script bash accepts, completing commands, flags and resource names", async () => {
    const ns = await freshNamespace("plugin-completion");
    await kubectlOk(["apply", "-n", ns, "-f", "-"], { input: `${resource("alpha")}\n${resource("beta")}` });
    const run = await shell(
      [
        "kubectl dms completion bash > script.bash",
        "bash -n script.bash",
        "source script.bash",
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a bash expansion, not a template
        'complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _kubectl_dms; echo "${COMPREPLY[*]}"; }',
        "complete_words kubectl-dms re",
        "complete_words kubectl-dms status --all",
        `complete_words kubectl-dms suspend -n ${ns} ''`,
        "complete_words kubectl-dms deployments ''",
        "complete_words kubectl-dms status -o ''",
        "complete_words kubectl-dms logs web --type d",
      ].join("\n"),
      { HOME: bin },
    );
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout.split("\n")).toEqual([
      "reconcile resume rebuild repos revisions",
      "--all-namespaces",
      "alpha beta",
      "list --help -h",
      "table wide name json yaml",
      "deploy",
      "",
    ]);
  });

  it("completes `kubectl dms …` for kubectl itself through kubectl_complete-dms: verbs, flags, resource names", async () => {
    const ns = await freshNamespace("plugin-kubectl-completion");
    await kubectlOk(["apply", "-n", ns, "-f", "-"], { input: `${resource("gamma")}\n${resource("delta")}` });
    const complete = async (words: string) => {
      const run = await shell(`kubectl __complete dms ${words}`);
      expect(run.code).toBe(0);
      return run.stdout;
    };
    expect(await complete("sus")).toBe("suspend\n:4\n");
    expect(await complete("r")).toBe("reconcile\nresume\nrollout-now\nrebuild\nrepos\nrevisions\n:4\n");
    expect(await complete("status --all")).toBe("--all-namespaces\n:4\n");
    // Names with their state beside them; a verb takes several, so the ones typed are not offered again.
    expect(await complete(`rollout-now -n ${ns} ''`)).toBe(
      "delta\tnot reconciled yet\ngamma\tnot reconciled yet\n:4\n",
    );
    expect(await complete(`suspend --namespace=${ns} g`)).toBe("gamma\tnot reconciled yet\n:4\n");
    expect(await complete(`suspend -n ${ns} gamma ''`)).toBe("delta\tnot reconciled yet\n:4\n");
    // The values of -o and --type, with what each is.
    expect(await complete("status -o w")).toBe("wide\ta table with more columns, ids and times whole\n:4\n");
    expect(await complete("logs x --type ''")).toBe("build\tthe build log\ndeploy\tthe deploy log\n:4\n");
    expect(await complete("ru")).toBe(":4\n");
  });

  it("completes resource names with their Ready condition in fish and zsh, asking the real kubectl", async () => {
    const ns = await freshNamespace("plugin-shell-completion");
    await kubectlOk(["apply", "-n", ns, "-f", "-"], { input: `${resource("epsilon")}\n${resource("zeta")}` });
    await setStatus(ns, "dmsd", "zeta", {
      conditions: [condition("Ready", "True", "Available", "the service's deployment is READY")],
    });
    const fish = await shell(
      [
        "kubectl dms completion fish > script.fish",
        `fish -c 'source script.fish; complete -C "kubectl-dms suspend -n ${ns} "; complete -C "kubectl-dms suspend -n ${ns} zeta "'`,
      ].join("\n"),
    );
    expect(fish.stderr).toBe("");
    expect(fish.stdout).toBe("epsilon\tnot reconciled yet\nzeta\tReady=True\nepsilon\tnot reconciled yet\n");
    const zsh = await shell(
      [
        "kubectl dms completion zsh > script.zsh",
        // zsh's _describe needs its line editor: a stand-in prints the entries it is given.
        `zsh -c '_describe() { print -rl -- "\${(@P)4}"; }; compdef() { :; }; source ./script.zsh; words=(kubectl-dms resume -n ${ns} ""); CURRENT=5; _kubectl_dms'`,
      ].join("\n"),
    );
    expect(zsh.stderr).toBe("");
    expect(zsh.stdout).toBe("epsilon:not reconciled yet\nzeta:Ready=True\n");
  });

  it("writes zsh and fish scripts for the plugin's commands, and refuses another shell", async () => {
    const zsh = await dms("completion zsh");
    expect(zsh).toMatch(/^#compdef kubectl-dms\n/);
    // zsh's own completion, with descriptions: not the bash script under bashcompinit.
    expect(zsh).not.toContain("bashcompinit");
    expect(zsh).toContain("_describe -t values value described");
    const fish = await dms("completion fish");
    expect(fish).toContain("complete -c kubectl-dms -n 'test -z (__kubectl_dms_path)' -a status");
    expect(fish).not.toContain("-a run\n");
    const bad = await shell("kubectl dms completion powershell");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("must be one of bash, zsh, fish");
  });
});
