// docs/previews.md as users copy it: its YAML blocks are read from the page itself, each recipe's
// template is rendered for sample pull requests with the engine's own template language
// (test/controlplane/template-render: Argo CD's ApplicationSet goTemplate with sprig and its
// goTemplateOptions; the Flux Operator's ResourceSet with << >> and slim-sprig), and what it
// produces is applied with `kubectl apply --dry-run=server` against the real API server holding
// this operator's CRDs. A recipe that renders a resource the CRDs refuse, or another one than the
// page shows, fails here.

import { mkdirSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, parseAllDocuments, stringify } from "yaml";
import { isRecord } from "../../src/runtime/json.ts";
import { renderTemplate, templateRenderBinary } from "../controlplane/template-render.ts";
import { kubectl, kubectlOk } from "../support/cluster.ts";

const DOC = new URL("../../docs/previews.md", import.meta.url).pathname;

/** Two pull requests: a usual one, and one whose head commit is all digits (a number to YAML). */
const PULL_REQUESTS = [
  {
    number: 42,
    branch: "feature/faster-replies",
    sha: "3f2a1bc9d0e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4",
    title: "Faster replies",
    author: "octocat",
  },
  {
    number: 7,
    branch: "fix-7",
    sha: "1234567890123456789012345678901234567890",
    title: "A commit of digits",
    author: "hubot",
  },
];
type PullRequest = (typeof PULL_REQUESTS)[number];

/** The parameters Argo CD's GitHub pull-request generator gives a goTemplate (its documented keys). */
function argoParams(pr: PullRequest): Record<string, unknown> {
  return {
    number: String(pr.number),
    title: pr.title,
    branch: pr.branch,
    branch_slug: pr.branch.replace(/[^a-zA-Z0-9]+/g, "-").toLowerCase(),
    target_branch: "main",
    target_branch_slug: "main",
    head_sha: pr.sha,
    head_short_sha: pr.sha.slice(0, 8),
    head_short_sha_7: pr.sha.slice(0, 7),
    labels: ["preview"],
    author: pr.author,
  };
}

/** The inputs a Flux Operator GitHubPullRequest provider exports for a pull request. */
function fluxInputs(pr: PullRequest): Record<string, unknown> {
  return { id: String(pr.number), sha: pr.sha, branch: pr.branch, title: pr.title, author: pr.author };
}

type Obj = Record<string, unknown>;

/** The page's ```yaml blocks, as text. */
function yamlBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```yaml\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? "");
}

/** Every document of every block. */
function documents(blocks: readonly string[]): Obj[] {
  return blocks.flatMap((block) =>
    parseAllDocuments(block).map((doc) => {
      if (doc.errors.length > 0) throw new Error(`docs/previews.md: ${doc.errors[0]?.message}`);
      return doc.toJS() as Obj;
    }),
  );
}

function only(all: readonly Obj[], kind: string, where = (_o: Obj) => true): Obj {
  const found = all.filter((o) => o.kind === kind && where(o));
  if (found.length !== 1) throw new Error(`docs/previews.md: want one ${kind}, found ${found.length}`);
  return found[0] as Obj;
}

const at = (o: unknown, ...path: (string | number)[]): unknown =>
  path.reduce<unknown>(
    (v, k) => (isRecord(v) || Array.isArray(v) ? (v as Record<string, unknown>)[k] : undefined),
    o,
  );

/** The blocks that are files of the application repository: their first line names the path. */
function repositoryFiles(blocks: readonly string[]): Map<string, string> {
  const files = new Map<string, string>();
  for (const block of blocks) {
    const path = /^# (deploy\/\S+)\n/.exec(block)?.[1];
    if (path) files.set(path, block);
  }
  return files;
}

let bin: string;
let blocks: string[];
let docs: Obj[];
let work: string;

beforeAll(async () => {
  // Built by `node test/controlplane/ensure.ts` before the run; built here (seconds) only if not.
  bin = await templateRenderBinary();
  blocks = yamlBlocks(await readFile(DOC, "utf8"));
  docs = documents(blocks);
  work = await mkdtemp(join(tmpdir(), "dms-previews-"));
  // The recipes' namespace; created once (the dry runs need it to exist).
  const ns = await kubectl(["get", "namespace", "previews"]);
  if (ns.code !== 0) await kubectlOk(["create", "namespace", "previews"]);
}, 1_200_000);
afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

/** `kubectl apply --dry-run=server` of `objects`; resolves with kubectl's stdout, or throws its stderr. */
function dryRun(objects: readonly unknown[], namespace?: string): Promise<string> {
  const input = objects.map((o) => stringify(o)).join("---\n");
  return kubectlOk(["apply", "--dry-run=server", ...(namespace ? ["-n", namespace] : []), "-f", "-"], {
    input,
  });
}

/** The Deployment resource the page shows for pull request 42. */
function pageExample(): Obj {
  return only(docs, "Deployment", (o) => at(o, "metadata", "name") === "myapp-pr-42");
}

/** What the preview resource must be for `pr`: the page's example, renamed and on its commit. */
function expectedFor(pr: PullRequest): Obj {
  const example = structuredClone(pageExample());
  (example.metadata as Obj).name = `myapp-pr-${pr.number}`;
  ((example.spec as Obj).sourceRevisionConfig as Obj).repoRef = pr.sha;
  return example;
}

describe("docs/previews.md", () => {
  it("the page's example resource and its preview connection are accepted by the API server", async () => {
    const connection = only(docs, "ServiceConnection");
    const secret = only(docs, "Secret");
    const out = await dryRun([secret, connection, pageExample()]);
    expect(out).toContain("deployment.dms.dev/myapp-pr-42 created (server dry run)");
    expect(at(pageExample(), "spec", "deleteTracingProject")).toBe(true);
    expect(at(pageExample(), "spec", "deletionPolicy")).toBe("Delete");
  });

  describe("Argo CD: the ApplicationSet's template, rendered as the ApplicationSet controller does", () => {
    const appSet = () => only(docs, "ApplicationSet");

    it("asks for goTemplate and missingkey=error, so a misspelt parameter fails instead of rendering empty", () => {
      expect(at(appSet(), "spec", "goTemplate")).toBe(true);
      expect(at(appSet(), "spec", "goTemplateOptions")).toEqual(["missingkey=error"]);
      expect(at(appSet(), "spec", "generators", 0, "pullRequest", "github", "repo")).toBe("myapp");
    });

    it.each(PULL_REQUESTS)(
      "pull request $number: the Application and the Deployment it applies",
      async (pr) => {
        const application = (await renderTemplate(bin, {
          engine: "argocd-applicationset",
          template: at(appSet(), "spec", "template"),
          params: argoParams(pr),
          goTemplateOptions: at(appSet(), "spec", "goTemplateOptions") as string[],
        })) as Obj;
        expect(at(application, "metadata", "name")).toBe(`myapp-pr-${pr.number}`);
        expect(at(application, "spec", "source", "targetRevision")).toBe(pr.sha);
        const namespace = at(application, "spec", "destination", "namespace") as string;
        expect(namespace).toBe("previews");

        // What Argo CD does with the source: kustomize build of `path` at the commit, with the
        // Application's kustomize options written into the kustomization (nameSuffix, patches).
        const source = at(application, "spec", "source") as Obj;
        const dir = join(work, `argocd-${pr.number}`);
        for (const [path, text] of repositoryFiles(blocks)) {
          if (!path.startsWith(`${source.path as string}/`)) continue;
          const file = join(dir, path);
          mkdirSync(dirname(file), { recursive: true });
          await writeFile(file, text);
        }
        const base = join(dir, source.path as string);
        const kustomization = parse(await readFile(join(base, "kustomization.yaml"), "utf8")) as Obj;
        const options = source.kustomize as Obj;
        await writeFile(
          join(base, "kustomization.yaml"),
          stringify({ ...kustomization, nameSuffix: options.nameSuffix, patches: options.patches }),
        );
        const built = await kubectlOk(["kustomize", base]);
        const [deployment] = parseAllDocuments(built).map((d) => d.toJS() as Obj);
        expect(deployment).toEqual({ ...expectedFor(pr), metadata: { name: `myapp-pr-${pr.number}` } });
        // Argo CD applies it into the destination namespace.
        const out = await dryRun([deployment], namespace);
        expect(out).toContain(`deployment.dms.dev/myapp-pr-${pr.number} created (server dry run)`);
      },
    );

    it("a parameter the generator does not give fails the render (missingkey=error)", async () => {
      const template = structuredClone(at(appSet(), "spec", "template")) as Obj;
      (template.metadata as Obj).name = "myapp-pr-{{ .pull_number }}";
      await expect(
        renderTemplate(bin, {
          engine: "argocd-applicationset",
          template,
          params: argoParams(PULL_REQUESTS[0] as PullRequest),
          goTemplateOptions: ["missingkey=error"],
        }),
      ).rejects.toThrow(/map has no entry for key "pull_number"/);
    });
  });

  describe("Flux: the ResourceSet's resources, rendered as the Flux Operator does", () => {
    const resourceSet = () => only(docs, "ResourceSet");

    it("takes its inputs from the page's GitHubPullRequest provider", () => {
      const provider = only(docs, "ResourceSetInputProvider");
      expect(at(provider, "spec", "type")).toBe("GitHubPullRequest");
      expect(at(resourceSet(), "spec", "inputsFrom")).toEqual([
        { kind: "ResourceSetInputProvider", name: at(provider, "metadata", "name") },
      ]);
    });

    it.each(PULL_REQUESTS)("pull request $number: the Deployment it applies", async (pr) => {
      const templates = at(resourceSet(), "spec", "resources") as unknown[];
      expect(templates).toHaveLength(1);
      const deployment = (await renderTemplate(bin, {
        engine: "flux-resourceset",
        template: templates[0],
        params: fluxInputs(pr),
      })) as Obj;
      expect(deployment).toEqual({
        ...expectedFor(pr),
        metadata: {
          name: `myapp-pr-${pr.number}`,
          namespace: "previews",
          annotations: { "preview.dms.dev/branch": pr.branch },
        },
      });
      const out = await dryRun([deployment]);
      expect(out).toContain(`deployment.dms.dev/myapp-pr-${pr.number} created (server dry run)`);
    });

    it("without | quote, a commit of digits would render as a number, which the CRD refuses", async () => {
      const template = structuredClone((at(resourceSet(), "spec", "resources") as unknown[])[0]) as Obj;
      ((template.spec as Obj).sourceRevisionConfig as Obj).repoRef = "<< inputs.sha >>";
      const deployment = (await renderTemplate(bin, {
        engine: "flux-resourceset",
        template,
        params: fluxInputs(PULL_REQUESTS[1] as PullRequest),
      })) as Obj;
      expect(typeof at(deployment, "spec", "sourceRevisionConfig", "repoRef")).toBe("number");
      const result = await kubectl(["apply", "--dry-run=server", "-f", "-"], {
        input: JSON.stringify(deployment),
      });
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain("spec.sourceRevisionConfig.repoRef");
    });
  });
});
