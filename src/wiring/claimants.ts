/**
 * Who may claim a service name on a connection. A resource refused its connection claims no name
 * on it: a hostile namespace cannot hold another team's name on a shared tenant by creating its
 * resource first.
 */
import type { ConnectionSessions } from "../connection/registry.ts";
import type { resourcePort } from "../kube/reconcile-adapters.ts";

/** The resources port of the watch cache. */
type Resources = ReturnType<typeof resourcePort>;

/**
 * `resources` whose claimants leave out those refused their connection. One that owns a
 * deployment there (its status records one: only the operator writes status) keeps its claim, so
 * a relabelled namespace does not hand it to a rival.
 */
export function refusalAwareResources(
  resources: Resources,
  connections: Pick<ConnectionSessions, "refuses">,
): Resources {
  return {
    ...resources,
    claimants: (claim) =>
      resources.claimants(claim).filter((o) => Boolean(o.status?.deploymentId) || !connections.refuses(o)),
  };
}
