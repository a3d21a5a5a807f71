/**
 * Gauges of the Deployment resources' state for dashboards and alerts: how many are Ready and
 * Synced, how many roll out a revision, how many rollouts failed. Computed when Prometheus
 * scrapes, from the watch cache (one pass over the cached resources per scrape, never per
 * reconcile), so they cost nothing between scrapes and are never stale.
 */
import { Gauge, type Registry } from "prom-client";

/** What the gauges read of a resource: its conditions. */
export interface ConditionsOf {
  status?: { conditions?: readonly { type: string; status: string; reason?: string }[] };
}

/** The gauges' names. */
export const RESOURCE_METRICS = {
  resources: "dms_resources",
  rollouts: "dms_rollouts",
  connectionReady: "dms_connection_ready",
} as const;

/** The conditions of a resource without any. */
const NO_CONDITIONS: readonly { type: string; status: string; reason?: string }[] = [];

/** Reasons that mark a rollout: in progress (Ready=False), failed (Stalled=True). */
const ROLLOUT_IN_PROGRESS = "RolloutInProgress";
const ROLLOUT_FAILED = "RevisionFailed";

/**
 * Registers on `registry`:
 * - `dms_resources{ready,synced}`: resources per status of their Ready and Synced conditions
 *   (`True`, `False`, `Unknown`; `None` before the operator wrote one);
 * - `dms_rollouts{state="in_progress"|"failed"}`: resources whose Ready reason is
 *   `RolloutInProgress`, and whose Stalled reason is `RevisionFailed`.
 * `list` is called once per scrape.
 */
export function registerResourceMetrics(registry: Registry, list: () => Iterable<ConditionsOf>): void {
  new Gauge({
    name: RESOURCE_METRICS.resources,
    help: "Deployment resources by the status of their Ready and Synced conditions.",
    labelNames: ["ready", "synced"],
    registers: [registry],
    collect() {
      this.reset();
      // Counted by the two statuses without a string or object per resource: this runs over
      // every cached resource at every scrape.
      const counts = new Map<string, Map<string, number>>();
      for (const resource of list()) {
        let ready = "None";
        let synced = "None";
        for (const c of resource.status?.conditions ?? NO_CONDITIONS) {
          if (c.type === "Ready") ready = c.status;
          else if (c.type === "Synced") synced = c.status;
        }
        let bySynced = counts.get(ready);
        if (!bySynced) {
          bySynced = new Map();
          counts.set(ready, bySynced);
        }
        bySynced.set(synced, (bySynced.get(synced) ?? 0) + 1);
      }
      for (const [ready, bySynced] of counts)
        for (const [synced, n] of bySynced) this.set({ ready, synced }, n);
    },
  });
  new Gauge({
    name: RESOURCE_METRICS.rollouts,
    help: "Deployment resources rolling out a revision (in_progress) or whose latest revision failed (failed).",
    labelNames: ["state"],
    registers: [registry],
    collect() {
      let inProgress = 0;
      let failed = 0;
      for (const resource of list()) {
        for (const c of resource.status?.conditions ?? NO_CONDITIONS) {
          if (c.type === "Ready" && c.status === "False" && c.reason === ROLLOUT_IN_PROGRESS) inProgress++;
          if (c.type === "Stalled" && c.status === "True" && c.reason === ROLLOUT_FAILED) failed++;
        }
      }
      this.set({ state: "in_progress" }, inProgress);
      this.set({ state: "failed" }, failed);
    },
  });
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
