/**
 * The service's endpoints: routing by path template and the handler of each. Handlers only
 * translate HTTP to store calls; the rules live in the store.
 */
import type { IncomingMessage } from "node:http";
import { REDEPLOY_ROUTE } from "../api/redeploy.ts";
import { REVISION_LOGS_ROUTE } from "../api/revision-logs.ts";
import { isUuid, ROUTES } from "../api/wire.ts";
import type { RedeployBehaviour } from "./changes.ts";
import { notFound, ServiceError, type ValidationIssue } from "./errors.ts";
import type { FaultController } from "./faults.ts";
import { endlessPageJson } from "./hostile.ts";
import { json, missingBody, readJsonBody, type SimResponse } from "./http.ts";
import { parseLogsQuery } from "./logs.ts";
import { parseBoolean, parseListQuery } from "./query.ts";
import type { SimulatorStore } from "./store.ts";
import { parseCreateBody, parsePatchBody, uuidIssue, uuidPathIssues } from "./validation.ts";

/** A handler of one route: the request, its decoded path parameters, and the raw query string. */
export type Handler = (
  req: IncomingMessage,
  params: readonly string[],
  search: string,
) => SimResponse | Promise<SimResponse>;

/** The outcome of routing: the route key counters and faults use, and a handler or an error status. */
export interface RouteMatch {
  /** `"GET /v2/deployments"`; `"GET (unmatched)"` when no template matches. */
  route: string;
  /** The path template, or `"(unmatched)"`. */
  template: string;
  params: string[];
  handler: Handler | undefined;
  /** Allowed methods when the template matched but the method did not (405). */
  allow?: string;
}

const { PROVIDERS, REPOS, DEPLOYMENTS, DEPLOYMENT, REVISION, REVISIONS, CREATE_REVISION } = ROUTES;
const REPOS_PREFIX = REPOS.slice(0, REPOS.indexOf("{"));
const DEPLOYMENT_PREFIX = "/v2/deployments/";

function decode(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/**
 * Whether the simulated service has the revisions route (it is not in the shared spec, and a
 * service without it must still be served): `present`, `missing` (404 "Not Found", as for any
 * unknown path) or `method-not-allowed` (405).
 */
export const REVISIONS_ROUTE_MODES = ["present", "missing", "method-not-allowed"] as const;
export type RevisionsRouteMode = (typeof REVISIONS_ROUTE_MODES)[number];

/**
 * Whether the simulated service has the revision logs route (from the service's public
 * documentation, not the shared spec); the same modes as {@link REVISIONS_ROUTE_MODES}.
 */
export const LOGS_ROUTE_MODES = REVISIONS_ROUTE_MODES;
export type LogsRouteMode = RevisionsRouteMode;

/**
 * The redeploy route (POST /v2/deployments/{id}/revisions/{revision_id}/redeploy, from the
 * service's public documentation, which does not say what it does): `new-revision` (default: a
 * new revision copying the old one), `switch-active` (`active_revision_id` switches back),
 * `missing` (404 "Not Found") or `method-not-allowed` (405).
 */
export const REDEPLOY_ROUTE_MODES = [
  "new-revision",
  "switch-active",
  "missing",
  "method-not-allowed",
] as const;
export type RedeployRouteMode = (typeof REDEPLOY_ROUTE_MODES)[number];

/**
 * Whether the simulated service has the rebuild route (POST /v2/deployments/{id}/revisions, from
 * the service's public documentation, not the shared spec); the same modes as
 * {@link REVISIONS_ROUTE_MODES}. `missing` answers 404 "Not Found" as for an unknown path.
 */
export const REBUILD_ROUTE_MODES = REVISIONS_ROUTE_MODES;
export type RebuildRouteMode = RevisionsRouteMode;

/**
 * Routes of the service bound to `store` and `faults`; `revisions.mode` (the single revision
 * route), `revisionListing.mode` (GET /v2/deployments/{id}/revisions), `logs.mode`,
 * `redeploy.mode` and `rebuild.mode` (POST /v2/deployments/{id}/revisions) are read per request.
 */
export function serviceRoutes(
  store: SimulatorStore,
  faults: FaultController,
  revisions: { mode: RevisionsRouteMode } = { mode: "present" },
  revisionListing: { mode: RevisionsRouteMode } = { mode: "present" },
  logs: { mode: LogsRouteMode } = { mode: "present" },
  redeploy: { mode: RedeployRouteMode } = { mode: "new-revision" },
  rebuild: { mode: RebuildRouteMode } = { mode: "present" },
): (method: string, path: string) => RouteMatch {
  const table: Record<string, Record<string, Handler>> = {
    [PROVIDERS]: { GET: () => json(200, store.providers()) },
    [REPOS]: {
      GET: (_req, [integrationId = ""]) => {
        if (!isUuid(integrationId)) throw new ServiceError(422, [uuidIssue(["path", "integration_id"])]);
        const repos = store.repos(integrationId);
        if (repos === undefined) throw notFound("Integration");
        return json(200, repos);
      },
    },
    [DEPLOYMENTS]: {
      GET: (_req, _params, search) => {
        const query = parseListQuery(search);
        const listing = faults.listing;
        return {
          status: 200,
          body: listing.endless
            ? endlessPageJson(query, store.tenantId, store.now())
            : store.listPageJson(query, listing),
        };
      },
      POST: async (req) => {
        const body = await readJsonBody(req);
        if (body === undefined) throw missingBody();
        return json(201, store.create(parseCreateBody(body)));
      },
    },
    [DEPLOYMENT]: {
      // No GET of one deployment: the spec shows none, so a client must not come to rely on it
      // here (FastAPI answers 405 for a known path with an unknown method).
      PATCH: async (req, [id = ""]) => {
        const pathIssues = uuidPathIssues("deployment_id", id);
        const raw = await readJsonBody(req);
        if (raw === undefined) {
          throw new ServiceError(422, [
            ...pathIssues,
            { loc: ["body"], msg: "Field required", type: "missing" },
          ]);
        }
        return json(200, store.patch(id, parsePatchBody(raw, pathIssues)));
      },
      DELETE: (_req, [id = ""], search) => {
        const issues = uuidPathIssues("deployment_id", id);
        const deleteTracingProject = parseDeleteQuery(search, issues);
        if (issues.length > 0) throw new ServiceError(422, issues);
        store.delete(id, { deleteTracingProject });
        return { status: 204 };
      },
    },
    [REVISIONS]: {
      GET: (_req, [id = ""], search) => {
        const issues = uuidPathIssues("deployment_id", id);
        if (issues.length > 0) throw new ServiceError(422, issues);
        const { limit, offset } = parseListQuery(search);
        return json(200, store.revisionPage(id, limit, offset));
      },
      // CREATE_REVISION: the same template, another method (matched under `rebuild.mode`).
      POST: async (req, [id = ""]) => {
        const issues = uuidPathIssues("deployment_id", id);
        const raw = await readJsonBody(req);
        issues.push(...rebuildBodyIssues(raw));
        if (issues.length > 0) throw new ServiceError(422, issues);
        return json(201, store.createRevision(id));
      },
    },
    [REVISION]: {
      GET: (_req, [id = "", revisionId = ""]) => {
        const issues = [...uuidPathIssues("deployment_id", id), ...uuidPathIssues("revision_id", revisionId)];
        if (issues.length > 0) throw new ServiceError(422, issues);
        return json(200, store.revision(id, revisionId));
      },
    },
    [REDEPLOY_ROUTE]: {
      POST: (_req, [id = "", revisionId = ""]) => {
        const issues = [...uuidPathIssues("deployment_id", id), ...uuidPathIssues("revision_id", revisionId)];
        if (issues.length > 0) throw new ServiceError(422, issues);
        const behaviour: RedeployBehaviour =
          redeploy.mode === "switch-active" ? "switch-active" : "new-revision";
        return json(200, store.redeploy(id, revisionId, behaviour));
      },
    },
    [REVISION_LOGS_ROUTE]: {
      GET: (_req, [id = "", revisionId = ""], search) => {
        const issues = [...uuidPathIssues("deployment_id", id), ...uuidPathIssues("revision_id", revisionId)];
        if (issues.length > 0) throw new ServiceError(422, issues);
        return json(200, store.revisionLogs(id, revisionId, parseLogsQuery(search)));
      },
    },
  };

  const revisionsMode = () => revisions.mode;
  const match = (method: string, template: string, params: string[]): RouteMatch => {
    const handlers = table[template] ?? {};
    const handler = handlers[method];
    const route = `${method} ${template}`;
    if (handler !== undefined) return { route, template, params, handler };
    return { route, template, params, handler: undefined, allow: Object.keys(handlers).join(", ") };
  };

  return (method, path) => {
    if (path === DEPLOYMENTS) return match(method, DEPLOYMENTS, []);
    if (path.startsWith(DEPLOYMENT_PREFIX)) {
      const parts = path.slice(DEPLOYMENT_PREFIX.length).split("/").map(decode);
      const [id, revisions, revisionId] = parts;
      const given = (v: string | undefined): v is string => v !== undefined && v !== "" && !v.includes("/");
      if (parts.length === 1 && given(id)) return match(method, DEPLOYMENT, [id]);
      if (parts.length === 2 && given(id) && revisions === "revisions" && method === "POST") {
        if (rebuild.mode === "present") return match(method, CREATE_REVISION, [id]);
        if (rebuild.mode === "method-not-allowed") {
          const route = `${method} ${CREATE_REVISION}`;
          return { route, template: CREATE_REVISION, params: [], handler: undefined, allow: "GET" };
        }
      } else if (parts.length === 2 && given(id) && revisions === "revisions") {
        if (revisionListing.mode === "present") return match(method, REVISIONS, [id]);
        if (revisionListing.mode === "method-not-allowed") {
          const route = `${method} ${REVISIONS}`;
          return { route, template: REVISIONS, params: [], handler: undefined, allow: "POST" };
        }
      }
      const logsMatch = matchLogs(method, parts, logs.mode, match);
      if (logsMatch) return logsMatch;
      const redeployMatch = matchRedeploy(method, parts, redeploy.mode, match);
      if (redeployMatch) return redeployMatch;
      if (parts.length === 3 && given(id) && revisions === "revisions" && given(revisionId)) {
        if (revisionsMode() === "present") return match(method, REVISION, [id, revisionId]);
        if (revisionsMode() === "method-not-allowed") {
          const route = `${method} ${REVISION}`;
          return { route, template: REVISION, params: [], handler: undefined, allow: "DELETE" };
        }
      }
    } else if (path === PROVIDERS) {
      return match(method, PROVIDERS, []);
    } else if (path.startsWith(REPOS_PREFIX) && path.endsWith("/repos")) {
      const id = decode(path.slice(REPOS_PREFIX.length, -"/repos".length));
      if (id !== undefined && id !== "" && !id.includes("/")) return match(method, REPOS, [id]);
    }
    return { route: `${method} (unmatched)`, template: "(unmatched)", params: [], handler: undefined };
  };
}

/**
 * The issues of a rebuild's body: it must be a JSON object, and the service's documentation gives
 * it no fields (`{}`), so any field is refused as FastAPI refuses an extra one.
 */
function rebuildBodyIssues(raw: unknown): ValidationIssue[] {
  if (raw === undefined) return [{ loc: ["body"], msg: "Field required", type: "missing" }];
  if (typeof raw !== "object" || raw === null || Array.isArray(raw))
    return [
      {
        loc: ["body"],
        msg: "Input should be a valid dictionary or object to extract fields from",
        type: "model_attributes_type",
      },
    ];
  return Object.keys(raw).map((key) => ({
    loc: ["body", key],
    msg: "Extra inputs are not permitted",
    type: "extra_forbidden",
  }));
}

/**
 * `delete_tracing_project` of a DELETE's query, parsed as FastAPI parses a boolean (a bad value
 * is a 422 issue pushed onto `issues`); false when absent, its documented default.
 */
function parseDeleteQuery(search: string, issues: ValidationIssue[]): boolean {
  const raw = new URLSearchParams(search).getAll("delete_tracing_project").at(-1);
  if (raw === undefined) return false;
  const value = parseBoolean(raw);
  if (value === undefined)
    issues.push({
      loc: ["query", "delete_tracing_project"],
      msg: "Input should be a valid boolean, unable to interpret input",
      type: "bool_parsing",
    });
  return value === true;
}

/**
 * The logs route for the path segments after `/v2/deployments/` (`{id}/revisions/{rid}/logs`),
 * as `mode` has it; undefined for another path, or when the route is `missing` (any unknown path).
 */
function matchLogs(
  method: string,
  parts: readonly (string | undefined)[],
  mode: LogsRouteMode,
  match: (method: string, template: string, params: string[]) => RouteMatch,
): RouteMatch | undefined {
  const [id, revisions, revisionId, logs] = parts;
  const given = (v: string | undefined): v is string => v !== undefined && v !== "" && !v.includes("/");
  if (parts.length !== 4 || !given(id) || revisions !== "revisions" || !given(revisionId) || logs !== "logs")
    return undefined;
  if (mode === "present") return match(method, REVISION_LOGS_ROUTE, [id, revisionId]);
  if (mode === "method-not-allowed")
    return {
      route: `${method} ${REVISION_LOGS_ROUTE}`,
      template: REVISION_LOGS_ROUTE,
      params: [],
      handler: undefined,
      allow: "DELETE",
    };
  return undefined;
}

/**
 * The redeploy route for the path segments after `/v2/deployments/`
 * (`{id}/revisions/{rid}/redeploy`), as `mode` has it; undefined for another path, or when the
 * route is `missing` (any unknown path).
 */
function matchRedeploy(
  method: string,
  parts: readonly (string | undefined)[],
  mode: RedeployRouteMode,
  match: (method: string, template: string, params: string[]) => RouteMatch,
): RouteMatch | undefined {
  const [id, revisions, revisionId, action] = parts;
  const given = (v: string | undefined): v is string => v !== undefined && v !== "" && !v.includes("/");
  if (
    parts.length !== 4 ||
    !given(id) ||
    revisions !== "revisions" ||
    !given(revisionId) ||
    action !== "redeploy" ||
    mode === "missing"
  )
    return undefined;
  if (mode !== "method-not-allowed") return match(method, REDEPLOY_ROUTE, [id, revisionId]);
  return {
    route: `${method} ${REDEPLOY_ROUTE}`,
    template: REDEPLOY_ROUTE,
    params: [],
    handler: undefined,
    allow: "GET",
  };
}
