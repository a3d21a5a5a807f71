// How the cluster tests find their kube-apiserver, etcd and kubectl. `go` here is a stand-in shell
// script on PATH (an external tool, not one of our modules), so building is exercised in
// milliseconds: what it writes, how often it runs, and what a user reads when it cannot.
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  binaryCacheDir,
  type ControlPlaneBinaries,
  controlPlaneVersions,
  ensureBinaries,
  ensureGoTool,
  GITOPS_HEALTH,
  goToolCacheName,
  HELM,
  PROMTOOL,
  prometheusRelease,
} from "../controlplane/binaries.ts";

const FAKE_GO = `#!/bin/sh
case "$1" in
  env) echo "\${FAKE_GO_VERSION:-go1.26.0}" ;;
  build)
    out=""; pkg=""
    while [ $# -gt 0 ]; do
      case "$1" in -o) out="$2"; shift ;; *) pkg="$1" ;; esac
      shift
    done
    echo "$pkg" >> "$FAKE_GO_LOG"
    sleep 0.2
    if [ -n "$FAKE_GO_FAIL" ]; then echo "build exploded" >&2; exit 2; fi
    printf '#!/bin/sh\\necho %s\\n' "$pkg" > "$out"
    chmod +x "$out" ;;
  *) exit 1 ;;
esac
`;

let root: string;
let env: NodeJS.ProcessEnv;

function executable(path: string): string {
  writeFileSync(path, "#!/bin/sh\n");
  chmodSync(path, 0o755);
  return path;
}

function builds(): string[] {
  try {
    return readFileSync(join(root, "go.log"), "utf8").trim().split("\n").filter(Boolean);
  } catch {
    return [];
  }
}

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "dms-binaries-test-"));
  mkdirSync(join(root, "bin"));
  writeFileSync(join(root, "bin", "go"), FAKE_GO, { mode: 0o755 });
  env = {
    PATH: `${join(root, "bin")}:/usr/bin:/bin`,
    DMS_CACHE_DIR: join(root, "cache"),
    FAKE_GO_LOG: join(root, "go.log"),
  };
});

afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

describe("ensureBinaries", () => {
  it("uses the TEST_ASSET_* binaries as given, building nothing", async () => {
    const given: ControlPlaneBinaries = {
      kubeApiServer: executable(join(root, "my-apiserver")),
      etcd: executable(join(root, "my-etcd")),
      kubectl: executable(join(root, "my-kubectl")),
    };
    const found = await ensureBinaries({
      env: {
        ...env,
        TEST_ASSET_KUBE_APISERVER: given.kubeApiServer,
        TEST_ASSET_ETCD: given.etcd,
        TEST_ASSET_KUBECTL: given.kubectl,
      },
    });
    expect(found).toEqual(given);
    expect(builds()).toEqual([]);
  });

  it("takes binaries from KUBEBUILDER_ASSETS, unless one is named individually", async () => {
    const assets = join(root, "assets");
    mkdirSync(assets);
    for (const name of ["kube-apiserver", "etcd", "kubectl"]) executable(join(assets, name));
    const etcd = executable(join(root, "other-etcd"));
    const found = await ensureBinaries({
      env: { ...env, KUBEBUILDER_ASSETS: assets, TEST_ASSET_ETCD: etcd },
    });
    expect(found).toEqual({
      kubeApiServer: join(assets, "kube-apiserver"),
      etcd,
      kubectl: join(assets, "kubectl"),
    });
  });

  it("refuses an explicit path that is not there instead of quietly using another binary", async () => {
    await expect(ensureBinaries({ env: { ...env, TEST_ASSET_ETCD: join(root, "nope") } })).rejects.toThrow(
      /TEST_ASSET_ETCD=.*nope is not an executable file/,
    );
    await expect(ensureBinaries({ env: { ...env, KUBEBUILDER_ASSETS: root } })).rejects.toThrow(
      /KUBEBUILDER_ASSETS=.* has no executable kube-apiserver/,
    );
  });

  it("without binaries and without Go, says how to provide them", async () => {
    const noGo = { ...env, PATH: "/nonexistent" };
    const error = await ensureBinaries({ env: noGo }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    const message = (error as Error).message;
    expect(message).toContain("Missing kube-apiserver, etcd, kubectl");
    expect(message).toContain("Go is not installed");
    for (const hint of [
      "TEST_ASSET_KUBE_APISERVER",
      "TEST_ASSET_ETCD",
      "TEST_ASSET_KUBECTL",
      "KUBEBUILDER_ASSETS",
    ]) {
      expect(message).toContain(hint);
    }
    expect(message).toMatch(/install Go >= 1\.24/);
  });

  it("names a Go that is too old", async () => {
    await expect(ensureBinaries({ env: { ...env, FAKE_GO_VERSION: "go1.22.5" } })).rejects.toThrow(
      /Go 1\.22 is too old.*install Go >= 1\.24/s,
    );
    expect(builds()).toEqual([]);
  });

  it("builds each missing binary once into the versioned cache, even when two callers race", async () => {
    const [a, b] = await Promise.all([ensureBinaries({ env }), ensureBinaries({ env })]);
    expect(a).toEqual(b);
    const v = controlPlaneVersions();
    const dir = binaryCacheDir(env);
    expect(dir).toBe(join(root, "cache", "controlplane", `k8s-${v.kubernetes}_etcd-${v.etcd}`));
    expect(a).toEqual({
      kubeApiServer: join(dir, "kube-apiserver"),
      etcd: join(dir, "etcd"),
      kubectl: join(dir, "kubectl"),
    });
    expect(builds().sort()).toEqual([
      "go.etcd.io/etcd/server/v3",
      "k8s.io/kubernetes/cmd/kube-apiserver",
      "k8s.io/kubernetes/cmd/kubectl",
    ]);
    expect(readdirSync(dir).sort()).toEqual(["etcd", "kube-apiserver", "kubectl"]); // no temp files, no lock
    expect(spawnSync(a.kubectl, { encoding: "utf8" }).stdout.trim()).toBe("k8s.io/kubernetes/cmd/kubectl");

    await ensureBinaries({ env });
    expect(builds()).toHaveLength(3); // the cache is reused
  });

  it("leaves no half-written binary when a build fails, and the next attempt builds", async () => {
    const error = await ensureBinaries({ env: { ...env, FAKE_GO_FAIL: "1" } }).catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/go build of kube-apiserver failed \(exit 2\):\nbuild exploded/);
    expect(readdirSync(binaryCacheDir(env))).toEqual([]);

    const built = await ensureBinaries({ env });
    // The failed attempt built kube-apiserver only; the next one builds all three, and they run.
    expect(builds()).toEqual([
      "k8s.io/kubernetes/cmd/kube-apiserver",
      "k8s.io/kubernetes/cmd/kube-apiserver",
      expect.stringContaining("etcd"),
      "k8s.io/kubernetes/cmd/kubectl",
    ]);
    expect(spawnSync(built.kubeApiServer, { encoding: "utf8" }).stdout.trim()).toBe(
      "k8s.io/kubernetes/cmd/kube-apiserver",
    );
    expect(readdirSync(binaryCacheDir(env))).not.toEqual([]);
  });

  it("takes over a build lock whose owner has died", async () => {
    const dir = binaryCacheDir(env);
    mkdirSync(dir, { recursive: true });
    const dead = spawnSync("true").pid;
    writeFileSync(join(dir, ".build.lock"), String(dead));
    const lines: string[] = [];
    await ensureBinaries({ env, log: (line) => lines.push(line) });
    expect(lines.join("\n")).toContain(`stale lock ${join(dir, ".build.lock")} of process ${dead}`);
    expect(builds()).toHaveLength(3);
  });
});

describe("ensureGoTool, for gitops-health", () => {
  it("builds it once, into a cache directory named by a digest of its module, even when two callers race", async () => {
    const name = goToolCacheName(GITOPS_HEALTH);
    expect(name).toMatch(/^gitops-health-[0-9a-f]{16}$/);
    const [a, b] = await Promise.all([
      ensureGoTool(GITOPS_HEALTH, { env }),
      ensureGoTool(GITOPS_HEALTH, { env }),
    ]);
    expect(a).toBe(join(root, "cache", "tools", name, "gitops-health"));
    expect(b).toBe(a);
    expect(builds()).toEqual(["."]);
    expect(readdirSync(join(root, "cache", "tools", name))).toEqual(["gitops-health"]);
    await ensureGoTool(GITOPS_HEALTH, { env });
    expect(builds()).toEqual(["."]);
  });

  it("fails, naming the Go it needs, when Go is missing or older than its module", async () => {
    await expect(ensureGoTool(GITOPS_HEALTH, { env: { ...env, PATH: "/nonexistent" } })).rejects.toThrow(
      /gitops-health is built with Go >= 1\.26 .* Go is not installed .*node test\/controlplane\/ensure\.ts/,
    );
    await expect(
      ensureGoTool(GITOPS_HEALTH, { env: { ...env, FAKE_GO_VERSION: "go1.25.3" } }),
    ).rejects.toThrow(/Go 1\.25 is too old/);
    expect(builds()).toEqual([]);
  });
});

/** A go that logs its whole command line (to see the -ldflags) and builds an empty script. */
function useCommandLineGo(): void {
  writeFileSync(
    join(root, "bin", "go"),
    `#!/bin/sh\ncase "$1" in\n  env) echo go1.26.0 ;;\n  build) echo "$@" >> "$FAKE_GO_LOG"; out=""\n    while [ $# -gt 0 ]; do case "$1" in -o) out="$2"; shift ;; esac; shift; done\n    printf '#!/bin/sh\\n' > "$out"; chmod +x "$out" ;;\nesac\n`,
    { mode: 0o755 },
  );
}

describe("ensureGoTool, for helm", () => {
  it("builds the pinned release into helm-<version>, stamping that version into `helm version`", async () => {
    useCommandLineGo();
    const helm = pinnedVersion("helm", "helm.sh/helm/v4");
    expect(goToolCacheName(HELM)).toBe(`helm-${helm}`);
    const path = await ensureGoTool(HELM, { env });
    expect(path).toBe(join(root, "cache", "tools", `helm-${helm}`, "helm"));
    const [line] = builds();
    expect(line).toContain(`-X helm.sh/helm/v4/internal/version.version=${helm} `);
    expect(line).toMatch(/ helm\.sh\/helm\/v4\/cmd\/helm$/);
  });
});

describe("ensureGoTool, for promtool", () => {
  it("stamps the Prometheus release of the pinned module into `promtool --version` and names its cache by it", async () => {
    useCommandLineGo();
    const release = prometheusRelease(pinnedVersion("promtool", "github.com/prometheus/prometheus"));
    expect(goToolCacheName(PROMTOOL)).toBe(`promtool-${release}`);
    const path = await ensureGoTool(PROMTOOL, { env });
    expect(path).toBe(join(root, "cache", "tools", `promtool-${release}`, "promtool"));
    const [line] = builds();
    expect(line).toContain(`-X github.com/prometheus/common/version.Version=${release} `);
  });

  it("reads a Prometheus release out of its module version, and refuses what is not one", () => {
    expect(prometheusRelease("v0.316.0")).toBe("3.16.0");
    expect(prometheusRelease("v0.300.2")).toBe("3.0.2");
    expect(prometheusRelease("v0.1205.1")).toBe("12.5.1");
    expect(() => prometheusRelease("v3.16.0")).toThrow(/not a github.com\/prometheus\/prometheus version/);
  });
});

/** The version of `modulePath` that test/controlplane/<module>/go.mod pins. */
function pinnedVersion(module: string, modulePath: string): string {
  const goMod = readFileSync(join(import.meta.dirname, "..", "controlplane", module, "go.mod"), "utf8");
  const version = goMod
    .split("\n")
    .map((line) =>
      line
        .trim()
        .replace(/^require\s+/, "")
        .split(/\s+/),
    )
    .find(([path]) => path === modulePath)?.[1];
  if (!version?.startsWith("v"))
    throw new Error(`test/controlplane/${module}/go.mod does not require ${modulePath}`);
  return version;
}
