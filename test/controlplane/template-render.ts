// Runs template-render (the Go command in ./template-render, built into the cache by ensure.ts):
// Argo CD's ApplicationSet and the Flux Operator's ResourceSet templates rendered with the
// engines' own template language, function libraries and options, so that the tests of
// docs/previews.md check what those tools would produce rather than our reading of their rules.
import { ensureGoTool, TEMPLATE_RENDER } from "./binaries.ts";
import { runCaptured } from "./kubectl.ts";

/** Which engine's rendering, and of what. */
export type RenderInput =
  | {
      /** An ApplicationSet's `spec.template` with `goTemplate: true`, on one generator's parameters. */
      engine: "argocd-applicationset";
      template: unknown;
      params: Record<string, unknown>;
      /** The ApplicationSet's `spec.goTemplateOptions`. */
      goTemplateOptions: readonly string[];
    }
  | {
      /** One entry of a ResourceSet's `spec.resources`, on one input set. */
      engine: "flux-resourceset";
      template: unknown;
      params: Record<string, unknown>;
    };

/** The path of the template-render binary, built into the cache when missing (seconds, once). */
export function templateRenderBinary(): Promise<string> {
  return ensureGoTool(TEMPLATE_RENDER);
}

/** The rendered object; rejects with the engine's own error when the template does not render. */
export async function renderTemplate(binary: string, input: RenderInput): Promise<unknown> {
  const run = await runCaptured(binary, [], { input: JSON.stringify(input), timeoutMs: 60_000 });
  if (run.code !== 0) throw new Error(`${binary} exited ${run.code}: ${run.stderr.trim()}`);
  return (JSON.parse(run.stdout) as { object: unknown }).object;
}
