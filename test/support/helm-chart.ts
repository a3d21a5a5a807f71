/**
 * The Helm chart (charts/dms-operator) as its tests run it: the real helm (built into the tool
 * cache, see test/controlplane/binaries.ts), its renderings parsed, and the one normalisation
 * under which a rendering must equal the kustomize install's.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
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
}

/**
 * `helm template <release> charts/dms-operator -n <namespace> [--set …]`, parsed; throws with
 * helm's message when it refuses.
 */
export async function renderChart(binary: string, options: RenderOptions): Promise<K8sObject[]> {
  const args = ["template", options.release ?? "dms-operator", CHART, "-n", options.namespace];
  for (const set of options.set ?? []) args.push("--set", set);
  const result = await helm(binary, args);
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
 * An object with what must differ between the two install paths taken out, and nothing else:
 * the {@link HELM_LABELS} wherever they are keys (metadata labels, selectors, pod template
 * labels), the CRDs' {@link HELM_CRD_ANNOTATION}, and a labels or annotations map left empty by
 * those removals.
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
  if (copy.kind === "CustomResourceDefinition" && metadata.annotations)
    delete metadata.annotations[HELM_CRD_ANNOTATION];
  for (const field of ["labels", "annotations"]) {
    const map = metadata[field];
    if (map && Object.keys(map).length === 0) delete metadata[field];
  }
  return copy;
}

/** `Kind namespace/name` (or `Kind name` when cluster-scoped): how objects are matched up. */
export function identity(object: K8sObject): string {
  const { namespace, name } = object.metadata;
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
