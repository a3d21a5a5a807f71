// The container image's runtime layout, proven without a container engine: exactly what the
// Dockerfile's runtime stage copies (compiled dist/, production node_modules only, package.json,
// bin/, crds/) is assembled into a directory, made read-only, and the operator is run from it
// as uid/gid 65532 (the image's USER) with the manifests' NODE_OPTIONS and arguments, as the
// manifests' ServiceAccount, against the real API server and the simulator. What a user then
// sees with `kubectl get dmsd` is checked on the resources it reconciles.
import { type ChildProcess, execFileSync, type SpawnOptions, spawn } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { loadSeed } from "../../src/simulator/seed.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { freePort } from "../controlplane/net.ts";
import { freshNamespace, kubectl, kubectlOk, waitFor } from "../support/cluster.ts";
import { containerArgs, MANIFESTS, serviceAccountKubeconfig } from "./install-support.ts";

const ROOT = join(MANIFESTS, "..");
const UID = 65532;
const API_KEY = "image-layout-key-5e1f";
const PKG = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };

/** The runtime stage of the Dockerfile: its COPY lines, USER, ENTRYPOINT, CMD and ENV. */
function runtimeStage() {
  const lines = readFileSync(join(ROOT, "Dockerfile"), "utf8")
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((l) => l.trim());
  const from = lines.findLastIndex((l) => /^FROM\s/i.test(l));
  const stage = lines.slice(from + 1).filter((l) => l && !l.startsWith("#"));
  const copies = stage
    .filter((l) => /^COPY\s/i.test(l))
    .map((l) => {
      const parts = l.split(/\s+/).slice(1);
      const fromStage = parts.find((p) => p.startsWith("--from="))?.slice("--from=".length);
      const [src, dest] = parts.filter((p) => !p.startsWith("--"));
      return { fromStage, src: src ?? "", dest: dest ?? "" };
    });
  const json = (word: string) => {
    const line = stage.find((l) => l.toUpperCase().startsWith(`${word} `));
    return line ? (JSON.parse(line.slice(word.length + 1)) as string[]) : [];
  };
  return {
    copies,
    user: stage.find((l) => /^USER\s/i.test(l))?.split(/\s+/)[1],
    workdir: stage.find((l) => /^WORKDIR\s/i.test(l))?.split(/\s+/)[1],
    entrypoint: json("ENTRYPOINT"),
    cmd: json("CMD"),
    env: Object.fromEntries(
      stage
        .filter((l) => /^ENV\s/i.test(l))
        .map((l) => l.replace(/^ENV\s+/i, "").split("=") as [string, string]),
    ),
  };
}

/** The packages `npm prune --omit=dev` keeps: every locked top-level package not marked dev. */
function productionPackages(): string[] {
  const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as {
    packages: Record<string, { dev?: boolean }>;
  };
  return Object.entries(lock.packages)
    .filter(([path, p]) => /^node_modules\/(@[^/]+\/)?[^/]+$/.test(path) && !p.dev)
    .map(([path]) => path)
    .filter((path) => existsSync(join(ROOT, path))); // optional packages of other platforms are absent
}

/** Reproduces the build stage's output for `src` (a path under the build stage's WORKDIR). */
function fromBuildStage(src: string, dest: string): void {
  if (src === "/app/dist") {
    execFileSync(process.execPath, [
      join(ROOT, "node_modules", "typescript", "bin", "tsc"),
      "-p",
      join(ROOT, "tsconfig.build.json"),
      "--outDir",
      dest,
    ]);
  } else if (src === "/app/node_modules") {
    for (const path of productionPackages())
      cpSync(join(ROOT, path), join(dest, path.slice("node_modules/".length)), { recursive: true });
  } else throw new Error(`the test does not know how to reproduce COPY --from=build ${src}: teach it`);
}

function readOnly(path: string): void {
  const info = statSync(path);
  if (info.isDirectory()) {
    for (const entry of readdirSync(path)) readOnly(join(path, entry));
    chmodSync(path, 0o555);
  } else chmodSync(path, info.mode & 0o111 ? 0o555 : 0o444);
}

/** `NODE_OPTIONS` as manifests/manager/manager.yaml sets it for the operator container, if it does. */
function manifestNodeOptions(): string | undefined {
  const doc = parse(readFileSync(join(MANIFESTS, "manager", "manager.yaml"), "utf8")) as {
    spec: {
      template: { spec: { containers: { name: string; env?: { name: string; value?: string }[] }[] } };
    };
  };
  const container = doc.spec.template.spec.containers.find((c) => c.name === "operator");
  return container?.env?.find((e) => e.name === "NODE_OPTIONS")?.value;
}

/** Spawns `command` as uid/gid 65532 with no supplementary groups (setpriv, from util-linux). */
const spawnAsNonRoot = (command: string[], options: SpawnOptions) =>
  spawn("setpriv", [`--reuid=${UID}`, `--regid=${UID}`, "--clear-groups", "--", ...command], options);

describe("the image's runtime layout", () => {
  const stage = runtimeStage();
  let root: string;
  let app: string;
  let node: string;
  let simulator: RunningSimulator;
  let child: ChildProcess;
  let logPath: string;
  let probes: string;
  let ns: string;
  const log = () => readFileSync(logPath, "utf8");

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "dms-image-"));
    chmodSync(root, 0o755);
    app = join(root, (stage.workdir ?? "/app").replace(/^\//, ""));
    mkdirSync(app, { recursive: true });
    for (const { fromStage, src, dest } of stage.copies) {
      const target = join(app, dest);
      if (fromStage === "build") fromBuildStage(src, target);
      else if (fromStage === undefined)
        cpSync(join(ROOT, src), dest.endsWith("/") && !src.includes("/") ? join(target, src) : target, {
          recursive: true,
        });
      else throw new Error(`unknown stage ${fromStage}`);
    }
    readOnly(app);
    // The distroless image's Node, at the path its ENTRYPOINT names (/nodejs/bin/node).
    node = join(root, (stage.entrypoint[0] ?? "").replace(/^\//, ""));
    mkdirSync(join(node, ".."), { recursive: true });
    copyFileSync(process.execPath, node);
    chmodSync(node, 0o555);

    await kubectlOk(["apply", "-k", join(MANIFESTS, "default")]);
    simulator = await startSimulator({
      apiKey: API_KEY,
      seed: await loadSeed(join(ROOT, "src", "simulator", "seed.example.yaml")),
      timing: { readyAfterMs: 300, revisionActiveAfterMs: 300, deleteAfterMs: 300 },
    });
    const secrets = join(root, "secrets");
    mkdirSync(secrets, { mode: 0o755 });
    const kubeconfig = await serviceAccountKubeconfig("dms-system", "dms-operator", secrets);
    chmodSync(kubeconfig, 0o444);
    writeFileSync(join(secrets, "api-key"), API_KEY, { mode: 0o444 });
    const [command, ...args] = await containerArgs(join(MANIFESTS, "default"), {
      POD_NAMESPACE: "dms-system",
    });
    const probesPort = await freePort();
    probes = `http://127.0.0.1:${probesPort}`;
    logPath = join(root, "operator.log");
    const out = openSync(logPath, "w");
    const nodeOptions = manifestNodeOptions();
    child = spawnAsNonRoot(
      [
        node,
        // The image's absolute paths (/app/bin/dms-operator.mjs) are under `root` here.
        ...stage.entrypoint.slice(1).map((arg) => (arg.startsWith("/") ? join(root, arg) : arg)),
        command ?? "",
        ...args.filter((a) => !/^--(metrics|health-probe)-bind-address/.test(a)),
        "--metrics-bind-address=0",
        `--health-probe-bind-address=127.0.0.1:${probesPort}`,
        `--kubeconfig=${kubeconfig}`,
      ],
      {
        cwd: app,
        stdio: ["ignore", out, out],
        env: {
          ...stage.env,
          ...(nodeOptions ? { NODE_OPTIONS: nodeOptions } : {}),
          HOME: "/nonexistent",
          PATH: "/usr/bin:/bin",
          POD_NAMESPACE: "dms-system",
          POD_NAME: "dms-operator-image-0",
          DMS_BASE_URL: simulator.url,
          DMS_API_KEY_FILE: join(secrets, "api-key"),
          DMS_POLL_INTERVAL: "1s",
        },
      },
    );
    ns = await freshNamespace("image-layout");
  }, 180_000);

  afterAll(async () => {
    if (ns) await kubectl(["delete", "dmsd", "--all", "-n", ns, "--timeout=30s"]);
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    }
    await simulator?.close();
    if (root) {
      chmodSync(root, 0o755);
      execFileSync("chmod", ["-R", "u+w", root]);
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("holds exactly what the runtime stage copies, and production dependencies only", () => {
    expect(stage.copies.map((c) => c.src).sort()).toEqual([
      "/app/dist",
      "/app/node_modules",
      "bin",
      "crds",
      "package.json",
    ]);
    expect(stage.user).toBe(`${UID}:${UID}`);
    expect(stage.env.NODE_ENV).toBe("production");
    expect(readdirSync(app).sort()).toEqual(["bin", "crds", "dist", "node_modules", "package.json"]);
    expect(existsSync(join(app, "dist", "cli.js"))).toBe(true);
    const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as {
      packages: Record<string, { dev?: boolean }>;
    };
    const devOnly = Object.entries(lock.packages)
      .filter(([path, p]) => p.dev && /^node_modules\/(@[^/]+\/)?[^/]+$/.test(path))
      .map(([path]) => path);
    expect(devOnly).toContain("node_modules/vitest");
    expect(devOnly.filter((path) => existsSync(join(app, path)))).toEqual([]);
    for (const prod of ["commander", "p-retry", "pino", "prom-client", "yaml", "@kubernetes/client-node"])
      expect(existsSync(join(app, "node_modules", prod, "package.json")), prod).toBe(true);
  });

  it("runs as uid 65532 from a tree it cannot write, with the manifests' NODE_OPTIONS, and becomes ready", async () => {
    await waitFor(async () => (await fetch(`${probes}/readyz`)).status === 200, {
      timeoutMs: 60_000,
      intervalMs: 500,
      description: "/readyz of the operator run from the image layout",
    }).catch((error: Error) => {
      throw new Error(`${error.message}; exit ${child.exitCode}; its log:\n${log()}`);
    });
    const status = readFileSync(`/proc/${child.pid}/status`, "utf8");
    expect(status).toMatch(new RegExp(`^Uid:\\s+${UID}\\s+${UID}\\s+${UID}\\s+${UID}$`, "m"));
    expect(status).toMatch(new RegExp(`^Gid:\\s+${UID}\\s+${UID}`, "m"));
    const environ = readFileSync(`/proc/${child.pid}/environ`, "utf8").split("\0");
    const nodeOptions = manifestNodeOptions();
    if (nodeOptions) expect(environ).toContain(`NODE_OPTIONS=${nodeOptions}`);
    // The tree is read-only to that user: a write fails.
    const write = await new Promise<number | null>((resolve) =>
      spawnAsNonRoot([node, "-e", `require("fs").writeFileSync(${JSON.stringify(join(app, "probe"))}, "")`], {
        stdio: "ignore",
      }).on("exit", resolve),
    );
    expect(write).not.toBe(0);
    // The start-up line names the version.
    const starting = log()
      .split("\n")
      .filter((l) => l.includes('"starting dms-operator"'))
      .map((l) => JSON.parse(l) as { version?: string });
    expect(starting).toHaveLength(1);
    expect(starting[0]?.version).toBe(PKG.version);
  }, 120_000);

  it("reconciles a sample to Ready, and kubectl get dmsd shows Synced, Reason, Remote, Ready, Age (and revisions under -o wide)", async () => {
    await kubectlOk(["apply", "-n", ns, "-f", join(MANIFESTS, "samples", "internal-docker.yaml")]);
    const waited = await kubectl(
      ["wait", "--for=condition=Ready", "dmsd/summarizer", "-n", ns, "--timeout=45s"],
      {
        timeoutMs: 50_000,
      },
    );
    expect(waited.stderr).toBe("");
    const table = await kubectlOk(["get", "dmsd", "-n", ns]);
    const [header, row] = table
      .trim()
      .split("\n")
      .map((l) => l.trim().split(/\s+/));
    expect(header).toEqual(["NAME", "SYNCED", "REASON", "REMOTE", "READY", "AGE"]);
    expect(row?.slice(0, 5)).toEqual(["summarizer", "True", "ReconcileSuccess", "READY", "True"]);

    const wide = (await kubectlOk(["get", "dmsd", "-n", ns, "-o", "wide"])).trim().split("\n");
    expect(wide[0]?.trim().split(/\s+/)).toEqual([
      "NAME",
      "SYNCED",
      "REASON",
      "REMOTE",
      "READY",
      "AGE",
      "REVISIONS",
      "REVISION-STATUS",
      "LIVE",
      "TYPE",
      "OWNER",
    ]);
    const status = (field: string) =>
      kubectlOk(["get", "dmsd", "summarizer", "-n", ns, "-o", `jsonpath={.status.${field}}`]);
    const [latest, active] = [await status("latestRevisionId"), await status("activeRevisionId")];
    expect(latest).toMatch(/^[0-9a-f-]{36}$/);
    expect(wide[1]).toContain(` ${latest.slice(0, 8)}/${active.slice(0, 8)}`);
    expect(wide[1]).not.toContain(latest);
  });

  it("a resource stuck on a name conflict says so in kubectl get dmsd", async () => {
    const other = await freshNamespace("image-layout-dup");
    try {
      await kubectlOk(["apply", "-n", other, "-f", join(MANIFESTS, "samples", "internal-docker.yaml")]);
      const row = await waitFor(
        async () => {
          const line = (await kubectlOk(["get", "dmsd", "summarizer", "-n", other, "--no-headers"])).trim();
          return line.includes("NameConflict") ? line.split(/\s+/) : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 500, description: "the duplicate to report NameConflict" },
      );
      expect(row.slice(0, 3)).toEqual(["summarizer", "False", "NameConflict"]);
    } finally {
      await kubectl(["delete", "dmsd", "--all", "-n", other, "--timeout=30s"]);
    }
  });
});
