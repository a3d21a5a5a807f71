/**
 * `/_sim/`: the simulator's controls over HTTP, for other processes (the CLI, the demo, the
 * benchmark, tests). For local use only: these routes never ask for the API key and never see
 * faults, so a simulator must not be exposed beyond the machine it serves.
 *
 *   GET    /_sim/counters            route → status → count
 *   GET    /_sim/requests            the latest requests: at, method, route, url, userAgent, status
 *   POST   /_sim/counters/reset      204; forgets the counters and the requests
 *   GET    /_sim/faults              the faults in force
 *   PUT    /_sim/faults              replace the faults (JSON body, see `Faults`); 200 with them
 *   DELETE /_sim/faults              204
 *   PATCH  /_sim/deployments/{id}    drift (see `DriftChange`, also `status`, `fail_revisions`,
 *                                    `quirks`); 200 with the deployment
 *   PUT    /_sim/revisions-route     `{"mode": "present" | "missing" | "method-not-allowed"}`; 200 with it
 *   PUT    /_sim/revision-listing-route  the same for GET /v2/deployments/{id}/revisions
 *   PUT    /_sim/tracing-projects    `{"keep": true | false}`: whether deletes leave tracing projects
 *   DELETE /_sim/tracing-projects/{name}  204; deletes one, as a person would in the service's UI
 *   PUT    /_sim/logs-route          `{"mode": "present" | "missing" | "method-not-allowed"}`; 200 with it
 *   PUT    /_sim/redeploy-route      `{"mode": "new-revision" | "switch-active" | "missing" |
 *                                    "method-not-allowed"}`; 200 with it
 *   GET    /_sim/redeploys           the redeploys answered: at, deployment, revision named,
 *                                    behaviour, revision that goes live
 *   PUT    /_sim/rebuild-route       `{"mode": "present" | "missing" | "method-not-allowed"}`: POST
 *                                    /v2/deployments/{id}/revisions; 200 with it
 *   PUT    /_sim/empty-secrets       `{"mode": "clears" | "unchanged"}`: what `secrets: []` in a
 *                                    PATCH means; 200 with it
 *   GET    /_sim/state               tenant, clock, timing, faults, deployments with revisions,
 *                                    tracing projects
 */
import type { IncomingMessage } from "node:http";
import type { DriftChange } from "./drift.ts";
import { ServiceError } from "./errors.ts";
import type { FaultController, Faults } from "./faults.ts";
import { json, missingBody, readJsonBody, type SimResponse } from "./http.ts";
import type { Timing } from "./record.ts";
import type { SimRequest } from "./requests.ts";
import {
  type LogsRouteMode,
  REBUILD_ROUTE_MODES,
  REDEPLOY_ROUTE_MODES,
  REVISIONS_ROUTE_MODES,
  type RebuildRouteMode,
  type RedeployRouteMode,
  type RevisionsRouteMode,
} from "./routes.ts";
import { EMPTY_SECRETS_MODES, type EmptySecretsMode, type SimulatorStore } from "./store.ts";

/** What the admin routes act on. */
export interface AdminContext {
  store: SimulatorStore;
  faults: FaultController;
  counters: () => Record<string, Record<string, number>>;
  requests: () => SimRequest[];
  resetCounters: () => void;
  timing: Timing;
  now: () => number;
  revisionsRoute: { mode: RevisionsRouteMode };
  revisionListing: { mode: RevisionsRouteMode };
  logsRoute: { mode: LogsRouteMode };
  redeployRoute: { mode: RedeployRouteMode };
  rebuildRoute: { mode: RebuildRouteMode };
  emptySecrets: { mode: EmptySecretsMode };
}

/** Answers one `/_sim/` request; `path` starts with `/_sim/`. Unknown paths are 404. */
export async function handleAdmin(
  req: IncomingMessage,
  path: string,
  ctx: AdminContext,
): Promise<SimResponse> {
  const method = req.method ?? "GET";
  const key = `${method} ${path}`;
  switch (key) {
    case "GET /_sim/counters":
      return json(200, ctx.counters());
    case "GET /_sim/requests":
      return json(200, ctx.requests());
    case "POST /_sim/counters/reset":
      ctx.resetCounters();
      return { status: 204 };
    case "GET /_sim/faults":
      return json(200, ctx.faults.get());
    case "PUT /_sim/faults": {
      const body = await readJsonBody(req);
      if (body === undefined) throw missingBody();
      ctx.faults.set(body as Faults);
      return json(200, ctx.faults.get());
    }
    case "DELETE /_sim/faults":
      ctx.faults.clear();
      return { status: 204 };
    case "GET /_sim/state":
      return json(200, state(ctx));
    case "PUT /_sim/revisions-route":
      return json(200, setMode(ctx.revisionsRoute, await readJsonBody(req)));
    case "PUT /_sim/revision-listing-route":
      return json(200, setMode(ctx.revisionListing, await readJsonBody(req)));
    case "PUT /_sim/tracing-projects": {
      const keep = ((await readJsonBody(req)) as { keep?: unknown } | undefined)?.keep;
      if (typeof keep !== "boolean")
        throw new ServiceError(422, [
          { loc: ["body", "keep"], msg: "Input should be a valid boolean", type: "bool_type" },
        ]);
      ctx.store.tracingProjects.keep = keep;
      return json(200, tracingState(ctx));
    }
    case "PUT /_sim/logs-route":
      return json(200, setMode(ctx.logsRoute, await readJsonBody(req)));
    case "PUT /_sim/redeploy-route":
      return json(200, setRedeployMode(ctx.redeployRoute, await readJsonBody(req)));
    case "GET /_sim/redeploys":
      return json(200, ctx.store.redeploys());
    case "PUT /_sim/rebuild-route":
      return json(200, setModeOf(REBUILD_ROUTE_MODES, ctx.rebuildRoute, await readJsonBody(req)));
    case "PUT /_sim/empty-secrets":
      return json(200, setModeOf(EMPTY_SECRETS_MODES, ctx.emptySecrets, await readJsonBody(req)));
  }
  const tracingPrefix = "/_sim/tracing-projects/";
  if (method === "DELETE" && path.startsWith(tracingPrefix)) {
    let name: string;
    try {
      name = decodeURIComponent(path.slice(tracingPrefix.length));
    } catch {
      throw new ServiceError(404, "Tracing project not found");
    }
    if (!ctx.store.tracingProjects.remove(name)) throw new ServiceError(404, "Tracing project not found");
    return { status: 204 };
  }
  const prefix = "/_sim/deployments/";
  if (method === "PATCH" && path.startsWith(prefix)) {
    const body = await readJsonBody(req);
    if (body === undefined) throw missingBody();
    return json(200, ctx.store.drift(path.slice(prefix.length), body as DriftChange));
  }
  throw new ServiceError(404, "Not Found");
}

/** The `mode` of a `PUT /_sim/…-route` body, or a 422 naming the modes. */
function state(ctx: AdminContext) {
  return {
    tenant_id: ctx.store.tenantId,
    now: new Date(ctx.now()).toISOString(),
    timing: ctx.timing,
    faults: ctx.faults.get(),
    revisions_route: ctx.revisionsRoute.mode,
    revision_listing_route: ctx.revisionListing.mode,
    tracing_projects: tracingState(ctx),
    logs_route: ctx.logsRoute.mode,
    redeploy_route: ctx.redeployRoute.mode,
    rebuild_route: ctx.rebuildRoute.mode,
    empty_secrets: ctx.emptySecrets.mode,
    redeploys: ctx.store.redeploys(),
    deployments: ctx.store.list().map((d) => ({ ...d, revisions: ctx.store.revisions(d.id) ?? [] })),
  };
}

/** Sets a route's `mode` from a `{"mode": …}` body, or a 422 naming the modes. */
function setMode(target: { mode: RevisionsRouteMode }, body: unknown): { mode: RevisionsRouteMode } {
  return setModeOf(REVISIONS_ROUTE_MODES, target, body);
}

/** Sets the redeploy route's `mode` from a `{"mode": …}` body, or a 422 naming the modes. */
function setRedeployMode(target: { mode: RedeployRouteMode }, body: unknown): { mode: RedeployRouteMode } {
  return setModeOf(REDEPLOY_ROUTE_MODES, target, body);
}

/** Sets `target.mode` to one of `modes` from a `{"mode": …}` body, or a 422 naming them. */
function setModeOf<T extends string>(modes: readonly T[], target: { mode: T }, body: unknown): { mode: T } {
  target.mode = modeOf(modes, body);
  return { mode: target.mode };
}

/** The `mode` of a `{"mode": …}` body when it is one of `modes`, else a 422 naming them. */
function modeOf<T extends string>(modes: readonly T[], body: unknown): T {
  const mode = (body as { mode?: unknown } | undefined)?.mode;
  const known = modes.find((m) => m === mode);
  if (known !== undefined) return known;
  throw new ServiceError(422, [
    {
      loc: ["body", "mode"],
      msg: `Input should be ${modes.map((m) => `'${m}'`).join(", ")}`,
      type: "literal_error",
    },
  ]);
}

function tracingState(ctx: AdminContext): { keep: boolean; names: string[] } {
  return { keep: ctx.store.tracingProjects.keep, names: ctx.store.tracingProjects.list() };
}
