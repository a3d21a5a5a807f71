// What `kubectl dms` says when the API server cannot be reached or refuses: one line naming the
// server, the kubeconfig and context, what went wrong and the fix, as kubectl's "The connection to
// the server … was refused - did you specify the right host or port?" does; never a socket's code
// alone. Against the run's real kube-apiserver (a token it does not know, a CA it was not given,
// a user bound to read only), a loopback port nobody listens on, and a loopback server that never
// answers.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { registerSuspendCommand } from "../../src/commands/annotate.ts";
import { ClusterClient } from "../../src/commands/cluster-errors.ts";
import { registerVersionCommand } from "../../src/commands/operator-version.ts";
import { registerRevisionsCommand } from "../../src/commands/revisions-command.ts";
import { registerStatusCommand } from "../../src/commands/status.ts";
import { loadKubeConfig } from "../../src/kube/config.ts";
import { freePort } from "../controlplane/net.ts";
import { runCli } from "../support/cli.ts";
import { freshNamespace, kubectlOk, testKubeconfigPath, testServer } from "../support/cluster.ts";

const commands = [
  registerStatusCommand,
  registerSuspendCommand,
  registerVersionCommand,
  registerRevisionsCommand,
];
const dms = (args: string[]) => runCli(args, { commands, name: "kubectl dms" });

interface Kubeconfig {
  clusters: { cluster: Record<string, string> }[];
  users: { user: Record<string, string> }[];
}

let dir: string;
/** Writes a copy of the run's admin kubeconfig changed by `edit`, and returns its path. */
function kubeconfigLike(name: string, edit: (config: Kubeconfig) => void): string {
  const config = parse(readFileSync(testKubeconfigPath(), "utf8")) as Kubeconfig;
  edit(config);
  const path = join(dir, name);
  writeFileSync(path, stringify(config), { mode: 0o600 });
  return path;
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "dms-cli-errors-"));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("kubectl dms and an API server it cannot use", () => {
  it("connection refused: names the server, the kubeconfig and context, and what to check", async () => {
    const port = await freePort();
    const path = kubeconfigLike("refused", (c) => {
      for (const { cluster } of c.clusters) cluster.server = `https://127.0.0.1:${port}`;
    });
    const run = await dms(["status", "--kubeconfig", path]);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `error: cannot reach the API server https://127.0.0.1:${port} (kubeconfig ${path}, context dms-test): connection refused: is the cluster running, and is it the one meant? Or pick another with --context or --kubeconfig\n`,
    );
  });

  it("a certificate the kubeconfig does not trust: names the setting that trusts it", async () => {
    const path = kubeconfigLike("no-ca", (c) => {
      for (const { cluster } of c.clusters) delete cluster["certificate-authority-data"];
    });
    for (const args of [["status"], ["revisions", "web", "-n", "default"]]) {
      const run = await dms([...args, "--kubeconfig", path]);
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(
        new RegExp(
          `^error: the API server ${testServer()} \\(kubeconfig ${path}, context dms-test\\) has a certificate the kubeconfig does not trust \\(self-signed certificate in certificate chain\\): set the cluster's certificate-authority-data \\(or certificate-authority\\) in the kubeconfig to the CA that signed it, or pick another with --context or --kubeconfig\\n$`,
        ),
      );
    }
  });

  it("credentials it does not accept: says to log in again; version fails as kubectl version does", async () => {
    const path = kubeconfigLike("bad-token", (c) => {
      for (const { user } of c.users) user.token = "not-a-token-the-server-knows";
    });
    const said = `error: the API server ${testServer()} (kubeconfig ${path}, context dms-test) did not accept the credentials (401 Unauthorized): log in again (a token may have expired), or pick another with --context or --kubeconfig\n`;
    const status = await dms(["status", "--kubeconfig", path]);
    expect(status).toEqual({ code: 1, stdout: "", stderr: said });
    const version = await dms(["version", "--kubeconfig", path]);
    expect(version.code).toBe(1);
    expect(version.stderr).toBe(said);
  });

  it("a verb the user's roles do not grant: the API server's words, and who grants it", async () => {
    const ns = await freshNamespace("cli-forbidden");
    await kubectlOk(["create", "serviceaccount", "viewer", "-n", ns]);
    await kubectlOk([
      "create",
      "role",
      "read",
      "-n",
      ns,
      "--verb=get,list",
      "--resource=deployments.dms.dev",
    ]);
    await kubectlOk([
      "create",
      "rolebinding",
      "viewer",
      "-n",
      ns,
      "--role=read",
      `--serviceaccount=${ns}:viewer`,
    ]);
    const token = (await kubectlOk(["create", "token", "viewer", "-n", ns])).trim();
    const path = kubeconfigLike("viewer", (c) => {
      for (const { user } of c.users) user.token = token;
    });
    await kubectlOk(["apply", "-n", ns, "-f", "-"], {
      input: JSON.stringify({
        apiVersion: "dms.dev/v1alpha1",
        kind: "Deployment",
        metadata: { name: "web" },
        spec: { source: "internal_docker", sourceRevisionConfig: { imageUri: "registry.example.com/a:1" } },
      }),
    });
    const run = await dms(["suspend", "web", "-n", ns, "--kubeconfig", path]);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `error: the API server ${testServer()} (kubeconfig ${path}, context dms-test) refused: deployments.dms.dev "web" is forbidden: User "system:serviceaccount:${ns}:viewer" cannot patch resource "deployments" in API group "dms.dev" in the namespace "${ns}": ask a cluster admin for that access (the ClusterRoles dms-operator-edit and dms-operator-view, bound in a namespace, give a team the verbs and status), or pick another with --context or --kubeconfig\n`,
    );
    // revisions (and logs) read the resource first: a user who may not get it is told so alike.
    await kubectlOk(["create", "serviceaccount", "stranger", "-n", ns]);
    const stranger = (await kubectlOk(["create", "token", "stranger", "-n", ns])).trim();
    const elsewhere = kubeconfigLike("stranger", (c) => {
      for (const { user } of c.users) user.token = stranger;
    });
    const revisions = await dms(["revisions", "web", "-n", ns, "--kubeconfig", elsewhere]);
    expect(revisions.code).toBe(1);
    expect(revisions.stderr).toBe(
      `error: the API server ${testServer()} (kubeconfig ${elsewhere}, context dms-test) refused: deployments.dms.dev "web" is forbidden: User "system:serviceaccount:${ns}:stranger" cannot get resource "deployments" in API group "dms.dev" in the namespace "${ns}": ask a cluster admin for that access (the ClusterRoles dms-operator-edit and dms-operator-view, bound in a namespace, give a team the verbs and status), or pick another with --context or --kubeconfig\n`,
    );
    // What the user may do still works, and what status may not read is a note, as before.
    const status = await dms(["status", "-n", ns, "--kubeconfig", path]);
    expect(status.code).toBe(0);
    expect(status.stdout).toContain("note: cannot list ServiceConnections: forbidden\n");
  });
});

describe("an API server that never answers", () => {
  let server: Server;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    server = createServer((socket) => {
      sockets.push(socket);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it("says the server gave no answer in time, naming it and the kubeconfig", async () => {
    const { port } = server.address() as { port: number };
    const path = kubeconfigLike("silent", (c) => {
      for (const { cluster } of c.clusters) cluster.server = `https://127.0.0.1:${port}`;
    });
    const loaded = loadKubeConfig({ kubeconfig: path });
    const client = new ClusterClient(loaded.config, loaded, { timeoutMs: 300 });
    await expect(client.request({ method: "GET", path: "/api" })).rejects.toThrow(
      `the API server https://127.0.0.1:${port} (kubeconfig ${path}, context dms-test) gave no complete answer in time (GET /api: timeout: no complete answer within 300 ms): retry, and check that the cluster is healthy and reachable`,
    );
  });
});
