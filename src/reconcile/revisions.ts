/**
 * The short form of the service's revision ids shown by `kubectl get dmsd -o wide`: full UUIDs
 * are 36 characters each, and the first 8 tell revisions of one deployment apart in practice
 * (as a short commit sha does).
 */
import type { Deployment } from "../api/wire.ts";

/** `<latest>/<active>`, 8 characters each, `-` for an id the service does not report. */
export function shortRevisions(d: Pick<Deployment, "latest_revision_id" | "active_revision_id">): string {
  return `${(d.latest_revision_id ?? "-").slice(0, 8)}/${(d.active_revision_id ?? "-").slice(0, 8)}`;
}
