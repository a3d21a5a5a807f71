/**
 * The revision logs route (from the service's public documentation, not the shared spec) through
 * the client and the `logs` command, against the simulator over loopback: both types, both
 * orders, paging with the cursor, `type` required, an unknown revision, a service without the
 * route; the command by name with `--base-url`, `-o json`, `--since`, and `--follow` ending when
 * the revision ends.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { ServiceClient } from "../../src/api/client.ts";
import { isServiceError } from "../../src/api/errors.ts";
import { type LogEntry, LogsRouteMissingError } from "../../src/api/revision-logs.ts";
import type { CliContext } from "../../src/commands/context.ts";
import { registerLogsCommand } from "../../src/commands/logs-command.ts";
import { runProgram } from "../../src/commands/program.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { runCli } from "../support/cli.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { unsafeCharacters } from "../support/terminal-safe.ts";
import { deploymentPath, type FakeKube, startFakeKube } from "./fake-kube.ts";

const UNKNOWN = "d0000000-0000-4000-8000-000000000009";
/** The simulator's clock runs an hour behind: every log line is an hour old for `--since`. */
const HOUR = 3_600_000;

let sim: RunningSimulator;
let client: ServiceClient;
const clock = new ManualClock({ start: Date.now() - HOUR });

beforeAll(async () => {
  sim = await startSimulator({
    timing: { readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 },
    now: () => clock.now(),
  });
  client = new ServiceClient({ baseUrl: sim.url, qps: 10_000, burst: 1000 });
});
afterAll(async () => {
  await sim.close();
});

/** A deployment (with a secret) whose latest revision failed at `phase`; its revision id. */
async function failed(name: string, phase: "build" | "deploy" | "create") {
  const d = await client.createDeployment({
    name,
    source: "internal_docker",
    source_revision_config: { image_uri: "registry.example.com/agent:1" },
    secrets: [{ name: "DB_PASSWORD", value: "pw-in-the-log" }],
  });
  sim.store.drift(d.id, { fail_revisions: phase });
  const patched = await client.patchDeployment(d.id, {
    source_revision_config: { image_uri: "registry.example.com/agent:2" },
  });
  clock.advance(1);
  return { id: d.id, revision: patched.latest_revision_id ?? "" };
}

const messages = (entries: readonly LogEntry[]) => entries.map((e) => e.message);

describe("the client's revision logs", () => {
  it("a failed build: its build log oldest first, ending in the error, newest first when asked; no deploy log", async () => {
    const { id, revision } = await failed("build-fails", "build");
    const asc = await client.getRevisionLogs(id, revision, { type: "build" });
    expect(asc?.nextOffset).toBeNull();
    const lines = messages(asc?.entries ?? []);
    expect(lines[0]).toContain(`revision ${revision}: resolving internal_docker source`);
    expect(lines).toContain("env: DB_PASSWORD=pw-in-the-log");
    expect(lines.at(-1)).toMatch(/^error: build failed/);
    expect(asc?.entries.at(-1)).toMatchObject({ level: "ERROR", time: expect.any(String) });
    const desc = await client.getRevisionLogs(id, revision, { type: "build", order: "desc", limit: 2 });
    expect(messages(desc?.entries ?? [])).toEqual(lines.slice(-2).reverse());
    expect(desc?.nextOffset).toBe("2");
    const deploy = await client.getRevisionLogs(id, revision, { type: "deploy" });
    expect(deploy).toEqual({ entries: [], nextOffset: null, skipped: 0 });
  });

  it("a failed deploy has both logs, the deploy one ending in the error; a failed create a build log", async () => {
    const deploy = await failed("deploy-fails", "deploy");
    const build = await client.getRevisionLogs(deploy.id, deploy.revision, { type: "build" });
    expect(messages(build?.entries ?? []).at(-1)).toMatch(/^build of revision .* succeeded$/);
    const logs = await client.getRevisionLogs(deploy.id, deploy.revision, { type: "deploy" });
    expect(messages(logs?.entries ?? []).at(-1)).toMatch(/^error: container agent exited with code 1/);
    const create = await failed("create-fails", "create");
    const createLog = await client.getRevisionLogs(create.id, create.revision, { type: "build" });
    expect(messages(createLog?.entries ?? []).at(-1)).toMatch(/^error: could not resolve/);
  });

  it("pages with the cursor: limit 2 and next_offset give the whole log, each entry once", async () => {
    const { id, revision } = await failed("paged", "build");
    const whole = messages((await client.getRevisionLogs(id, revision, { type: "build" }))?.entries ?? []);
    const paged: string[] = [];
    let offset: string | undefined;
    for (let pages = 0; pages < 50; pages++) {
      const page = await client.getRevisionLogs(id, revision, {
        type: "build",
        limit: 2,
        ...(offset === undefined ? {} : { offset }),
      });
      paged.push(...messages(page?.entries ?? []));
      if (!page?.nextOffset) break;
      offset = page.nextOffset;
    }
    expect(paged).toEqual(whole);
    expect(whole.length).toBeGreaterThan(4);
  });

  it("type is required (400), limit is checked before sending, an unknown revision is undefined", async () => {
    const { id, revision } = await failed("checked", "build");
    const res = await fetch(`${sim.url}/v2/deployments/${id}/revisions/${revision}/logs`);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ detail: "query parameter 'type' is required: build or deploy" });
    const bad = await fetch(`${sim.url}/v2/deployments/${id}/revisions/${revision}/logs?type=run`);
    expect(bad.status).toBe(400);
    await expect(client.getRevisionLogs(id, revision, { type: "build", limit: 0 })).rejects.toThrow(/limit/);
    await expect(client.getRevisionLogs(id, UNKNOWN, { type: "build" })).resolves.toBeUndefined();
    const unknownDeployment = await client
      .getRevisionLogs(UNKNOWN, UNKNOWN, { type: "build" })
      .catch((e) => e);
    expect(unknownDeployment).not.toBeInstanceOf(LogsRouteMissingError);
  });

  it("a service without the route (404 Not Found, 405) throws LogsRouteMissingError", async () => {
    const { id, revision } = await failed("no-route", "build");
    try {
      sim.logsRoute.mode = "missing";
      const missing = await client.getRevisionLogs(id, revision, { type: "build" }).catch((e) => e);
      expect(missing).toBeInstanceOf(LogsRouteMissingError);
      expect(missing.status).toBe(404);
      const res = await fetch(`${sim.url}/_sim/logs-route`, {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ mode: "method-not-allowed" }),
      });
      expect(res.status).toBe(200);
      const notAllowed = await client.getRevisionLogs(id, revision, { type: "build" }).catch((e) => e);
      expect(notAllowed).toBeInstanceOf(LogsRouteMissingError);
      expect(notAllowed.status).toBe(405);
      // The revisions route itself is unaffected.
      await expect(client.getRevision(id, revision)).resolves.toMatchObject({ status: "BUILD_FAILED" });
    } finally {
      sim.logsRoute.mode = "present";
    }
  });

  it("a server's other failures stay service errors", async () => {
    const { id, revision } = await failed("flaky", "build");
    sim.faults.set({
      script: [
        { route: "GET /v2/deployments/{deployment_id}/revisions/{revision_id}/logs", count: 10, status: 503 },
      ],
    });
    try {
      const error = await new ServiceClient({ baseUrl: sim.url, retries: 0 })
        .getRevisionLogs(id, revision, { type: "build" })
        .catch((e) => e);
      expect(isServiceError(error, "unavailable")).toBe(true);
    } finally {
      sim.faults.clear();
    }
  });
});

describe("dms-operator logs", () => {
  const logs = (args: string[]) =>
    runCli(["logs", "--service", ...args], {
      commands: [registerLogsCommand],
      env: { DMS_BASE_URL: sim.url },
    });

  it("by name: the latest revision's build log when its build failed, as time level message", async () => {
    const { revision } = await failed("cli-build", "build");
    const run = await logs(["cli-build"]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+Z INFO revision .*: resolving/);
    expect(lines.at(-1)).toMatch(/ ERROR error: build failed/);
    const deploy = await logs(["cli-build", "--type", "deploy", "--revision", revision]);
    expect(deploy).toEqual({ code: 0, stdout: "", stderr: "" });
  });

  it("-o json prints one entry per line; --since leaves out older entries", async () => {
    await failed("cli-json", "deploy");
    const run = await logs(["cli-json", "-o", "json"]);
    const entries = run.stdout
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as LogEntry);
    expect(entries.at(-1)).toMatchObject({
      level: "ERROR",
      message: expect.stringMatching(/^error: container/),
    });
    // Every line is an hour old on the simulator's clock.
    expect((await logs(["cli-json", "--since", "10m"])).stdout).toBe("");
    expect((await logs(["cli-json", "--since", "2h"])).stdout.split("\n").length).toBe(entries.length + 1);
  });

  it("escapes the controls a build printed (OSC 52, clear screen, bidi override, invisible fillers), and keeps them as JSON and YAML escapes in -o json|yaml", async () => {
    const hostile =
      "\x1b]52;c;SGVsbG8=\x07\x1b[2J\x1b[H\x9b2J\u202eexe.txt\nforged ERROR line\u3164\u200b\ufe0f";
    const d = await client.createDeployment({
      name: "cli-hostile",
      source: "internal_docker",
      source_revision_config: { image_uri: "registry.example.com/agent:1" },
      secrets: [{ name: "BANNER", value: hostile }],
    });
    sim.store.drift(d.id, { fail_revisions: "build" });
    await client.patchDeployment(d.id, {
      source_revision_config: { image_uri: "registry.example.com/agent:2" },
    });
    clock.advance(1);
    const text = await logs(["cli-hostile"]);
    expect(text.code).toBe(0);
    expect(unsafeCharacters(text.stdout)).toEqual([]);
    const line = text.stdout.split("\n").find((l) => l.includes("BANNER"));
    expect(line).toContain(
      "env: BANNER=\\x1b]52;c;SGVsbG8=\\x07\\x1b[2J\\x1b[H\\x9b2J\\u202eexe.txt\\nforged ERROR line\\u3164\\u200b\\ufe0f",
    );
    // The newline inside the entry does not start a line of its own.
    expect(text.stdout.split("\n").some((l) => l.startsWith("forged"))).toBe(false);
    const json = await logs(["cli-hostile", "-o", "json"]);
    expect(json.code).toBe(0);
    expect(unsafeCharacters(json.stdout)).toEqual([]);
    const entries = json.stdout
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as LogEntry);
    expect(entries.map((e) => e.message)).toContain(`env: BANNER=${hostile}`);
    const yaml = await logs(["cli-hostile", "-o", "yaml"]);
    expect(yaml.code).toBe(0);
    expect(unsafeCharacters(yaml.stdout)).toEqual([]);
    for (const c of ["\u3164", "\u200b", "\ufe0f"]) expect(yaml.stdout).not.toContain(c);
    expect(yaml.stdout).toContain("\\u3164\\u200b\\ufe0f");
    const documents = parseAllDocuments(yaml.stdout).map((doc) => doc.toJS() as LogEntry);
    expect(documents.map((e) => e.message)).toContain(`env: BANNER=${hostile}`);
  });

  it("a name the service does not have, and a bad --since, fail clearly", async () => {
    const missing = await logs(["no-such-deployment"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('the service has no deployment named "no-such-deployment"');
    const since = await logs(["x", "--since", "soon"]);
    expect(since.code).toBe(1);
    expect(since.stderr).toContain("must be a duration");
  });
});

describe("dms-operator logs <Deployment resource> --kubeconfig", () => {
  const NS = "team-logs";
  let kube: FakeKube;
  let own: { id: string; revision: string };
  let victim: { id: string; revision: string };
  beforeAll(async () => {
    own = await failed("logs-own", "build");
    victim = await failed("logs-victim", "deploy");
    kube = await startFakeKube({ namespace: NS });
  });
  afterAll(async () => {
    await kube.close();
  });

  /** The resource `logs-own` (the default connection), its status recording `deploymentId`. */
  function resourceRecording(deploymentId: string | undefined) {
    kube.put(deploymentPath(NS, "logs-own"), {
      apiVersion: "dms.dev/v1alpha1",
      kind: "Deployment",
      metadata: { name: "logs-own", namespace: NS, resourceVersion: "1", uid: "u-logs", generation: 1 },
      spec: { source: "internal_docker" },
      ...(deploymentId === undefined ? {} : { status: { deploymentId } }),
    });
  }
  const logsOf = () =>
    runCli(["logs", "logs-own", "-n", NS, "--kubeconfig", kube.kubeconfig, "-o", "json"], {
      commands: [registerLogsCommand],
      env: { DMS_BASE_URL: sim.url },
    });
  /** The revision ids the printed entries name (the simulator's lines say `revision <id>: …`). */
  const revisionsNamed = (stdout: string) =>
    new Set(
      stdout
        .trimEnd()
        .split("\n")
        .map((line) => /revision ([0-9a-f-]{36})/.exec((JSON.parse(line) as LogEntry).message)?.[1])
        .filter((id) => id !== undefined),
    );

  it.each([
    ["the resource's own deployment", () => own.id],
    ["another team's deployment (forged)", () => victim.id],
    ["no uuid (forged)", () => "../../v2/deployments"],
    ["a deployment the service does not have", () => UNKNOWN],
    ["nothing yet", () => undefined],
  ])(
    "status.deploymentId of %s: the log of the deployment that carries the resource's name",
    async (_what, id) => {
      resourceRecording(id());
      const run = await logsOf();
      expect(run.stderr).toBe("");
      expect(run.code).toBe(0);
      expect(revisionsNamed(run.stdout)).toEqual(new Set([own.revision]));
      expect(run.stdout).not.toContain(victim.revision);
    },
  );

  it.each([
    [
      "NameConflict",
      'the service name "logs-victim" is already claimed by the older resource team-a/logs-victim',
    ],
    ["ConnectionNotAllowed", "the default connection may not be used from namespace team-logs"],
  ])(
    "a resource the operator reports %s for owns no deployment: not another's log",
    async (reason, message) => {
      kube.put(deploymentPath(NS, "logs-loser"), {
        apiVersion: "dms.dev/v1alpha1",
        kind: "Deployment",
        metadata: { name: "logs-loser", namespace: NS, resourceVersion: "1", uid: "u-loser", generation: 1 },
        spec: { source: "internal_docker", name: "logs-victim" },
        status: { conditions: [{ type: "Synced", status: "False", reason, message }] },
      });
      const run = await runCli(
        ["logs", "logs-loser", "-n", NS, "--kubeconfig", kube.kubeconfig, "-o", "json"],
        {
          commands: [registerLogsCommand],
          env: { DMS_BASE_URL: sim.url },
        },
      );
      expect(run.code).toBe(1);
      expect(run.stdout).not.toContain(victim.revision);
      expect(run.stderr).toContain(`Deployment ${NS}/logs-loser owns no deployment on the service`);
      expect(run.stderr).toContain(reason);
    },
  );
});

describe("dms-operator logs --follow", () => {
  let live: RunningSimulator;
  beforeAll(async () => {
    live = await startSimulator({
      timing: { readyAfterMs: 0, revisionActiveAfterMs: 1500, deleteAfterMs: 0 },
    });
  });
  afterAll(async () => {
    await live.close();
  });

  it("prints new entries as they are written, each once, and ends when the revision goes live", async () => {
    const liveClient = new ServiceClient({ baseUrl: live.url });
    await liveClient.createDeployment({ name: "following", source: "internal_docker" });
    const run = await runCli(["logs", "following", "--service", "--follow", "--type", "deploy"], {
      commands: [registerLogsCommand],
      env: { DMS_BASE_URL: live.url },
    });
    expect(run.code).toBe(0);
    const lines = run.stdout
      .trimEnd()
      .split("\n")
      .map((l) => l.replace(/^\S+ \S+ /, ""));
    expect(lines).toEqual([
      expect.stringMatching(/^scheduling revision /),
      expect.stringMatching(/^pulling image /),
      "starting container agent",
      expect.stringMatching(/^revision .* is live$/),
    ]);
  });

  it("Ctrl-C ends it with no error line and the status of an interruption, 130", async () => {
    const slow = await startSimulator({
      timing: { readyAfterMs: 0, revisionActiveAfterMs: HOUR, deleteAfterMs: 0 },
    });
    try {
      await new ServiceClient({ baseUrl: slow.url }).createDeployment({
        name: "interrupted",
        source: "internal_docker",
      });
      const stop = new AbortController();
      let stdout = "";
      let stderr = "";
      const ctx: CliContext = {
        // The first entry printed, the user presses Ctrl-C (the revision is still being built).
        out: (text) => {
          stdout += text;
          stop.abort(new Error("shutdown requested by signal"));
        },
        err: (text) => {
          stderr += text;
        },
        stdoutIsTTY: false,
        env: { DMS_BASE_URL: slow.url },
        stopSignal: stop.signal,
      };
      const code = await runProgram(
        ["logs", "interrupted", "--service", "--follow", "--type", "build"],
        ctx,
        [registerLogsCommand],
      );
      expect(stdout).toMatch(/resolving internal_docker source/);
      expect(stderr).toBe("");
      expect(code).toBe(130);
    } finally {
      await slow.close();
    }
  });
});
