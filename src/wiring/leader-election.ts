/** The leader elector of `--leader-elect`, on a Lease in the operator's namespace. */
import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import { KubeLease } from "../kube/lease.ts";
import type { Clock } from "../runtime/clock.ts";
import { LeaderElector } from "../runtime/leader.ts";
import type { RuntimeMetrics } from "../runtime/metrics.ts";
import type { OperatorConfig } from "./operator-config.ts";

/** What the elector is built from: the process's client, namespace, identity and instruments. */
export interface ElectorDeps {
  client: KubeClient;
  /** The kubeconfig context's namespace, if any. */
  namespace: string | undefined;
  identity: string;
  metrics: RuntimeMetrics;
  logger: Logger;
  clock: Clock;
}

/**
 * The Manager's elector of `config.leaderElection` when it is enabled (none otherwise); the Lease
 * lives in its namespace, else the kubeconfig context's, else `default`. Leadership is reported as
 * a metric, and the holder as this process sees it to `onLeader` (its own identity while it leads,
 * undefined once it stops).
 */
export function leaderElection(
  config: OperatorConfig["leaderElection"],
  deps: ElectorDeps,
  onLeader?: (identity: string | undefined) => void,
): { elector?: LeaderElector } {
  if (!config.enabled) return {};
  const { client, identity, metrics, logger, clock } = deps;
  const namespace = config.namespace ?? deps.namespace ?? "default";
  // 0 from the start, not only once a term ends: a replica that never wins the Lease (RBAC, the
  // API server) must still say it does not lead, or DmsOperatorNoLeader has nothing to fire on.
  metrics.setLeader(config.name, false);
  const elector = new LeaderElector({
    lease: new KubeLease(client, { namespace, name: config.name }),
    identity,
    leaseDurationMs: config.leaseDurationMs,
    renewDeadlineMs: config.renewDeadlineMs,
    retryPeriodMs: config.retryPeriodMs,
    clock,
    logger,
    onLeadingChange: (leading) => {
      metrics.setLeader(config.name, leading);
      onLeader?.(leading ? identity : undefined);
    },
    ...(onLeader ? { onNewLeader: (holder: string) => onLeader(holder) } : {}),
  });
  return { elector };
}
