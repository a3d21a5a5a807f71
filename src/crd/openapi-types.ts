/**
 * TypeBox builders for the two OpenAPI shapes of the CRD that plain TypeBox spells differently:
 * a string enum (TypeBox: a union of literals, rendered as `enum` by `render.ts`), and an object
 * kept exactly as given (`x-kubernetes-preserve-unknown-fields`).
 */
import { type TLiteral, type TUnion, Type } from "@sinclair/typebox";

/** A string restricted to `values`, typed as their union; rendered as an OpenAPI `enum`. */
export const StringEnum = <const T extends readonly string[]>(values: T, options: Record<string, unknown>) =>
  Type.Union(
    values.map((v) => Type.Literal(v)),
    options,
  ) as unknown as TUnion<{ [K in keyof T]: TLiteral<T[K]> }[number][]>;

/** An object kept exactly as given (the CRD preserves its unknown fields). */
export const PreservedObject = (description: string) =>
  Type.Record(Type.String(), Type.Unknown(), { description, "x-kubernetes-preserve-unknown-fields": true });
