// Finds (or builds) the kube-apiserver, etcd and kubectl binaries the cluster tests run against.
//
// Order, per binary: the envtest variable naming that binary, then $KUBEBUILDER_ASSETS, then the
// per-user cache, then `go build` from the wrapper modules next to this file. A path the user
// pointed at explicitly must exist: silently falling back to something else would test a
// different Kubernetes than the one the user asked for.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { accessSync, constants, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { rename, rm } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { acquireLock } from "./lock.ts";

/** Paths of the three executables a control plane needs. */
export interface ControlPlaneBinaries {
  readonly kubeApiServer: string;
  readonly etcd: string;
  readonly kubectl: string;
}

/** The versions the wrapper Go modules pin (read from their go.mod, so the two cannot drift). */
export interface ControlPlaneVersions {
  /** e.g. `v1.35.4` */
  readonly kubernetes: string;
  /** e.g. `v3.6.16` */
  readonly etcd: string;
}

/** Raised when a binary can be neither found nor built; the message says how to provide one. */
export class ControlPlaneBinariesError extends Error {
  override readonly name = "ControlPlaneBinariesError";
}

/** Options of {@link ensureBinaries}. */
export interface EnsureBinariesOptions {
  /** Environment to read the envtest variables and cache location from; defaults to `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Receives progress lines (which binary is built, Go's own output). */
  log?: (line: string) => void;
  /** How long to wait for another process that holds the build lock; default 30 minutes. */
  lockTimeoutMs?: number;
}

type BinaryKey = keyof ControlPlaneBinaries;

const MODULES_DIR = import.meta.dirname;
const MIN_GO: readonly [number, number] = [1, 24]; // the `tool` directive of the go.mod files needs 1.24

/** A command built with `go build` from one of the wrapper modules next to this file. */
interface GoBuild {
  /** Executable name in the cache. */
  file: string;
  /** Directory of the wrapper module (its go.mod pins the version). */
  module: string;
  /** Go package of the command. */
  pkg: string;
}

const BINARY: Record<BinaryKey, GoBuild & { envVar: string; module: "kube" | "etcd" }> = {
  kubeApiServer: {
    file: "kube-apiserver",
    envVar: "TEST_ASSET_KUBE_APISERVER",
    module: "kube",
    pkg: "k8s.io/kubernetes/cmd/kube-apiserver",
  },
  etcd: { file: "etcd", envVar: "TEST_ASSET_ETCD", module: "etcd", pkg: "go.etcd.io/etcd/server/v3" },
  kubectl: {
    file: "kubectl",
    envVar: "TEST_ASSET_KUBECTL",
    module: "kube",
    pkg: "k8s.io/kubernetes/cmd/kubectl",
  },
};

const HOW_TO_PROVIDE =
  "Provide prebuilt binaries with TEST_ASSET_KUBE_APISERVER, TEST_ASSET_ETCD and TEST_ASSET_KUBECTL " +
  "(or a KUBEBUILDER_ASSETS directory holding kube-apiserver, etcd and kubectl), " +
  `or install Go >= ${MIN_GO.join(".")} (https://go.dev/dl/) so they can be built once into the cache.`;

function requiredVersion(goMod: string, modulePath: string): string {
  const file = join(MODULES_DIR, goMod, "go.mod");
  const text = readFileSync(file, "utf8");
  const escaped = modulePath.replaceAll(".", "\\.").replaceAll("/", "\\/");
  const match = new RegExp(`^\\s*${escaped}\\s+(v\\S+)`, "m").exec(text);
  if (!match?.[1]) throw new Error(`${file} does not require ${modulePath}`);
  return match[1];
}

/** The Kubernetes and etcd versions the wrapper modules build; throws when a go.mod lost its pin. */
export function controlPlaneVersions(): ControlPlaneVersions {
  return {
    kubernetes: requiredVersion("kube", "k8s.io/kubernetes"),
    etcd: requiredVersion("etcd", "go.etcd.io/etcd/server/v3"),
  };
}

/**
 * The per-user, per-version directory built binaries are kept in:
 * `${DMS_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/dms-operator}/controlplane/k8s-<v>_etcd-<v>`.
 */
export function binaryCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const root = env.DMS_CACHE_DIR || join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "dms-operator");
  const v = controlPlaneVersions();
  return join(root, "controlplane", `k8s-${v.kubernetes}_etcd-${v.etcd}`);
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** A binary the user pointed at explicitly, or undefined when they did not. Throws when it is not there. */
function explicitBinary(key: BinaryKey, env: NodeJS.ProcessEnv): string | undefined {
  const { envVar, file } = BINARY[key];
  const direct = env[envVar];
  if (direct) {
    if (!isExecutable(direct)) {
      throw new ControlPlaneBinariesError(`${envVar}=${direct} is not an executable file. ${HOW_TO_PROVIDE}`);
    }
    return direct;
  }
  const assets = env.KUBEBUILDER_ASSETS;
  if (assets) {
    const path = join(assets, file);
    if (!isExecutable(path)) {
      throw new ControlPlaneBinariesError(
        `KUBEBUILDER_ASSETS=${assets} has no executable ${file}. ${HOW_TO_PROVIDE}`,
      );
    }
    return path;
  }
  return undefined;
}

/**
 * Returns the three binaries, building the missing ones into {@link binaryCacheDir} with `go build`.
 * Safe to call from several processes at once: builds are serialised by a lock file and land by
 * atomic rename, so nobody ever runs a half-written binary. Throws {@link ControlPlaneBinariesError}
 * when a binary is neither provided nor buildable; never returns a partial result.
 */
export async function ensureBinaries(options: EnsureBinariesOptions = {}): Promise<ControlPlaneBinaries> {
  const env = options.env ?? process.env;
  const log = options.log ?? (() => {});
  const cacheDir = binaryCacheDir(env);
  const found: Partial<Record<BinaryKey, string>> = {};
  const keys = Object.keys(BINARY) as BinaryKey[];
  for (const key of keys) {
    found[key] = explicitBinary(key, env) ?? cached(cacheDir, key);
  }
  const missing = keys.filter((key) => found[key] === undefined);
  if (missing.length > 0) {
    const go = await goVersion(env);
    if (go === undefined || !atLeast(go, MIN_GO)) {
      const have =
        go === undefined ? "Go is not installed (no `go` on PATH)" : `Go ${go.join(".")} is too old`;
      throw new ControlPlaneBinariesError(
        `Missing ${missing.map((k) => BINARY[k].file).join(", ")} for the cluster tests and ${have}. ${HOW_TO_PROVIDE}`,
      );
    }
    mkdirSync(cacheDir, { recursive: true });
    const release = await acquireLock(join(cacheDir, ".build.lock"), {
      timeoutMs: options.lockTimeoutMs ?? 30 * 60_000,
      log,
      waitingFor: "building the control-plane binaries",
    });
    try {
      for (const key of missing) {
        // Another process may have built it while we waited for the lock.
        found[key] = cached(cacheDir, key) ?? (await build(BINARY[key], ldflags(key), cacheDir, env, log));
      }
    } finally {
      release();
    }
  }
  const { kubeApiServer, etcd, kubectl } = found;
  if (!kubeApiServer || !etcd || !kubectl)
    throw new Error("unreachable: a binary was neither found nor built");
  return { kubeApiServer, etcd, kubectl };
}

/** A development tool the tests run, built like the control plane: pinned by a wrapper go.mod. */
export interface GoTool extends GoBuild {
  /**
   * The module whose version (from the wrapper's go.mod) names the cache directory. Without it,
   * the directory is named by a digest of the wrapper module's files (go.mod, go.sum and its own
   * .go files), so that any change to the pins or to our code there builds a new binary.
   */
  modulePath?: string;
  /** The oldest Go that builds it, when newer than the control plane's. */
  minGo?: readonly [number, number];
  /**
   * A Go string variable that reports the tool's version (set with `-X` to the pinned version of
   * {@link modulePath}, as {@link version} spells it), for tools that print a placeholder otherwise.
   */
  versionVar?: string;
  /**
   * The tool's own version for the pinned version of {@link modulePath}, when the two differ (the
   * Go module of a project whose releases are not its module versions): what {@link versionVar}
   * is set to and what names the cache directory. Default: the module's version.
   */
  version?: (moduleVersion: string) => string;
}

/** actionlint, which lints the GitHub Actions workflows in the test suite. */
export const ACTIONLINT: GoTool = {
  file: "actionlint",
  module: "actionlint",
  pkg: "github.com/rhysd/actionlint/cmd/actionlint",
  modulePath: "github.com/rhysd/actionlint",
};

/**
 * gitops-health: our own command (test/controlplane/gitops-health/main.go) around the health
 * engines of Argo CD (gopher-lua) and Flux (kstatus, fluxcd/pkg runtime/cel), which the tests of
 * docs/gitops-health.md run. See test/controlplane/gitops-health.ts.
 */
export const GITOPS_HEALTH: GoTool = {
  file: "gitops-health",
  module: "gitops-health",
  pkg: ".",
  minGo: [1, 26], // fluxcd/pkg/runtime's go.mod
};

/**
 * template-render: our own command (test/controlplane/template-render/main.go) that renders Argo
 * CD ApplicationSet and Flux Operator ResourceSet templates with the engines' template language
 * and function libraries, which the tests of docs/previews.md run. See
 * test/controlplane/template-render.ts.
 */
export const TEMPLATE_RENDER: GoTool = {
  file: "template-render",
  module: "template-render",
  pkg: ".",
};

/**
 * helm (v4, the maintained major line: v3 gets security fixes only), which lints, renders, installs
 * and upgrades charts/dms-operator in test/e2e/helm-chart.test.ts and test/unit/helm-chart.test.ts.
 */
export const HELM: GoTool = {
  file: "helm",
  module: "helm",
  pkg: "helm.sh/helm/v4/cmd/helm",
  modulePath: "helm.sh/helm/v4",
  minGo: [1, 26], // helm.sh/helm/v4's go.mod
  versionVar: "helm.sh/helm/v4/internal/version.version", // else `helm version` says v4.3
};

/**
 * promtool, Prometheus's own checker of rule files, which checks and unit-tests the alert rules of
 * charts/dms-operator and manifests/components/alerts in test/unit/alerts.test.ts. The module
 * github.com/prometheus/prometheus v0.3XX.Y is Prometheus 3.XX.Y, the version `promtool
 * --version` prints (Prometheus's release builds stamp it the same way).
 */
export const PROMTOOL: GoTool = {
  file: "promtool",
  module: "promtool",
  pkg: "github.com/prometheus/prometheus/cmd/promtool",
  modulePath: "github.com/prometheus/prometheus",
  minGo: [1, 26], // github.com/prometheus/prometheus's go.mod
  versionVar: "github.com/prometheus/common/version.Version",
  version: prometheusRelease,
};

/** The Prometheus release of a github.com/prometheus/prometheus module version: v0.316.2 is 3.16.2. */
export function prometheusRelease(moduleVersion: string): string {
  const match = /^v0\.(\d+)(\d\d)\.(\d+)$/.exec(moduleVersion);
  if (!match)
    throw new Error(`${moduleVersion} is not a github.com/prometheus/prometheus version (v0.MMmm.p)`);
  return `${match[1]}.${Number(match[2])}.${match[3]}`;
}

/** The name of `tool`'s cache directory: `<file>-<version>` or `<file>-<digest of its module>`. */
export function goToolCacheName(tool: GoTool): string {
  if (tool.modulePath) return `${tool.file}-${toolVersion(tool, tool.modulePath)}`;
  const dir = join(MODULES_DIR, tool.module);
  const hash = createHash("sha256");
  for (const name of readdirSync(dir).sort()) {
    if (name === "go.mod" || name === "go.sum" || name.endsWith(".go")) {
      hash
        .update(`${name}\0`)
        .update(readFileSync(join(dir, name)))
        .update("\0");
    }
  }
  return `${tool.file}-${hash.digest("hex").slice(0, 16)}`;
}

/**
 * The path of `tool`, built once with `go build` into
 * `${DMS_CACHE_DIR:-…/dms-operator}/tools/<cache name>` (see {@link goToolCacheName}; same lock,
 * atomic rename and Go check as {@link ensureBinaries}). Throws {@link ControlPlaneBinariesError}
 * when Go is missing or too old.
 */
export async function ensureGoTool(tool: GoTool, options: EnsureBinariesOptions = {}): Promise<string> {
  const env = options.env ?? process.env;
  const log = options.log ?? (() => {});
  const root = env.DMS_CACHE_DIR || join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "dms-operator");
  const cacheDir = join(root, "tools", goToolCacheName(tool));
  const path = join(cacheDir, tool.file);
  if (isExecutable(path)) return path;
  const minGo = tool.minGo ?? MIN_GO;
  const go = await goVersion(env);
  if (go === undefined || !atLeast(go, minGo)) {
    const have = go === undefined ? "Go is not installed (no `go` on PATH)" : `Go ${go.join(".")} is too old`;
    throw new ControlPlaneBinariesError(
      `${tool.file} is built with Go >= ${minGo.join(".")} (https://go.dev/dl/) and ${have}. ` +
        "Install Go, then run `node test/controlplane/ensure.ts` to build it into the cache.",
    );
  }
  mkdirSync(cacheDir, { recursive: true });
  const release = await acquireLock(join(cacheDir, ".build.lock"), {
    timeoutMs: options.lockTimeoutMs ?? 30 * 60_000,
    log,
    waitingFor: `building ${tool.file}`,
  });
  try {
    return isExecutable(path) ? path : await build(tool, goToolLdflags(tool), cacheDir, env, log);
  } finally {
    release();
  }
}

function goToolLdflags(tool: GoTool): string {
  if (!tool.versionVar || !tool.modulePath) return "-s -w";
  return `-s -w -X ${tool.versionVar}=${toolVersion(tool, tool.modulePath)}`;
}

/** The version `tool` reports: its pinned `modulePath` version, as {@link GoTool.version} spells it. */
function toolVersion(tool: GoTool, modulePath: string): string {
  const pinned = requiredVersion(tool.module, modulePath);
  return tool.version ? tool.version(pinned) : pinned;
}

function cached(cacheDir: string, key: BinaryKey): string | undefined {
  const path = join(cacheDir, BINARY[key].file);
  return isExecutable(path) ? path : undefined;
}

function atLeast(version: readonly number[], min: readonly [number, number]): boolean {
  const [major = 0, minor = 0] = version;
  return major > min[0] || (major === min[0] && minor >= min[1]);
}

async function goVersion(env: NodeJS.ProcessEnv): Promise<number[] | undefined> {
  try {
    // GOTOOLCHAIN=local: report the installed Go, not a toolchain it would download for this module.
    const out = await run("go", ["env", "GOVERSION"], { env: { ...env, GOTOOLCHAIN: "local" } });
    const match = /go(\d+)\.(\d+)/.exec(out.stdout);
    return out.code === 0 && match ? [Number(match[1]), Number(match[2])] : undefined;
  } catch {
    return undefined; // spawn ENOENT: no go on PATH
  }
}

function ldflags(key: BinaryKey): string {
  if (BINARY[key].module === "etcd") return "-s -w";
  // Without these, `kube-apiserver --version` says v0.0.0 and kubectl warns about version skew.
  const v = controlPlaneVersions().kubernetes;
  const [major, minor] = v.replace(/^v/, "").split(".");
  const vars = ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"].flatMap((pkg) => [
    `-X ${pkg}.gitVersion=${v}`,
    `-X ${pkg}.gitMajor=${major}`,
    `-X ${pkg}.gitMinor=${minor}`,
  ]);
  return ["-s -w", ...vars].join(" ");
}

async function build(
  { file, module, pkg }: GoBuild,
  flags: string,
  cacheDir: string,
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
) {
  const target = join(cacheDir, file);
  const temp = `${target}.tmp-${process.pid}`;
  const args = ["build", "-trimpath", "-ldflags", flags, "-o", temp, pkg];
  log(`building ${file} (go ${args.join(" ")}) in ${join(MODULES_DIR, module)}; first build takes minutes`);
  const started = Date.now();
  try {
    const out = await run("go", args, { cwd: join(MODULES_DIR, module), env, onLine: log });
    if (out.code !== 0) {
      throw new ControlPlaneBinariesError(
        `go build of ${file} failed (exit ${out.code}):\n${out.stderr.trim()}\n${HOW_TO_PROVIDE}`,
      );
    }
    await rename(temp, target);
  } finally {
    await rm(temp, { force: true });
  }
  log(`built ${target} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return target;
}

interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

function run(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env: NodeJS.ProcessEnv; onLine?: (line: string) => void },
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      const text = chunk.toString();
      stderr += text;
      for (const line of text.split("\n")) if (line.trim()) opts.onLine?.(line);
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}
