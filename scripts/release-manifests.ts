// Renders the manifests a release attaches, with the image pinned by digest:
//
//   npm run release:manifests -- --version 0.2.0 --image ghcr.io/acme/dms-operator@sha256:<64 hex>
//     [--out-dir release] [--kubectl path]
//
// writes <out-dir>/install.yaml (CRDs, namespace, ServiceAccount, ClusterRole, the operator),
// <out-dir>/install-namespaced.yaml (Role-based, no namespace: `kubectl apply -n <ns> -f`) and
// <out-dir>/crds.yaml (the CRDs and their deletion protection policy, what a cluster admin applies
// once before a namespaced install).
// Rendering is `kubectl kustomize` of a copy of manifests/ whose `images:` entry is rewritten, so
// the release is exactly what `kubectl apply -k` of the same tree would apply.
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { parse, stringify } from "yaml";

/** What a release is rendered from. */
export interface ReleaseOptions {
  /** Semantic version of the release, without `v`, e.g. `0.2.0`. */
  version: string;
  /** The pushed image by digest: `<registry>/<name>@sha256:<64 hex>` (a tag before `@` is allowed). */
  image: string;
  /** Where the files go. */
  outDir: string;
  /** The kubectl used for `kubectl kustomize`. */
  kubectl: string;
}

/** The image reference split into kustomize's `images:` fields. */
export interface ImageRef {
  newName: string;
  digest: string;
}

const ROOT = resolve(import.meta.dirname, "..");

/** The files a release attaches, by name (the README's quickstart links them). */
export const RELEASE_FILES = ["install.yaml", "install-namespaced.yaml", "crds.yaml"] as const;
const VERSION = /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/;
const IMAGE = /^([a-z0-9][a-z0-9._\-/:]*?)(?::[\w][\w.-]{0,127})?@(sha256:[0-9a-f]{64})$/;

/** Splits `name[:tag]@sha256:…`; throws an Error naming the flag and the expected shape. */
export function parseImage(image: string): ImageRef {
  const match = IMAGE.exec(image);
  if (!match?.[1] || !match[2])
    throw new Error(
      `--image ${JSON.stringify(image)} must be an image by digest, e.g. ghcr.io/acme/dms-operator@sha256:<64 hex digits> (the release pins the digest the build pushed)`,
    );
  return { newName: match[1], digest: match[2] };
}

function kustomize(kubectl: string, dir: string): string {
  const out = spawnSync(kubectl, ["kustomize", dir], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  if (out.error)
    throw new Error(`cannot run ${kubectl} (pass --kubectl or set KUBECTL): ${out.error.message}`);
  if (out.status !== 0) throw new Error(`${kubectl} kustomize ${dir} failed: ${out.stderr.trim()}`);
  return out.stdout;
}

/** Rewrites the kustomization in `dir`: pins the `dms-operator` image, optionally drops `namespace`. */
function pin(dir: string, image: ImageRef, version: string, dropNamespace: boolean): void {
  const file = join(dir, "kustomization.yaml");
  const doc = parse(readFileSync(file, "utf8")) as Record<string, unknown>;
  doc.images = [{ name: "dms-operator", newName: image.newName, newTag: version, digest: image.digest }];
  doc.labels = [{ pairs: { "app.kubernetes.io/version": version }, includeSelectors: false }];
  if (dropNamespace) delete doc.namespace;
  writeFileSync(file, stringify(doc));
}

/** Renders the three files; returns their paths. */
export function renderRelease(options: ReleaseOptions): string[] {
  if (!VERSION.test(options.version))
    throw new Error(
      `--version ${JSON.stringify(options.version)} must be a semantic version such as 0.2.0 (no leading v)`,
    );
  const image = parseImage(options.image);
  const work = mkdtempSync(join(tmpdir(), "dms-release-"));
  try {
    cpSync(join(ROOT, "manifests"), join(work, "manifests"), { recursive: true });
    cpSync(join(ROOT, "crds"), join(work, "crds"), { recursive: true });
    pin(join(work, "manifests", "default"), image, options.version, false);
    pin(join(work, "manifests", "namespaced"), image, options.version, true);
    const header = (what: string) =>
      `# dms-operator ${options.version}: ${what}\n# image ${image.newName}:${options.version}@${image.digest}\n`;
    const files: Record<string, string> = {
      "install.yaml":
        header("cluster-wide install (kubectl apply --server-side -f install.yaml)") +
        kustomize(options.kubectl, join(work, "manifests", "default")),
      "install-namespaced.yaml":
        header(
          "namespace-scoped install (kubectl apply -n <namespace> -f install-namespaced.yaml; crds.yaml first)",
        ) + kustomize(options.kubectl, join(work, "manifests", "namespaced")),
      "crds.yaml":
        header(
          "the CRDs and their deletion protection policy, applied once by a cluster admin before a namespaced install",
        ) + kustomize(options.kubectl, join(work, "manifests", "crd")),
    };
    mkdirSync(options.outDir, { recursive: true });
    return Object.entries(files).map(([name, text]) => {
      const path = join(options.outDir, name);
      writeFileSync(path, text);
      return path;
    });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  try {
    const { values } = parseArgs({
      options: {
        version: { type: "string" },
        image: { type: "string" },
        "out-dir": { type: "string", default: "release" },
        kubectl: { type: "string", default: process.env.KUBECTL ?? "kubectl" },
      },
    });
    if (!values.version || !values.image)
      throw new Error(
        "usage: npm run release:manifests -- --version X --image REF@sha256:<digest> [--out-dir release]",
      );
    const written = renderRelease({
      version: values.version.replace(/^v/, ""),
      image: values.image,
      outDir: resolve(values["out-dir"]),
      kubectl: values.kubectl,
    });
    for (const path of written) process.stdout.write(`wrote ${path}\n`);
  } catch (error) {
    process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  }
}
