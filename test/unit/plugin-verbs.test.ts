// The pure parts of the kubectl plugin's verbs: how `status` reads and shows what it listed
// (tolerantly, bounded, without terminal escapes), how `version` reads the operator's version
// from its Deployment, and what the verbs accept as a name and a timeout. Through the real kubectl
// and API server: test/e2e/kubectl-plugin.test.ts.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { RequestListener } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  registerRebuildCommand,
  registerReconcileCommand,
  registerRolloutNowCommand,
  registerSuspendCommand,
  resourceName,
  waitTimeout,
} from "../../src/commands/annotate.ts";
import { acknowledgement, neverAcknowledged } from "../../src/commands/annotate-run.ts";
import { type Candidate, completions, DIRECTIVE } from "../../src/commands/completion-plugin.ts";
import { registerLogsCommand } from "../../src/commands/logs-command.ts";
import {
  describeInstall,
  imageTag,
  installOf,
  registerVersionCommand,
} from "../../src/commands/operator-version.ts";
import { registerRevisionsCommand } from "../../src/commands/revisions-command.ts";
import { registerStatusCommand } from "../../src/commands/status.ts";
import {
  type ConnectionView,
  heldUntil,
  MAX_RESOURCES,
  oneLine,
  renderStatus,
  resourceView,
  SECTION_ROWS,
  statusDocument,
} from "../../src/commands/status-view.ts";
import { runCli, silentContext } from "../support/cli.ts";
import { kubeStub } from "../support/kube-stub.ts";

/**
 * Runs `use` with a kubeconfig (context `plain`, namespace team-a) of an API server on loopback
 * answering with `handle`; the file is removed after, the server after the test.
 */
async function withApiServer(handle: RequestListener, use: (kubeconfig: string) => Promise<void>) {
  const { server } = await kubeStub(handle);
  const { port } = server.address() as AddressInfo;
  const dir = mkdtempSync(join(tmpdir(), "dms-plugin-verbs-"));
  try {
    const kubeconfig = join(dir, "config");
    writeFileSync(
      kubeconfig,
      `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:${port}"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: plain, context: {cluster: c, user: u, namespace: team-a}}]
current-context: plain
`,
    );
    await use(kubeconfig);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const cond = (type: string, status: string, reason = "R", message = "m") => ({
  type,
  status,
  reason,
  message,
});
const item = (name: string, conditions: object[], extra: object = {}) => ({
  metadata: { name, namespace: "team-a" },
  spec: {},
  status: { conditions },
  ...extra,
});

describe("status: resourceView", () => {
  it("groups by kstatus: Stalled, then Reconciling, then Ready, else not Ready", () => {
    expect(
      resourceView(item("a", [cond("Ready", "True"), cond("Stalled", "True", "InvalidSpec")]))?.group,
    ).toBe("Stalled");
    expect(resourceView(item("b", [cond("Ready", "True"), cond("Reconciling", "True")]))?.group).toBe(
      "Reconciling",
    );
    expect(resourceView(item("c", [cond("Ready", "True", "Available")]))).toMatchObject({
      group: "Ready",
      reason: "Available",
    });
    expect(resourceView(item("d", [cond("Ready", "False", "Unauthorized")]))).toMatchObject({
      group: "NotReady",
      reason: "Unauthorized",
    });
    expect(resourceView(item("e", []))).toMatchObject({ group: "NotReady", reason: "NotReconciledYet" });
  });

  it("reads anything the API server could hold without throwing, and skips what is not an object", () => {
    for (const odd of [null, 1, "x", {}, { metadata: {} }, { metadata: { name: 5 } }])
      expect(resourceView(odd)).toBeUndefined();
    expect(
      resourceView({ metadata: { name: "x" }, status: { conditions: [1, null, { type: 3 }] } }),
    ).toMatchObject({
      name: "x",
      group: "NotReady",
    });
  });

  it("marks a suspended resource, a held change (with its windows) and a failed revision", () => {
    const view = resourceView({
      metadata: { name: "w", namespace: "n", annotations: { "dms.dev/paused": "true" } },
      spec: { rolloutWindows: [{ kind: "deny", schedule: "0 0 * * *", duration: "1h" }] },
      status: {
        latestRevisionId: "abcdef12-3",
        latestRevisionStatus: "DEPLOY_FAILED",
        failedRevisionLog: { revisionId: "abcdef12-3", excerpt: "a\nlast line\n" },
        conditions: [cond("Synced", "False", "OutsideRolloutWindow", "held")],
      },
    });
    expect(view?.paused).toBe(true);
    expect(view?.held?.windows).toHaveLength(1);
    expect(view?.failed).toEqual({ revision: "abcdef12-3", status: "DEPLOY_FAILED", excerpt: "last line" });
  });
});

/** The status screen of namespace team-a holding `items`, with no connection object. */
const render = (items: unknown[]) =>
  renderStatus({
    scope: "namespace team-a",
    allNamespaces: false,
    resources: { items, truncated: false },
    connections: [],
    notes: [],
    now: 0,
  });

describe("status: the connections section with no connection object", () => {
  const ready = [cond("Ready", "True", "Available")];

  it("says that the resources without spec.connectionRef use the default connection", () => {
    expect(render([item("a", ready), item("b", ready)])).toContain(
      "\nConnections: none (2 resources use the default connection: the operator's own --base-url and API key)\n",
    );
    const mixed = render([
      item("a", ready),
      item("b", ready, { spec: { connectionRef: { kind: "ServiceConnection", name: "gone" } } }),
    ]);
    expect(mixed).toContain("\nConnections: none (1 resource uses the default connection:");
  });

  it("says none alone when every resource names a connection", () => {
    const out = render([
      item("a", ready, { spec: { connectionRef: { kind: "ServiceConnection", name: "gone" } } }),
    ]);
    expect(out).toContain("\nConnections: none\n");
  });
});

describe("status: the owning replica (run --sharded)", () => {
  const owned = (
    name: string,
    labels: Record<string, unknown>,
    conditions = [cond("Ready", "True", "Available")],
  ) => item(name, conditions, { metadata: { name, namespace: "team-a", labels } });

  it("reads the owner label and a pending drain, tolerantly and bounded", () => {
    expect(resourceView(owned("a", { "shard.dms.dev/owner": "ring-1" }))).toMatchObject({ owner: "ring-1" });
    expect(
      resourceView(owned("b", { "shard.dms.dev/owner": "ring-2", "shard.dms.dev/drain": "true" })),
    ).toMatchObject({ owner: "ring-2", draining: true });
    const plain = resourceView(owned("c", { app: "x" }));
    expect(plain && "owner" in plain).toBe(false);
    expect(plain && "draining" in plain).toBe(false);
    // Not a string, or a terminal escape: nothing, or one clean line.
    expect(resourceView(owned("d", { "shard.dms.dev/owner": 7 }))?.owner).toBeUndefined();
    expect(resourceView(owned("e", { "shard.dms.dev/owner": `\u001b[31m${"x".repeat(200)}` }))?.owner).toBe(
      `\ufffd${"x".repeat(61)}…`,
    );
    expect(resourceView({ metadata: { name: "f", labels: "nonsense" } })?.owner).toBeUndefined();
  });

  it("adds an OWNER column and a line of owners when sharded, nothing when not", () => {
    const out = render([
      owned("a", { "shard.dms.dev/owner": "ring-1" }),
      owned("b", { "shard.dms.dev/owner": "ring-2", "shard.dms.dev/drain": "true" }),
      owned("c", { "shard.dms.dev/owner": "ring-1" }, [cond("Ready", "False", "Unauthorized", "bad key")]),
      owned("d", {}),
    ]);
    expect(out).toContain("Owners (run --sharded): ring-1 2, ring-2 1; 1 draining, 1 not assigned yet\n");
    expect(out).toContain("  NAME  OWNER              REASON     MESSAGE\n");
    expect(out).toContain("  b     ring-2 (draining)  Available  m\n");
    expect(out).toContain("  d     -                  Available  m\n");
    expect(out).toMatch(/ {2}c {5}ring-1 {2}Unauthorized {2}bad key\n/);
    const plain = render([owned("a", {}), owned("b", { app: "x" })]);
    expect(plain).not.toContain("OWNER");
    expect(plain).not.toContain("Owners");
    expect(plain).toContain("  NAME  REASON     MESSAGE\n");
  });

  it("names at most ten owners, most resources first", () => {
    const items = Array.from({ length: 14 }, (_, i) =>
      Array.from({ length: i + 1 }, (_, j) => owned(`r${i}-${j}`, { "shard.dms.dev/owner": `ghost-${i}` })),
    ).flat();
    const line =
      render(items)
        .split("\n")
        .find((l) => l.startsWith("Owners")) ?? "";
    expect(line).toBe(
      `Owners (run --sharded): ${Array.from({ length: 10 }, (_, k) => `ghost-${13 - k} ${14 - k}`).join(", ")}, and 4 more`,
    );
  });

  it("puts the owner and a drain in -o json, only when present", () => {
    const document = statusDocument({
      scope: "namespace team-a",
      allNamespaces: false,
      resources: {
        items: [
          owned("a", { "shard.dms.dev/owner": "ring-1", "shard.dms.dev/drain": "true" }),
          owned("b", {}),
        ],
        truncated: false,
      },
      connections: [],
      notes: [],
      now: 0,
    });
    const [a, b] = document.resources as Record<string, unknown>[];
    expect(a).toMatchObject({ name: "a", owner: "ring-1", draining: true });
    expect(b && Object.keys(b)).not.toContain("owner");
  });
});

describe("status: heldUntil", () => {
  const now = Date.UTC(2026, 10, 27, 12, 0); // a Friday
  it("computes the opening from the resource's windows, in UTC and the window's time zone", () => {
    const held = {
      message: "",
      windows: [{ kind: "allow", schedule: "0 3 * * 6", duration: "1h", timeZone: "Europe/Berlin" }],
    };
    expect(heldUntil(held, new Map(), now)).toBe(
      "2026-11-28T02:00:00Z (2026-11-28 03:00 Europe/Berlin (GMT+01:00))",
    );
  });

  it("uses the connection's windows when the resource has none, else what the operator's message says", () => {
    const connection: ConnectionView = {
      kind: "ServiceConnection",
      namespace: "n",
      name: "prod",
      ready: "True",
      reason: "Connected",
      message: "",
      resources: "1",
      windows: [{ kind: "allow", schedule: "0 3 * * 6", duration: "1h", timeZone: "UTC" }],
    };
    const connections = new Map([["ServiceConnection/n/prod", connection]]);
    expect(heldUntil({ message: "", connection: "ServiceConnection/n/prod" }, connections, now)).toMatch(
      /^2026-11-28T03:00:00Z /,
    );
    expect(
      heldUntil(
        {
          message:
            "x is held; it goes out at 2027-01-01T00:00:00Z (2027-01-01 01:00 Europe/Berlin (GMT+01:00)), when …",
        },
        new Map(),
        now,
      ),
    ).toBe("2027-01-01T00:00:00Z (2027-01-01 01:00 Europe/Berlin (GMT+01:00))");
    expect(heldUntil({ message: "held" }, new Map(), now)).toBe("unknown: see its Synced condition");
    // Binding: the connection's windows and the resource's own rule together; the message says when.
    const binding = new Map([["ServiceConnection/n/prod", { ...connection, binding: true }]]);
    const message = "x is held; it goes out at 2026-12-05T04:00:00Z (2026-12-05 04:00 UTC (GMT)), when …";
    const own = [{ kind: "allow", schedule: "0 4 * * *", duration: "1h", timeZone: "UTC" }];
    expect(heldUntil({ message, windows: own, connection: "ServiceConnection/n/prod" }, binding, now)).toBe(
      "2026-12-05T04:00:00Z (2026-12-05 04:00 UTC (GMT))",
    );
  });
});

describe("status: output bounds", () => {
  it("oneLine replaces control characters (terminal escapes) and cuts to the width", () => {
    // The printable rule: an escape sequence whole, bidi, zero-width and invisible characters too.
    expect(oneLine("a\u001b]0;title\u0007b\nc")).toBe("a\ufffdb c");
    expect(oneLine("v1\u202e\u200b\u3164\u009b2J")).toBe("v1\ufffd");
    expect(oneLine("x".repeat(500), 10)).toBe(`${"x".repeat(9)}…`);
  });

  it("prints at most SECTION_ROWS rows per section and counts the rest", () => {
    const items = Array.from({ length: SECTION_ROWS + 5 }, (_, i) =>
      item(`r${i}`, [cond("Ready", "True", "Available")]),
    );
    const out = renderStatus({
      scope: "namespace team-a",
      allNamespaces: false,
      resources: { items, truncated: true },
      connections: [],
      notes: ["cannot list ClusterServiceConnections: forbidden"],
      now: 0,
    });
    expect(out).toContain(`(${SECTION_ROWS + 5}; the first ${MAX_RESOURCES} read, narrow with -n)`);
    expect(out.match(/^ {2}r\d+ /gm)).toHaveLength(SECTION_ROWS);
    expect(out).toContain("  … and 5 more\n");
    expect(out).toContain("note: cannot list ClusterServiceConnections: forbidden\n");
  });
});

describe("status and version as json or yaml", () => {
  it("status: every resource read (past the rows a section prints), when a held change goes out, the connections", () => {
    const items = [
      ...Array.from({ length: SECTION_ROWS + 2 }, (_, i) =>
        item(`r${i}`, [cond("Ready", "True", "Available")]),
      ),
      item("held", [
        cond("Synced", "False", "OutsideRolloutWindow", "held: it goes out at 2026-12-01T02:00:00Z (x)"),
      ]),
    ];
    const connections: ConnectionView[] = [
      {
        kind: "ServiceConnection",
        namespace: "team-a",
        name: "c",
        ready: "True",
        reason: "Connected",
        message: "",
        resources: "1",
        windows: [],
      },
    ];
    const document = statusDocument({
      scope: "namespace team-a",
      allNamespaces: false,
      resources: { items, truncated: false },
      connections,
      notes: [],
      now: 0,
    });
    const resources = document.resources as { name: string; held?: { goesOutAt: string } }[];
    expect(resources).toHaveLength(SECTION_ROWS + 3);
    expect(resources.find((r) => r.name === "held")?.held?.goesOutAt).toBe("2026-12-01T02:00:00Z (x)");
    expect(document.connections).toEqual([
      {
        kind: "ServiceConnection",
        namespace: "team-a",
        name: "c",
        ready: "True",
        reason: "Connected",
        message: "",
        resources: "1",
      },
    ]);
  });

  it("version --client -o json|yaml: one document, as kubectl version prints it", async () => {
    const json = await runCli(["version", "--client", "-o", "json"], { commands: [registerVersionCommand] });
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({ clientVersion: expect.stringMatching(/^\d+\.\d+\.\d+/) });
    const yaml = await runCli(["version", "--client", "-o", "yaml"], { commands: [registerVersionCommand] });
    expect(parse(yaml.stdout)).toEqual(JSON.parse(json.stdout));
    const table = await runCli(["version", "--client"], { commands: [registerVersionCommand] });
    expect(table.stdout).toMatch(/^Client Version: \d/);
  });
});

describe("version -n", () => {
  it("is refused with --operator-namespace, which narrows the search for the operator", async () => {
    const refusal =
      "error: version takes no -n, --namespace (the namespace of Deployment resources): it looks for the operator in every namespace; narrow it with --operator-namespace <ns>\n";
    for (const args of [
      ["version", "--client", "-n", "team-a"],
      ["version", "--namespace=team-a", "--kubeconfig", "/nonexistent/kubeconfig"],
    ])
      expect(await runCli(args, { commands: [registerVersionCommand] }), args.join(" ")).toEqual({
        code: 1,
        stdout: "",
        stderr: refusal,
      });
    const help = await runCli(["version", "--help"], { commands: [registerVersionCommand] });
    expect(help.stdout).toContain("--operator-namespace <ns>");
    expect(help.stdout).not.toMatch(/-n, --namespace/);
  });
});

describe("version: the operator's Deployment", () => {
  it("takes the image's tag, past a registry port and before a digest", () => {
    expect(imageTag("dms-operator:0.1.0")).toBe("0.1.0");
    expect(imageTag("registry:5000/team/dms-operator:1.2.3@sha256:abc")).toBe("1.2.3");
    expect(imageTag("registry:5000/team/dms-operator@sha256:abc")).toBeUndefined();
    expect(imageTag("dms-operator")).toBeUndefined();
  });

  it("prefers the app.kubernetes.io/version label, and reads the operator container's image", () => {
    const install = installOf({
      metadata: {
        name: "dms-operator",
        namespace: "dms-system",
        labels: { "app.kubernetes.io/version": "2.0.0" },
      },
      spec: {
        replicas: 2,
        template: {
          spec: {
            containers: [
              { name: "sidecar", image: "x:9" },
              { name: "operator", image: "op:1.0.0" },
            ],
          },
        },
      },
      status: { readyReplicas: 1 },
    });
    expect(install && describeInstall(install)).toBe(
      "2.0.0 (dms-system/dms-operator, 1/2 ready, image op:1.0.0)",
    );
    expect(installOf({ metadata: { name: "x" } })).toBeUndefined();
    expect(installOf({ metadata: { name: "x", namespace: "y" }, spec: { template: 3 } })).toMatchObject({
      version: undefined,
      image: undefined,
    });
  });
});

describe("the verbs' arguments", () => {
  it("take a Kubernetes object name only", () => {
    expect(resourceName("web-1.v2")).toBe("web-1.v2");
    for (const bad of ["Web", "../x", "a/b", "", "x".repeat(254), "-a"])
      expect(() => resourceName(bad)).toThrow();
  });

  it("bound --timeout from 1s to 1h", () => {
    expect(waitTimeout("30s")).toBe(30_000);
    expect(waitTimeout("1h")).toBe(3_600_000);
    for (const bad of ["0s", "999ms", "2h", "5", "1d", "-1s"]) expect(() => waitTimeout(bad)).toThrow();
  });
});

describe("the verbs' --timeout without --wait", () => {
  it("is refused with the fix before anything is patched, as a flag that means nothing alone", async () => {
    // An API server that would patch anything: without the refusal the verb succeeds at once.
    const requests: string[] = [];
    await withApiServer(
      (req, res) => {
        requests.push(`${req.method} ${req.url}`);
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ metadata: { name: "web", namespace: "team-a" }, spec: {} }));
      },
      async (kubeconfig) => {
        const commands = [registerReconcileCommand, registerRolloutNowCommand, registerRebuildCommand];
        for (const verb of ["reconcile", "rollout-now", "rebuild"]) {
          const args = [verb, "web", "--timeout", "30s", "--kubeconfig", kubeconfig];
          expect(await runCli(args, { commands }), verb).toEqual({
            code: 1,
            stdout: "",
            stderr: "error: --timeout applies to --wait: add --wait\n",
          });
        }
        expect(requests).toEqual([]);
        // Without --timeout, the verb patches and is done.
        const plain = await runCli(["reconcile", "web", "--kubeconfig", kubeconfig], { commands });
        expect(plain).toMatchObject({ code: 0, stdout: "deployment.dms.dev/web reconcile requested\n" });
        expect(requests).toEqual([
          "PATCH /apis/dms.dev/v1alpha1/namespaces/team-a/deployments/web?fieldManager=dms-cli",
        ]);
      },
    );
  });
});

describe("kubectl dms suspend of a resource another manager already paused", () => {
  it("applies the annotation under dms-cli too (a merge patch of the same value leaves its manager), and only then", async () => {
    const requests: { line: string; type: string; body: string }[] = [];
    // Who the answer shows owning dms.dev/paused.
    let owner = "kubectl-annotate";
    await withApiServer(
      (req, res) => {
        let body = "";
        req.on("data", (chunk: Buffer) => {
          body += chunk.toString();
        });
        req.on("end", () => {
          requests.push({
            line: `${req.method} ${req.url}`,
            type: String(req.headers["content-type"]),
            body,
          });
          const fieldsV1 = { "f:metadata": { "f:annotations": { "f:dms.dev/paused": {} } } };
          res.writeHead(200, { "content-type": "application/json" });
          res.end(
            JSON.stringify({
              metadata: {
                name: "web",
                namespace: "team-a",
                annotations: { "dms.dev/paused": "true" },
                managedFields: [{ manager: owner, operation: "Update", fieldsV1 }],
              },
              spec: {},
            }),
          );
        });
      },
      async (kubeconfig) => {
        const commands = [registerSuspendCommand];
        const run = await runCli(["suspend", "web", "--kubeconfig", kubeconfig], { commands });
        expect(run).toMatchObject({ code: 0, stderr: "" });
        const path = "/apis/dms.dev/v1alpha1/namespaces/team-a/deployments/web";
        expect(requests.map((r) => r.line)).toEqual([
          `PATCH ${path}?fieldManager=dms-cli`,
          `PATCH ${path}?fieldManager=dms-cli&force=true`,
        ]);
        expect(requests[1]?.type).toBe("application/apply-patch+yaml");
        expect(JSON.parse(requests[1]?.body ?? "")).toEqual({
          apiVersion: "dms.dev/v1alpha1",
          kind: "Deployment",
          metadata: { name: "web", annotations: { "dms.dev/paused": "true" } },
        });

        // Already dms-cli's: the merge patch alone.
        requests.length = 0;
        owner = "dms-cli";
        expect(await runCli(["suspend", "web", "--kubeconfig", kubeconfig], { commands })).toMatchObject({
          code: 0,
        });
        expect(requests.map((r) => r.line)).toEqual([`PATCH ${path}?fieldManager=dms-cli`]);
      },
    );
  });
});

describe("kubectl's completion of kubectl dms", () => {
  const ctx = silentContext();
  const asked: object[] = [];
  const names = async (flags: object): Promise<Candidate[]> => {
    asked.push(flags);
    return [{ value: "web", description: "Ready=True Available" }, { value: "worker" }, { value: "api" }];
  };
  const complete = async (...words: string[]) => {
    const { candidates, directive } = await completions(words, ctx, undefined, names);
    return { candidates: candidates.map((c) => c.value), directive };
  };

  it("offers the plugin's commands (not run or simulator) and its own flags", async () => {
    expect((await complete("")).candidates).toContain("status");
    expect((await complete("")).candidates).not.toContain("run");
    expect((await complete("s")).candidates).toEqual(["status", "suspend"]);
    expect(await complete("--v")).toEqual({
      candidates: ["--version", "--verbose"],
      directive: DIRECTIVE.noFiles,
    });
  });

  it("offers a command's subcommands and flags, and files after a flag that takes a value", async () => {
    expect((await complete("deployments", "")).candidates).toEqual(["list"]);
    expect((await complete("deployments", "list", "--sh")).candidates).toEqual(["--show-secret-values"]);
    expect(await complete("plan", "-f", "")).toEqual({ candidates: [], directive: DIRECTIVE.files });
  });

  it("offers the values of -o, --status and --type, with what each means", async () => {
    expect((await complete("status", "-o", "")).candidates).toEqual([
      "table",
      "wide",
      "name",
      "json",
      "yaml",
    ]);
    expect((await complete("logs", "web", "-o", "")).candidates).toEqual(["table", "json", "yaml", "text"]);
    expect((await complete("logs", "--type", "b")).candidates).toEqual(["build"]);
    expect((await complete("deployments", "list", "--status", "AW")).candidates).toEqual([
      "AWAITING_DATABASE",
      "AWAITING_DELETE",
    ]);
    expect((await complete("deployments", "list", "--output=j")).candidates).toEqual(["--output=json"]);
    const described = await completions(["status", "-o", "w"], ctx, undefined, names);
    expect(described.candidates).toEqual([
      { value: "wide", description: expect.stringContaining("columns") },
    ]);
  });

  it("offers resource names of the namespace and cluster typed, with their state, for each name a verb takes", async () => {
    asked.length = 0;
    expect((await complete("suspend", "-n", "team-a", "--context", "dev", "w")).candidates).toEqual([
      "web",
      "worker",
    ]);
    expect(asked).toEqual([{ namespace: "team-a", context: "dev" }]);
    expect((await complete("logs", "--namespace=team-b", "--kubeconfig", "/k", "")).candidates).toHaveLength(
      3,
    );
    expect(asked[1]).toEqual({ namespace: "team-b", kubeconfig: "/k" });
    // A verb takes several names: the others are offered, not those typed.
    expect((await complete("suspend", "web", "")).candidates).toEqual(["worker", "api"]);
    // logs takes one.
    expect((await complete("logs", "web", "")).candidates).toEqual([]);
    const withState = await completions(["reconcile", "we"], ctx, undefined, names);
    expect(withState.candidates).toEqual([{ value: "web", description: "Ready=True Available" }]);
  });
});

describe("the verbs' --wait: requests the operator never acknowledges", () => {
  const resource = (managementPolicy?: string) => ({
    metadata: { name: "intake-bot" },
    spec: managementPolicy === undefined ? {} : { managementPolicy },
  });

  it("a rebuild of an ObserveOnly resource: it builds nothing, so --wait would only time out", () => {
    expect(neverAcknowledged("lastHandledRebuildAt", resource("ObserveOnly"))).toMatch(
      /^is ObserveOnly \(spec\.managementPolicy\): .*set spec\.managementPolicy: Manage/,
    );
  });

  it("not a rebuild of a managed one, nor a reconcile or rollout-now (acknowledged under ObserveOnly too)", () => {
    expect(neverAcknowledged("lastHandledRebuildAt", resource())).toBeUndefined();
    expect(neverAcknowledged("lastHandledRebuildAt", resource("Manage"))).toBeUndefined();
    expect(neverAcknowledged("lastHandledReconcileAt", resource("ObserveOnly"))).toBeUndefined();
    expect(neverAcknowledged("lastHandledRolloutNow", resource("ObserveOnly"))).toBeUndefined();
    for (const odd of [null, "x", {}, { spec: 1 }])
      expect(neverAcknowledged("lastHandledRebuildAt", odd)).toBeUndefined();
  });
});

describe("rebuild --wait: a rebuild's call still out is not yet its acknowledgement", () => {
  const V = "2030-01-02T00:00:00Z";
  const RECORD = { afterRevisionId: "r1", configHash: "0".repeat(64) };

  it("the intent written before the call (the record without the value): sent, waited on", () => {
    expect(
      acknowledgement({ lastHandledRebuildAt: V, unconfirmedRebuild: RECORD }, "lastHandledRebuildAt", V),
    ).toBe("sent");
  });

  it("answered, or its answer lost (the record names the value): acknowledged; another value: not", () => {
    expect(acknowledgement({ lastHandledRebuildAt: V }, "lastHandledRebuildAt", V)).toBe(true);
    const lost = { lastHandledRebuildAt: V, unconfirmedRebuild: { ...RECORD, requestedAt: V } };
    expect(acknowledgement(lost, "lastHandledRebuildAt", V)).toBe(true);
    expect(acknowledgement({ lastHandledRebuildAt: "earlier" }, "lastHandledRebuildAt", V)).toBe(false);
    expect(
      acknowledgement({ lastHandledRolloutNow: V, unconfirmedRebuild: RECORD }, "lastHandledRolloutNow", V),
    ).toBe(true);
  });
});

describe("the verbs on a cluster without the CRDs", () => {
  it("status and --all say the API server does not serve Deployment resources, and how to fix it", async () => {
    // An API server without deployments.dms.dev answers its listing 404, as for a missing kind.
    await withApiServer(
      (_req, res) => {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            kind: "Status",
            status: "Failure",
            reason: "NotFound",
            message: "the server could not find the requested resource",
            code: 404,
          }),
        );
      },
      async (kubeconfig) => {
        const commands = [registerStatusCommand, registerReconcileCommand];
        for (const args of [["status"], ["reconcile", "--all"]]) {
          const run = await runCli([...args, "--kubeconfig", kubeconfig], { commands });
          expect(run.code).toBe(1);
          expect(run.stderr).toMatch(
            /^error: the API server does not serve deployments\.dms\.dev \(kubeconfig .*config, context plain\): install the CRDs .*or pick another cluster with --context or --kubeconfig\n$/,
          );
        }
      },
    );
  });

  // As the real API server answers a path of a group it does not serve: text, not a Status.
  const noCrds: RequestListener = (_req, res) => {
    res.writeHead(404, { "content-type": "text/plain; charset=utf-8" });
    res.end("404 page not found\n");
  };
  const named = [
    ["suspend", "web"],
    ["reconcile", "web"],
    ["revisions", "web"],
    ["logs", "web"],
  ];
  const commands = [
    registerSuspendCommand,
    registerReconcileCommand,
    registerRevisionsCommand,
    registerLogsCommand,
  ];

  it("a verb, logs and revisions given a name say so too, not that the resource is not found", async () => {
    await withApiServer(noCrds, async (kubeconfig) => {
      for (const args of named) {
        const run = await runCli([...args, "--kubeconfig", kubeconfig], { commands });
        expect(run.code, args.join(" ")).toBe(1);
        expect(run.stderr, args.join(" ")).toMatch(
          /^error: the API server does not serve deployments\.dms\.dev \(kubeconfig .*config, context plain\): install the CRDs /,
        );
        expect(run.stderr).not.toContain("not found");
      }
    });
  });

  it("with the CRDs installed, a missing resource is named as not found", async () => {
    const discovery = {
      kind: "APIResourceList",
      groupVersion: "dms.dev/v1alpha1",
      resources: [{ name: "deployments" }],
    };
    const missing = {
      kind: "Status",
      status: "Failure",
      reason: "NotFound",
      message: "not found",
      code: 404,
    };
    await withApiServer(
      (req, res) => {
        const served = req.url === "/apis/dms.dev/v1alpha1";
        res.writeHead(served ? 200 : 404, { "content-type": "application/json" });
        res.end(JSON.stringify(served ? discovery : missing));
      },
      async (kubeconfig) => {
        for (const args of named) {
          const run = await runCli([...args, "--kubeconfig", kubeconfig], { commands });
          expect(run.code, args.join(" ")).toBe(1);
          expect(run.stderr, args.join(" ")).toMatch(/^error: Deployment resource team-a\/web not found: /);
        }
      },
    );
  });
});

describe("status on a namespace without resources", () => {
  // An API server holding no Deployment resource and no connection.
  const empty: RequestListener = (_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ kind: "List", apiVersion: "v1", metadata: {}, items: [] }));
  };

  it("says kubectl's No resources found on stderr, prints nothing on stdout and exits 0", async () => {
    await withApiServer(empty, async (kubeconfig) => {
      for (const [args, stderr] of [
        [[], "No resources found in team-a namespace.\n"],
        [["-n", "team-b"], "No resources found in team-b namespace.\n"],
        [["-A"], "No resources found\n"],
        [["-o", "wide"], "No resources found in team-a namespace.\n"],
        [["--no-headers"], "No resources found in team-a namespace.\n"],
        [["-A", "-o", "wide"], "No resources found\n"],
        [["-o", "name"], ""],
      ] as const) {
        const run = await runCli(["status", ...args, "--kubeconfig", kubeconfig], {
          commands: [registerStatusCommand],
        });
        expect({ code: run.code, stdout: run.stdout, stderr: run.stderr }, args.join(" ")).toEqual({
          code: 0,
          stdout: "",
          stderr,
        });
      }
    });
  });

  it("still shows the cluster's connections on the screen, without a summary of zeros", async () => {
    const connection = {
      metadata: { name: "shared" },
      spec: {},
      status: { conditions: [cond("Ready", "True", "Connected", "")], deployments: 0 },
    };
    const withConnection: RequestListener = (req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      const items = req.url?.includes("/clusterserviceconnections") ? [connection] : [];
      res.end(JSON.stringify({ kind: "List", apiVersion: "v1", metadata: {}, items }));
    };
    await withApiServer(withConnection, async (kubeconfig) => {
      const run = await runCli(["status", "--kubeconfig", kubeconfig], { commands: [registerStatusCommand] });
      expect(run.code).toBe(0);
      expect(run.stderr).toBe("No resources found in team-a namespace.\n");
      expect(run.stdout).toMatch(/^Connections \(1\):\n {2}CONNECTION +READY/);
      expect(run.stdout).toContain("ClusterServiceConnection/shared  True");
    });
  });
});

describe("the verbs' -l with a malformed selector", () => {
  it("is refused naming the flag, in kubectl's words, before any request", async () => {
    const paths: string[] = [];
    const empty: RequestListener = (req, res) => {
      paths.push(req.url ?? "");
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ kind: "List", apiVersion: "v1", metadata: {}, items: [] }));
    };
    await withApiServer(empty, async (kubeconfig) => {
      for (const [selector, problem] of [
        ["tier in (web", 'expected "," or ")" in a value list, found the end'],
        ["==web", 'expected a label key, found "=="'],
        ["replicas>many", `for 'Gt', 'Lt' operators, the value must be an integer, found "many"`],
      ] as const) {
        const run = await runCli(["suspend", "-l", selector, "--kubeconfig", kubeconfig], {
          commands: [registerSuspendCommand],
        });
        expect({ code: run.code, stderr: run.stderr }, selector).toEqual({
          code: 1,
          stderr: `error: invalid argument ${JSON.stringify(selector)} for "-l, --selector" flag: unable to parse requirement: ${problem}\n`,
        });
      }
      expect(paths).toEqual([]);
      // What the API server takes goes to it: sets, and Gt/Lt with an integer.
      for (const selector of ["tier in (web,api),!quarantine", "replicas>2"]) {
        const run = await runCli(["suspend", "-l", selector, "--kubeconfig", kubeconfig], {
          commands: [registerSuspendCommand],
        });
        expect(run.code, selector).toBe(0);
        expect(run.stderr).toBe(`No Deployment resources found in namespace team-a matching ${selector}.\n`);
      }
      expect(paths).toHaveLength(2);
    });
  });
});
