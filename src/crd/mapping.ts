/**
 * Mapping from the resource's spec (camelCase) to the service's wire model (snake_case), field
 * by field. Pure: Secret values and the GitHub shorthand's resolution are read by the caller and
 * passed in. The way back, a deployment to a spec, is `import`'s (`gitops/importer.ts`), from
 * the same tables.
 *
 * The field-by-field correspondence is explicit, in the tables below: no case conversion happens
 * at runtime, every mapped field is listed, and map keys inside values (labels, annotations, env
 * names) are never touched.
 */
import type {
  DeploymentSource,
  ResourceSpecNumberField,
  RevisionSource,
  SecretReference,
} from "../api/wire.ts";
import type { SourceConfigRequest, SourceRevisionConfigRequest } from "../api/wire-requests.ts";
import { InvalidSpecError, type MissingSecretKey, SecretNotFoundError } from "./errors.ts";
import type { ResolvedGithub } from "./github.ts";
import { RESOURCE_SPEC_NUMBERS } from "./resource-spec-schema.ts";
import type { DeploymentSpec } from "./schema.ts";

/** `[specField, wireField]` of `sourceConfig` scalar fields (resourceSpec and listenerConfig apart). */
export const SOURCE_CONFIG_SCALARS = [
  ["integrationId", "integration_id"],
  ["repoUrl", "repo_url"],
  ["buildOnPush", "build_on_push"],
  ["customUrl", "custom_url"],
  ["listenerId", "listener_id"],
  ["installCommand", "install_command"],
  ["buildCommand", "build_command"],
  ["deploymentType", "deployment_type"],
] as const;

/** `[specField, wireField]` of `sourceRevisionConfig` (the fields whose change makes a revision). */
export const SOURCE_REVISION_FIELDS = [
  ["repoRef", "repo_ref"],
  ["graphConfigPath", "graph_config_path"],
  ["imageUri", "image_uri"],
  ["sourceTarballPath", "source_tarball_path"],
] as const;

/** `[specField, wireField]` of the non-numeric ResourceSpec fields; values copied as they are. */
const RESOURCE_SPEC_VALUES = [
  ["labels", "labels"],
  ["annotations", "annotations"],
  ["serviceAccountName", "service_account_name"],
  ["imagePullSecrets", "image_pull_secrets"],
  ["volumes", "volumes"],
  ["volumeMounts", "volume_mounts"],
  ["initContainers", "init_containers"],
  ["sidecars", "sidecars"],
] as const;

/** `[specField, wireField]` of every ResourceSpec field, numbers first, in display order. */
export const RESOURCE_SPEC_FIELDS: ReadonlyArray<readonly [string, string]> = [
  ...RESOURCE_SPEC_NUMBERS.map(([spec, wire]) => [spec, wire] as const),
  ...RESOURCE_SPEC_VALUES,
];

// Compile-time proof that the table covers every numeric field of the wire model, so a field
// added to wire.ts without a spec counterpart fails the type check here.
type MappedNumberField = (typeof RESOURCE_SPEC_NUMBERS)[number][1];
const everyNumberFieldMapped: [Exclude<ResourceSpecNumberField, MappedNumberField>] extends [never]
  ? true
  : false = true;
void everyNumberFieldMapped;

const toSpec = (table: ReadonlyArray<readonly [string, string]>) =>
  new Map(table.map(([spec, wire]) => [wire, spec] as const));

const SOURCE_CONFIG_SPEC_NAMES = toSpec([
  ...SOURCE_CONFIG_SCALARS,
  ["listenerConfig", "listener_config"],
  ["resourceSpec", "resource_spec"],
]);
const REVISION_SPEC_NAMES = toSpec(SOURCE_REVISION_FIELDS);
const RESOURCE_SPEC_SPEC_NAMES = toSpec(RESOURCE_SPEC_FIELDS);

/** The spec path users know (`sourceConfig.resourceSpec.cpu`) of a wire field, for summaries. */
export function specPath(
  group: "source_config" | "source_revision_config" | "resource_spec",
  wire: string,
): string {
  switch (group) {
    case "source_config":
      return `sourceConfig.${SOURCE_CONFIG_SPEC_NAMES.get(wire) ?? wire}`;
    case "source_revision_config":
      return `sourceRevisionConfig.${REVISION_SPEC_NAMES.get(wire) ?? wire}`;
    case "resource_spec":
      return `sourceConfig.resourceSpec.${RESOURCE_SPEC_SPEC_NAMES.get(wire) ?? wire}`;
  }
}

/** Display order of wire keys: the table's order first, then any other key alphabetically. */
export function orderedKeys(
  keys: Iterable<string>,
  table: ReadonlyArray<readonly [string, string]>,
): string[] {
  const present = new Set(keys);
  const known = table.map(([, wire]) => wire).filter((wire) => present.has(wire));
  const rest = [...present].filter((k) => !known.includes(k)).sort();
  return [...known, ...rest];
}

/** A secret with its value resolved, as sent to the service. */
export interface SecretValue {
  name: string;
  value: string;
}

/**
 * What the service's deployment must look like, in wire terms, holding ONLY what the spec sets
 * (a field absent here is not managed). Secret values are resolved: handle with care.
 */
export interface DesiredDeployment {
  name: string;
  source: DeploymentSource;
  /** Sent only with a new revision: the service does not report it back. */
  revision_source?: RevisionSource;
  source_config?: SourceConfigRequest;
  source_revision_config?: SourceRevisionConfigRequest;
  /** Present (possibly empty) only when the spec manages secrets. */
  secrets?: SecretValue[];
  secret_references?: SecretReference[];
  /** The name the service's UI shows: sent by a PATCH only (a create does not take it). */
  display_name?: string;
}

/** Inputs the mapping cannot compute itself. */
export interface ResolvedInputs {
  /** Decoded data of the Secrets named by `valueFrom.secretKeyRef`: Secret name → key → value. */
  secretData?: Readonly<Record<string, Readonly<Record<string, string>> | undefined>>;
  /** The resolution of `spec.github` (see `resolveGithub`); required when the spec uses it. */
  github?: ResolvedGithub;
}

/** The effective deployment name: `spec.name`, else the resource's `metadata.name`. */
export function effectiveName(spec: DeploymentSpec, metadataName: string): string {
  return spec.name ?? metadataName;
}

/** Every `{secret, key}` the spec reads through `valueFrom.secretKeyRef`, without duplicates. */
export function secretKeyRefs(spec: DeploymentSpec): Array<{ secret: string; key: string }> {
  const seen = new Map<string, { secret: string; key: string }>();
  for (const entry of spec.secrets ?? []) {
    const ref = entry.valueFrom?.secretKeyRef;
    if (ref) seen.set(JSON.stringify([ref.name, ref.key]), { secret: ref.name, key: ref.key });
  }
  return [...seen.values()];
}

/** Whether a field holds a value: a null, as the service answers an unset field, does not. */
export const defined = <T>(value: T | null | undefined): value is T => value !== undefined && value !== null;

/**
 * The deepest a `spec.sourceConfig.resourceSpec` field's value may nest its objects and lists (the
 * field's own value one level). Only the API server's limits bound what the Kubernetes-shaped
 * objects kept as given hold; sent, a service echoes them in its answers, and those are refused
 * past `MAX_ANSWER_DEPTH` (128): every answer of a shared connection holding them would be. An
 * honest object nests a few levels.
 */
export const MAX_RESOURCE_SPEC_DEPTH = 32;

/** The path (`[0].securityContext…`) of an object or list of `value` nested past `limit` levels. */
function pathPast(value: unknown, limit: number): string | undefined {
  const todo: Array<[unknown, string, number]> = [[value, "", 1]];
  for (let next = todo.pop(); next !== undefined; next = todo.pop()) {
    const [node, path, depth] = next;
    if (typeof node !== "object" || node === null) continue;
    if (depth > limit) return path;
    const list = Array.isArray(node);
    for (const [key, child] of Object.entries(node))
      todo.push([child, list ? `${path}[${key}]` : `${path}.${key}`, depth + 1]);
  }
  return undefined;
}

/**
 * The desired wire state of a spec. Throws {@link SecretNotFoundError} naming every missing
 * Secret/key (never a value), and {@link InvalidSpecError} when `spec.github` is set but not
 * resolved or a secret entry has neither value nor valueFrom.
 */
export function desiredFromSpec(
  spec: DeploymentSpec,
  metadataName: string,
  resolved: ResolvedInputs = {},
): DesiredDeployment {
  const desired: DesiredDeployment = { name: effectiveName(spec, metadataName), source: spec.source };
  if (spec.revisionSource) desired.revision_source = spec.revisionSource;
  if (spec.github && !resolved.github) {
    throw new InvalidSpecError(
      "spec.github",
      "the repository must be resolved before planning (resolveGithub)",
    );
  }

  const sourceConfig: Record<string, unknown> = {};
  const sc = spec.sourceConfig ?? {};
  for (const [specKey, wireKey] of SOURCE_CONFIG_SCALARS) {
    if (defined(sc[specKey])) sourceConfig[wireKey] = sc[specKey];
  }
  if (resolved.github && spec.github) {
    sourceConfig.integration_id = resolved.github.integrationId;
    sourceConfig.repo_url = resolved.github.repoUrl;
  }
  if (defined(sc.listenerConfig?.k8sNamespace)) {
    sourceConfig.listener_config = { k8s_namespace: sc.listenerConfig.k8sNamespace };
  }
  const resourceSpec: Record<string, unknown> = {};
  const rs: Record<string, unknown> = { ...sc.resourceSpec };
  for (const [specKey, wireKey] of RESOURCE_SPEC_FIELDS) {
    if (!defined(rs[specKey])) continue;
    const deep = pathPast(rs[specKey], MAX_RESOURCE_SPEC_DEPTH);
    if (deep !== undefined)
      throw new InvalidSpecError(
        `spec.sourceConfig.resourceSpec.${specKey}${deep}`,
        `nests deeper than ${MAX_RESOURCE_SPEC_DEPTH} levels of objects and lists; nothing is sent`,
      );
    resourceSpec[wireKey] = structuredClone(rs[specKey]);
  }
  if (Object.keys(resourceSpec).length > 0) sourceConfig.resource_spec = resourceSpec;
  if (Object.keys(sourceConfig).length > 0) desired.source_config = sourceConfig as SourceConfigRequest;

  const revision: Record<string, string> = {};
  const src = spec.sourceRevisionConfig ?? {};
  for (const [specKey, wireKey] of SOURCE_REVISION_FIELDS) {
    const value = src[specKey];
    if (defined(value)) revision[wireKey] = value;
  }
  if (resolved.github && spec.github && !defined(revision.repo_ref))
    revision.repo_ref = resolved.github.defaultBranch;
  if (Object.keys(revision).length > 0) desired.source_revision_config = revision;

  if (spec.secrets) desired.secrets = resolveSecrets(spec.secrets, resolved);
  if (spec.displayName !== undefined) desired.display_name = spec.displayName;
  if (spec.secretReferences) {
    desired.secret_references = spec.secretReferences.map((r) => ({
      name: r.name,
      secret_name: r.secretName,
      secret_key: r.secretKey,
    }));
  }
  return desired;
}

/**
 * The secrets of a spec with their values: each `value` as given, each `valueFrom.secretKeyRef`
 * read from `resolved`. Throws as {@link desiredFromSpec} does.
 */
export function resolveSecrets(
  entries: NonNullable<DeploymentSpec["secrets"]>,
  resolved: ResolvedInputs,
): SecretValue[] {
  const missing: MissingSecretKey[] = [];
  const out: SecretValue[] = [];
  for (const entry of entries) {
    if (defined(entry.value)) {
      out.push({ name: entry.name, value: entry.value });
      continue;
    }
    const ref = entry.valueFrom?.secretKeyRef;
    if (!ref)
      throw new InvalidSpecError(`spec.secrets[${entry.name}]`, "set exactly one of value or valueFrom");
    const value = resolved.secretData?.[ref.name]?.[ref.key];
    if (value === undefined) missing.push({ secret: ref.name, key: ref.key, for: entry.name });
    else out.push({ name: entry.name, value });
  }
  if (missing.length > 0) throw new SecretNotFoundError(missing);
  return out;
}
