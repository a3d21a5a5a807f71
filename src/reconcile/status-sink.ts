/**
 * The status sink: every string of a Deployment resource's status passes here before it is
 * written, by the treatment its field declares (`status-fields.ts`, which says what each does):
 * text for people printable, a value tools compare kept exactly as given or left unset, and the
 * `Synced` condition's message saying which (`unsetNote`). Pure.
 *
 * The fields are found by walking the status schema (`crd/status-schema.ts`) with the status, so
 * a field added there passes here too (as a value until it declares otherwise). The connections'
 * status passes the same walk with its own table ({@link statusSink}, `connection/status.ts`).
 */
import type { TSchema } from "@sinclair/typebox";
import { printableLine, unprintableIn } from "../api/printable.ts";
import type { Condition, DeploymentResourceStatus } from "../crd/schema.ts";
import { DeploymentResourceStatusSchema } from "../crd/status-schema.ts";
import { compile, type Declared, type Node, STATUS_STRINGS, type UnsetField } from "./status-fields.ts";

/** A status as the sink writes it, and the fields it left unset. */
export interface SinkResult<S> {
  status: S;
  unset: UnsetField[];
}

/** Printable ASCII, most of a status: nothing of the rule, checked in one quick pass. */
const PLAIN = /^[ -~]*$/;

/** What {@link walk} answers for a value left unset. */
const UNSET = Symbol("unset");

/** Where a walk is (keys and list indexes), as the note writes it: `status.revisionHistory[2].id`. */
function shownOf(trail: readonly (string | number)[]): string {
  return trail.reduce<string>(
    (at, part) => (typeof part === "number" ? `${at}[${part}]` : `${at}.${part}`),
    "status",
  );
}

/**
 * `given` walked with its compiled schema: itself when nothing in it changes (most statuses:
 * nothing is copied), a copy with text escaped and values left unset, or {@link UNSET} when it is
 * left unset (a value holding a character of the rule, or an object missing a required field
 * for that reason).
 */
function walk(node: Node, given: unknown, trail: (string | number)[], unset: UnsetField[]): unknown {
  switch (node.kind) {
    case "string": {
      if (typeof given !== "string" || PLAIN.test(given)) return given;
      const character = unprintableIn(given);
      if (character === undefined) return given;
      if (node.declared.treatment === "text") return printableLine(given);
      unset.push({ field: shownOf(trail), from: node.declared.from, character });
      return UNSET;
    }
    case "list": {
      if (!Array.isArray(given)) return given;
      let out: unknown[] | undefined;
      given.forEach((item: unknown, i) => {
        trail.push(i);
        const kept = walk(node.items, item, trail, unset);
        trail.pop();
        if (kept !== item) out ??= given.slice(0, i);
        if (out !== undefined && kept !== UNSET) out.push(kept);
      });
      return out ?? given;
    }
    case "object": {
      if (given === null || typeof given !== "object" || Array.isArray(given)) return given;
      const record = given as Record<string, unknown>;
      let out: Record<string, unknown> | undefined;
      const before = unset.length;
      for (const key of Object.keys(record)) {
        const field = node.fields.get(key);
        const inner = record[key];
        if (field === undefined || inner === undefined) continue;
        trail.push(key);
        const kept = walk(field, inner, trail, unset);
        trail.pop();
        if (kept === inner) continue;
        if (kept === UNSET && node.required.has(key)) {
          // Without it the object is not one: it goes, and the note names it for its field.
          const shown = shownOf(trail);
          const dropped = unset.splice(before);
          const cause = dropped.find((u) => u.field === `${shown}.${key}`) ?? dropped[0];
          if (cause) unset.push({ ...cause, field: shown, because: key });
          return UNSET;
        }
        out ??= { ...record };
        if (kept === UNSET) delete out[key];
        else out[key] = kept;
      }
      return out ?? given;
    }
    case "other":
      return given;
  }
}

/** The sink of one kind's status: its schema walked with its table of declared treatments. */
export interface StatusSink<S extends object> {
  /**
   * `status` as written: its text fields printable, every other string kept exactly as given or
   * left unset (see the module comment), with the fields left unset. The same object when nothing
   * changes.
   */
  keepPrintable(status: S): SinkResult<S>;
  /**
   * `conditions` as {@link StatusSink.keepPrintable} writes them within a status: for conditions
   * set after the rest of the status passed (their messages are printable already; one kept from
   * before is checked).
   */
  keepPrintableConditions(conditions: Condition[]): Condition[];
}

/** The sink of the status `schema` describes, each string field treated as `declarations` says. */
export function statusSink<S extends object>(
  schema: TSchema,
  declarations: Readonly<Record<string, Declared>>,
): StatusSink<S> {
  const root = compile(schema, declarations);
  const conditionsNode = root.kind === "object" ? root.fields.get("conditions") : undefined;
  return {
    keepPrintable: (status) => {
      const unset: UnsetField[] = [];
      const written = walk(root, status, [], unset);
      return { status: (written === UNSET ? {} : written) as S, unset };
    },
    keepPrintableConditions: (conditions) => {
      if (conditionsNode === undefined) return conditions;
      const written = walk(conditionsNode, conditions, ["conditions"], []);
      return written === UNSET ? [] : (written as Condition[]);
    },
  };
}

const DEPLOYMENT_SINK = statusSink<DeploymentResourceStatus>(DeploymentResourceStatusSchema, STATUS_STRINGS);

/** The Deployment resource's status as written (see {@link StatusSink.keepPrintable}). */
export function keepPrintable(status: DeploymentResourceStatus): SinkResult<DeploymentResourceStatus> {
  return DEPLOYMENT_SINK.keepPrintable(status);
}

/** The Deployment resource's conditions as written (see {@link StatusSink.keepPrintableConditions}). */
export function keepPrintableConditions(conditions: Condition[]): Condition[] {
  return DEPLOYMENT_SINK.keepPrintableConditions(conditions);
}
