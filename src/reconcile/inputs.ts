/**
 * What a spec needs from outside itself before it can be planned: the values of the Secrets it
 * references (read live, in the resource's own namespace only) and the resolution of the
 * `github` shorthand through the forge repository listing.
 */
import { isServiceError } from "../api/errors.ts";
import type { ForgeRepo } from "../api/wire.ts";
import { InvalidSpecError } from "../crd/errors.ts";
import { type ResolvedGithub, resolveGithub } from "../crd/github.ts";
import { secretKeyRefs } from "../crd/mapping.ts";
import type { DeploymentSpec } from "../crd/schema.ts";
import type { Clock } from "../runtime/clock.ts";
import type { DeploymentsPort, SecretsPort } from "./ports.ts";

/** Secret data by Secret name and key, plus every value read (for redaction). */
export interface ReadSecrets {
  data: Record<string, Record<string, string>>;
  values: string[];
}

/**
 * Reads every `valueFrom.secretKeyRef` of `spec` from `namespace`. Missing Secrets or keys are
 * simply absent from the result: the mapping names each of them in one error.
 */
export async function readSecrets(
  spec: DeploymentSpec,
  namespace: string,
  secrets: SecretsPort,
  signal: AbortSignal,
): Promise<ReadSecrets> {
  const out: ReadSecrets = { data: {}, values: [] };
  for (const entry of spec.secrets ?? []) if (entry.value !== undefined) out.values.push(entry.value);
  for (const { secret, key } of secretKeyRefs(spec)) {
    const read = await secrets.read(namespace, secret, key, signal);
    if (read.kind !== "found") continue;
    out.data[secret] ??= {};
    out.data[secret][key] = read.value;
    out.values.push(read.value);
  }
  return out;
}

/**
 * The forge repository listings by integration, kept for `ttlMs` so that resources using the
 * `github` shorthand do not cost a listing on every reconcile.
 */
export class RepoListings {
  readonly #service: DeploymentsPort;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #cache = new Map<string, { at: number; repos: Promise<ForgeRepo[]> }>();

  constructor(service: DeploymentsPort, clock: Clock, ttlMs: number) {
    this.#service = service;
    this.#clock = clock;
    this.#ttlMs = ttlMs;
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

  /** The integration's repositories, from the cache while fresh. A failed listing is not kept. */
  list(integrationId: string, signal: AbortSignal): Promise<ForgeRepo[]> {
    const cached = this.#cache.get(integrationId);
    if (cached && this.#clock.now() - cached.at <= this.#ttlMs) return cached.repos;
    const repos = this.#service.listRepos(integrationId, signal);
    this.#cache.set(integrationId, { at: this.#clock.now(), repos });
    repos.catch(() => this.#cache.delete(integrationId));
    return repos;
  }
}
