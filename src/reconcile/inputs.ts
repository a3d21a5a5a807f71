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

/** One listing, shared by every caller that asks while it is fresh. */
interface SharedListing {
  at: number;
  repos: Promise<ForgeRepo[]>;
  /** Aborts the fetch once every caller waiting for it has given up. */
  controller: AbortController;
  waiters: number;
  settled: boolean;
}

/**
 * The forge repository listings by integration, kept for `ttlMs` so that resources using the
 * `github` shorthand do not cost a listing on every reconcile.
 */
export class RepoListings {
  readonly #service: DeploymentsPort;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #cache = new Map<string, SharedListing>();

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

  /**
   * The integration's repositories, from the cache while fresh. A failed listing is not kept.
   * Callers asking while a listing is in flight share it, yet each waits only as long as its own
   * `signal` allows: the fetch runs under a signal of its own, aborted only when every caller
   * waiting for it has given up (so one caller's timeout never fails the others).
   */
  list(integrationId: string, signal: AbortSignal): Promise<ForgeRepo[]> {
    if (signal.aborted) return Promise.reject(signal.reason);
    let shared = this.#cache.get(integrationId);
    if (!shared || this.#clock.now() - shared.at > this.#ttlMs) {
      shared = this.#fetch(integrationId);
      this.#cache.set(integrationId, shared);
    }
    return shared.settled ? shared.repos : this.#join(integrationId, shared, signal);
  }

  #fetch(integrationId: string): SharedListing {
    const controller = new AbortController();
    const shared: SharedListing = {
      at: this.#clock.now(),
      repos: this.#service.listRepos(integrationId, controller.signal),
      controller,
      waiters: 0,
      settled: false,
    };
    shared.repos.then(
      () => {
        shared.settled = true;
      },
      () => {
        shared.settled = true;
        if (this.#cache.get(integrationId) === shared) this.#cache.delete(integrationId);
      },
    );
    return shared;
  }

  /** Waits for `shared` until it settles or `signal` aborts, whichever comes first. */
  #join(integrationId: string, shared: SharedListing, signal: AbortSignal): Promise<ForgeRepo[]> {
    shared.waiters += 1;
    return new Promise<ForgeRepo[]>((resolve, reject) => {
      let waiting = true;
      const leave = () => {
        if (!waiting) return false;
        waiting = false;
        signal.removeEventListener("abort", onAbort);
        shared.waiters -= 1;
        return true;
      };
      const onAbort = () => {
        if (!leave()) return;
        if (shared.waiters === 0 && !shared.settled) {
          // Nobody waits any more: stop the fetch, and let the next caller start a fresh one.
          shared.controller.abort(new Error("every caller waiting for the repository listing gave up"));
          if (this.#cache.get(integrationId) === shared) this.#cache.delete(integrationId);
        }
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      shared.repos.then(
        (repos) => {
          if (leave()) resolve(repos);
        },
        (error: unknown) => {
          if (leave()) reject(error);
        },
      );
    });
  }
}
