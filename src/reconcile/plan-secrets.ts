/**
 * The secrets part of the plan: whether the spec's secrets must be sent, given what the service
 * shows (values, masked values or none) and the hash of what was last applied; and what may be
 * taken as last applied is `lastAppliedFor`'s (plan.ts). Here too, for Secrets left unread (their
 * versions unchanged), whether their values are needed after all and the plan's desired state
 * with them. Pure. Entered only for a spec that manages its secrets.
 */

import {
  type DesiredDeployment,
  type ResolvedInputs,
  resolveSecrets,
  type SecretValue,
} from "../crd/mapping.ts";
import type { DeploymentSpec } from "../crd/schema.ts";
import { type SecretDigest, UNKEYED_SECRET_DIGEST } from "./secret-hash.ts";
import type { Deployment, Secret } from "./service-types.ts";

/** What the secrets cannot be made to be: an empty list the service did not take (see {@link keptSecretsProblem}). */
export interface SecretsProblem {
  reason: "CannotClearSecrets";
  /** Always `spec.secrets`. */
  field: string;
  /** Sentence naming the secrets and the way out. Never a secret value. */
  message: string;
}

/** The planner's decision about `secrets`. */
export interface SecretsDecision {
  /** The list to send, when the service must be told. */
  send?: SecretValue[];
  /** Summary lines naming secrets, never their values. */
  lines: string[];
  /** What cannot be done (an empty list cannot clear the service's secrets). */
  problem?: SecretsProblem;
  /** Hash of the desired secrets, once they are (or will be, after `send`) what the service has. */
  hash?: string;
}

/**
 * Decides whether `desired` secrets (undefined: not managed) must be sent, given the `remote`
 * ones (values, masked values or none) and the hash last applied. In sync when the names are
 * the same and either the hash last applied is the digest of the desired values (`digest`: keyed
 * with the install key; a plain digest recorded before it still matches), or the service shows
 * exactly the desired values. Never sends when in sync.
 */
export function planSecrets(
  desired: readonly SecretValue[] | undefined,
  remote: readonly Secret[],
  lastHash: string | undefined,
  digest: SecretDigest = UNKEYED_SECRET_DIGEST,
): SecretsDecision {
  if (!desired) return { lines: [] };
  const remoteNames = [...new Set(remote.map((s) => s.name))].sort();
  if (desired.length === 0) {
    if (remoteNames.length === 0) return { lines: [], hash: digest.digest([]) };
    // The empty list was sent (its digest is the one last applied) and the service kept them:
    // it reads an empty list on an update as "unchanged". Said, never sent again (no PATCH loop).
    if (digest.matches(lastHash, [])) return { lines: [], problem: keptSecretsProblem(remoteNames) };
    // The spec reads an empty list as "no secrets": sent once.
    return {
      send: [],
      lines: [`secrets: removed ${remoteNames.join(", ")}`],
      hash: digest.digest([]),
    };
  }
  const hash = digest.digest(desired);
  const recorded = digest.matches(lastHash, desired);
  const remoteValue = new Map(remote.map((s) => [s.name, s.value]));
  const desiredNames = desired.map((s) => s.name).sort();
  const namesMatch =
    desiredNames.length === remoteNames.length && desiredNames.every((n, i) => n === remoteNames[i]);
  const valuesShown = desired.every((s) => remoteValue.get(s.name) === s.value);
  if (namesMatch && (recorded || valuesShown)) return { lines: [], hash };

  const added = desiredNames.filter((n) => !remoteValue.has(n));
  const removed = remoteNames.filter((n) => !desiredNames.includes(n));
  // Whether a kept secret's value changed is known from the values when the service shows them,
  // otherwise only from the hash: then every kept secret counts as rotated.
  const rotated = recorded
    ? []
    : desired
        .filter((s) => remoteValue.has(s.name) && remoteValue.get(s.name) !== s.value)
        .map((s) => s.name)
        .sort();
  const lines: string[] = [];
  if (added.length > 0) lines.push(`secrets: added ${added.join(", ")}`);
  if (removed.length > 0) lines.push(`secrets: removed ${removed.join(", ")}`);
  if (rotated.length > 0) lines.push(`secrets: rotated ${rotated.join(", ")}`);
  if (lines.length === 0) lines.push(`secrets: set ${desiredNames.join(", ")}`);
  return { send: desired.map((s) => ({ name: s.name, value: s.value })), lines, hash };
}

/**
 * The problem of an empty `spec.secrets` the service did not take: an empty list was sent, and
 * its deployment still has the secrets `names` (a service that treats an empty list on an update
 * as "unchanged", as the service's own provider does, cannot clear its last secrets that way).
 */
export function keptSecretsProblem(names: readonly string[]): SecretsProblem {
  return {
    reason: "CannotClearSecrets",
    field: "spec.secrets",
    message: `spec.secrets is empty and an empty secrets list was sent, but the service's deployment still has secrets ${names.join(", ")}: this service treats an empty list on an update as "unchanged" (as the service's own provider does), so its last secrets cannot be cleared that way, and the list is not sent again; remove them on the service (its UI), list the secrets to keep, or remove spec.secrets to stop managing them`,
  };
}

/**
 * Whether the service's deployment has exactly the secret names of `spec` (false when none): when
 * not, the values left unread are needed after all.
 */
export function sameSecretNames(
  spec: Pick<DeploymentSpec, "secrets">,
  deployment: Deployment | null | undefined,
): boolean {
  if (!deployment) return false;
  const wanted = [...new Set((spec.secrets ?? []).map((s) => s.name))].sort();
  const shown = [...new Set(deployment.secrets.map((s) => s.name))].sort();
  return wanted.length === shown.length && wanted.every((name, i) => name === shown[i]);
}

/**
 * `desired`, mapped by `desiredFromSpec` from `spec` without its secrets, with the secrets
 * of `spec` resolved from `resolved` as that mapping resolves them: for a plan whose Secrets
 * were read only once their values turned out to be needed. Throws as the mapping does.
 */
export function withSecrets(
  desired: DesiredDeployment,
  spec: DeploymentSpec,
  resolved: ResolvedInputs,
): DesiredDeployment {
  return spec.secrets ? { ...desired, secrets: resolveSecrets(spec.secrets, resolved) } : desired;
}
