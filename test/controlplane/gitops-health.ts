// Runs gitops-health (the Go command in ./gitops-health, built into the cache by ensure.ts): the
// health engines of Argo CD and Flux, on objects, so that tests compare what the docs promise with
// what those tools compute rather than with our reading of their rules.
import { ensureGoTool, GITOPS_HEALTH } from "./binaries.ts";
import { runCaptured } from "./kubectl.ts";

/** One engine's answer about one object. */
export interface HealthVerdict {
  /** kstatus: InProgress, Current, Failed, Terminating, NotFound, Unknown; Argo CD: Healthy, Progressing… */
  status: string;
  /** The engine's message; for an evaluation error, the error. */
  message?: string;
}

/** What each engine concludes about one object. */
export interface EngineVerdicts {
  /** sigs.k8s.io/cli-utils `status.Compute`. */
  kstatus: HealthVerdict;
  /** Flux's kstatus fork behind its generic status reader: what `wait: true` sees. */
  fluxKstatus: HealthVerdict;
  /** fluxcd/pkg runtime/cel's status reader: what `healthCheckExprs` make of it. */
  fluxHealthCheckExprs?: HealthVerdict;
  /** The health Lua in gopher-lua, as Argo CD runs an argocd-cm customization. */
  argocd?: HealthVerdict;
}

/** One entry of a Kustomization's `spec.healthCheckExprs`. */
export interface FluxHealthCheckExprs {
  apiVersion: string;
  kind: string;
  current: string;
  failed?: string;
  inProgress?: string;
}

/** What to judge, and with which script and expressions. */
export interface HealthInput {
  argocdHealthLua?: string;
  fluxHealthCheckExprs?: FluxHealthCheckExprs;
  objects: unknown[];
}

/** The path of the gitops-health binary, built into the cache when missing (minutes, once). */
export function gitopsHealthBinary(): Promise<string> {
  return ensureGoTool(GITOPS_HEALTH);
}

/**
 * Runs the engines on `input.objects`; resolves with one {@link EngineVerdicts} per object, in
 * order. Rejects with the command's own message when it refuses the input (a script or an
 * expression that does not parse, an object that is not a Kubernetes object).
 */
export async function judge(binary: string, input: HealthInput): Promise<EngineVerdicts[]> {
  const run = await runCaptured(binary, [], { input: JSON.stringify(input), timeoutMs: 60_000 });
  if (run.code !== 0) throw new Error(`${binary} exited ${run.code}: ${run.stderr.trim()}`);
  const out = JSON.parse(run.stdout) as { verdicts: EngineVerdicts[] };
  if (out.verdicts.length !== input.objects.length)
    throw new Error(`${binary} judged ${out.verdicts.length} objects of ${input.objects.length}`);
  return out.verdicts;
}
