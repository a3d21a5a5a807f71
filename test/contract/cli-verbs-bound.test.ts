// A verb's --all or -l over more Deployment resources than it acts on at once (MAX_SELECTED):
// refused before any write, naming the bound and how to narrow it, never the first ones changed
// and the rest left as they were in silence. Against a loopback fake of the API server that
// pages its lists and records every request.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerSuspendCommand } from "../../src/commands/annotate.ts";
import { MAX_SELECTED } from "../../src/commands/annotate-run.ts";
import { runCli } from "../support/cli.ts";
import { deploymentPath, type FakeKube, startFakeKube } from "./fake-kube.ts";

let kube: FakeKube;

beforeAll(async () => {
  kube = await startFakeKube({ namespace: "team-a" });
  // One more than the bound, over two namespaces.
  for (let i = 0; i <= MAX_SELECTED; i++) {
    const namespace = i % 2 === 0 ? "team-a" : "team-b";
    const name = `web-${i}`;
    kube.put(deploymentPath(namespace, name), {
      apiVersion: "dms.dev/v1alpha1",
      kind: "Deployment",
      metadata: { name, namespace, resourceVersion: "1" },
      spec: {},
    });
  }
});

afterAll(() => kube.close());

describe("a verb over more resources than it acts on at once", () => {
  it("suspend --all -A: refused before any write, naming the bound and how to narrow it", async () => {
    const run = await runCli(["suspend", "--all", "-A", "--kubeconfig", kube.kubeconfig], {
      commands: [registerSuspendCommand],
      name: "kubectl dms",
    });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr).toBe(
      `error: more than ${MAX_SELECTED} Deployment resources found in all namespaces: a verb acts on at most ${MAX_SELECTED} at once, and none was changed; narrow them with -l <selector> or -n <namespace>\n`,
    );
    expect(kube.requests.filter((r) => !r.startsWith("GET "))).toEqual([]);
  });
});
