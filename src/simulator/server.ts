/**
 * The service simulator's HTTP server: a faithful, in-memory stand-in for the Deployment
 * Management Service on node:http, with fault injection, per-route counters and `/_sim/`
 * controls. For tests, the demo, the benchmark, and trying the operator without an account.
 */
import { timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { isUuid } from "../api/wire.ts";
import { handleAdmin } from "./admin.ts";
import { ServiceError } from "./errors.ts";
import { FaultController } from "./faults.ts";
import { writeOversized } from "./hostile.ts";
import { errorResponse, json, type SimResponse, writeResponse } from "./http.ts";
import type { SecretsMode, Timing } from "./record.ts";
import { type RequestFilter, RequestRecord, type SimRequest } from "./requests.ts";
import {
  LOGS_ROUTE_MODES,
  type LogsRouteMode,
  REBUILD_ROUTE_MODES,
  REDEPLOY_ROUTE_MODES,
  REVISIONS_ROUTE_MODES,
  type RebuildRouteMode,
  type RedeployRouteMode,
  type RevisionsRouteMode,
  serviceRoutes,
} from "./routes.ts";
import { type SimulatorSeed, validateSeed } from "./seed.ts";
import { EMPTY_SECRETS_MODES, type EmptySecretsMode, SimulatorStore } from "./store.ts";

export type { RequestFilter, SimRequest } from "./requests.ts";
export type { RebuildRouteMode, RedeployRouteMode } from "./routes.ts";
export type { SimulatorSeed } from "./seed.ts";

/** Options of {@link startSimulator}; every field has a default. */
export interface SimulatorOptions {
  /** Interface to listen on. Default 127.0.0.1. */
  host?: string;
  /** Port; 0 (the default) picks a free one. */
  port?: number;
  /** When set (non-empty), every service route answers 401 unless the `apiKeyHeader` header carries this key. */
  apiKey?: string;
  /** Header carrying the key. Default `x-api-key`. */
  apiKeyHeader?: string;
  /** `tenant_id` of every deployment (a uuid), unless the seed names one. Default {@link DEFAULT_TENANT_ID}. */
  tenantId?: string;
  /** Initial state; validated (an invalid seed rejects with an error naming the field). */
  seed?: SimulatorSeed;
  /** Transition delays in ms of the clock `now`; 0 means immediate. Defaults: {@link DEFAULT_TIMING}. */
  timing?: Partial<Timing>;
  /** How secret values appear in responses. Default `masked` (`********`). */
  secretsInResponses?: SecretsMode;
  /** The clock, in ms since the epoch. Default `Date.now`. Fault delays use real timers regardless. */
  now?: () => number;
  /**
   * The revisions route (GET /v2/deployments/{id}/revisions/{revision_id}, not in the shared
   * spec): `present` (default), `missing` (404 "Not Found") or `method-not-allowed` (405), to
   * act as a service without it. Changeable while running: `revisionsRoute.mode` or
   * `PUT /_sim/revisions-route`.
   */
  revisionsRoute?: RevisionsRouteMode;
  /**
   * The revision listing (GET /v2/deployments/{id}/revisions, not in the shared spec, paged like
   * the deployment listing): `present` (default), `missing` (404 "Not Found") or
   * `method-not-allowed` (405). Changeable while running: `revisionListing.mode` or
   * `PUT /_sim/revision-listing-route`.
   */
  revisionListing?: RevisionsRouteMode;
  /**
   * Whether a DELETE without `delete_tracing_project=true` leaves the deployment's tracing project
   * behind, so that a later create of the name answers 409 naming it, as the real service does.
   * Default false (a seed's `tracingProjects.keep` wins); changeable with `store.tracingProjects`
   * or `PUT /_sim/tracing-projects`.
   */
  keepTracingProjects?: boolean;
  /**
   * The revision logs route (GET /v2/deployments/{id}/revisions/{revision_id}/logs, from the
   * service's public documentation): the same modes as `revisionsRoute`. Changeable while
   * running: `logsRoute.mode` or `PUT /_sim/logs-route`.
   */
  logsRoute?: LogsRouteMode;
  /**
   * The redeploy route (POST /v2/deployments/{id}/revisions/{revision_id}/redeploy, from the
   * service's public documentation, which does not say what it does): `new-revision` (default:
   * a new revision copying the named one's config, deployed without a build), `switch-active`
   * (`active_revision_id` switches back to the named one once deployed), `missing` (404 "Not
   * Found") or `method-not-allowed` (405). Changeable while running: `redeployRoute.mode` or
   * `PUT /_sim/redeploy-route`. Every redeploy answered is recorded: `store.redeploys()`.
   */
  redeployRoute?: RedeployRouteMode;
  /**
   * The rebuild route (POST /v2/deployments/{id}/revisions, from the service's public
   * documentation: a new revision of the deployment's current configuration, body `{}`):
   * `present` (default), `missing` (404 "Not Found") or `method-not-allowed` (405), to act as a
   * service without it. Changeable while running: `rebuildRoute.mode` or `PUT /_sim/rebuild-route`.
   */
  rebuildRoute?: RebuildRouteMode;
  /**
   * What an empty `secrets` list in a PATCH means: `clears` (default, as the spec reads) or
   * `unchanged` (as the service's own provider treats it: the last secret cannot be cleared that
   * way). Changeable while running: `emptySecrets.mode` or `PUT /_sim/empty-secrets`.
   */
  emptySecretsOnUpdate?: EmptySecretsMode;
  /** How many of the latest requests `requests()` keeps one by one. Default 10,000. */
  requestRecordLimit?: number;
  /** Called with every request to a service route before it is handled (to look at headers in tests). */
  onRequest?: (req: IncomingMessage) => void;
  /**
   * Serve HTTPS with this PEM certificate (chain) and key, as a self-hosted service behind a
   * private CA does; `url` is then `https://…`. Default: plain HTTP.
   */
  tls?: { cert: string; key: string };
}

/** A simulator listening on loopback (or `host`). */
export interface RunningSimulator {
  /** Base URL, e.g. `http://127.0.0.1:41234` (`https://` with `tls`), without a trailing slash. */
  url: string;
  /** Stops listening, drops open connections and pending fault timers. */
  close(): Promise<void>;
  /** Faults in force; changes apply to the next request. */
  faults: FaultController;
  /** Answers per route template and status: `{"PATCH /v2/deployments/{deployment_id}": {"200": 3}}`; resets count as `"reset"`. */
  counters(): Record<string, Record<string, number>>;
  /**
   * The latest requests to service routes, oldest first: when each arrived (on the clock `now`),
   * its route as `counters()` names it, its URL and the status answered. The record of which
   * calls were made, and when, for tests and benchmarks.
   */
  requests(filter?: RequestFilter): SimRequest[];
  /** Forgets the counters and the requests. */
  resetCounters(): void;
  /** The state, for tests: read it, or drift a deployment as someone else would. */
  store: SimulatorStore;
  /** Whether the revisions route exists; set `mode` to change it for the next request. */
  revisionsRoute: { mode: RevisionsRouteMode };
  /** Whether the revision listing exists; set `mode` to change it for the next request. */
  revisionListing: { mode: RevisionsRouteMode };
  /** Whether the revision logs route exists; set `mode` to change it for the next request. */
  logsRoute: { mode: LogsRouteMode };
  /** How the redeploy route behaves, or that it is missing; set `mode` for the next request. */
  redeployRoute: { mode: RedeployRouteMode };
  /** Whether the rebuild route exists; set `mode` to change it for the next request. */
  rebuildRoute: { mode: RebuildRouteMode };
  /** What an empty `secrets` list in a PATCH means; set `mode` for the next PATCH. */
  emptySecrets: { mode: EmptySecretsMode };
}

/** Transition delays used when none are given. */
export const DEFAULT_TIMING: Readonly<Timing> = {
  readyAfterMs: 3000,
  revisionActiveAfterMs: 2000,
  deleteAfterMs: 1500,
};
/** Tenant of the simulated deployments when neither options nor seed name one. */
export const DEFAULT_TENANT_ID = "5e1a7c3d-0000-4000-8000-00000000d0e5";

/** Starts a simulator; resolves once it listens. Rejects on an invalid seed or a port in use. */
export async function startSimulator(options: SimulatorOptions = {}): Promise<RunningSimulator> {
  const seed = options.seed === undefined ? undefined : validateSeed(options.seed, "seed");
  const now = options.now ?? Date.now;
  const timing: Timing = { ...DEFAULT_TIMING, ...options.timing };
  const tenantId = options.tenantId ?? DEFAULT_TENANT_ID;
  if (!isUuid(tenantId))
    throw new Error(`tenantId: must be a uuid (each deployment's tenant_id), got '${tenantId}'`);
  const emptySecrets = {
    mode: checkedMode("emptySecretsOnUpdate", EMPTY_SECRETS_MODES, options.emptySecretsOnUpdate ?? "clears"),
  };
  const store = new SimulatorStore({
    emptySecrets,
    tenantId,
    timing,
    secretsMode: options.secretsInResponses ?? "masked",
    now,
    seed,
    ...(options.keepTracingProjects === undefined
      ? {}
      : { keepTracingProjects: options.keepTracingProjects }),
  });
  const faults = new FaultController();
  const revisionsRoute = { mode: options.revisionsRoute ?? "present" };
  if (!REVISIONS_ROUTE_MODES.includes(revisionsRoute.mode))
    throw new Error(
      `revisionsRoute: must be one of ${REVISIONS_ROUTE_MODES.join(", ")}, got ${revisionsRoute.mode}`,
    );
  const revisionListing = { mode: options.revisionListing ?? "present" };
  if (!REVISIONS_ROUTE_MODES.includes(revisionListing.mode))
    throw new Error(
      `revisionListing: must be one of ${REVISIONS_ROUTE_MODES.join(", ")}, got ${revisionListing.mode}`,
    );
  const logsRoute = { mode: options.logsRoute ?? "present" };
  if (!LOGS_ROUTE_MODES.includes(logsRoute.mode))
    throw new Error(`logsRoute: must be one of ${LOGS_ROUTE_MODES.join(", ")}, got ${logsRoute.mode}`);
  const redeployRoute = { mode: options.redeployRoute ?? "new-revision" };
  if (!REDEPLOY_ROUTE_MODES.includes(redeployRoute.mode))
    throw new Error(
      `redeployRoute: must be one of ${REDEPLOY_ROUTE_MODES.join(", ")}, got ${redeployRoute.mode}`,
    );
  const rebuildRoute = {
    mode: checkedMode("rebuildRoute", REBUILD_ROUTE_MODES, options.rebuildRoute ?? "present"),
  };
  const route = serviceRoutes(
    store,
    faults,
    revisionsRoute,
    revisionListing,
    logsRoute,
    redeployRoute,
    rebuildRoute,
  );
  const timers = new Set<NodeJS.Timeout>();
  const record = new RequestRecord(now, options.requestRecordLimit);
  const counters = () => record.counters();
  const requests = (filter?: RequestFilter) => record.requests(filter);
  const resetCounters = () => record.reset();
  const authorized = authorizer(options.apiKey, (options.apiKeyHeader ?? "x-api-key").toLowerCase());

  const fail = (error: unknown): SimResponse => {
    if (error instanceof ServiceError) return errorResponse(error);
    // An unexpected error (a bug) behind a 500.
    process.stderr.write(`simulator: internal error: ${String(error)}\n`);
    return json(500, { detail: "Internal Server Error" });
  };

  const admin = {
    store,
    faults,
    counters,
    requests,
    resetCounters,
    timing,
    now,
    revisionsRoute,
    revisionListing,
    logsRoute,
    redeployRoute,
    rebuildRoute,
    emptySecrets,
  };
  const serveAdmin = (req: IncomingMessage, res: ServerResponse, path: string) => {
    handleAdmin(req, path, admin).then(
      (response) => writeResponse(res, response, undefined, timers),
      (error: unknown) => writeResponse(res, fail(error), undefined, timers),
    );
  };

  const serve = (req: IncomingMessage, res: ServerResponse, path: string, search: string) => {
    const match = route(req.method ?? "GET", path);
    const request = record.arrived(
      req.method ?? "GET",
      match.route,
      req.url ?? path,
      req.headers["user-agent"],
    );
    const send = (response: SimResponse) => {
      record.answered(request, String(response.status));
      res.once("close", () => {
        if (!res.writableFinished) record.closedEarly(request);
      });
      writeResponse(res, response, faults.slowBody(match.route, match.template), timers);
    };
    const proceed = (decision: ReturnType<FaultController["decide"]>) => {
      if (decision.reset === true) {
        record.answered(request, "reset");
        req.socket.destroy();
        return;
      }
      if (decision.status !== undefined) {
        const headers: Record<string, string> =
          decision.retryAfterSeconds === undefined
            ? {}
            : { "retry-after": String(decision.retryAfterSeconds) };
        send({
          status: decision.status,
          body: JSON.stringify({ detail: faults.errorDetail(decision.status) }),
          headers,
        });
        return;
      }
      const oversized = faults.oversized(match.route, match.template);
      if (oversized !== undefined) {
        record.answered(request, "200");
        writeOversized(res, oversized, (finished) => {
          if (!finished) record.closedEarly(request);
        });
        return;
      }
      if (match.handler === undefined) {
        if (match.allow === undefined) send(json(404, { detail: "Not Found" }));
        else send({ ...json(405, { detail: "Method Not Allowed" }), headers: { allow: match.allow } });
        return;
      }
      options.onRequest?.(req);
      if (!authorized(req)) {
        send(json(401, { detail: "Invalid or missing API key" }));
        return;
      }
      // Handled, then the answer lost: the connection reset where the answer would go.
      const answer =
        decision.lost === true
          ? () => {
              record.answered(request, "reset");
              req.socket.destroy();
            }
          : send;
      try {
        const result = match.handler(req, match.params, search);
        if (result instanceof Promise) result.then(answer, (error: unknown) => answer(fail(error)));
        else answer(result);
      } catch (error) {
        answer(fail(error));
      }
    };
    const decision = faults.decide(match.route, match.template, search);
    if (decision.delayMs <= 0) {
      proceed(decision);
      return;
    }
    const timer = setTimeout(() => {
      timers.delete(timer);
      proceed(decision);
    }, decision.delayMs);
    timers.add(timer);
  };

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? "/";
    const q = url.indexOf("?");
    const path = q === -1 ? url : url.slice(0, q);
    if (path.startsWith("/_sim/")) serveAdmin(req, res, path);
    else serve(req, res, path, q === -1 ? "" : url.slice(q + 1));
  };
  const server = options.tls
    ? createHttpsServer({ cert: options.tls.cert, key: options.tls.key }, handle)
    : createServer(handle);

  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = `${options.tls ? "https" : "http"}://${host.includes(":") ? `[${host}]` : host}:${port}`;

  return {
    url,
    faults,
    counters,
    requests,
    resetCounters,
    store,
    revisionsRoute,
    revisionListing,
    logsRoute,
    redeployRoute,
    rebuildRoute,
    emptySecrets,
    close: () =>
      new Promise<void>((resolve, reject) => {
        for (const timer of timers) clearTimeout(timer);
        timers.clear();
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

/** `mode` when it is one of `modes`; otherwise an error naming the option and the modes. */
function checkedMode<T extends string>(option: string, modes: readonly T[], mode: T): T {
  if (modes.includes(mode)) return mode;
  throw new Error(`${option}: must be one of ${modes.join(", ")}, got ${String(mode)}`);
}

/** A check of the API key header, constant-time; always true when no (or an empty) key is configured. */
function authorizer(apiKey: string | undefined, header: string): (req: IncomingMessage) => boolean {
  if (apiKey === undefined || apiKey === "") return () => true;
  const expected = Buffer.from(apiKey, "utf8");
  return (req) => {
    const given = req.headers[header];
    if (typeof given !== "string") return false;
    const actual = Buffer.from(given, "utf8");
    return actual.length === expected.length && timingSafeEqual(actual, expected);
  };
}
