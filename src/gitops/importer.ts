/**
 * `dms-operator import`, the pure part: the service's deployments turned into Deployment
 * resources that reproduce them exactly, so that applying them makes the operator adopt each one
 * with no write to the service. Secret values never enter a resource: each secret becomes a
 * `valueFrom.secretKeyRef`, and the values (when the service shows them) go to a separate Secret.
 */
import { createHash } from "node:crypto";
import {
  DEFAULT_DEPLOYMENT_TYPE,
  DEPLOYMENT_SOURCES,
  type Deployment,
  KNOWN_DEPLOYMENT_TYPES,
  type ResourceSpec,
} from "../api/wire.ts";
import type { ConnectionRef } from "../crd/conventions.ts";
import { InvalidSpecError } from "../crd/errors.ts";
import {
  defined,
  RESOURCE_SPEC_FIELDS,
  SOURCE_CONFIG_SCALARS,
  SOURCE_REVISION_FIELDS,
} from "../crd/mapping.ts";
import {
  API_VERSION,
  type DeploymentResource,
  type DeploymentSpec,
  KIND,
  MAX_DISPLAY_NAME_LENGTH,
} from "../crd/schema.ts";
import { isRecord } from "../runtime/json.ts";
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

/** Options of {@link specFromDeployment}. */
export interface ImportOptions {
  /** Kubernetes Secret (same namespace) that will hold the deployment's secret values. */
  secretName: string;
  /**
   * The key in that Secret of the deployment secret named `secret`. Default
   * {@link secretDataKey}; `import --secrets-from` prefixes the resource name, so that one
   * Secret can hold the secrets of many deployments.
   */
  keyOf?: (secret: string) => string;
}

const SECRET_KEY = /^[-._a-zA-Z0-9]+$/;

/**
 * The key under which a deployment secret's value is stored in a Kubernetes Secret: the name
 * itself when it is a valid Secret key, otherwise a sanitized name with a short hash suffix (so
 * two different names never share a key). Deterministic; `import` uses it for both the
 * `secretKeyRef` and the Secret manifest.
 */
export function secretDataKey(secretName: string): string {
  if (SECRET_KEY.test(secretName) && secretName.length <= 253) return secretName;
  const digest = createHash("sha256").update(secretName).digest("hex").slice(0, 8);
  const base = secretName.replace(/[^-._a-zA-Z0-9]/g, "_").slice(0, 240);
  return `${base}-${digest}`;
}

/**
 * A spec that reproduces `deployment` exactly: every non-null field it reports becomes a managed
 * field, secrets become `valueFrom.secretKeyRef` entries to `options.secretName` (keys from
 * `options.keyOf`, else {@link secretDataKey}; values never copied). `spec.name` is always set, since resource names
 * are stricter than the service's. `revisionSource` is not reported by the service, so left out;
 * so is a `deployment_type` the CRD does not list (unset, the resource accepts the service's).
 * Law: mapping the result back with the Secret's data gives a desired state `plan` finds equal.
 */
export function specFromDeployment(deployment: Deployment, options: ImportOptions): DeploymentSpec {
  const source = DEPLOYMENT_SOURCES.find((s) => s === deployment.source);
  // wire.ts types `source` as a plain string; the response schema already checked the value.
  if (!source) throw new InvalidSpecError("spec.source", `unknown source ${deployment.source}`);
  const spec: DeploymentSpec = { name: deployment.name, source };
  const wireConfig: Record<string, unknown> = { ...deployment.source_config };
  const sourceConfig: Record<string, unknown> = {};
  for (const [specKey, wireKey] of SOURCE_CONFIG_SCALARS) {
    if (defined(wireConfig[wireKey])) sourceConfig[specKey] = wireConfig[wireKey];
  }
  // A type the CRD does not list (a newer service's) is left out: the resource then accepts it.
  if (!KNOWN_DEPLOYMENT_TYPES.some((t) => t === sourceConfig.deploymentType))
    delete sourceConfig.deploymentType;
  const namespace = deployment.source_config.listener_config?.k8s_namespace;
  if (defined(namespace)) sourceConfig.listenerConfig = { k8sNamespace: namespace };
  const resourceSpec = resourceSpecToSpec(deployment.source_config.resource_spec);
  if (resourceSpec) sourceConfig.resourceSpec = resourceSpec;
  if (Object.keys(sourceConfig).length > 0) spec.sourceConfig = sourceConfig;

  const revision: Record<string, string> = {};
  const wireRevision: Record<string, unknown> = { ...deployment.source_revision_config };
  for (const [specKey, wireKey] of SOURCE_REVISION_FIELDS) {
    const value = wireRevision[wireKey];
    if (typeof value === "string") revision[specKey] = value;
  }
  if (Object.keys(revision).length > 0) spec.sourceRevisionConfig = revision;

  if (deployment.secrets.length > 0) {
    const keyOf = options.keyOf ?? secretDataKey;
    spec.secrets = deployment.secrets.map((s) => ({
      name: s.name,
      valueFrom: { secretKeyRef: { name: options.secretName, key: keyOf(s.name) } },
    }));
  }
  const references = deployment.secret_references ?? [];
  if (deployment.source === "external_docker" && references.length > 0) {
    spec.secretReferences = references.map((r) => ({
      name: r.name,
      secretName: r.secret_name,
      secretKey: r.secret_key,
    }));
  }
  // Within the CRD's bound only: a longer name is left out (unmanaged, the service's kept).
  const displayName = deployment.display_name;
  if (typeof displayName === "string" && displayName !== "" && displayName.length <= MAX_DISPLAY_NAME_LENGTH)
    spec.displayName = displayName;
  return spec;
}

type SpecResourceSpec = NonNullable<NonNullable<DeploymentSpec["sourceConfig"]>["resourceSpec"]>;

function resourceSpecToSpec(wire: ResourceSpec | null | undefined): SpecResourceSpec | undefined {
  if (!isRecord(wire)) return undefined;
  const out: Record<string, unknown> = {};
  const source: Record<string, unknown> = wire;
  for (const [specKey, wireKey] of RESOURCE_SPEC_FIELDS) {
    if (defined(source[wireKey])) out[specKey] = withoutNullFields(source[wireKey]);
  }
  return Object.keys(out).length > 0 ? (out as SpecResourceSpec) : undefined;
}

/**
 * A copy of `value` without the object fields the service answers as null: the planner reads a
 * nested null as absent (`wireEqual`), and the CRD refuses a null where it types a value.
 */
function withoutNullFields(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNullFields);
  if (!isRecord(value)) return value;
  // fromEntries: a key such as `__proto__` (a label's) stays a key.
  return Object.fromEntries(
    Object.entries(value).flatMap(([key, field]) =>
      field === null ? [] : [[key, withoutNullFields(field)]],
    ),
  );
}
