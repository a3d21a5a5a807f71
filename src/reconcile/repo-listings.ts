/**
 * The forge repositories a connection's integrations reach, listed on demand and kept a while:
 * what resolves a spec's `github` shorthand to a repository (entered only by a spec that uses it).
 */
import { isServiceError } from "../api/errors.ts";
import { InvalidSpecError } from "../crd/errors.ts";
import { type ResolvedGithub, resolveGithub } from "../crd/github.ts";
import type { DeploymentSpec } from "../crd/schema.ts";
import type { Clock } from "../runtime/clock.ts";
import { SharedCall } from "../runtime/shared-call.ts";
import type { ForgeRepos } from "./ports.ts";
import type { ForgeRepo } from "./service-types.ts";

/**
 * The most repositories a connection's {@link RepoListings} keeps, over all its integrations'
 * listings: the integration id is a tenant's, and its service may answer any id with a large
 * listing. The oldest listings go first; one larger than this alone is used, not kept.
 */
export const KEPT_REPOS = 2_000;

export class RepoListings {
  readonly #service: ForgeRepos;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #keptRepos: number;
  /** The last listing per integration, and when it was asked for (oldest first). */
  readonly #kept = new Map<string, { at: number; repos: ForgeRepo[] }>();
  #keptCount = 0;
  readonly #calls = new Map<string, SharedCall<ForgeRepo[]>>();

  constructor(service: ForgeRepos, clock: Clock, ttlMs: number, keptRepos = KEPT_REPOS) {
    this.#service = service;
    this.#clock = clock;
    this.#ttlMs = ttlMs;
    this.#keptRepos = keptRepos;
  }

  /** Resolves `spec.github`, or undefined when the spec does not use it. Throws when not found. */
  async resolve(spec: DeploymentSpec, signal: AbortSignal): Promise<ResolvedGithub | undefined> {
    if (!spec.github) return undefined;
    const { integrationId } = spec.github;
    try {
      return resolveGithub(spec.github, await this.list(integrationId, signal));
    } catch (error) {
      if (!isServiceError(error, "not_found")) throw error;
      throw new InvalidSpecError(
        "spec.github.integrationId",
        `the service has no GitHub integration ${integrationId}; use the id of an existing forge integration`,
      );
    }
  }

  /**
   * The integration's repositories, kept for `ttlMs` from when they were asked for (within
   * {@link KEPT_REPOS} in all); a failed listing is not kept. Callers asking while a listing is in
   * flight share it, yet each waits only as long as its own `signal` allows (see {@link SharedCall}).
   */
  async list(integrationId: string, signal: AbortSignal): Promise<ForgeRepo[]> {
    const kept = this.#kept.get(integrationId);
    if (kept && this.#clock.now() - kept.at <= this.#ttlMs) return kept.repos;
    let call = this.#calls.get(integrationId);
    if (!call) {
      call = new SharedCall(async (callSignal) => {
        const at = this.#clock.now();
        const repos = await this.#service.listRepos(integrationId, callSignal);
        this.#keep(integrationId, at, repos);
        return repos;
      });
      this.#calls.set(integrationId, call);
    }
    try {
      return await call.run(signal);
    } finally {
      // Forgotten once settled (or given up by all): a tenant may name any number of integrations.
      if (!call.running && this.#calls.get(integrationId) === call) this.#calls.delete(integrationId);
    }
  }

  /** The listings in flight (a call for each integration being listed). */
  get listing(): number {
    return this.#calls.size;
  }

  /** Keeps `repos`, dropping the expired listings, then the oldest, to stay within the bound. */
  #keep(integrationId: string, at: number, repos: ForgeRepo[]): void {
    this.#drop(integrationId);
    if (repos.length > this.#keptRepos) return;
    for (const [id, kept] of this.#kept)
      if (this.#clock.now() - kept.at > this.#ttlMs || this.#keptCount + repos.length > this.#keptRepos)
        this.#drop(id);
    this.#kept.set(integrationId, { at, repos });
    this.#keptCount += repos.length;
  }

  #drop(integrationId: string): void {
    this.#keptCount -= this.#kept.get(integrationId)?.repos.length ?? 0;
    this.#kept.delete(integrationId);
  }
}
