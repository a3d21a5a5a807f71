/**
 * Gauges of the Deployment resources' state for dashboards and alerts: how many are Ready and
 * Synced, how many roll out a revision, how many rollouts failed or are held outside their
 * rollout windows (and since when), how many are Stalled and why. Computed when Prometheus
 * scrapes, from the watch cache, in one pass over the cached resources per scrape (shared by the
 * gauges of one scrape, never per reconcile), so they cost nothing between scrapes and are
 * never stale.
 */
import { Gauge, type Registry } from "prom-client";

/** A condition as the gauges read it. */
interface ConditionOf {
  type: string;
  status: string;
  reason?: string;
  lastTransitionTime?: string;
}

/** What the gauges read of a resource: its conditions. */
export interface ConditionsOf {
  status?: { conditions?: readonly ConditionOf[] };
}

/** The gauges' names. */
export const RESOURCE_METRICS = {
  resources: "dms_resources",
  rollouts: "dms_rollouts",
  stalled: "dms_resources_stalled",
  heldAge: "dms_rollouts_held_max_age_seconds",
  connectionReady: "dms_connection_ready",
} as const;

/** The `reason` label of `dms_resources_stalled` for a reason not in the list it was given. */
export const OTHER_REASON = "Other";

/** What {@link registerResourceMetrics} needs besides the resources. */
export interface ResourceMetricsOptions {
  /**
   * The reasons of `Stalled` that `dms_resources_stalled` counts apart, each exported (as 0 when
   * no resource has it) so that a query or an alert finds the series; any other reason counts as
   * {@link OTHER_REASON}. The label's values are these and `Other`, whatever a status says.
   */
  stalledReasons: readonly string[];
  /** The clock the held changes' age is read on (ms since the epoch). Default `Date.now`. */
  now?: () => number;
}

/** The conditions of a resource without any. */
const NO_CONDITIONS: readonly ConditionOf[] = [];

/** Reasons that mark a rollout: in progress (Ready=False), failed (Stalled=True), held (Synced=False). */
const ROLLOUT_IN_PROGRESS = "RolloutInProgress";
const ROLLOUT_FAILED = "RevisionFailed";
const ROLLOUT_HELD = "OutsideRolloutWindow";

/** What one pass over the cached resources counts. */
interface Tally {
  /** Resources by Ready status, then Synced status. */
  readySynced: Map<string, Map<string, number>>;
  inProgress: number;
  failed: number;
  held: number;
  /** The earliest instant (ms) a change still held was held from; `Infinity` when none. */
  heldSince: number;
  /** Stalled resources by reason (a listed reason, or `Other`). */
  stalled: Map<string, number>;
}

/**
 * Counts `resources` in one pass, without a string or an object per resource (this runs over
 * every cached resource at every scrape): the maps are keyed by strings the statuses already
 * hold, and reasons not in `known` all count under one key.
 */
function tally(resources: Iterable<ConditionsOf>, known: ReadonlySet<string>): Tally {
  const t: Tally = {
    readySynced: new Map(),
    inProgress: 0,
    failed: 0,
    held: 0,
    heldSince: Number.POSITIVE_INFINITY,
    stalled: new Map(),
  };
  for (const resource of resources) {
    let ready = "None";
    let synced = "None";
    let held = false;
    let heldSince = Number.NaN;
    let reconcilingSince = Number.NaN;
    for (const c of resource.status?.conditions ?? NO_CONDITIONS) {
      if (c.type === "Ready") {
        ready = c.status;
        if (c.status === "False" && c.reason === ROLLOUT_IN_PROGRESS) t.inProgress++;
      } else if (c.type === "Synced") {
        synced = c.status;
        if (c.status === "False" && c.reason === ROLLOUT_HELD) {
          held = true;
          heldSince = timeOf(c);
        }
      } else if (c.type === "Stalled" && c.status === "True") {
        if (c.reason === ROLLOUT_FAILED) t.failed++;
        const reason = c.reason !== undefined && known.has(c.reason) ? c.reason : OTHER_REASON;
        t.stalled.set(reason, (t.stalled.get(reason) ?? 0) + 1);
      } else if (c.type === "Reconciling" && c.status === "True" && c.reason === ROLLOUT_HELD) {
        reconcilingSince = timeOf(c);
      }
    }
    if (held) t.held++;
    if (held && !Number.isNaN(heldSince)) {
      // Synced moves its lastTransitionTime only when its status moves, so a change held after
      // another Synced=False reason (Paused, ReconcileError) keeps that earlier time; Reconciling
      // set True by the hold is later then. The later of the two is the nearer bound on when
      // the hold began (never after it).
      const since = Number.isNaN(reconcilingSince) ? heldSince : Math.max(heldSince, reconcilingSince);
      if (since < t.heldSince) t.heldSince = since;
    }
    let bySynced = t.readySynced.get(ready);
    if (!bySynced) {
      bySynced = new Map();
      t.readySynced.set(ready, bySynced);
    }
    bySynced.set(synced, (bySynced.get(synced) ?? 0) + 1);
  }
  return t;
}

/**
 * The instant of a condition's `lastTransitionTime` (ms); NaN when missing or unreadable (the
 * CRD requires an RFC 3339 time, so only a status that skipped validation has none): such a
 * change counts as held, not in the age.
 */
function timeOf(c: ConditionOf): number {
  return c.lastTransitionTime === undefined ? Number.NaN : Date.parse(c.lastTransitionTime);
}

/**
 * Registers on `registry`:
 * - `dms_resources{ready,synced}`: resources per status of their Ready and Synced conditions
 *   (`True`, `False`, `Unknown`; `None` before the operator wrote one);
 * - `dms_rollouts{state="in_progress"|"failed"|"held"}`: resources whose Ready reason is
 *   `RolloutInProgress`, whose Stalled reason is `RevisionFailed`, and whose Synced reason is
 *   `OutsideRolloutWindow` (a change that makes a revision held until a rollout window opens);
 * - `dms_rollouts_held_max_age_seconds`: how long the longest-held of those changes has been
 *   held (0 when none is), from the lastTransitionTime of its Synced and Reconciling conditions;
 * - `dms_resources_stalled{reason}`: resources Stalled, by reason (see
 *   {@link ResourceMetricsOptions.stalledReasons}).
 * `list` is called once per scrape, whichever of the gauges the scrape reads: the gauges of one
 * scrape share one pass (`/metrics?name=` of one gauge still makes one).
 */
export function registerResourceMetrics(
  registry: Registry,
  list: () => Iterable<ConditionsOf>,
  options: ResourceMetricsOptions,
): void {
  const known = new Set(options.stalledReasons);
  known.delete(OTHER_REASON);
  const now = options.now ?? Date.now;
  // The collectors of one scrape run one after the other in the same turn of the event loop
  // (prom-client calls each gauge's collect before its first await): the tally they share is
  // dropped once that turn ends, so the next scrape counts again.
  let shared: Tally | undefined;
  const current = (): Tally => {
    if (shared) return shared;
    const fresh = tally(list(), known);
    shared = fresh;
    queueMicrotask(() => {
      shared = undefined;
    });
    return fresh;
  };
  new Gauge({
    name: RESOURCE_METRICS.resources,
    help: "Deployment resources by the status of their Ready and Synced conditions.",
    labelNames: ["ready", "synced"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [ready, bySynced] of current().readySynced)
        for (const [synced, n] of bySynced) this.set({ ready, synced }, n);
    },
  });
  new Gauge({
    name: RESOURCE_METRICS.rollouts,
    help: "Deployment resources rolling out a revision (in_progress), whose latest revision failed (failed), or whose change that makes a revision is held outside the rollout windows (held).",
    labelNames: ["state"],
    registers: [registry],
    collect() {
      const t = current();
      this.set({ state: "in_progress" }, t.inProgress);
      this.set({ state: "failed" }, t.failed);
      this.set({ state: "held" }, t.held);
    },
  });
  new Gauge({
    name: RESOURCE_METRICS.heldAge,
    help: "Seconds since the longest-held change outside the rollout windows was held (Synced=False, reason OutsideRolloutWindow); 0 when none is held.",
    registers: [registry],
    collect() {
      const since = current().heldSince;
      this.set(since === Number.POSITIVE_INFINITY ? 0 : ageSeconds(now(), since));
    },
  });
  new Gauge({
    name: RESOURCE_METRICS.stalled,
    help: `Deployment resources Stalled, by the reason of their Stalled condition (${OTHER_REASON}: a reason not broken out).`,
    labelNames: ["reason"],
    registers: [registry],
    collect() {
      const { stalled } = current();
      for (const reason of known) this.set({ reason }, stalled.get(reason) ?? 0);
      this.set({ reason: OTHER_REASON }, stalled.get(OTHER_REASON) ?? 0);
    },
  });
}

/** Whole seconds from `since` to `now`, never below 0 (a transition time ahead of this clock). */
function ageSeconds(now: number, since: number): number {
  return Math.max(0, Math.floor((now - since) / 1000));
}

/** A connection as its gauge reads it: its key (`ServiceConnection/<ns>/<name>`) and conditions. */
export interface ConnectionConditions extends ConditionsOf {
  key: string;
}

/**
 * Registers `dms_connection_ready{connection,reason}` on `registry`: 1 when the connection's Ready
 * condition is True, 0 otherwise (reason `None` before its first check), one series per
 * connection resource (connections are few: one per tenant or environment). An alert on
 * `dms_connection_ready == 0` names the connection whose key or service is failing.
 */
export function registerConnectionMetrics(
  registry: Registry,
  list: () => Iterable<ConnectionConditions>,
): void {
  new Gauge({
    name: RESOURCE_METRICS.connectionReady,
    help: "Whether each ServiceConnection / ClusterServiceConnection is Ready (1) or not (0), with the Ready reason.",
    labelNames: ["connection", "reason"],
    registers: [registry],
    collect() {
      this.reset();
      for (const c of list()) {
        const ready = c.status?.conditions?.find((x) => x.type === "Ready");
        this.set({ connection: c.key, reason: ready?.reason ?? "None" }, ready?.status === "True" ? 1 : 0);
      }
    },
  });
}
