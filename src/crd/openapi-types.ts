/**
 * TypeBox builders for the OpenAPI shapes of the CRD that plain TypeBox spells differently or
 * that need more than one keyword: a string enum (TypeBox: a union of literals, rendered as `enum`
 * by `render.ts`), an object kept exactly as given (`x-kubernetes-preserve-unknown-fields`), and a
 * map bounded in entries, key length and values.
 */
import { type TLiteral, type TSchema, type TUnion, Type } from "@sinclair/typebox";

/** A string restricted to `values`, typed as their union; rendered as an OpenAPI `enum`. */
export const StringEnum = <const T extends readonly string[]>(values: T, options: Record<string, unknown>) =>
  Type.Union(
    values.map((v) => Type.Literal(v)),
    options,
  ) as unknown as TUnion<{ [K in keyof T]: TLiteral<T[K]> }[number][]>;

/**
 * An object kept exactly as given (the CRD preserves its unknown fields), of at most
 * `maxProperties` fields: its own fields are counted, what they hold is not (no OpenAPI keyword
 * bounds a subtree of unknown shape).
 */
export const PreservedObject = (description: string, maxProperties: number) =>
  Type.Record(Type.String(), Type.Unknown(), {
    description,
    maxProperties,
    "x-kubernetes-preserve-unknown-fields": true,
  });

/**
 * The CEL rule bounding the keys of a map: OpenAPI bounds a map's values and its number of
 * entries, not its keys. `crd-size.test.ts` reads the bound back from this exact form.
 */
export const mapKeyRule = (path: string, maxKeyLength: number) => ({
  rule: `self.all(k, k.size() <= ${maxKeyLength})`,
  message: `${path}: a key is longer than ${maxKeyLength} characters: shorten it`,
  reason: "FieldValueInvalid",
});

/** Options of {@link BoundedMap}. */
export interface BoundedMapOptions {
  /** The map's path, for the key rule's message (`spec.sourceConfig.resourceSpec.labels`). */
  path: string;
  description: string;
  maxProperties: number;
  maxKeyLength: number;
}

/**
 * A map of string keys to `value`: at most `maxProperties` entries, each key at most
 * `maxKeyLength` characters (a CEL rule in the CRD; a key pattern for TypeBox's own checks).
 */
export const BoundedMap = <V extends TSchema>(value: V, o: BoundedMapOptions) =>
  Type.Record(Type.String({ pattern: `^[\\s\\S]{0,${o.maxKeyLength}}$` }), value, {
    description: o.description,
    maxProperties: o.maxProperties,
    additionalProperties: false,
    "x-kubernetes-validations": [mapKeyRule(o.path, o.maxKeyLength)],
  });
