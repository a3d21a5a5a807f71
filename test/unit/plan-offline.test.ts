// `plan --offline`: the files checked against the CRD's schema and CEL rules with no network (no
// service URL, no cluster given: a request would fail the run), for a CI job without credentials.

import { beforeAll, describe, expect, it } from "vitest";
import { unprintableIn } from "../../src/api/printable.ts";
import { registerPlanCommand } from "../../src/commands/plan-command.ts";
import { startSimulator } from "../../src/simulator/server.ts";
import { runCli } from "../support/cli.ts";

const valid = `apiVersion: dms.dev/v1alpha1
kind: Deployment
metadata:
  name: agent
  namespace: team-a
spec:
  source: external_docker
  sourceRevisionConfig:
    imageUri: registry.example.com/agent:1
`;

const misspelt = `apiVersion: dms.dev/v1alpha1
kind: Deployment
metadata:
  name: broken
spec:
  source: external_docker
  sourcConfig:
    resourceSpec: {cpu: 1}
`;

const plan = (args: string[], stdin: string) =>
  runCli(["plan", "--offline", "-f", "-", ...args], { commands: [registerPlanCommand], stdin, env: {} });

// The command loads plan.ts and all it imports on its first run: 0.5 s of CPU, once for the file,
// and 10 s at a load of 13 on one core. Loaded here, in its own time, not in the first test's.
beforeAll(async () => {
  await import("../../src/commands/plan.ts");
}, 60_000);

describe("plan --offline", () => {
  it("exits 0 when every document is valid, asking nothing of the service or a cluster", async () => {
    const run = await plan([], valid);
    expect(run).toMatchObject({ code: 0, stderr: "" });
    expect(run.stdout).toContain("Offline: 1 valid, 0 invalid documents in 1 file");
    // Nor which resources of the cluster the files no longer hold: said, not guessed.
    expect(run.stdout).toContain(
      "Not known offline: the resources of the cluster that the files no longer hold (plan --kubeconfig warns when a prune would delete a protected one, spec.deletionProtection: true).\n",
    );
    // Nor whether an immutable field changed: the CRD's rules for them compare with the live object.
    expect(run.stdout).toContain(
      "Not known offline: whether a file changes a field that cannot change (spec.name, spec.source, spec.sourceConfig.deploymentType, spec.connectionRef), which kubectl apply refuses against the cluster's resource and the operator against the service's deployment (plan without --offline checks the service's, and with --kubeconfig the cluster's).\n",
    );
  });

  it("exits 1 with file:line:col on a refusal, naming the nearest field of a misspelt one", async () => {
    const run = await plan([], `${valid}---\n${misspelt}`);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(
      /^<stdin>:17:3: error: spec\.sourcConfig: unknown field \(did you mean `sourceConfig`\? /m,
    );
    expect(run.stdout).toContain("Offline: 1 valid, 1 invalid document in 1 file");
  });

  it("-o json: the valid resources and the refusals; -o name: the names, refusals on stderr", async () => {
    const json = await plan(["-o", "json"], `${valid}---\n${misspelt}`);
    expect(JSON.parse(json.stdout)).toMatchObject({
      exitCode: 1,
      offline: true,
      valid: [{ line: 1, namespace: "team-a", name: "agent" }],
      invalidDocuments: 1,
      fileErrors: [{ line: 17, column: 3 }],
      protectedRemovals: null,
    });
    const names = await plan(["-o", "name"], `${valid}---\n${misspelt}`);
    expect(names.stdout).toBe("deployment.dms.dev/agent\n");
    expect(names.stderr).toMatch(/:17:3: error: spec\.sourcConfig/);
  });

  it("a refusal quoting the file's own key writes its controls as escapes, on stdout and stderr", async () => {
    // A key of a pull request's manifest: it must not drive the reviewer's terminal or the CI log.
    const hostile = misspelt.replace("  sourcConfig:", '  "sourc\\e]0;PWNED\\a\\e[2JConfig":');
    const text = await plan([], hostile);
    expect(text.code).toBe(1);
    expect(text.stdout).toContain("spec.sourc\\x1b]0;PWNED\\x07\\x1b[2JConfig: unknown field");
    const names = await plan(["-o", "name"], hostile);
    expect(names.stderr).toContain("spec.sourc\\x1b]0;PWNED\\x07\\x1b[2JConfig: unknown field");
    for (const out of [text.stdout, names.stdout, names.stderr])
      expect(unprintableIn(out.replaceAll("\n", ""))).toBeUndefined();
  });

  it("refuses what would read a cluster, and a bad flag exits 1 (2 means changes planned)", async () => {
    const run = await plan(["--kubeconfig", "/k"], valid);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      "error: --offline reads no cluster and no service: drop --kubeconfig, or drop --offline to plan against them\n",
    );
    const bad = await plan(["--no-such-flag"], valid);
    expect(bad.code).toBe(1);
    const protection = await plan(["--protection-namespaces", "prod,staging"], valid);
    expect(protection.stderr).toBe(
      "error: --offline reads no cluster and no service: drop --protection-namespaces, or drop --offline to plan against them\n",
    );
    // Flags it would otherwise accept and ignore: the cluster's and the service's.
    const ignored = await plan(
      ["--operator-namespace", "ops", "--max-secret-bytes", "4096", "--base-url", "http://x"],
      valid,
    );
    expect(ignored.code).toBe(1);
    expect(ignored.stderr).toBe(
      "error: --offline reads no cluster and no service: drop --operator-namespace, --max-secret-bytes, --base-url, or drop --offline to plan against them\n",
    );
  });
});

describe("plan --protection-namespaces", () => {
  const online = (args: string[]) =>
    runCli(["plan", "-f", "-", ...args], { commands: [registerPlanCommand], stdin: valid, env: {} });

  it("takes namespace names separated by commas, and needs --kubeconfig", async () => {
    const bad = await online(["--protection-namespaces", "prod,Team_B"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("must be a namespace name");
    const empty = await online(["--protection-namespaces", "prod,,b"]);
    expect(empty.stderr).toContain("must be namespace names separated by commas, e.g. team-a,team-b.");
    const alone = await online(["--protection-namespaces", "prod"]);
    expect(alone.code).toBe(1);
    expect(alone.stderr).toBe(
      "error: --protection-namespaces names namespaces of a cluster to check for protected resources the files no longer hold: pass --kubeconfig too\n",
    );
  });
});

describe("plan's flags of the cluster without --kubeconfig", () => {
  it("are refused, not ignored", async () => {
    for (const [flag, value] of [
      ["--operator-namespace", "ops"],
      ["--max-secret-bytes", "4096"],
    ] as const) {
      const run = await runCli(["plan", "-f", "-", flag, value, "--base-url", "http://127.0.0.1:9"], {
        commands: [registerPlanCommand],
        stdin: valid,
        env: {},
      });
      expect(run.code).toBe(1);
      expect(run.stderr).toBe(
        `error: ${flag}: of the cluster plan reads with --kubeconfig: pass --kubeconfig too\n`,
      );
    }
  });
});

describe("plan -o name", () => {
  it("writes on stderr why a resource fails the plan, the names alone on stdout", async () => {
    const sim = await startSimulator({
      seed: {
        deployments: [
          { name: "agent", source: "internal_docker", source_revision_config: { image_uri: "img:1" } },
        ],
      },
    });
    try {
      // The service's deployment has another source, which cannot change: blocked, exit 1.
      const run = await runCli(["plan", "-f", "-", "-o", "name"], {
        commands: [registerPlanCommand],
        stdin: valid,
        env: { DMS_BASE_URL: sim.url },
      });
      expect(run.code).toBe(1);
      expect(run.stdout).toBe("deployment.dms.dev/agent\n");
      expect(run.stderr).toMatch(/^error: team-a\/agent \[<stdin>:1\]: \w+: .*source/);
    } finally {
      await sim.close();
    }
  });
});
