/**
 * Fault injection: what goes wrong, where, and how often. Faults apply to the service's routes
 * only, never to `/_sim/`. Rates draw from a seedable PRNG that is reseeded whenever the faults
 * are set, so a test that sends the same requests in the same order sees the same faults.
 */
import { STATUS_CODES } from "node:http";
import { type Static, Type } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { ServiceError } from "./errors.ts";
import { OVERSIZED_MIN_BYTES, type Oversized } from "./hostile.ts";
import { issuesOf } from "./validation.ts";

/**
 * A route selector: a route template with its method (`"PATCH /v2/deployments/{deployment_id}"`),
 * a template alone for every method (`"/v2/deployments/{deployment_id}"`), or absent for every
 * service route.
 */
const Route = Type.Optional(Type.String({ minLength: 1 }));
/**
 * Narrows a rule to the lookups by id (`GET /v2/deployments?deployment_ids=…`): `one`, those
 * asking for a single id; `many`, those asking for several (a batch). Absent: every request.
 */
const Ids = Type.Optional(Type.Union([Type.Literal("one"), Type.Literal("many")]));
const Status = Type.Integer({ minimum: 400, maximum: 599 });
const RetryAfter = Type.Optional(Type.Integer({ minimum: 0 }));

/** The faults of a simulator, as set by {@link FaultController.set} or `PUT /_sim/faults`. */
export const FaultsSchema = Type.Object(
  {
    /** Seed of the PRNG behind every `rate`. Default 1. */
    seed: Type.Optional(Type.Integer()),
    /** Delay before answering; every matching rule adds its `ms`. */
    latency: Type.Optional(
      Type.Array(Type.Object({ ms: Type.Integer({ minimum: 0 }), route: Route, ids: Ids })),
    ),
    /** Answer `status` with probability `rate` (0..1); `retryAfterSeconds` adds a Retry-After header. */
    errors: Type.Optional(
      Type.Array(
        Type.Object({
          status: Status,
          rate: Type.Number({ minimum: 0, maximum: 1 }),
          route: Route,
          retryAfterSeconds: RetryAfter,
          ids: Ids,
        }),
      ),
    ),
    /**
     * Deterministic script: the next `count` requests to `route` answer `status` (or have their
     * connection reset: `reset` before they are handled, `lost` once handled, a write applied
     * whose answer never comes), consumed in order. The way tests make "fail twice, then succeed".
     */
    script: Type.Optional(
      Type.Array(
        Type.Object({
          route: Route,
          count: Type.Integer({ minimum: 1 }),
          status: Type.Union([Status, Type.Literal("reset"), Type.Literal("lost")]),
          retryAfterSeconds: RetryAfter,
        }),
      ),
    ),
    /**
     * Fault answers as a gateway in front of a service writes them: each names a request id of
     * its own (`Service Unavailable (request id 4)`), a text that differs at every answer.
     */
    gatewayAnswers: Type.Optional(Type.Boolean()),
    /** Destroy the socket without answering, with probability `rate`. */
    resets: Type.Optional(
      Type.Array(Type.Object({ rate: Type.Number({ minimum: 0, maximum: 1 }), route: Route })),
    ),
    /** Write response bodies in chunks of `chunkBytes` with `delayMs` between them (first match). */
    slowBody: Type.Optional(
      Type.Array(
        Type.Object({
          chunkBytes: Type.Integer({ minimum: 1 }),
          delayMs: Type.Integer({ minimum: 0 }),
          route: Route,
        }),
      ),
    ),
    /** A deployment created less than this many ms ago is not yet listed by GET /v2/deployments. */
    listingLagMs: Type.Optional(Type.Integer({ minimum: 0 })),
    /** GET /v2/deployments returns at most this many items, whatever the `limit`. */
    pageCap: Type.Optional(Type.Integer({ minimum: 1 })),
    /** GET /v2/deployments answers the request's own `offset` instead of the next one. */
    repeatOffset: Type.Optional(Type.Boolean()),
    /**
     * A hostile server: answer 200 with a body of `bytes` bytes of JSON after decompression
     * (`{"padding":"xxx…"}`), streamed, gzip-encoded (`Content-Encoding: gzip`) when `gzip`
     * (first match). The handler is not run.
     */
    oversized: Type.Optional(
      Type.Array(
        Type.Object({
          route: Route,
          bytes: Type.Integer({ minimum: OVERSIZED_MIN_BYTES, maximum: Number.MAX_SAFE_INTEGER }),
          gzip: Type.Optional(Type.Boolean()),
        }),
      ),
    ),
    /**
     * A hostile server: GET /v2/deployments never ends. Every page is full (the request's
     * `limit`) of distinct, valid deployments made up from their position, the next offset is
     * always given, and each page is answered after `pageDelayMs`. Filters are ignored.
     */
    endlessListing: Type.Optional(Type.Object({ pageDelayMs: Type.Integer({ minimum: 0 }) })),
  },
  { additionalProperties: false },
);
/** See {@link FaultsSchema}. */
export type Faults = Static<typeof FaultsSchema>;
const faultsCheck = TypeCompiler.Compile(FaultsSchema);

/** What the server must do to one request before (or instead of) handling it. */
export interface FaultDecision {
  delayMs: number;
  /** Answer with this status (and optional Retry-After) instead of handling the request. */
  status?: number;
  retryAfterSeconds?: number;
  /** Destroy the connection without answering. */
  reset?: boolean;
  /** Handle the request (a write is applied), then destroy the connection instead of answering. */
  lost?: boolean;
}

/** Chunked writing of a response body. */
export interface SlowBody {
  chunkBytes: number;
  delayMs: number;
}

const NONE: FaultDecision = { delayMs: 0 };
/** The route the `endlessListing` fault answers. */
const ENDLESS_ROUTE = "GET /v2/deployments";

/** mulberry32: small, fast, good enough to spread faults (or a test's inputs); deterministic per seed. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const matches = (selector: string | undefined, route: string, path: string): boolean =>
  selector === undefined || selector === route || selector === path;

/** How many ids a request's `deployment_ids` asks for (0: none given). */
function idsAsked(search: string): number {
  const ids = new URLSearchParams(search).get("deployment_ids");
  return ids === null || ids === "" ? 0 : ids.split(",").length;
}

/** Whether a rule's `ids` narrowing admits a request asking for `asked` ids. */
const idsMatch = (ids: "one" | "many" | undefined, asked: () => number): boolean =>
  ids === undefined || (ids === "one" ? asked() === 1 : asked() > 1);

/**
 * Holds the current faults and decides, request by request, which apply. Mutations take effect
 * for the next request. `set` validates and throws a 422 {@link ServiceError} naming the field.
 */
export class FaultController {
  #faults: Faults = {};
  #script: { route?: string; left: number; status: number | "reset" | "lost"; retryAfterSeconds?: number }[] =
    [];
  #random: () => number = prng(1);
  #active = false;
  /** Fault answers given under `gatewayAnswers`: the last one's request id. */
  #answered = 0;

  /** Replaces every fault with `faults` (validated) and reseeds the PRNG. */
  set(faults: Faults): void {
    const issues = issuesOf(faultsCheck, faults, ["body"]);
    if (issues.length > 0) throw new ServiceError(422, issues);
    this.#faults = structuredClone(faults);
    this.#script = (faults.script ?? []).map((s) => ({ ...s, left: s.count }));
    this.#random = prng(faults.seed ?? 1);
    this.#active = Object.keys(faults).some((k) => k !== "seed");
  }

  /** Removes every fault. */
  clear(): void {
    this.set({});
  }

  /** The faults in force, with each script entry's remaining `count`. */
  get(): Faults {
    const current = structuredClone(this.#faults);
    if (this.#script.length > 0 || current.script !== undefined) {
      current.script = this.#script
        .filter((s) => s.left > 0)
        .map(({ left, ...rest }) => ({ ...rest, count: left }));
    }
    return current;
  }

  /**
   * Decides the fate of one request to `route` (`"GET /v2/deployments"`), whose template is
   * `path` and whose query string (without `?`) is `search`.
   */
  decide(route: string, path: string, search = ""): FaultDecision {
    if (!this.#active) return NONE;
    const f = this.#faults;
    let counted: number | undefined;
    const asked = () => {
      counted ??= idsAsked(search);
      return counted;
    };
    let delayMs = 0;
    for (const rule of f.latency ?? [])
      if (matches(rule.route, route, path) && idsMatch(rule.ids, asked)) delayMs += rule.ms;
    if (f.endlessListing !== undefined && route === ENDLESS_ROUTE) delayMs += f.endlessListing.pageDelayMs;
    for (const entry of this.#script) {
      if (entry.left <= 0 || !matches(entry.route, route, path)) continue;
      entry.left -= 1;
      if (entry.status === "reset") return { delayMs, reset: true };
      if (entry.status === "lost") return { delayMs, lost: true };
      return { delayMs, status: entry.status, retryAfterSeconds: entry.retryAfterSeconds };
    }
    for (const rule of f.resets ?? []) {
      if (matches(rule.route, route, path) && this.#random() < rule.rate) return { delayMs, reset: true };
    }
    for (const rule of f.errors ?? []) {
      if (matches(rule.route, route, path) && idsMatch(rule.ids, asked) && this.#random() < rule.rate) {
        return { delayMs, status: rule.status, retryAfterSeconds: rule.retryAfterSeconds };
      }
    }
    return delayMs === 0 ? NONE : { delayMs };
  }

  /** The `detail` of a fault's answer of `status`: with a request id of its own under `gatewayAnswers`. */
  errorDetail(status: number): string {
    const text = STATUS_CODES[status] ?? "Error";
    if (this.#faults.gatewayAnswers !== true) return text;
    this.#answered += 1;
    return `${text} (request id ${this.#answered})`;
  }

  /** The oversized answer `route` gets instead of its handler's, if any (first match). */
  oversized(route: string, path: string): Oversized | undefined {
    return this.#faults.oversized?.find((rule) => matches(rule.route, route, path));
  }

  /** How bodies of `route` are to be written slowly, if at all. */
  slowBody(route: string, path: string): SlowBody | undefined {
    return this.#faults.slowBody?.find((rule) => matches(rule.route, route, path));
  }

  /** Listing faults, read by the listing handler. */
  get listing(): { lagMs: number; pageCap: number | undefined; repeatOffset: boolean; endless: boolean } {
    return {
      lagMs: this.#faults.listingLagMs ?? 0,
      pageCap: this.#faults.pageCap,
      repeatOffset: this.#faults.repeatOffset ?? false,
      endless: this.#faults.endlessListing !== undefined,
    };
  }
}
