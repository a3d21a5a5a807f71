/**
 * The status sink: every string of a Deployment resource's status passes here before it is
 * written, by the treatment its field declares. Pure.
 *
 * - `text`, meant for people (a condition's message, why a revision was redeployed, a log
 *   excerpt): written with the printable rule (`printableLine`, `api/printable.ts`).
 * - `value`, one that tools compare (an image reference, a commit, a revision or deployment id,
 *   an annotation's value the operator acknowledges): never rewritten. One holding a character of
 *   the rule is left unset (with the object that needs it: a revision history entry without its
 *   id), and {@link unsetNote} says which field and why, in the `Synced` condition's message.
 * - `operator`, written by the operator alone from its own vocabulary, clock or digests: no text
 *   of a tenant or a service reaches it. Kept as given, or left unset as a value would be.
 *
 * The fields are found by walking the status schema (`crd/status-schema.ts`) with the status, so
 * a field added there passes here too (as a value until it declares otherwise);
 * test/unit/status-sink.test.ts fails while one has no declared treatment.
 */
import type { TSchema } from "@sinclair/typebox";
import { printableLine, unprintableIn } from "../../api/printable.ts";
import type { DeploymentResourceStatus } from "../../crd/schema.ts";
import { DeploymentResourceStatusSchema } from "../../crd/status-schema.ts";

/** How a status string is written (see the module comment). */
export type Treatment = "text" | "value" | "operator";

/** A field's treatment, and who gives what it holds (the note names them). */
export interface Declared {
  treatment: Treatment;
  from: string;
}

const SERVICE = "the service";
const OPERATOR = "the operator";
const value = (from: string): Declared => ({ treatment: "value", from });
const text = (from: string): Declared => ({ treatment: "text", from });
const operator: Declared = { treatment: "operator", from: OPERATOR };
const served = value(SERVICE);

/**
 * Every string field of the status, by its path in the schema (`a.b`, `list[].field`), with its
 * treatment. docs/tenant-inputs.md lists the ones a tenant or a service fills.
 */
export const STATUS_STRINGS: Readonly<Record<string, Declared>> = {
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
  "conditions[].type": operator,
  "conditions[].status": operator,
  "conditions[].lastTransitionTime": operator,
  "conditions[].reason": operator,
  // The service's answers and the tenant's spec are quoted in it.
  "conditions[].message": text("the service and the spec"),
  appliedSecretsHash: operator,
  appliedSecretVersions: operator,
  lastHandledReconcileAt: value("the dms.dev/reconcile-requested-at annotation"),
  lastHandledRolloutNow: value("the dms.dev/rollout-now annotation"),
  createRequestedAt: operator,
  rolloutStartedAt: operator,
  "failedRevisionLog.revisionId": served,
  "failedRevisionLog.reason": operator,
  "failedRevisionLog.type": operator,
  "failedRevisionLog.excerpt": text("the service's build or deploy log"),
  "failedRevisionLog.failedReadAt": operator,
  resolvedRepoUrl: value("GitHub (spec.github)"),
  resolvedRepoRef: value("GitHub (spec.github)"),
};

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

/** A status as the sink writes it, and the fields it left unset. */
export interface SinkResult {
  status: DeploymentResourceStatus;
  unset: UnsetField[];
}

type Schema = TSchema & {
  type?: string;
  properties?: Record<string, TSchema>;
  required?: readonly string[];
  items?: TSchema;
  anyOf?: readonly TSchema[];
};

/** The treatment of a string at `path`: its declaration, else that of a value (never rewritten). */
export function treatmentOf(path: string): Declared {
  return STATUS_STRINGS[path] ?? value("an undeclared source");
}

/** True for a string leaf of the schema: a string, or an enum of string literals. */
export function isStringSchema(schema: Schema): boolean {
  return schema.type === "string" || (schema.anyOf?.every((s: Schema) => s.type === "string") ?? false);
}

/** A leaf's outcome: the value to write, or why it is left unset. */
type Leaf = { keep: unknown } | { unset: { from: string; character: string } };

function leaf(path: string, given: string): Leaf {
  const declared = treatmentOf(path);
  if (declared.treatment === "text") return { keep: printableLine(given) };
  const character = unprintableIn(given);
  return character === undefined ? { keep: given } : { unset: { from: declared.from, character } };
}

/**
 * `given` walked with `schema`: the value to write, or `undefined` when it is left unset (a value
 * holding a character of the rule, or an object missing a required field for that reason).
 */
function walk(schema: Schema, given: unknown, path: string, shown: string, unset: UnsetField[]): unknown {
  if (typeof given === "string" && isStringSchema(schema)) {
    const outcome = leaf(path, given);
    if ("keep" in outcome) return outcome.keep;
    unset.push({ field: shown, ...outcome.unset });
    return undefined;
  }
  if (Array.isArray(given) && schema.items) {
    const items = schema.items as Schema;
    return given.flatMap((item, i) => {
      const kept = walk(items, item, `${path}[]`, `${shown}[${i}]`, unset);
      return kept === undefined ? [] : [kept];
    });
  }
  if (given !== null && typeof given === "object" && !Array.isArray(given) && schema.properties) {
    const out: Record<string, unknown> = {};
    const before = unset.length;
    for (const [key, inner] of Object.entries(given)) {
      const property = schema.properties[key] as Schema | undefined;
      const kept = property
        ? walk(property, inner, path ? `${path}.${key}` : key, `${shown}.${key}`, unset)
        : inner;
      if (kept !== undefined) out[key] = kept;
      else if (inner !== undefined && schema.required?.includes(key)) {
        // Without it the object is not one: it goes, and the note names it for its field.
        const dropped = unset.splice(before);
        const cause = dropped.find((u) => u.field === `${shown}.${key}`) ?? dropped[0];
        if (cause) unset.push({ ...cause, field: shown, because: key });
        return undefined;
      }
    }
    return out;
  }
  return given;
}

/**
 * `status` as written: its text fields printable, every other string kept exactly as given or
 * left unset (see the module comment), with the fields left unset.
 */
export function keepPrintable(status: DeploymentResourceStatus): SinkResult {
  const unset: UnsetField[] = [];
  const written = walk(DeploymentResourceStatusSchema as Schema, status, "", "status", unset);
  return { status: (written ?? {}) as DeploymentResourceStatus, unset };
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
