// Runs kargo-expr (the Go command in ./kargo-expr, built into the cache by ensure.ts): a Kargo
// `http` promotion step's successExpression and failureExpression evaluated with expr-lang/expr,
// the engine Kargo uses, on the environment its step builds from a response, so that the tests of
// docs/guide/promotion.md check what Kargo would conclude rather than our reading of its rules.
import { ensureGoTool, KARGO_EXPR } from "./binaries.ts";
import { runCaptured } from "./kubectl.ts";

/** One HTTP response as the step would receive it. */
export interface StepResponse {
  status: number;
  headers?: Record<string, string[]>;
  /** The body as received (JSON text). */
  body: string;
}

/** What the step concludes of one response: `Running` is polled again. */
export interface StepVerdict {
  success: boolean | null;
  failure: boolean | null;
  outcome: "Succeeded" | "Failed" | "Running" | "Errored";
  error?: string;
}

/** The path of the kargo-expr binary, built into the cache when missing (seconds, once). */
export function kargoExprBinary(): Promise<string> {
  return ensureGoTool(KARGO_EXPR);
}

/** The step's verdict on each response, in order. */
export async function judgeStep(
  binary: string,
  step: { successExpression?: string; failureExpression?: string },
  responses: readonly StepResponse[],
): Promise<StepVerdict[]> {
  const input = { ...step, responses };
  const run = await runCaptured(binary, [], { input: JSON.stringify(input), timeoutMs: 60_000 });
  if (run.code !== 0) throw new Error(`${binary} exited ${run.code}: ${run.stderr.trim()}`);
  return (JSON.parse(run.stdout) as { results: StepVerdict[] }).results;
}
