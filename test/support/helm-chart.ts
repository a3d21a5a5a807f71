/**
 * The Helm chart (charts/dms-operator) as its tests run it: the real helm (built into the tool
 * cache, see test/controlplane/binaries.ts), its renderings parsed, and the one normalisation
 * under which a rendering must equal the kustomize install's.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, realpathSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rename, rm, symlink, writeFile } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { promisify } from "node:util";
import { parse, parseAllDocuments } from "yaml";
import { ensureGoTool, HELM } from "../controlplane/binaries.ts";
import { type KubectlResult, runCaptured } from "../controlplane/kubectl.ts";

/** The chart's directory. */
export const CHART = join(import.meta.dirname, "..", "..", "charts", "dms-operator");

/** The path of helm, built into the cache when missing (minutes, once). */
export function helmBinary(): Promise<string> {
  return ensureGoTool(HELM);
}

/** Helm's own state (repositories, registry logins, cache) for this test process, never the user's. */
let helmHome: string | undefined;

/**
 * Runs `helm <args>`; resolves with its exit code and output (a non-zero exit is a result).
 * `kubeconfig` is passed as `--kubeconfig` for the commands that reach a cluster.
 */
export function helm(
  binary: string,
  args: string[],
  opts: { kubeconfig?: string; input?: string; timeoutMs?: number } = {},
): Promise<KubectlResult> {
  helmHome ??= mkdtempSync(join(tmpdir(), "dms-helm-home-"));
  return runCaptured(binary, [...args, ...(opts.kubeconfig ? [`--kubeconfig=${opts.kubeconfig}`] : [])], {
    env: {
      PATH: process.env.PATH ?? "",
      HOME: helmHome,
      HELM_CACHE_HOME: join(helmHome, "cache"),
      HELM_CONFIG_HOME: join(helmHome, "config"),
      HELM_DATA_HOME: join(helmHome, "data"),
    },
    input: opts.input ?? "",
    timeoutMs: opts.timeoutMs ?? 120_000,
  });
}

/** A Kubernetes object as parsed from YAML. */
export type K8sObject = Record<string, unknown> & {
  kind: string;
  metadata: { name: string; namespace?: string } & Record<string, unknown>;
};

/** The objects of a multi-document YAML text (empty documents dropped). */
export function objectsOf(text: string): K8sObject[] {
  return parseAllDocuments(text)
    .map((doc) => doc.toJS() as unknown)
    .filter((v): v is K8sObject => typeof v === "object" && v !== null);
}

/** How a test renders the chart. */
export interface RenderOptions {
  release?: string;
  namespace: string;
  /** `--set` arguments (`key=value`). */
  set?: string[];
  /** Values given as a file (`-f`), for what `--set` cannot spell (e.g. `{{ … }}` for tpl). */
  values?: Record<string, unknown>;
  /** Render the `helm test` objects (templates/tests/) too. Default off (`--skip-tests`): they are no part of an install. */
  tests?: boolean;
}

/**
 * `helm template <release> charts/dms-operator -n <namespace> [-f …] [--set …] [--skip-tests]`, parsed;
 * throws with helm's message when it refuses.
 */
export async function renderChart(binary: string, options: RenderOptions): Promise<K8sObject[]> {
  const args = ["template", options.release ?? "dms-operator", CHART, "-n", options.namespace];
  const dir = options.values ? await mkdtemp(join(tmpdir(), "dms-helm-values-")) : undefined;
  if (dir) {
    // JSON is YAML: helm reads it as a values file.
    await writeFile(join(dir, "values.yaml"), JSON.stringify(options.values));
    args.push("-f", join(dir, "values.yaml"));
  }
  for (const set of options.set ?? []) args.push("--set", set);
  if (!options.tests) args.push("--skip-tests");
  const result = await helm(binary, args).finally(() => (dir ? rm(dir, { recursive: true }) : undefined));
  if (result.code !== 0)
    throw new Error(`helm ${args.join(" ")} exited ${result.code}: ${result.stderr.trim()}`);
  return objectsOf(result.stdout);
}

/**
 * The labels Helm's conventions add to every object and selector (the release, the tool, the
 * chart and its version), which a kustomize install cannot have.
 */
export const HELM_LABELS = ["app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"];

/**
 * The annotation that keeps the CRDs on `helm uninstall`, which kubectl installs have no use for.
 */
export const HELM_CRD_ANNOTATION = "helm.sh/resource-policy";

/**
 * Kinds the chart keeps on `helm uninstall` ({@link HELM_CRD_ANNOTATION}): the CRDs, and the
 * deletion protection policy that comes with them.
 */
const KEPT_KINDS = [
  "CustomResourceDefinition",
  "ValidatingAdmissionPolicy",
  "ValidatingAdmissionPolicyBinding",
];
/** Cluster-scoped kinds kustomize (5.5) takes for namespaced: it gives them an overlay's namespace. */
const CLUSTER_SCOPED_UNKNOWN_TO_KUSTOMIZE = [
  "ValidatingAdmissionPolicy",
  "ValidatingAdmissionPolicyBinding",
  "FlowSchema",
];

/**
 * An object with what must differ between the two install paths taken out, and nothing else:
 * the {@link HELM_LABELS} wherever they are keys (metadata labels, selectors, pod template
 * labels), the kept kinds' {@link HELM_CRD_ANNOTATION}, the namespace kustomize gives the
 * cluster-scoped kinds it does not know, and a labels or annotations map left empty by those
 * removals.
 */
export function normalised(object: K8sObject): K8sObject {
  const strip = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(strip);
    if (typeof value !== "object" || value === null) return value;
    const out: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(value)) {
      if (HELM_LABELS.includes(key)) continue;
      out[key] = strip(child);
    }
    return out;
  };
  const copy = strip(object) as K8sObject;
  const metadata = copy.metadata as Record<string, Record<string, unknown> | undefined>;
  if (KEPT_KINDS.includes(copy.kind) && metadata.annotations)
    delete metadata.annotations[HELM_CRD_ANNOTATION];
  // The API server drops that namespace: as installed, neither path's object has one.
  if (CLUSTER_SCOPED_UNKNOWN_TO_KUSTOMIZE.includes(copy.kind))
    delete (copy.metadata as { namespace?: string }).namespace;
  for (const field of ["labels", "annotations"]) {
    const map = metadata[field];
    if (map && Object.keys(map).length === 0) delete metadata[field];
  }
  return copy;
}

/** `Kind namespace/name` (or `Kind name` when cluster-scoped): how objects are matched up. */
export function identity(object: K8sObject): string {
  const { name } = object.metadata;
  const namespace = CLUSTER_SCOPED_UNKNOWN_TO_KUSTOMIZE.includes(object.kind)
    ? undefined
    : object.metadata.namespace;
  return namespace ? `${object.kind} ${namespace}/${name}` : `${object.kind} ${name}`;
}

/** Objects by {@link identity}, normalised; throws on two objects of one identity. */
export function byIdentity(objects: K8sObject[]): Map<string, K8sObject> {
  const map = new Map<string, K8sObject>();
  for (const object of objects) {
    const key = identity(object);
    if (map.has(key)) throw new Error(`two objects ${key} in one rendering`);
    map.set(key, normalised(object));
  }
  return map;
}

/** The chart's path inside the repository, as `git archive` and `git log` name it. */
const CHART_IN_REPO = "charts/dms-operator";

/** How {@link previousChart} chose the chart an upgrade starts from. */
export type PreviousChartSource = "tag" | "first chart commit";

/** A previous version of the chart, extracted from the repository's history. */
export interface PreviousChart {
  /** The tag (`v…`) or the full commit hash it was extracted from. */
  rev: string;
  /** A tag whose chart version is lower than the working tree's, or the commit that added the chart. */
  source: PreviousChartSource;
  /** The chart's `version` at `rev`. */
  version: string;
  /** The extracted chart directory (inside {@link PreviousChart.root}). */
  path: string;
  /**
   * The operator's CLI at `rev` (`src/cli.ts`, resolving its packages from this checkout's
   * node_modules, or from its own lockfile's when the lockfiles differ): what the previous
   * release's image runs, since an operator of this tree
   * writes status fields the previous chart's CRDs do not declare.
   */
  cli: string;
  /** The temporary directory holding the tree at `rev`, for the caller to remove. */
  root: string;
}

/** SemVer 2.0.0's own pattern (semver.org), which Helm requires of a chart's `version`. */
const SEMVER =
  /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

/**
 * Compares two chart versions by SemVer 2.0.0 precedence (build metadata ignored): negative when
 * `a` is lower, 0 when equal, positive when higher. Throws on a version that is not SemVer,
 * naming it.
 */
export function compareChartVersions(a: string, b: string): number {
  const parts = (version: string) => {
    const match = SEMVER.exec(version);
    if (!match)
      throw new Error(`chart version ${JSON.stringify(version)} is not SemVer 2 (MAJOR.MINOR.PATCH)`);
    return {
      core: [match[1], match[2], match[3]].map(Number),
      pre: match[4] === undefined ? [] : match[4].split("."),
    };
  };
  const x = parts(a);
  const y = parts(b);
  for (let i = 0; i < 3; i++) {
    const d = (x.core[i] ?? 0) - (y.core[i] ?? 0);
    if (d !== 0) return d;
  }
  // A pre-release is lower than its release; identifiers compare numerically when both are
  // numeric, numeric lower than alphanumeric, else by ASCII; a shorter list of equal prefix is lower.
  if (x.pre.length === 0 || y.pre.length === 0) return y.pre.length - x.pre.length;
  for (let i = 0; i < Math.min(x.pre.length, y.pre.length); i++) {
    const [p, q] = [x.pre[i] ?? "", y.pre[i] ?? ""];
    const [pn, qn] = [/^\d+$/.test(p), /^\d+$/.test(q)];
    if (pn && qn && Number(p) !== Number(q)) return Number(p) - Number(q);
    if (pn !== qn) return pn ? -1 : 1;
    if (p !== q) return p < q ? -1 : 1;
  }
  return x.pre.length - y.pre.length;
}

/** `git -C <repo> <args>`: its stdout, or null when git exits non-zero (or is missing). */
async function git(repo: string, args: string[]): Promise<string | null> {
  try {
    return (await promisify(execFile)("git", ["-C", repo, ...args], { timeout: 60_000 })).stdout;
  } catch {
    return null;
  }
}

/** The `version` of a Chart.yaml's text, naming `where` when there is none. */
function chartVersion(chartYaml: string, where: string): string {
  const version = (parse(chartYaml) as { version?: unknown } | null)?.version;
  if (typeof version !== "string") throw new Error(`${where} has no string "version"`);
  return version;
}

/**
 * The chart a `helm upgrade` test starts from, extracted from the repository's history with
 * `git archive <rev> | tar -x` into a new temporary directory (with the operator of that
 * version, see {@link PreviousChart.cli}): the tag `v*`
 * with the highest chart version lower than the working tree's (the last release, once there is
 * one), else the commit that first added `charts/dms-operator/Chart.yaml` (the oldest chart
 * there is). A shallow clone first fetches its history from its origin. Throws, naming the fix,
 * when the checkout has no usable history: a source archive, or a shallow clone whose origin
 * cannot give it, would otherwise test an upgrade from the wrong chart, or none.
 */
export async function previousChart(): Promise<PreviousChart> {
  const repo = join(CHART, "..", "..");
  const toplevel = (await git(repo, ["rev-parse", "--show-toplevel"]))?.trim();
  if (!toplevel || realpathSync(toplevel) !== realpathSync(repo))
    throw new Error(
      `${repo} is not a git checkout: the upgrade test takes the previous chart from the repository's history; run it in a clone with history (git clone), not a source archive`,
    );
  // A shallow clone (a CI checkout's default) fetches the history it lacks from its origin once:
  // objects only, the working tree and branches stay as they are.
  const shallow = async () => (await git(repo, ["rev-parse", "--is-shallow-repository"]))?.trim() === "true";
  if (
    (await shallow()) &&
    ((await git(repo, ["fetch", "--unshallow", "--tags", "--quiet"])) === null || (await shallow()))
  )
    throw new Error(
      `${repo} is a shallow clone and git fetch --unshallow --tags failed: the upgrade test takes the previous chart from the repository's history; clone with history (in CI, check out with fetch-depth: 0)`,
    );
  const current = chartVersion(await readFile(join(CHART, "Chart.yaml"), "utf8"), `${CHART}/Chart.yaml`);

  let chosen: { rev: string; source: PreviousChartSource; version: string } | undefined;
  // Newest first, so that of two tags with one chart version the later one is taken.
  const tags = ((await git(repo, ["tag", "--list", "v*", "--sort=-creatordate"])) ?? "").split("\n");
  for (const tag of tags.filter((t) => t !== "")) {
    const text = await git(repo, ["show", `${tag}:${CHART_IN_REPO}/Chart.yaml`]);
    if (text === null) continue; // a tag from before the chart
    const version = chartVersion(text, `${CHART_IN_REPO}/Chart.yaml at ${tag}`);
    if (compareChartVersions(version, current) >= 0) continue;
    if (!chosen || compareChartVersions(version, chosen.version) > 0)
      chosen = { rev: tag, source: "tag", version };
  }
  if (!chosen) {
    const added = (
      (await git(repo, ["log", "--diff-filter=A", "--format=%H", "--", `${CHART_IN_REPO}/Chart.yaml`])) ?? ""
    )
      .split("\n")
      .filter((line) => line !== "");
    const first = added.at(-1);
    if (!first)
      throw new Error(`no commit of ${repo} adds ${CHART_IN_REPO}/Chart.yaml: commit the chart first`);
    const text = await git(repo, ["show", `${first}:${CHART_IN_REPO}/Chart.yaml`]);
    chosen = {
      rev: first,
      source: "first chart commit",
      version: chartVersion(text ?? "", `${CHART_IN_REPO}/Chart.yaml at ${first}`),
    };
  }

  // The whole tree (a few MB): the chart, and the operator that chart's image would run.
  const root = await mkdtemp(join(tmpdir(), "dms-previous-chart-"));
  const archive = join(root, "..", `${basename(root)}.tar`);
  try {
    if ((await git(repo, ["archive", "--format=tar", `--output=${archive}`, chosen.rev])) === null)
      throw new Error(`git archive ${chosen.rev} failed in ${repo}`);
    await promisify(execFile)("tar", ["-x", "-f", archive, "-C", root], { timeout: 60_000 });
  } finally {
    await rm(archive, { force: true });
  }
  await symlink(await packagesFor(repo, root), join(root, "node_modules"));
  return { ...chosen, path: join(root, CHART_IN_REPO), cli: join(root, "src", "cli.ts"), root };
}

/**
 * The node_modules the tree extracted at `root` runs with: this checkout's when both lockfiles
 * agree, else the production packages its own lockfile pins (as its image held them: a package
 * this tree dropped, such as an HTTP client, is still there), installed once per lockfile into
 * `${DMS_CACHE_DIR:-…/dms-operator}/previous-packages/<digest>` with `npm ci --omit=dev`.
 */
async function packagesFor(repo: string, root: string): Promise<string> {
  const [lockThen, lockNow] = await Promise.all([
    readFile(join(root, "package-lock.json"), "utf8"),
    readFile(join(repo, "package-lock.json"), "utf8"),
  ]);
  if (lockThen === lockNow) return join(repo, "node_modules");
  const cache =
    process.env.DMS_CACHE_DIR ||
    join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "dms-operator");
  const digest = createHash("sha256").update(lockThen).digest("hex").slice(0, 16);
  const dir = join(cache, "previous-packages", digest);
  if (existsSync(join(dir, "node_modules"))) return join(dir, "node_modules");
  // Installed beside, then renamed into place: a run stopped half-way leaves no half install.
  await mkdir(dirname(dir), { recursive: true });
  const work = await mkdtemp(`${dir}.installing-`);
  try {
    await Promise.all(
      ["package.json", "package-lock.json"].map(async (f) =>
        writeFile(join(work, f), await readFile(join(root, f))),
      ),
    );
    await promisify(execFile)(
      "npm",
      ["ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
      { cwd: work, timeout: 600_000 },
    );
    await rename(work, dir).catch(async (error: unknown) => {
      // Another run installed it meanwhile: theirs serves.
      if (!existsSync(join(dir, "node_modules"))) throw error;
    });
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  return join(dir, "node_modules");
}

/**
 * The keys of `next` (a values.yaml's text) that `previous` lacks, each the shortest path
 * (`caBundle`, `metrics.certSecret`) whose parent both have: what `helm upgrade --reuse-values`,
 * which renders the new templates with the previous chart's defaults, leaves unset.
 */
export function addedValues(previous: string, next: string): string[] {
  const isMap = (v: unknown): v is Record<string, unknown> =>
    typeof v === "object" && v !== null && !Array.isArray(v);
  const added: string[] = [];
  const walk = (old: Record<string, unknown>, now: Record<string, unknown>, prefix: string) => {
    for (const [key, value] of Object.entries(now)) {
      const path = `${prefix}${key}`;
      if (!(key in old)) added.push(path);
      else if (isMap(value) && isMap(old[key])) walk(old[key], value, `${path}.`);
    }
  };
  const [old, now] = [parse(previous) as unknown, parse(next) as unknown];
  walk(isMap(old) ? old : {}, isMap(now) ? now : {}, "");
  return added;
}
