/**
 * Resolution of the `spec.github` shorthand against a forge integration's repository listing.
 * Pure: the caller lists the repositories (GET /v1/integrations/forge/github/{id}/repos).
 */
import type { ForgeRepo } from "../api/wire.ts";
import { GithubRepositoryNotFoundError } from "./errors.ts";
import type { DeploymentSpec } from "./schema.ts";

/** The `spec.github` shorthand. */
export type GithubShorthand = NonNullable<DeploymentSpec["github"]>;

/** What the shorthand stands for, as the service wants it when creating a deployment. */
export interface ResolvedGithub {
  /** `source_config.integration_id` (the repository's `host_integration_id`). */
  integrationId: string;
  /** `source_config.repo_url`. */
  repoUrl: string;
  /** `source_revision_config.repo_ref` when the spec sets no `repoRef`. */
  defaultBranch: string;
}

/**
 * The repository `shorthand.repository` ("owner/name", matched case-insensitively as GitHub
 * does) among `repos`. Throws {@link GithubRepositoryNotFoundError}, listing what the integration
 * does reach, when it is not there.
 */
export function resolveGithub(shorthand: GithubShorthand, repos: readonly ForgeRepo[]): ResolvedGithub {
  const wanted = shorthand.repository.toLowerCase();
  const repo = repos.find((r) => `${r.owner}/${r.name}`.toLowerCase() === wanted);
  if (!repo) {
    const available = repos.map((r) => `${r.owner}/${r.name}`).sort();
    throw new GithubRepositoryNotFoundError(shorthand.repository, shorthand.integrationId, available);
  }
  return { integrationId: repo.host_integration_id, repoUrl: repo.url, defaultBranch: repo.default_branch };
}
