/**
 * The explicit field-by-field correspondence between the resource's camelCase spec and the
 * service's snake_case wire model. No case conversion happens at runtime: every mapped field is
 * listed here, and map keys inside values (labels, annotations, env names) are never touched.
 */
import type { ResourceSpecNumberField } from "../api/wire.ts";
import { RESOURCE_SPEC_NUMBERS } from "./resource-spec-schema.ts";

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
export const RESOURCE_SPEC_VALUES = [
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
