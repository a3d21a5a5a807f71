/**
 * `dms-operator import`, the pure part: the service's deployments turned into Deployment
 * resources that reproduce them exactly, so that applying them makes the operator adopt each one
 * with no write to the service. Secret values never enter a resource: each secret becomes a
 * `valueFrom.secretKeyRef`, and the values (when the service shows them) go to a separate Secret.
 */
import { DEFAULT_DEPLOYMENT_TYPE, type Deployment } from "../api/wire.ts";
import type { ConnectionRef } from "../crd/conventions.ts";
import { InvalidSpecError } from "../crd/errors.ts";
import { secretDataKey, specFromDeployment } from "../crd/mapping.ts";
import { API_VERSION, type DeploymentResource, type DeploymentSpec, KIND } from "../crd/schema.ts";
import { objectNameFor } from "./names.ts";
import { githubTarget, type RepoListing, repoReachabilityWarning } from "./repos.ts";
import { validateResource } from "./validate.ts";

/** How to import. */
export interface ImportSettings {
  /** `metadata.namespace` of every object; absent: left to `kubectl apply -n`. */
  namespace?: string;
  /**
   * One Secret, named so, holding the values of every imported deployment's secrets (keys
   * `<metadata.name>.<secret>`), and produced as a manifest. Absent: each deployment reads its
   * own Secret `<metadata.name>-secrets` (keys: the secret names), and no manifest is produced.
   */
  secretsFrom?: string;
  /** The forge repository listing of each integration a `github` source uses. */
  repos: ReadonlyMap<string, RepoListing>;
  /**
   * The connection the deployments were listed through: every resource names it in
   * `spec.connectionRef`, so the operator manages them on the same tenant. Absent: the default one.
   */
  connectionRef?: ConnectionRef;
}

/** How the service showed a secret's value. */
export type SecretValueState = "value" | "masked" | "absent";

/** One key of the Kubernetes Secret a resource reads. `value` only when the service showed it. */
export interface SecretKey {
  /** The service's name of the deployment it belongs to. */
  deployment: string;
  /** The deployment secret's name (`spec.secrets[].name`). */
  name: string;
  /** Key in the Kubernetes Secret. */
  key: string;
  state: SecretValueState;
  value?: string;
}

/** A deployment that can be declared, as a resource. */
export interface ImportedResource {
  deployment: Deployment;
  resource: DeploymentResource & {
    apiVersion: string;
    kind: string;
    metadata: { name: string; namespace?: string };
  };
  /** The Kubernetes Secret its `valueFrom` entries read, when it has secrets. */
  secretName?: string;
  keys: SecretKey[];
  /** Things the user should know; one line each, never a secret value. */
  warnings: string[];
  /** Why the resource proposes `spec.deletionProtection: true`, when it does. */
  protectedBecause?: string;
}

/** A deployment that cannot be declared, and why. */
export interface SkippedDeployment {
  name: string;
  id: string;
  reason: string;
}

/** What an import produces. */
export interface ImportResult {
  resources: ImportedResource[];
  skipped: SkippedDeployment[];
}

/**
 * A value the service shows in place of the real one. Assumption (the spec does not say): a
 * masked value is made only of `*` or `•`; any other string is taken as the real value.
 */
export function secretValueState(value: string | undefined): SecretValueState {
  if (value === undefined) return "absent";
  return value.length > 0 && /^[*•]+$/u.test(value) ? "masked" : "value";
}

/**
 * Turns `deployments` (as listed by the service) into resources, in the order given.
 *
 * Contract: a deployment is skipped, with a reason, when its name is shared by another listed
 * deployment (the operator could not tell them apart), when it is being deleted, or when the
 * resource that reproduces it would be refused by the CRD. `spec.name` is always the service's
 * name; `metadata.name` is that name when Kubernetes accepts it, else {@link objectNameFor}'s.
 * Fields the CRD cannot express (secret references on a source other than external_docker) are
 * left unmanaged, with a warning. A production deployment gets `spec.deletionProtection: true`
 * (see {@link protectionReason}). Never puts a secret value in a resource or a message.
 */
export function importDeployments(
  deployments: readonly Deployment[],
  settings: ImportSettings,
): ImportResult {
  const count = new Map<string, number>();
  for (const d of deployments) count.set(d.name, (count.get(d.name) ?? 0) + 1);
  const result: ImportResult = { resources: [], skipped: [] };
  for (const deployment of deployments) {
    const skip = (reason: string) =>
      result.skipped.push({ name: deployment.name, id: deployment.id, reason });
    const twins = count.get(deployment.name) ?? 0;
    if (twins > 1) {
      skip(
        `the service has ${twins} deployments with this name; the operator finds deployments by name and could not tell them apart`,
      );
      continue;
    }
    if (deployment.status === "AWAITING_DELETE") {
      skip("it is being deleted on the service; a resource would create it again once it is gone");
      continue;
    }
    try {
      const imported = importOne(deployment, settings);
      const violations = validateResource(imported.resource);
      if (violations.length > 0) {
        skip(`the CRD would refuse the resource: ${violations.map((v) => v.message).join("; ")}`);
        continue;
      }
      result.resources.push(imported);
    } catch (error) {
      if (!(error instanceof InvalidSpecError)) throw error;
      skip(error.message);
    }
  }
  return result;
}

function importOne(deployment: Deployment, settings: ImportSettings): ImportedResource {
  const name = objectNameFor(deployment.name);
  const secretName = settings.secretsFrom ?? objectNameFor(name, "-secrets");
  const keyOf = (secret: string) =>
    settings.secretsFrom === undefined ? secretDataKey(secret) : secretDataKey(`${name}.${secret}`);
  const protectedBecause = protectionReason(deployment);
  const mapped: DeploymentSpec = {
    ...specFromDeployment(deployment, { secretName, keyOf }),
    ...(protectedBecause === undefined ? {} : { deletionProtection: true }),
  };
  // Right after the source, where a reader looks for where the deployment lives.
  const { name: serviceName, source, ...rest } = mapped;
  const spec: DeploymentSpec = settings.connectionRef
    ? {
        ...(serviceName === undefined ? {} : { name: serviceName }),
        source,
        connectionRef: settings.connectionRef,
        ...rest,
      }
    : mapped;
  const keys: SecretKey[] = deployment.secrets.map((s) => {
    const state = secretValueState(s.value);
    return {
      deployment: deployment.name,
      name: s.name,
      key: keyOf(s.name),
      state,
      ...(state === "value" && s.value !== undefined ? { value: s.value } : {}),
    };
  });
  const warnings: string[] = [];
  const refs = deployment.secret_references ?? [];
  if (deployment.source !== "external_docker" && refs.length > 0) {
    warnings.push(
      `its secret_references (${refs.map((r) => r.name).join(", ")}) are left unmanaged: the resource allows them only with source external_docker`,
    );
  }
  const target = githubTarget(deployment.source, undefined, deployment.source_config);
  if (target) {
    const listing = settings.repos.get(target.integrationId) ?? {
      kind: "failed" as const,
      reason: "the integration's repositories were not listed",
    };
    const warning = repoReachabilityWarning(target.integrationId, target.repoUrl, listing);
    if (warning) warnings.push(warning);
  }
  const metadata = settings.namespace === undefined ? { name } : { name, namespace: settings.namespace };
  return {
    deployment,
    resource: { apiVersion: API_VERSION, kind: KIND, metadata, spec },
    ...(keys.length > 0 ? { secretName } : {}),
    keys,
    warnings,
    ...(protectedBecause === undefined ? {} : { protectedBecause }),
  };
}

/**
 * Why `deployment` should be protected from deletion, or undefined: its type is `prod`, or it has
 * none (the service returns none, or null): the service makes a deployment `prod` when none is
 * given, and a production deployment taken for a development one is the costlier mistake (an
 * unprotected resource that a pruned file deletes, with `deletionPolicy: Delete` its deployment
 * too) than the reverse (one `kubectl patch` before a deliberate delete). Any other type, also
 * one the CRD does not list, is not proposed for protection.
 */
export function protectionReason(deployment: Deployment): string | undefined {
  const type = deployment.source_config.deployment_type;
  if (type === DEFAULT_DEPLOYMENT_TYPE) return `its deployment type is ${type}`;
  if (type === undefined || type === null)
    return `the service returns no deployment type for it, and makes a deployment ${DEFAULT_DEPLOYMENT_TYPE} when none is given`;
  return undefined;
}
