// `kubectl dms <verb> --all -A` / `-l <selector> -A`, as `kubectl annotate dmsd --all -A` does:
// the Deployment resources of every namespace (matching the selector), each patched in its own
// namespace; names with -A refused, as kubectl refuses them. Against the run's real API server.
import { describe, expect, it } from "vitest";
import { registerReconcileCommand, registerSuspendCommand } from "../../src/commands/annotate.ts";
import { runCommands } from "../../src/commands/program.ts";
import { KUBECTL_PLUGIN_NAME } from "../../src/commands/program-name.ts";
import { COMMANDS } from "../../src/commands/registry.ts";
import { capturingContext, runCli } from "../support/cli.ts";
import { freshNamespace, kubectlOk, testKubeconfigPath } from "../support/cluster.ts";

const commands = [registerSuspendCommand, registerReconcileCommand];
const dms = (args: string[]) =>
  runCli([...args, "--kubeconfig", testKubeconfigPath()], { commands, name: "kubectl dms" });

const resource = (name: string, labels: Record<string, string>) =>
  JSON.stringify({
    apiVersion: "dms.dev/v1alpha1",
    kind: "Deployment",
    metadata: { name, labels },
    spec: { source: "internal_docker", sourceRevisionConfig: { imageUri: "registry.example.com/a:1" } },
  });

const paused = async (ns: string, name: string) =>
  (
    await kubectlOk([
      "get",
      "dmsd",
      name,
      "-n",
      ns,
      "-o",
      "jsonpath={.metadata.annotations.dms\\.dev/paused}",
    ])
  ).trim();

describe("the verbs with -A, --all-namespaces", { timeout: 60_000 }, () => {
  it("-l <selector> -A acts on the matching resources of every namespace, each in its own", async () => {
    const [a, b] = [await freshNamespace("verbs-all-a"), await freshNamespace("verbs-all-b")];
    const run = a; // a label value no other test's resources carry
    await kubectlOk(["apply", "-n", a, "-f", "-"], { input: resource("web", { batch: run }) });
    await kubectlOk(["apply", "-n", b, "-f", "-"], { input: resource("web", { batch: run }) });
    await kubectlOk(["apply", "-n", b, "-f", "-"], { input: resource("other", { batch: "elsewhere" }) });
    const suspended = await dms(["suspend", "-l", `batch=${run}`, "-A"]);
    expect(suspended).toEqual({
      code: 0,
      stdout: "deployment.dms.dev/web suspended\ndeployment.dms.dev/web suspended\n",
      stderr: "",
    });
    expect([await paused(a, "web"), await paused(b, "web"), await paused(b, "other")]).toEqual([
      "true",
      "true",
      "",
    ]);
    // --all-namespaces=true is the same flag; none matching is kubectl's "No resources found".
    const none = await dms(["suspend", "-l", `batch=${run}-none`, "--all-namespaces=true"]);
    expect(none).toEqual({
      code: 0,
      stdout: "",
      stderr: `No Deployment resources found matching batch=${run}-none.\n`,
    });
  });

  it("refuses names with -A, as kubectl does, before any request", async () => {
    const run = await dms(["reconcile", "web", "-A"]);
    expect(run).toEqual({
      code: 1,
      stdout: "",
      stderr:
        "error: a resource cannot be named across all namespaces: give -n <namespace> with names, or --all or -l <selector> with -A\n",
    });
  });
});

describe("kubectl's flags of the cluster before the verb's name", { timeout: 60_000 }, () => {
  it("are the verb's, as `kubectl -n team-a get` takes them: kubectl dms -n <ns> --kubeconfig <path> suspend", async () => {
    const ns = await freshNamespace("verbs-leading");
    await kubectlOk(["apply", "-n", ns, "-f", "-"], { input: resource("web", {}) });
    const { ctx, written } = capturingContext();
    const argv = ["--verbose", "-n", ns, `--kubeconfig=${testKubeconfigPath()}`, "suspend", "web"];
    const code = await runCommands(argv, ctx, KUBECTL_PLUGIN_NAME, COMMANDS);
    expect({ code, ...written }).toEqual({
      code: 0,
      stdout: "deployment.dms.dev/web suspended\n",
      stderr: "",
    });
    expect(await paused(ns, "web")).toBe("true");
  });
});
