/**
 * The planner: for one resource, what the service must be told. Pure and deterministic.
 *
 * Rules (issue 3): only what the spec sets is compared and sent; a PATCH carries only what
 * changed, with `source_config`, `source_revision_config` and `secrets` kept apart so a change
 * that needs no revision never makes one; `name` and `source` are never patched; `resource_spec`
 * is replaced whole by the service, so a change to any of its fields sends the desired fields
 * merged over the remote ones; secrets are decided from hashes and names, never sent when
 * nothing changed, and an empty list is reported rather than sent. Summaries never hold a
 * secret value. Beside it, what the status records a plan applied: what the next plan is made
 * against ({@link lastAppliedFor}), and what a write records once sent ({@link appliedVersions},
 * {@link appliedAt}; a create's as a PATCH's).
 */

import {
  type DesiredDeployment,
  orderedKeys,
  RESOURCE_SPEC_FIELDS,
  SOURCE_CONFIG_SCALARS,
  SOURCE_REVISION_FIELDS,
  specPath,
} from "../crd/mapping.ts";
import type { DeploymentSpec } from "../crd/schema.ts";
import { cloneJson, displayValue, isRecord, jsonEqual, wireEqual } from "../runtime/json.ts";
import { planSecrets, type SecretsDecision, type SecretsProblem } from "./plan-secrets.ts";
import type { StoredResource } from "./ports.ts";
import type { StatusRecord } from "./reasons.ts";
import type { SecretDigest } from "./secret-hash.ts";
import type {
  CreateDeploymentBody,
  Deployment,
  PatchDeploymentBody,
  SourceConfigRequest,
} from "./service-types.ts";

/** What the planner remembers from the last successful apply (from the resource's status). */
export interface LastApplied {
  /** `status.appliedSecretsHash`: hash of the secret names and values last sent. */
  secretsHash?: string;
  /** How secrets' digests are made and compared (keyed with the install key); default unkeyed. */
  secretDigest?: SecretDigest;
}

/** Which part of a PATCH a change belongs to. */
export type ChangeGroup =
  | "source_config"
  | "source_revision_config"
  | "secrets"
  | "secret_references"
  | "display_name";

/** One changed field, for summaries, events and `dms-operator plan`. */
export interface FieldChange {
  group: ChangeGroup;
  /** Spec path, e.g. `sourceConfig.resourceSpec.cpu`, or `secrets`. */
  field: string;
  /** Human-readable line, e.g. `sourceRevisionConfig.imageUri: repo/a:1 → repo/a:2`. Never a secret value. */
  line: string;
}

/** Something the spec asks that the operator cannot do; the controller reports it as a condition. */
export type PlanProblem = ImmutableProblem | SecretsProblem;

/**
 * A field the service cannot change differs from the spec: the name or the source (`Immutable`),
 * or the deployment type the spec sets (`DeploymentTypeMismatch`: the service fixes it at
 * creation, so the spec describes another deployment).
 */
export interface ImmutableProblem {
  reason: "Immutable" | "DeploymentTypeMismatch";
  /** Spec path of the field concerned. */
  field: string;
  /** Sentence naming the field and the way out. Never a secret value. */
  message: string;
}

/**
 * Create the deployment. `secretsHash`: record it as `status.appliedSecretsHash` once created.
 * `displayName`: the create does not take it; a PATCH sends it right after.
 */
export interface CreatePlan {
  action: "create";
  body: CreateDeploymentBody;
  summary: string[];
  secretsHash?: string;
  displayName?: string;
}

/** Patch the deployment. `newRevision` when `source_revision_config` is sent. */
export interface PatchPlan {
  action: "patch";
  body: PatchDeploymentBody;
  newRevision: boolean;
  summary: string[];
  changes: FieldChange[];
  problems: PlanProblem[];
  /** Record as `status.appliedSecretsHash` once the PATCH succeeded (absent: secrets unmanaged). */
  secretsHash?: string;
}

/** Nothing to send. `problems` may still hold what cannot be done. */
export interface NoopPlan {
  action: "noop";
  problems: PlanProblem[];
  /** The hash of the secrets found in sync, to record when status lacks it. */
  secretsHash?: string;
}

/** The service's deployment differs in what cannot change (name, source): nothing may be sent. */
export interface BlockedPlan {
  action: "blocked";
  problems: PlanProblem[];
  summary: string[];
}

/** The planner's decision. */
export type Plan = CreatePlan | PatchPlan | NoopPlan | BlockedPlan;

const absent = (value: unknown): boolean => value === undefined || value === null;
// Nested nulls from the service compare equal to absent fields (see wireEqual).
const same = (desired: unknown, remote: unknown): boolean =>
  absent(remote) ? false : wireEqual(desired, remote);
const line = (field: string, from: unknown, to: unknown) =>
  `${field}: ${displayValue(from)} → ${displayValue(to)}`;

/**
 * Decides what to send so that the service's deployment `observed` (undefined: there is none)
 * matches `desired`. Deterministic: equal inputs give equal plans.
 */
export function plan(
  desired: DesiredDeployment,
  observed: Deployment | undefined,
  lastApplied: LastApplied,
): Plan {
  if (!observed) return planCreate(desired, lastApplied.secretDigest);

  const immutable = immutableProblems(desired, observed);
  if (immutable.length > 0)
    return { action: "blocked", problems: immutable, summary: immutable.map((p) => p.message) };

  const changes: FieldChange[] = [];
  const body: PatchDeploymentBody = {};

  // The deployment type is sent on create only: a type that differs is a blocked plan (above),
  // and one the spec leaves out accepts the service's.
  const sourceConfig = diffSourceConfig(withoutType(desired.source_config), observed.source_config, changes);
  if (sourceConfig) body.source_config = sourceConfig;

  const revision = diffRevision(desired, observed, changes);
  if (revision) {
    body.source_revision_config = revision;
    // revision_source only means something for the revision this PATCH creates.
    if (desired.revision_source) body.revision_source = desired.revision_source;
  }

  // Secrets the spec does not manage: nothing to decide of them.
  const secrets: SecretsDecision = !desired.secrets
    ? { lines: [] }
    : planSecrets(desired.secrets, observed.secrets, lastApplied.secretsHash, lastApplied.secretDigest);
  if (secrets.send) body.secrets = secrets.send;
  changes.push(...secrets.lines.map((l) => ({ group: "secrets" as const, field: "secrets", line: l })));

  if (desired.secret_references) {
    const remote = observed.secret_references ?? [];
    const byName = <T extends { name: string }>(list: readonly T[]) =>
      [...list].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const want = byName(desired.secret_references).map((r) => [r.name, r.secret_name, r.secret_key]);
    const have = byName(remote).map((r) => [r.name, r.secret_name, r.secret_key]);
    if (!jsonEqual(want, have)) {
      body.secret_references = cloneJson(desired.secret_references);
      const show = (rows: unknown[][]) => rows.map((r) => r.join(":")).join(", ") || "(none)";
      changes.push({
        group: "secret_references",
        field: "secretReferences",
        line: `secretReferences: ${show(have)} → ${show(want)}`,
      });
    }
  }

  // PATCH only, and never cleared: a spec that leaves it out leaves the service's as it is.
  const displayName = desired.display_name;
  if (displayName !== undefined && displayName !== observed.display_name) {
    body.display_name = displayName;
    changes.push({
      group: "display_name",
      field: "displayName",
      line: line("displayName", observed.display_name, displayName),
    });
  }

  const problems = secrets.problem ? [secrets.problem] : [];
  const hash = secrets.hash === undefined ? {} : { secretsHash: secrets.hash };
  if (changes.length === 0) return { action: "noop", problems, ...hash };
  return {
    action: "patch",
    body,
    newRevision: revision !== undefined,
    summary: changes.map((c) => c.line),
    changes,
    problems,
    ...hash,
  };
}

function planCreate(desired: DesiredDeployment, digest: SecretDigest | undefined): CreatePlan {
  const body: CreateDeploymentBody = { name: desired.name, source: desired.source };
  const summary = [`create deployment ${desired.name} (source ${desired.source})`];
  if (desired.source_config) body.source_config = cloneJson(desired.source_config);
  if (desired.source_revision_config) body.source_revision_config = cloneJson(desired.source_revision_config);
  const changes: FieldChange[] = [];
  diffSourceConfig(desired.source_config, {}, changes);
  diffRevision(desired, { source_revision_config: {} }, changes);
  summary.push(...changes.map((c) => c.line));
  let secretsHash: string | undefined;
  if (desired.secrets) {
    const secrets = planSecrets(desired.secrets, [], undefined, digest);
    if (desired.secrets.length > 0)
      body.secrets = desired.secrets.map((s) => ({ name: s.name, value: s.value }));
    summary.push(...secrets.lines);
    secretsHash = secrets.hash;
  }
  if (desired.secret_references && desired.secret_references.length > 0) {
    body.secret_references = cloneJson(desired.secret_references);
    summary.push(`secretReferences: ${desired.secret_references.map((r) => r.name).join(", ")}`);
  }
  const displayName = desired.display_name;
  if (displayName !== undefined) summary.push(line("displayName", undefined, displayName));
  return {
    action: "create",
    body,
    summary,
    ...(secretsHash === undefined ? {} : { secretsHash }),
    ...(displayName === undefined ? {} : { displayName }),
  };
}

function immutableProblems(desired: DesiredDeployment, observed: Deployment): PlanProblem[] {
  const problems: PlanProblem[] = [];
  if (observed.name !== desired.name) {
    problems.push({
      reason: "Immutable",
      field: "spec.name",
      message: `spec.name is ${desired.name} but the service's deployment is named ${observed.name}: a deployment cannot be renamed; restore spec.name or create a new resource`,
    });
  }
  if (observed.source !== desired.source) {
    problems.push({
      reason: "Immutable",
      field: "spec.source",
      message: `spec.source is ${desired.source} but the service's deployment has source ${observed.source}: the source cannot change; restore spec.source or create a new resource`,
    });
  }
  const type = deploymentTypeProblem(desired, observed);
  if (type) problems.push(type);
  return problems;
}

/**
 * The spec's deployment type against the one the service returns: a set value that differs is
 * refused (the service fixes a deployment's type at creation, and refuses a PATCH that changes it).
 * A spec that leaves it out accepts whatever the service has; so is a service that does not
 * return one (nothing to compare with).
 */
function deploymentTypeProblem(
  desired: DesiredDeployment,
  observed: Deployment,
): ImmutableProblem | undefined {
  const want = desired.source_config?.deployment_type;
  const have = observed.source_config?.deployment_type;
  if (absent(want) || absent(have) || want === have) return undefined;
  const field = "spec.sourceConfig.deploymentType";
  return {
    reason: "DeploymentTypeMismatch",
    field,
    message: `${field} is ${want} but the service's deployment ${observed.name} has the type ${have}: the service fixes a deployment's type at creation, so it is never changed by a PATCH; a new type means a new deployment: remove ${field} (to accept ${have}) or set it to ${have}, or create a new resource (with another spec.name) of the type ${want}`,
  };
}

/** `config` without its deployment type, which is never PATCHed. */
function withoutType(config: SourceConfigRequest | undefined): SourceConfigRequest | undefined {
  if (!config || config.deployment_type === undefined) return config;
  const { deployment_type: _fixed, ...rest } = config;
  return rest;
}

function diffSourceConfig(
  desired: SourceConfigRequest | undefined,
  remoteConfig: Deployment["source_config"],
  changes: FieldChange[],
): SourceConfigRequest | undefined {
  if (!desired) return undefined;
  const remote: Record<string, unknown> = { ...remoteConfig };
  const want: Record<string, unknown> = { ...desired };
  const out: Record<string, unknown> = {};
  const scalarKeys = Object.keys(want).filter((k) => k !== "resource_spec" && k !== "listener_config");
  for (const key of orderedKeys(scalarKeys, SOURCE_CONFIG_SCALARS)) {
    if (absent(want[key]) || same(want[key], remote[key])) continue;
    out[key] = cloneJson(want[key]);
    changes.push({
      group: "source_config",
      field: specPath("source_config", key),
      line: line(specPath("source_config", key), remote[key], want[key]),
    });
  }
  const wantNamespace = desired.listener_config?.k8s_namespace;
  const haveNamespace = remoteConfig.listener_config?.k8s_namespace;
  if (!absent(wantNamespace) && !same(wantNamespace, haveNamespace)) {
    out.listener_config = { k8s_namespace: wantNamespace };
    const field = "sourceConfig.listenerConfig.k8sNamespace";
    changes.push({ group: "source_config", field, line: line(field, haveNamespace, wantNamespace) });
  }
  const resourceSpec = diffResourceSpec(desired.resource_spec, remoteConfig.resource_spec, changes);
  if (resourceSpec) out.resource_spec = resourceSpec;
  return Object.keys(out).length > 0 ? (out as SourceConfigRequest) : undefined;
}

function diffResourceSpec(
  desired: unknown,
  remoteSpec: unknown,
  changes: FieldChange[],
): SourceConfigRequest["resource_spec"] {
  if (!isRecord(desired)) return undefined;
  const remote = isRecord(remoteSpec) ? remoteSpec : {};
  let changed = false;
  for (const key of orderedKeys(Object.keys(desired), RESOURCE_SPEC_FIELDS)) {
    if (absent(desired[key]) || same(desired[key], remote[key])) continue;
    changed = true;
    const field = specPath("resource_spec", key);
    changes.push({ group: "source_config", field, line: line(field, remote[key], desired[key]) });
  }
  if (!changed) return undefined;
  // The service replaces resource_spec whole: what the spec leaves out must be sent as it is.
  const merged: Record<string, unknown> = cloneJson(remote);
  for (const [key, value] of Object.entries(desired)) if (!absent(value)) merged[key] = cloneJson(value);
  return merged;
}

function diffRevision(
  desired: DesiredDeployment,
  observed: Pick<Deployment, "source_revision_config">,
  changes: FieldChange[],
): PatchDeploymentBody["source_revision_config"] {
  if (!desired.source_revision_config) return undefined;
  const want: Record<string, unknown> = { ...desired.source_revision_config };
  const remote: Record<string, unknown> = { ...observed.source_revision_config };
  const out: Record<string, string> = {};
  for (const key of orderedKeys(Object.keys(want), SOURCE_REVISION_FIELDS)) {
    const value = want[key];
    if (typeof value !== "string" || same(value, remote[key])) continue;
    out[key] = value;
    const field = specPath("source_revision_config", key);
    changes.push({ group: "source_revision_config", field, line: line(field, remote[key], value) });
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/** `status.appliedGeneration` of `obj`'s spec applied in full now. */
export const appliedAt = (obj: Pick<StoredResource, "metadata">): StatusRecord =>
  obj.metadata.generation === undefined ? {} : { appliedGeneration: obj.metadata.generation };

/**
 * `status.appliedSecretVersions` after a plan that read the Secrets: their versions when the
 * secrets are (or, once the write succeeds, will be) what the service has, else none.
 */
export function appliedVersions(
  secretsHash: string | undefined,
  versions: string | undefined,
): string | null {
  return secretsHash !== undefined && versions !== undefined ? versions : null;
}

/**
 * What to plan `desired` against (the planner's `LastApplied`). `appliedSecretsHash` is the
 * resource's `status.appliedSecretsHash` (undefined when unknown). ObserveOnly never sent the
 * secrets, so where the service masks values only their names can be compared: the desired
 * values count as the ones applied. Every other policy uses the recorded hash, if any.
 * `secretDigest` makes and compares the digests (keyed with the install key).
 */
export function lastAppliedFor(
  spec: Pick<DeploymentSpec, "managementPolicy">,
  desired: Pick<DesiredDeployment, "secrets">,
  appliedSecretsHash: string | undefined,
  secretDigest: SecretDigest,
): { secretsHash?: string; secretDigest: SecretDigest } {
  const hash =
    spec.managementPolicy === "ObserveOnly" && desired.secrets
      ? secretDigest.digest(desired.secrets)
      : appliedSecretsHash;
  return hash ? { secretsHash: hash, secretDigest } : { secretDigest };
}
