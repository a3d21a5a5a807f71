/**
 * Whether a `github` source's repository is reachable through its forge integration, judged from
 * the integration's repository listing (GET /v1/integrations/forge/github/{id}/repos). Pure: the
 * caller lists; a failed listing is passed in as its reason.
 */
import type { ForgeRepo } from "../api/wire.ts";

/** An integration's listing, or why there is none (`not-found`: the service has no such integration). */
export type RepoListing =
  | { kind: "listed"; repos: readonly ForgeRepo[] }
  | { kind: "not-found" }
  | { kind: "failed"; reason: string };

/** `https://GitHub.com/Acme/Repo.git/` and `https://github.com/acme/repo` compare equal, as GitHub treats them. */
export function normalizeRepoUrl(url: string): string {
  return url
    .trim()
    .toLowerCase()
    .replace(/\/+$/, "")
    .replace(/\.git$/, "");
}

/**
 * A one-line warning when `repoUrl` is not among the repositories `integrationId` lists, or when
 * the listing could not be read; undefined when the repository is reachable. Never throws.
 */
export function repoReachabilityWarning(
  integrationId: string,
  repoUrl: string,
  listing: RepoListing,
): string | undefined {
  if (listing.kind === "not-found")
    return `the service has no GitHub integration ${integrationId}, so repository ${repoUrl} cannot be reached through it`;
  if (listing.kind === "failed")
    return `could not check that ${repoUrl} is reachable through GitHub integration ${integrationId}: ${listing.reason}`;
  const wanted = normalizeRepoUrl(repoUrl);
  if (listing.repos.some((r) => normalizeRepoUrl(r.url) === wanted)) return undefined;
  const count = listing.repos.length;
  return `repository ${repoUrl} is not among the ${count} repositor${count === 1 ? "y" : "ies"} GitHub integration ${integrationId} lists: new revisions will fail until the integration is granted access to it`;
}

/**
 * The integration and repository URL a deployment's source reads from GitHub through, when both
 * are known (source `github` or a `github` revision source); undefined otherwise.
 */
export function githubTarget(
  source: string,
  revisionSource: string | undefined,
  sourceConfig: { integration_id?: string | null; repo_url?: string | null } | undefined,
): { integrationId: string; repoUrl: string } | undefined {
  if (source !== "github" && revisionSource !== "github") return undefined;
  const integrationId = sourceConfig?.integration_id;
  const repoUrl = sourceConfig?.repo_url;
  if (!integrationId || !repoUrl) return undefined;
  return { integrationId, repoUrl };
}
