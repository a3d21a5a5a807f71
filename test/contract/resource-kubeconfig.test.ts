/**
 * Where `logs` and `revisions` find the cluster of a Deployment resource, as kubectl does:
 * `--kubeconfig`, else `KUBECONFIG` (several files merged), else `~/.kube/config` (of `HOME`, a
 * temporary directory here); `--context` without `--kubeconfig`; and the service named directly
 * (`--base-url`, `DMS_BASE_URL`) or `--connection` keeping `<resource>` a deployment name. Against
 * the simulator and a read-only fake API server over loopback.
 */
import { mkdir, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import type { Deployment } from "../../src/api/wire.ts";
import { registerLogsCommand } from "../../src/commands/logs-command.ts";
import { registerRevisionsCommand } from "../../src/commands/revisions-command.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { runCli } from "../support/cli.ts";
import {
  connectedResource,
  deploymentPath,
  type FakeKube,
  serviceConnectionPath,
  startConnectedKube,
} from "./fake-kube.ts";

const KEY = "resource-kubeconfig-key-6e1b";
const NS = "team-a";

let sim: RunningSimulator;
let kube: FakeKube;
let agent: Deployment;
/** A kubeconfig naming no namespace and, as its current context, a server nobody listens on. */
let elsewhere: string;

beforeAll(async () => {
  sim = await startSimulator({
    apiKey: KEY,
    timing: { readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 },
  });
  const client = new ServiceClient({ baseUrl: sim.url, apiKey: KEY, qps: 10_000, burst: 1000 });
  agent = await client.createDeployment({
    name: "agent",
    source: "internal_docker",
    source_revision_config: { image_uri: "registry.example.com/agent:1" },
  });
  sim.store.drift(agent.id, { fail_revisions: "build" });
  agent = await client.patchDeployment(agent.id, {
    source_revision_config: { image_uri: "registry.example.com/agent:2" },
  });

  kube = await startConnectedKube(NS, sim.url, KEY);
  kube.put(
    deploymentPath(NS, "billing"),
    connectedResource(
      NS,
      "billing",
      { name: "agent", source: "internal_docker" },
      { deploymentId: agent.id },
    ),
  );

  // The fake's context under its own name, and a current context whose server refuses.
  const fake = JSON.parse(await readFile(kube.kubeconfig, "utf8")) as Record<
    "clusters" | "users" | "contexts",
    object[]
  >;
  elsewhere = join(await mkdtemp(join(tmpdir(), "dms-kubeconfig-")), "elsewhere");
  await writeFile(
    elsewhere,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "closed", cluster: { server: "http://127.0.0.1:1" } }, ...fake.clusters],
      users: [{ name: "closed", user: { token: "t" } }, ...fake.users],
      contexts: [{ name: "closed", context: { cluster: "closed", user: "closed" } }, ...fake.contexts],
      "current-context": "closed",
    }),
  );
});
afterAll(async () => {
  await sim.close();
  await kube.close();
});

/** A HOME directory whose `.kube/config` is `kubeconfig` (none when undefined). */
async function home(kubeconfig?: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "dms-home-"));
  if (kubeconfig !== undefined) {
    await mkdir(join(dir, ".kube"));
    await writeFile(join(dir, ".kube", "config"), await readFile(kubeconfig));
  }
  return dir;
}

const revisions = (args: string[], env: Record<string, string>) =>
  runCli(["revisions", ...args, "-o", "json"], { commands: [registerRevisionsCommand], env });
const logs = (args: string[], env: Record<string, string>) =>
  runCli(["logs", ...args], { commands: [registerLogsCommand], env });
/** The ids `revisions -o json` printed. */
const ids = (stdout: string) => (JSON.parse(stdout) as { id: string }[]).map((r) => r.id);

describe("logs and revisions find the cluster as kubectl does", () => {
  beforeEach(() => {
    kube.requests.length = 0;
  });

  it("KUBECONFIG: the Deployment resource of its context's namespace, through its own connection", async () => {
    const run = await revisions(["billing"], { KUBECONFIG: kube.kubeconfig });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(ids(run.stdout)).toContain(agent.latest_revision_id);
    expect(kube.requests).toContain(`GET ${deploymentPath(NS, "billing")}`);
    expect(kube.requests).toContain(`GET ${serviceConnectionPath(NS, "prod")}`);
  });

  it("KUBECONFIG of several files: merged, the first to set the current context wins", async () => {
    // `elsewhere` sets another current context too, after the first file: the first one wins.
    const first = join(await mkdtemp(join(tmpdir(), "dms-kubeconfig-")), "current");
    await writeFile(first, JSON.stringify({ apiVersion: "v1", kind: "Config", "current-context": "fake" }));
    const run = await logs(["billing"], { KUBECONFIG: [first, elsewhere, kube.kubeconfig].join(delimiter) });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout.trimEnd().split("\n").at(-1)).toMatch(/ ERROR error: build failed/);
    expect(kube.requests).toContain(`GET ${deploymentPath(NS, "billing")}`);
  });

  it("~/.kube/config when neither --kubeconfig nor KUBECONFIG is given", async () => {
    const env = { HOME: await home(kube.kubeconfig) };
    const run = await logs(["billing"], env);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("error: build failed");
    const listed = await revisions(["billing"], env);
    expect(listed.code).toBe(0);
    expect(ids(listed.stdout)).toContain(agent.latest_revision_id);
    expect(kube.requests.filter((r) => r === `GET ${deploymentPath(NS, "billing")}`)).toHaveLength(2);
  });

  it("--context without --kubeconfig: a context of ~/.kube/config other than its current one", async () => {
    const env = { HOME: await home(elsewhere) };
    const current = await revisions(["billing", "-n", NS], env);
    expect(current.code).toBe(1);
    expect(current.stderr).toMatch(/127\.0\.0\.1:1/);
    const run = await revisions(["billing", "--context", "fake"], env);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(ids(run.stdout)).toContain(agent.latest_revision_id);
    const logged = await logs(["billing", "--context", "fake"], { KUBECONFIG: elsewhere });
    expect(logged.code).toBe(0);
    expect(logged.stdout).toContain("error: build failed");
  });

  it("--context with no kubeconfig anywhere: a usage error saying where one is looked for", async () => {
    const env = { HOME: await home() };
    for (const run of [
      await revisions(["billing", "--context", "fake"], env),
      await logs(["billing", "--context", "fake"], env),
    ]) {
      expect(run.code).toBe(1);
      expect(run.stderr).toBe(
        "error: --context fake needs a kubeconfig: pass --kubeconfig <path>, set KUBECONFIG, or create ~/.kube/config\n",
      );
    }
  });

  it("the Deployment resource also with DMS_BASE_URL set; --service makes <resource> the service's deployment name", async () => {
    const env = { HOME: await home(kube.kubeconfig), KUBECONFIG: kube.kubeconfig, DMS_API_KEY: KEY };
    // DMS_BASE_URL exported, as the README has users do, changes nothing: the cluster is read.
    const resource = await logs(["billing"], { ...env, DMS_BASE_URL: sim.url });
    expect(resource.stderr).toBe("");
    expect(resource.stdout).toContain("error: build failed");
    expect(kube.requests).toContain(`GET ${deploymentPath(NS, "billing")}`);
    kube.requests.length = 0;
    const byEnv = await revisions(["agent", "--service"], { ...env, DMS_BASE_URL: sim.url });
    expect(byEnv.stderr).toBe("");
    expect(ids(byEnv.stdout)).toContain(agent.latest_revision_id);
    const byFlag = await logs(["agent", "--service", "--base-url", sim.url], env);
    expect(byFlag.stderr).toBe("");
    expect(byFlag.stdout).toContain("error: build failed");
    expect(kube.requests).toEqual([]);
    // --service with a flag that names the cluster: one or the other.
    const both = await logs(["agent", "--service", "--context", "fake"], env);
    expect(both.code).toBe(1);
    expect(both.stderr).toContain("drop --context, or drop --service");
  });

  it("--connection reads the connection from KUBECONFIG; <resource> stays a deployment name", async () => {
    const run = await revisions(["agent", "--connection", "ServiceConnection/prod"], {
      KUBECONFIG: kube.kubeconfig,
    });
    expect(run.stderr).toBe("");
    expect(ids(run.stdout)).toContain(agent.latest_revision_id);
    expect(kube.requests).toContain(`GET ${serviceConnectionPath(NS, "prod")}`);
    expect(kube.requests).not.toContain(`GET ${deploymentPath(NS, "agent")}`);
  });

  it("no kubeconfig anywhere: a usage error naming where one is looked for, and --service", async () => {
    const run = await logs(["billing"], { HOME: await home() });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("set KUBECONFIG");
    expect(run.stderr).toContain("--service");
    expect(kube.requests).toEqual([]);
    const service = await logs(["billing", "--service"], { HOME: await home() });
    expect(service.code).toBe(1);
    expect(service.stderr).toContain("--base-url");
  });
});
