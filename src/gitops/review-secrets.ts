/**
 * `dms-operator plan`'s word on secrets whose values it could not compare: the spec planned
 * without them, what the names and literal values prove when the referenced Secrets (or the
 * install key their digest is keyed with) could not be read, and why secrets are sent although
 * they may be unchanged. review.ts asks these for an entry.
 */
import type { Deployment } from "../api/wire.ts";
import type { DeploymentSpec } from "../crd/schema.ts";
import type { FieldChange, LastApplied } from "../reconcile/plan.ts";
import { secretValueState } from "./importer.ts";

/** `spec` without its secrets: planned so when their values could not be read. */
export function withoutSecrets(spec: DeploymentSpec): DeploymentSpec {
  const { secrets: _ignored, ...rest } = spec;
  return rest;
}

/**
 * Secrets whose values could not be read: what the names and the literal values prove. Different
 * names are a certain change; so is a literal `value` other than the one the service shows, when
 * no digest recorded by the operator could vouch for it (none read: without a cluster there is
 * none to read). The same names otherwise leave the values unknown.
 */
export function uncheckedSecrets(
  spec: DeploymentSpec,
  observed: Deployment | null,
  keyUnread: boolean,
): { change?: FieldChange; note?: string } {
  const wanted = [...new Set((spec.secrets ?? []).map((s) => s.name))].sort();
  const how = keyUnread
    ? "status.appliedSecretsHash is keyed with the operator's install key, which this kubeconfig may not read (see --operator-namespace)"
    : "pass --kubeconfig to read the referenced Secrets";
  const suffix = `(values not checked: ${how})`;
  if (!observed) {
    return {
      change: { group: "secrets", field: "secrets", line: `secrets: set ${wanted.join(", ")} ${suffix}` },
    };
  }
  const remote = new Set(observed.secrets.map((s) => s.name));
  const added = wanted.filter((n) => !remote.has(n));
  const removed = [...remote].filter((n) => !wanted.includes(n)).sort();
  const shown = new Map(
    observed.secrets.flatMap((s) => (secretValueState(s.value) === "value" ? [[s.name, s.value]] : [])),
  );
  const changed = keyUnread
    ? []
    : [
        ...new Set(
          (spec.secrets ?? []).flatMap((s) =>
            typeof s.value === "string" && shown.has(s.name) && shown.get(s.name) !== s.value ? [s.name] : [],
          ),
        ),
      ].sort();
  if (added.length === 0 && removed.length === 0 && changed.length === 0)
    return {
      note: `secrets: the same names as the service's; their values are not checked (${how})`,
    };
  const parts = [
    ...(added.length > 0 ? [`added ${added.join(", ")}`] : []),
    ...(removed.length > 0 ? [`removed ${removed.join(", ")}`] : []),
    ...(changed.length > 0 ? [`literal value of ${changed.join(", ")} changed`] : []),
  ];
  return { change: { group: "secrets", field: "secrets", line: `secrets: ${parts.join("; ")} ${suffix}` } };
}

/** Why secrets are sent although they may be unchanged: the service hides values and no hash is known. */
export function maskedNote(observed: Deployment | null, lastApplied: LastApplied): string | undefined {
  if (!observed || lastApplied.secretsHash) return undefined;
  const hidden = observed.secrets.some((s) => secretValueState(s.value) !== "value");
  if (!hidden) return undefined;
  return "the service does not show secret values and no status.appliedSecretsHash is known, so the operator sends the secrets once even if they are unchanged";
}
