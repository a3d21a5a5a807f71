// kubectl's flags of the cluster before a command's name in the forms kubectl takes them, the
// value of -n attached too (`kubectl -nteam-a get dmsd`): the command's own. Against a loopback
// fake of the API server that records every request.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCommands } from "../../src/commands/program.ts";
import { KUBECTL_PLUGIN_NAME } from "../../src/commands/program-name.ts";
import { COMMANDS } from "../../src/commands/registry.ts";
import { capturingContext } from "../support/cli.ts";
import { type FakeKube, startFakeKube } from "./fake-kube.ts";

let kube: FakeKube;

beforeAll(async () => {
  kube = await startFakeKube({ namespace: "team-a" });
});

afterAll(() => kube.close());

describe("kubectl dms -n<namespace> <command>", () => {
  it("takes the namespace attached to -n, as kubectl -nteam-b does", async () => {
    const { ctx, written } = capturingContext();
    const argv = ["-nteam-b", "--kubeconfig", kube.kubeconfig, "suspend", "web"];
    await runCommands(argv, ctx, KUBECTL_PLUGIN_NAME, COMMANDS);
    expect(written.stderr).not.toContain("unknown option");
    // The resource of team-b was written to (the fake refuses every write, after recording it).
    expect(kube.requests).toContain("PATCH /apis/dms.dev/v1alpha1/namespaces/team-b/deployments/web");
  });
});
