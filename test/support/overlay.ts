// The kustomize install as a platform team reuses it: an overlay over manifests/default (with
// components) that moves it to another namespace and prefixes its names, rendered by the real
// `kubectl kustomize` of the run's control plane.
import { mkdir, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { parseAllDocuments } from "yaml";
import { kubectlOk } from "./cluster.ts";

/** The repository's manifests/. */
export const MANIFESTS = join(import.meta.dirname, "..", "..", "manifests");

/** An object as rendered, as far as the tests read it. */
export interface Rendered {
  kind: string;
  metadata: { name: string; namespace?: string };
}

/**
 * Writes `<work>/overlay/kustomization.yaml` (manifests/default, the `components` named under
 * manifests/components, in `namespace`, names prefixed with `namePrefix`) and renders it: the
 * objects, and `find(kind, name)`, which throws naming what the rendering lacks.
 */
export async function renderOverlay<T extends Rendered>(
  work: string,
  o: { namespace: string; namePrefix: string; components?: string[] },
): Promise<{ objects: T[]; find: (kind: string, name: string) => T }> {
  const overlay = join(work, "overlay");
  await mkdir(overlay);
  const components = (o.components ?? []).map((c) => relative(overlay, join(MANIFESTS, "components", c)));
  await writeFile(
    join(overlay, "kustomization.yaml"),
    [
      "apiVersion: kustomize.config.k8s.io/v1beta1",
      "kind: Kustomization",
      `namespace: ${o.namespace}`,
      `namePrefix: ${o.namePrefix}`,
      `resources: [${relative(overlay, join(MANIFESTS, "default"))}]`,
      ...(components.length > 0 ? [`components: [${components.join(", ")}]`] : []),
      "",
    ].join("\n"),
  );
  const objects = parseAllDocuments(await kubectlOk(["kustomize", overlay])).map((d) => d.toJS() as T);
  const find = (kind: string, name: string) => {
    const found = objects.find((x) => x.kind === kind && x.metadata.name === name);
    if (!found) throw new Error(`kubectl kustomize rendered no ${kind} ${name}`);
    return found;
  };
  return { objects, find };
}
