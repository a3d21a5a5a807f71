// What docs/guide/promotion.md tells users Kargo, Flux image automation and Argo CD Image Updater
// (through Kustomize) do with a `Deployment` resource, run with those tools' own engines where the
// suite can: every situation of the doc's table is put on a real API server (for an image and for
// a commit, the status written through the status subresource as the operator's status code
// writes it), read back over HTTP as Kargo's `http` step reads it, and judged by the doc's two
// steps with expr-lang/expr, the engine Kargo uses (test/controlplane/kargo-expr). Every cell the
// engine contradicts fails the test, naming the situation, the step and both answers. The Flux
// resource is checked against the CRD on the API server; the Kustomize field spec is built by the
// real `kubectl kustomize`.

import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { PatchType } from "../../src/kube/client.ts";
import { judgeStep, kargoExprBinary, type StepResponse } from "../controlplane/kargo-expr.ts";
import { freshNamespace, kubectl, kubectlOk } from "../support/cluster.ts";
import {
  ARTIFACTS,
  type Artifact,
  docFluxResource,
  docKargoStep,
  docKustomize,
  docTable,
  STEP_COLUMNS,
  situations,
  specOf,
  withVars,
} from "../support/promotion-doc.ts";
import { ClusterUser } from "../support/resources.ts";

const table = docTable();
const API = "/apis/dms.dev/v1alpha1";

let bin: string;
let namespace: string;
const user = new ClusterUser();

beforeAll(async () => {
  // Built by `node test/controlplane/ensure.ts` before the run; built here (seconds) only if not.
  bin = await kargoExprBinary();
  namespace = await freshNamespace("promotion");
}, 600_000);

/** A DNS-1123 name for a situation of an artifact. */
const nameOf = (artifact: Artifact, situation: string) =>
  `${artifact}-${situation
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-|-$/g, "")}`.slice(0, 63);

/** Puts `situation` of `artifact` on the API server: the spec at its generation, then its status. */
async function place(artifact: Artifact, situation: string): Promise<string> {
  const s = situations(artifact)[situation];
  if (!s) throw new Error(`no situation "${situation}"`);
  const { previous, promoted } = ARTIFACTS[artifact];
  const name = nameOf(artifact, situation);
  // Generation 2: created with the previous artifact, then edited to the promoted one.
  const first = s.generation === 2 ? previous : s.spec === "promoted" ? promoted : previous;
  const created = await user.create(namespace, name, specOf(artifact, first));
  if (s.generation === 2) await user.patch(namespace, name, { spec: specOf(artifact, promoted) });
  expect((await user.get(namespace, name))?.metadata.generation).toBe(s.generation);
  await user.client.request({
    method: "PATCH",
    path: `${API}/namespaces/${namespace}/deployments/${name}/status`,
    contentType: PatchType.Merge,
    body: { status: s.status },
  });
  expect(created.metadata.name).toBe(name);
  return name;
}

/** The resource as Kargo's step receives it: one GET through the API server, the body as sent. */
async function read(name: string): Promise<StepResponse> {
  const body = await kubectlOk(["get", "--raw", `${API}/namespaces/${namespace}/deployments/${name}`]);
  return { status: 200, headers: { "Content-Type": ["application/json"] }, body };
}

describe("docs/guide/promotion.md: the Kargo steps on the objects a real API server holds", () => {
  const names = [...table.keys()];

  it.each(STEP_COLUMNS.map((c) => c.artifact))(
    "every cell of the %s step's column is what Kargo's expression engine concludes",
    async (artifact) => {
      const placed: string[] = [];
      for (const situation of names) placed.push(await place(artifact, situation));
      const responses = await Promise.all(placed.map(read));
      const { step, vars, promoted } = ARTIFACTS[artifact];
      const verdicts = await judgeStep(bin, withVars(docKargoStep(step), vars(promoted)), responses);
      const wrong = names.flatMap((situation, i) => {
        const said = table.get(situation)?.steps[artifact];
        const v = verdicts[i];
        if (v?.outcome === said) return [];
        return [
          `${situation}: Kargo step (${artifact}): docs/guide/promotion.md says ${said}, the engine concludes ${v?.outcome}${v?.error ? ` (${v.error})` : ""}`,
        ];
      });
      expect(wrong).toEqual([]);
      // Each expression evaluated to a boolean on every object: no outcome by accident of an error.
      for (const v of verdicts) {
        expect(typeof v.success).toBe("boolean");
        expect(typeof v.failure).toBe("boolean");
      }
    },
    120_000,
  );

  it("the previous artifact live and Ready never passes for the promoted one, whichever is promoted", async () => {
    // The same object judged by a step promoting the previous artifact: that one is live.
    const response = await read(nameOf("image", "Previous artifact still live and Ready"));
    const { step, vars, previous } = ARTIFACTS.image;
    const [v] = await judgeStep(bin, withVars(docKargoStep(step), vars(previous)), [response]);
    expect(v?.outcome).toBe("Succeeded");
  });

  it("a resource the API server does not have (404) keeps the step polling", async () => {
    const { step, vars, promoted } = ARTIFACTS.image;
    const missing = await kubectl(["get", "--raw", `${API}/namespaces/${namespace}/deployments/none`]);
    expect(missing.code).not.toBe(0);
    const body = JSON.stringify({
      kind: "Status",
      apiVersion: "v1",
      status: "Failure",
      reason: "NotFound",
      code: 404,
    });
    const [v] = await judgeStep(bin, withVars(docKargoStep(step), vars(promoted)), [{ status: 404, body }]);
    expect(v).toMatchObject({ outcome: "Running", success: false, failure: false });
  });
});

describe("docs/guide/promotion.md: Flux setter markers and the Kustomize field spec", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "dms-promotion-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("the resource with the setter marker is accepted by the CRD, the marker on spec.sourceRevisionConfig.imageUri", async () => {
    const { text, object } = docFluxResource();
    const marked = text.split("\n").filter((line) => line.includes('"$imagepolicy"'));
    expect(marked).toHaveLength(1);
    expect(marked[0]).toMatch(/^ {4}imageUri: /);
    expect(
      (object.spec as { sourceRevisionConfig?: { imageUri?: string } }).sourceRevisionConfig?.imageUri,
    ).toBe("registry.example.com/agent:1.4.2");
    const manifest = text.replace(/namespace: \S+/, `namespace: ${namespace}`);
    const applied = await kubectl(["apply", "--dry-run=server", "-f", "-"], { input: manifest });
    expect(applied.stderr).toBe("");
    expect(applied.code).toBe(0);
  });

  it("kubectl kustomize writes the updater's digest into spec.sourceRevisionConfig.imageUri", async () => {
    const { kustomization, fieldSpec } = docKustomize();
    const { text } = docFluxResource();
    await writeFile(join(dir, "kustomization.yaml"), kustomization);
    await writeFile(join(dir, "dms-images.yaml"), fieldSpec);
    await writeFile(join(dir, "deployment.yaml"), text);
    const built = parse(await kubectlOk(["kustomize", dir])) as {
      spec: { sourceRevisionConfig: { imageUri: string } };
    };
    expect(built.spec.sourceRevisionConfig.imageUri).toBe(ARTIFACTS.image.promoted);
  });
});
