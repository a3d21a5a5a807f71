/**
 * The treatment each string field of a status declares, for the status sink (`statusSink`,
 * status.ts), and who gives what the field holds, which the note of a value left unset names
 * ({@link unsetNote}). The Deployment resource's fields by their path in the schema
 * ({@link STATUS_STRINGS}), the conditions' as every kind writes them ({@link CONDITION_STRINGS},
 * which the connections' table takes too: `connection/status.ts`); a kind's schema is compiled
 * with its table once, when its sink is built ({@link compile}). test/unit/status-sink.test.ts
 * fails while a string of the schema has no declared treatment.
 */
import type { TSchema } from "@sinclair/typebox";

/**
 * How a status string is written:
 * - `text`, meant for people (a condition's message, why a revision was redeployed, a log
 *   excerpt): written with the printable rule (`printableLine`, `api/printable.ts`).
 * - `value`, one that tools compare (an image reference, a commit, a revision or deployment id,
 *   an annotation's value the operator acknowledges): never rewritten. One holding a character of
 *   the rule is left unset (with the object that needs it: a revision history entry without its
 *   id), and {@link unsetNote} says which field and why, in the `Synced` condition's message.
 * - `operator`, written by the operator alone from its own vocabulary, clock or digests: no text
 *   of a tenant or a service reaches it. Kept as given, or left unset as a value would be.
 *
 * A string of the schema no table declares is a value.
 */
export type Treatment = "text" | "value" | "operator";

/** A field's treatment, and who gives what it holds (the note names them). */
export interface Declared {
  treatment: Treatment;
  from: string;
}

/** A table of declared treatments, by the field's path in the schema (`a.b`, `list[].field`). */
export type Declarations = Readonly<Record<string, Declared>>;

const SERVICE = "the service";
const OPERATOR = "the operator";
const value = (from: string): Declared => ({ treatment: "value", from });
/** A field of text for people, filled by `from`. */
export const text = (from: string): Declared => ({ treatment: "text", from });
/** A field the operator alone fills. */
export const operator: Declared = { treatment: "operator", from: OPERATOR };
const served = value(SERVICE);

/**
 * The strings of `conditions[]`, as every kind writes them: the operator's type, status, time and
 * reason; a message quoting what the service answered and what the spec holds.
 */
export const CONDITION_STRINGS: Declarations = {
  "conditions[].type": operator,
  "conditions[].status": operator,
  "conditions[].lastTransitionTime": operator,
  "conditions[].reason": operator,
  // The service's answers and the tenant's spec are quoted in it.
  "conditions[].message": text("the service and the spec"),
};

/**
 * Every string field of the status, by its path in the schema (`a.b`, `list[].field`), with its
 * treatment. docs/tenant-inputs.md lists the ones a tenant or a service fills.
 */
export const STATUS_STRINGS: Declarations = {
  connection: value("spec.connectionRef"),
  deploymentId: served,
  tenantId: served,
  remoteStatus: served,
  latestRevisionId: served,
  latestRevisionStatus: served,
  activeRevisionId: served,
  imageVersion: served,
  repoCommitSha: served,
  shortRevisions: served,
  liveRevision: served,
  "activeRevision.id": served,
  "activeRevision.imageUri": served,
  "activeRevision.repoRef": served,
  "activeRevision.repoCommitSha": served,
  "activeRevision.deployedAt": operator,
  "externalRevision.id": served,
  "externalRevision.seenAt": operator,
  "externalRevision.imageUri": served,
  "externalRevision.repoRef": served,
  "externalRevision.repoCommitSha": served,
  "revisionHistory[].id": served,
  "revisionHistory[].secretsHash": operator,
  "revisionHistory[].configHash": operator,
  "revisionHistory[].imageUri": served,
  "revisionHistory[].repoRef": served,
  "revisionHistory[].repoCommitSha": served,
  "revisionHistory[].redeployedAt": operator,
  "revisionHistory[].redeployedFrom": served,
  // Names the service's revision and what it deployed.
  "revisionHistory[].redeployReason": text(SERVICE),
  ...CONDITION_STRINGS,
  appliedSecretsHash: operator,
  appliedSecretVersions: operator,
  lastHandledReconcileAt: value("the dms.dev/reconcile-requested-at annotation"),
  lastHandledRolloutNow: value("the dms.dev/rollout-now annotation"),
  lastHandledRebuildAt: value("the dms.dev/rebuild-requested-at annotation"),
  "unconfirmedRebuild.requestedAt": value("the dms.dev/rebuild-requested-at annotation"),
  "unconfirmedRebuild.afterRevisionId": served,
  "unconfirmedRebuild.configHash": operator,
  createRequestedAt: operator,
  createdAt: operator,
  rolloutStartedAt: operator,
  "failedRevisionLog.revisionId": served,
  "failedRevisionLog.reason": operator,
  "failedRevisionLog.type": operator,
  "failedRevisionLog.excerpt": text("the service's build or deploy log"),
  "failedRevisionLog.failedReadAt": operator,
  resolvedRepoUrl: value("GitHub (spec.github)"),
  resolvedRepoRef: value("GitHub (spec.github)"),
  exportedConfigMap: value("spec.export.configMapName"),
};

type Schema = TSchema & {
  type?: string;
  properties?: Record<string, TSchema>;
  required?: readonly string[];
  items?: TSchema;
  anyOf?: readonly TSchema[];
};

/** True for a string leaf of the schema: a string, or an enum of string literals. */
export function isStringSchema(schema: Schema): boolean {
  return schema.type === "string" || (schema.anyOf?.every((s: Schema) => s.type === "string") ?? false);
}

/** The schema compiled once: each string knows its treatment, each object its required fields. */
export type Node =
  | { kind: "string"; declared: Declared }
  | { kind: "list"; items: Node }
  | { kind: "object"; fields: ReadonlyMap<string, Node>; required: ReadonlySet<string> }
  | { kind: "other" };

/** `schema` (at `path`) compiled with `declarations`: an undeclared string is a value. */
export function compile(schema: Schema, declarations: Declarations, path = ""): Node {
  if (isStringSchema(schema))
    return {
      kind: "string",
      declared: declarations[path] ?? { treatment: "value", from: "an undeclared source" },
    };
  if (schema.items)
    return { kind: "list", items: compile(schema.items as Schema, declarations, `${path}[]`) };
  if (!schema.properties) return { kind: "other" };
  const fields = new Map<string, Node>();
  for (const [key, inner] of Object.entries(schema.properties))
    fields.set(key, compile(inner as Schema, declarations, path ? `${path}.${key}` : key));
  return { kind: "object", fields, required: new Set(schema.required ?? []) };
}

/** A field left unset because its value holds a character of the rule. */
export interface UnsetField {
  /** `status.<path>` with list indexes: the field, or the object dropped for lack of it. */
  field: string;
  /** The field of that object whose value held it, when an object was dropped. */
  because?: string;
  from: string;
  /** The character, as `U+XXXX`. */
  character: string;
}

/** Fields a note names at most; the rest are counted. */
export const UNSET_NAMED = 5;

/**
 * The sentence of the `Synced` condition's message naming the fields left unset, or undefined
 * when none was: which field, who gave its value, the character, and why it is not rewritten.
 */
export function unsetNote(unset: readonly UnsetField[]): string | undefined {
  if (unset.length === 0) return undefined;
  const named = unset.slice(0, UNSET_NAMED).map((u) => {
    const field = u.because === undefined ? u.field : `${u.field} (its ${u.because})`;
    return `${field} as ${u.from} gave it holds ${u.character}`;
  });
  const more = unset.length > UNSET_NAMED ? `, and ${unset.length - UNSET_NAMED} more` : "";
  return `left unset: ${named.join(", ")}${more}; outside the printable rule, and a value tools compare is never rewritten`;
}
