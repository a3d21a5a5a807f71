/**
 * "Is my change live?": the active revision's short id with what it deployed, for
 * `status.liveRevision` (the `LIVE` column of `kubectl get dmsd -o wide`).
 */
import type { Deployment } from "../service-types.ts";

/**
 * `<active id, 8 characters>@<commit, 7 characters>` for a repository source, else
 * `@<image version>` (the service's `image_version`, else the tag of `image_uri`), or the short
 * id alone when the service reports neither.
 *
 * Contract: a deployment's `source_revision_config` and `image_version` describe its LATEST
 * revision (the spec says so), so they are read only while the latest revision is the active
 * one. During a rollout the active revision is an older one: `previous` (the value written
 * before) is kept when it names that same active revision, else the short id alone. Undefined
 * when the deployment has no active revision.
 */
export function liveRevision(d: Deployment, previous: string | undefined): string | undefined {
  const active = d.active_revision_id;
  if (!active) return undefined;
  const short = active.slice(0, 8);
  if (active !== d.latest_revision_id)
    return previous === short || previous?.startsWith(`${short}@`) ? previous : short;
  const config = d.source_revision_config;
  const what =
    config.repo_commit_sha?.slice(0, 7) || d.image_version || imageTag(config.image_uri ?? undefined);
  return what ? `${short}@${what}` : short;
}

/** The tag of an image reference (`registry:5000/app:1.4.2` → `1.4.2`), or undefined without one. */
export function imageTag(uri: string | undefined): string | undefined {
  if (!uri) return undefined;
  const name = uri.split("@")[0] ?? "";
  const last = name.slice(name.lastIndexOf("/") + 1);
  const colon = last.lastIndexOf(":");
  return colon === -1 || colon === last.length - 1 ? undefined : last.slice(colon + 1);
}
