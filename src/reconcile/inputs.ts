/**
 * What a spec needs from outside itself before it can be planned: the values of the Secrets it
 * references (read live, in the resource's own namespace only) and the resolution of the
 * `github` shorthand through the forge repository listing.
 */
import { createHash } from "node:crypto";
import { isServiceError } from "../api/errors.ts";
import { InvalidSpecError } from "../crd/errors.ts";
import { type ResolvedGithub, resolveGithub } from "../crd/github.ts";
import { secretKeyRefs } from "../crd/mapping.ts";
import type { DeploymentSpec } from "../crd/schema.ts";
import type { Clock } from "../runtime/clock.ts";
import { objectKey } from "../runtime/keys.ts";
import { SharedCall } from "../runtime/shared-call.ts";
import type { ForgeRepos, SecretsPort } from "./ports.ts";
import { SecretBudget, utf8Bytes } from "./secret-budget.ts";
import type { ForgeRepo } from "./service-types.ts";

/** The cache index of resources by the Secrets (`namespace/name`) their spec reads. */
export const SECRET_INDEX = "secretRefs";

/** The index values of {@link SECRET_INDEX}. */
export function secretIndexer(obj: { metadata: { namespace?: string }; spec: DeploymentSpec }): string[] {
  const namespace = obj.metadata.namespace ?? "";
  return [...new Set(secretKeyRefs(obj.spec).map((r) => objectKey({ namespace, name: r.secret })))];
}

/** Secret data by Secret name and key, plus every value read (for redaction). */
export interface ReadSecrets {
  data: Record<string, Record<string, string>>;
  values: string[];
}

/** The Secrets before any was read: nothing to scrub. */
export const NONE_READ: ReadSecrets = { data: {}, values: [] };

/**
 * What one reconcile has of the referenced Secrets: the values read (or the spec's inline ones),
 * or `unread`: their values are known to be those last applied and were not read, so a report or
 * a log shown reads them first. The one state the steps of a reconcile share, for a failure may
 * come at any step and its report must not show a value.
 */
export interface SecretsSeen {
  secrets: ReadSecrets;
  unread: boolean;
}

/**
 * Reads the values of the Secrets `run`'s spec references, within the secret budget, into what
 * it has `seen` (for every report to be scrubbed of them) and returns them. Once per reconcile:
 * a read that failed (or stopped at the budget) is not tried again for the failure's report.
 */
export async function readSecretsOf(
  from: { secrets: SecretsPort; maxSecretBytes: number },
  run: { obj: { metadata: { namespace?: string }; spec: DeploymentSpec }; seen: SecretsSeen },
  signal: AbortSignal,
): Promise<ReadSecrets> {
  run.seen.unread = false;
  const namespace = run.obj.metadata.namespace ?? "";
  run.seen.secrets = await readSecrets(run.obj.spec, namespace, from.secrets, signal, from.maxSecretBytes);
  return run.seen.secrets;
}

/**
 * Reads every `valueFrom.secretKeyRef` of `spec` from `namespace`, each referenced Secret once
 * however many entries use it. Missing Secrets or keys are simply absent from the result: the
 * mapping names each of them in one error.
 *
 * The values the spec would send (inline ones too, counted once per entry that sends them) are
 * counted against `maxBytes` as they are read: past it, the reading stops with a
 * `SecretsTooLargeError` (secret-budget.ts), before anything is built from the values.
 */
export async function readSecrets(
  spec: DeploymentSpec,
  namespace: string,
  secrets: SecretsPort,
  signal: AbortSignal,
  maxBytes: number,
): Promise<ReadSecrets> {
  const out = inlineSecrets(spec);
  // A spec that sends no secret has nothing to count (nor to read).
  if (!spec.secrets?.length) return out;
  const budget = new SecretBudget(maxBytes);
  for (const entry of spec.secrets ?? [])
    if (entry.value !== undefined)
      budget.add({
        what: `the value of spec.secrets[${entry.name}]`,
        bytes: utf8Bytes(entry.value),
        entries: 1,
      });
  const bySecret = referencesBySecret(spec);
  budget.check(bySecret.size === 0);
  let left = bySecret.size;
  for (const [secret, keys] of bySecret) {
    const read = await secrets.readKeys(namespace, secret, [...keys.keys()], signal);
    left -= 1;
    if (read.kind !== "found") continue;
    for (const [key, entries] of keys) {
      const value = read.values.get(key);
      if (value === undefined) continue;
      budget.add({ what: `key "${key}" of Secret "${secret}"`, bytes: utf8Bytes(value), entries });
      out.data[secret] ??= {};
      out.data[secret][key] = value;
      out.values.push(value);
    }
    budget.check(left === 0);
  }
  return out;
}

/** The Secrets `spec` reads, each with its keys and how many entries read each key. */
function referencesBySecret(spec: DeploymentSpec): Map<string, Map<string, number>> {
  const bySecret = new Map<string, Map<string, number>>();
  for (const entry of spec.secrets ?? []) {
    const ref = entry.valueFrom?.secretKeyRef;
    if (!ref) continue;
    const keys = bySecret.get(ref.name) ?? new Map<string, number>();
    keys.set(ref.key, (keys.get(ref.key) ?? 0) + 1);
    bySecret.set(ref.name, keys);
  }
  return bySecret;
}

/**
 * A digest of the resourceVersions of the Secrets `spec` reads through `valueFrom.secretKeyRef`,
 * as the metadata watch last saw them; undefined when the spec reads none or one of them is not
 * in the watch. Recorded with the secrets' hash once they are what the service has
 * (`status.appliedSecretVersions`): while it still matches (and the spec did not change), the
 * values are those last applied, and a reconcile need not read them.
 */
export function secretVersions(
  spec: DeploymentSpec,
  namespace: string,
  secrets: SecretsPort,
): string | undefined {
  const names = [...new Set(secretKeyRefs(spec).map((r) => r.secret))].sort();
  if (names.length === 0) return undefined;
  const lines: string[] = [];
  for (const name of names) {
    const version = secrets.version(namespace, name);
    if (version === undefined) return undefined;
    lines.push(`${name}\n${version}`);
  }
  return createHash("sha256").update(lines.join("\n\n")).digest("hex");
}

/** The inline secret values of `spec` (for redaction when the Secrets are not read). */
export function inlineSecrets(spec: DeploymentSpec): ReadSecrets {
  return { data: {}, values: (spec.secrets ?? []).flatMap((e) => (e.value === undefined ? [] : [e.value])) };
}

export class RepoListings {
  readonly #service: ForgeRepos;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  /** The last listing per integration, and when it was asked for. */
  readonly #kept = new Map<string, { at: number; repos: ForgeRepo[] }>();
  readonly #calls = new Map<string, SharedCall<ForgeRepo[]>>();

  constructor(service: ForgeRepos, clock: Clock, ttlMs: number) {
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
   * The integration's repositories, kept for `ttlMs` from when they were asked for; a failed
   * listing is not kept. Callers asking while a listing is in flight share it, yet each waits
   * only as long as its own `signal` allows (see {@link SharedCall}).
   */
  async list(integrationId: string, signal: AbortSignal): Promise<ForgeRepo[]> {
    const kept = this.#kept.get(integrationId);
    if (kept && this.#clock.now() - kept.at <= this.#ttlMs) return kept.repos;
    let call = this.#calls.get(integrationId);
    if (!call) {
      call = new SharedCall(async (callSignal) => {
        const at = this.#clock.now();
        const repos = await this.#service.listRepos(integrationId, callSignal);
        this.#kept.set(integrationId, { at, repos });
        return repos;
      });
      this.#calls.set(integrationId, call);
    }
    return call.run(signal);
  }
}
