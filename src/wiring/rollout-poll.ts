/**
 * What the rollout poller looks at: the deployments whose rollout is in progress, grouped by the
 * connection whose snapshot takes the answer, so one batched read per connection serves them all.
 */
import type { ConnectionSessions } from "../connection/registry.ts";
import type { KubeDeployments } from "../kube/custom-resources.ts";
import { connectionKeyOf, reachableDeployment } from "../reconcile/inputs.ts";
import type { RemoteSnapshot } from "../reconcile/service/snapshot.ts";
import { POLL_INDEX } from "./indexes.ts";

/** One connection's deployments to poll and the snapshot their state goes to. */
export interface RolloutPollTarget {
  snapshot: RemoteSnapshot;
  ids: string[];
}

/**
 * The poll targets now, from the cache's poll index: the deployments their resources may reach
 * (see {@link reachableDeployment}).
 */
export function rolloutPollTargets(
  deployments: Pick<KubeDeployments, "byIndex">,
  connections: Pick<ConnectionSessions, "refuses" | "session">,
): () => RolloutPollTarget[] {
  return () => {
    const ids = new Map<string, string[]>();
    for (const o of deployments.byIndex(POLL_INDEX, POLL_INDEX)) {
      const id = reachableDeployment(o, (r) => connections.refuses(r));
      if (!id) continue;
      const key = connectionKeyOf(o);
      const list = ids.get(key);
      if (list) list.push(id);
      else ids.set(key, [id]);
    }
    return [...ids].flatMap(([key, list]) => {
      const session = connections.session(key);
      return session ? [{ snapshot: session.snapshot, ids: list }] : [];
    });
  };
}
