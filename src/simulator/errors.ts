/**
 * Errors the simulator answers with, shaped like a FastAPI service's: `{detail: "..."}` for
 * domain errors (404, 409, 401) and `{detail: [{loc, msg, type}]}` for validation (422).
 */

/** One validation problem, as a FastAPI (pydantic v2) service reports it in a 422 `detail` list. */
export interface ValidationIssue {
  /** Where: `["body", "source_config", "repo_url"]`, `["query", "limit"]`, `["path", "deployment_id"]`. */
  loc: (string | number)[];
  msg: string;
  type: string;
  ctx?: Record<string, unknown>;
}

/**
 * A failure the simulator answers with `status` and `{detail}`. Thrown by the store and the
 * handlers; the server turns it into the response. `detail` is a message or a 422 issue list and
 * never contains a secret value or an API key.
 */
export class ServiceError extends Error {
  readonly status: number;
  readonly detail: string | ValidationIssue[];
  constructor(status: number, detail: string | ValidationIssue[]) {
    super(typeof detail === "string" ? detail : `validation failed: ${renderIssues(detail)}`);
    this.name = "ServiceError";
    this.status = status;
    this.detail = detail;
  }
}

/** A 422 carrying `issues` (never empty in practice). */
export const validationError = (issues: ValidationIssue[]): ServiceError => new ServiceError(422, issues);

/** A 404 `{detail}` for an unknown resource. */
export const notFound = (what: string): ServiceError => new ServiceError(404, `${what} not found`);

/** `a.b[2].c: msg; ...`: issues rendered for humans (seed loading errors, thrown messages). */
export function renderIssues(issues: readonly ValidationIssue[]): string {
  return issues.map((i) => `${renderLoc(i.loc)}: ${i.msg}`).join("; ");
}

/** `["deployments", 2, "source"]` → `deployments[2].source`. */
export function renderLoc(loc: readonly (string | number)[]): string {
  let out = "";
  for (const part of loc) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out === "" ? part : `.${part}`;
  }
  return out === "" ? "(root)" : out;
}
