// The CLI as users get it: `npm pack` (whose prepack compiles dist/) makes a tarball that,
// installed into an empty prefix, runs `--version`, `deployments list` against the simulator,
// and docs/gitops.md's pull-request workflow (its install and plan commands, as written), plus
// `plan -f -` on a multi-document stream. Nothing of the repository is on the installed CLI's
// path: only what the package ships. The same install is the kubectl plugin `kubectl-dms`, run
// by the real kubectl (the control plane's, test/controlplane/binaries.ts) as users run it.
import { execFile, execFileSync, spawn } from "node:child_process";
import {
  cpSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { CRDS, crdFile } from "../../src/crd/render.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { KEY, resourceYaml, SEED } from "../contract/gitops-fixture.ts";
import { ensureBinaries } from "../controlplane/binaries.ts";
import { LAST_RELEASE } from "../support/release.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const PKG = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { name: string; version: string };

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `command` through bash (as a workflow's `run:` does), with `stdin` and `env`. */
function bash(
  script: string,
  options: { cwd: string; env: NodeJS.ProcessEnv; stdin?: string },
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-e", "-c", script], { cwd: options.cwd, env: options.env });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on("data", (c: Buffer) => {
      stderr += c.toString();
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? 1, stdout, stderr }));
    child.stdin.on("error", () => {}); // EPIPE from a script that exits before reading its input
    child.stdin.end(options.stdin ?? "");
  });
}

/** The steps of the pull-request workflow in docs/gitops.md. */
function docWorkflowSteps(): { name?: string; run?: string }[] {
  const doc = readFileSync(join(ROOT, "docs", "gitops.md"), "utf8");
  const block = /### A CI gate \(GitHub Actions\)[\s\S]*?```yaml\n([\s\S]*?)```/.exec(doc)?.[1];
  if (!block) throw new Error("docs/gitops.md has no yaml block under '### A CI gate (GitHub Actions)'");
  const workflow = parse(block) as { jobs: Record<string, { steps: { name?: string; run?: string }[] }> };
  return Object.values(workflow.jobs).flatMap((job) => job.steps);
}

// Each step starts the installed CLI (seconds on a loaded 2-core machine): generous per-test limits.
describe("the packed CLI, installed into an empty prefix", { timeout: 90_000 }, () => {
  let work: string;
  let tarball: string;
  let prefix: string;
  let sim: RunningSimulator;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "dms-pack-"));
    // Pack a copy of the tracked files, so the prepack build never touches the working tree.
    const copy = join(work, "repo");
    const files = execFileSync("git", ["ls-files", "-z"], { cwd: ROOT, encoding: "utf8" })
      .split("\0")
      .filter(Boolean);
    for (const file of files) {
      mkdirSync(join(copy, dirname(file)), { recursive: true });
      cpSync(join(ROOT, file), join(copy, file));
    }
    symlinkSync(join(ROOT, "node_modules"), join(copy, "node_modules"));
    const npmEnv = { ...process.env, PATH: [dirname(process.execPath), process.env.PATH].join(delimiter) };
    const packed = await promisify(execFile)("npm", ["pack", "--json", "--pack-destination", work], {
      cwd: copy,
      env: npmEnv,
      encoding: "utf8",
    });
    const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf("["))) as {
      filename: string;
      files: { path: string }[];
    }[];
    if (!info) throw new Error(`npm pack printed no result: ${packed.stdout}`);
    tarball = join(work, info.filename);
    writeFileSync(join(work, "files.json"), JSON.stringify(info.files.map((f) => f.path)));

    // The doc's install step, with the tarball for the published package, into an empty prefix.
    prefix = join(work, "prefix");
    const install = docWorkflowSteps().find((s) => s.run?.includes(`npm install --global ${PKG.name}@`))?.run;
    if (!install)
      throw new Error("docs/gitops.md's workflow does not install the CLI with npm install --global");
    // The docs install the last release from the registry; this tree's tarball stands in for it.
    expect(install.trim()).toBe(`npm install --global ${PKG.name}@${LAST_RELEASE}`);
    const installed = await bash(
      `${install.trim().replace(`${PKG.name}@${LAST_RELEASE}`, JSON.stringify(tarball))} --prefix ${JSON.stringify(prefix)} --no-audit --no-fund --prefer-offline`,
      { cwd: work, env: npmEnv },
    );
    if (installed.code !== 0) throw new Error(`npm install of the tarball failed: ${installed.stderr}`);

    sim = await startSimulator({ apiKey: KEY, seed: SEED, secretsInResponses: "values" });
    // Only the installed CLI and Node: no repository path, no node_modules/.bin.
    env = {
      PATH: [join(prefix, "bin"), dirname(process.execPath), "/usr/bin", "/bin"].join(delimiter),
      HOME: work,
      DMS_BASE_URL: sim.url,
      DMS_API_KEY: KEY,
    };
  }, 300_000);

  afterAll(async () => {
    await sim?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  }, 60_000);

  it("ships the compiled CLI, the bin and the CRDs, and no sources or tests", () => {
    const files = JSON.parse(readFileSync(join(work, "files.json"), "utf8")) as string[];
    expect(files).toContain("dist/cli.js");
    expect(files).toContain("bin/dms-operator.mjs");
    expect(files).toContain("bin/kubectl-dms.mjs");
    expect(files).toContain("bin/kubectl_complete-dms.mjs");
    for (const crd of CRDS) expect(files).toContain(crdFile(crd));
    expect(files).toContain("package.json");
    expect(files.filter((f) => /^(src|test|scripts|manifests)\//.test(f))).toEqual([]);
  });

  it("dms-operator --version prints the package version", async () => {
    const run = await bash("dms-operator --version", { cwd: work, env });
    expect(run).toEqual({ code: 0, stdout: `${PKG.version}\n`, stderr: "" });
  });

  it("deployments list talks to the service", async () => {
    const run = await bash("dms-operator deployments list -o json", { cwd: work, env });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const names = (JSON.parse(run.stdout) as { name: string }[]).map((d) => d.name);
    expect(names).toContain("summarizer");
  });

  it("docs/gitops.md's plan step runs as written: exit 2 shown as a notice, the plan in plan.txt", async () => {
    const repo = join(work, "gitops-repo");
    mkdirSync(join(repo, "deploy"), { recursive: true });
    writeFileSync(
      join(repo, "deploy", "new-agent.yaml"),
      resourceYaml("new-agent", { source: "internal_docker", sourceRevisionConfig: { imageUri: "new:1" } }),
    );
    const step = docWorkflowSteps().find((s) => s.run?.includes("dms-operator plan"));
    if (!step?.run) throw new Error("docs/gitops.md's workflow has no dms-operator plan step");
    const run = await bash(step.run, { cwd: repo, env });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("::notice::dms-operator plan: changes planned");
    expect(readFileSync(join(repo, "plan.txt"), "utf8")).toMatch(
      /^default\/new-agent \[deploy\/new-agent\.yaml:1\]: create$/m,
    );

    // A wrong path fails the gate.
    rmSync(join(repo, "deploy"), { recursive: true });
    mkdirSync(join(repo, "deploy"));
    const wrong = await bash(step.run, { cwd: repo, env });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain("error: no Deployment resources");
  });

  it("plan -f - plans a multi-document stream, as piped from kubectl kustomize", async () => {
    const stream = [
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n",
      resourceYaml("new-agent", { source: "internal_docker", sourceRevisionConfig: { imageUri: "new:1" } }),
    ].join("---\n");
    const run = await bash("dms-operator plan -f -", { cwd: work, env, stdin: stream });
    expect(run.stdout).toMatch(/^default\/new-agent \[<stdin>:\d+\]: create$/m);
    expect(run.code).toBe(2);
  });
  describe("as the kubectl plugin kubectl-dms, run by the real kubectl", () => {
    let kubectl: string;
    const plugin = () => join(prefix, "bin", "kubectl-dms");
    const run = (script: string, stdin?: string) =>
      bash(script, {
        cwd: work,
        env: { ...env, KUBECTL: kubectl },
        ...(stdin === undefined ? {} : { stdin }),
      });

    beforeAll(async () => {
      kubectl = (await ensureBinaries()).kubectl;
    }, 600_000);

    it("is installed as `npm install --global` installs a bin: a link on PATH into the package", () => {
      expect(lstatSync(plugin()).isSymbolicLink()).toBe(true);
      expect(realpathSync(plugin())).toBe(
        realpathSync(join(prefix, "lib", "node_modules", PKG.name, "bin", "kubectl-dms.mjs")),
      );
    });

    it("kubectl plugin list shows it", async () => {
      const listed = await run('"$KUBECTL" plugin list');
      expect(listed.stdout).toContain(plugin());
      expect(listed.code).toBe(0);
    });

    it("kubectl dms --help says `Usage: kubectl dms` and lists the program's commands but run and simulator", async () => {
      const help = await run('"$KUBECTL" dms --help');
      expect(help.code).toBe(0);
      expect(help.stdout).toMatch(/^Usage: kubectl dms \[options\] \[command\]\n/);
      const own = await run("dms-operator --help");
      const commands = (text: string) =>
        [...(text.split("Commands:\n")[1] ?? "").matchAll(/^ {2}([\w-]+)/gm)].map((m) => m[1]);
      expect(commands(own.stdout)).toEqual(expect.arrayContaining(["run", "simulator", "status", "plan"]));
      expect(commands(help.stdout)).toEqual(
        commands(own.stdout).filter((c) => c !== "run" && c !== "simulator"),
      );
      const plan = await run('"$KUBECTL" dms plan --help');
      expect(plan.stdout).toMatch(/^Usage: kubectl dms plan \[options\]\n/);
      expect(plan.stdout).toContain("-n, --namespace <ns>");
    });

    it("kubectl completes `kubectl dms …` through the installed kubectl_complete-dms", async () => {
      expect(await run('"$KUBECTL" __complete dms sus')).toMatchObject({ code: 0, stdout: "suspend\n:4\n" });
    });

    it("kubectl dms --version prints the package version", async () => {
      expect(await run('"$KUBECTL" dms --version')).toEqual({
        code: 0,
        stdout: `${PKG.version}\n`,
        stderr: "",
      });
    });

    it("kubectl dms plan -n <ns> -f - plans against the service; kubectl passes its exit status 2 on", async () => {
      const resource = resourceYaml("new-agent", {
        source: "internal_docker",
        sourceRevisionConfig: { imageUri: "new:1" },
      });
      const planned = await run('"$KUBECTL" dms plan -n team-a -f -', resource);
      expect(planned.stderr).toBe("");
      expect(planned.stdout).toMatch(/^team-a\/new-agent \[<stdin>:\d+\]: create$/m);
      expect(planned.code).toBe(2);
    });

    it("takes --kubeconfig and --context after the plugin name, and kubectl refuses its flags before it", async () => {
      const kubeconfig = join(work, "plugin-kubeconfig.yaml");
      writeFileSync(
        kubeconfig,
        [
          "apiVersion: v1",
          "kind: Config",
          "clusters: [{name: dev, cluster: {server: 'https://127.0.0.1:1'}}]",
          "users: [{name: dev, user: {token: t}}]",
          "contexts: [{name: dev, context: {cluster: dev, user: dev, namespace: team-b}}]",
          "current-context: dev",
          "",
        ].join("\n"),
      );
      const wrong = await run(
        `"$KUBECTL" dms plan -f - --kubeconfig ${JSON.stringify(kubeconfig)} --context prod`,
      );
      expect(wrong.stderr).toContain(`error: context prod is not in ${kubeconfig} (contexts: dev)`);
      expect(wrong.code).toBe(1);
      const before = await run('"$KUBECTL" --context dev dms plan -f -');
      expect(before.stderr).toContain("flags cannot be placed before plugin name: --context");
      expect(before.code).not.toBe(0);
    });
  });
});
