/**
 * The object metadata every resource of the operator reads; the CRDs leave `metadata` to the API
 * server, so this schema only types it.
 */
import { Type } from "@sinclair/typebox";

/** The object metadata the operator reads. */
export const ObjectMetaSchema = Type.Object(
  {
    name: Type.Optional(Type.String()),
    namespace: Type.Optional(Type.String()),
    uid: Type.Optional(Type.String()),
    resourceVersion: Type.Optional(Type.String()),
    generation: Type.Optional(Type.Integer()),
    creationTimestamp: Type.Optional(Type.String()),
    deletionTimestamp: Type.Optional(Type.String()),
    labels: Type.Optional(Type.Record(Type.String(), Type.String())),
    annotations: Type.Optional(Type.Record(Type.String(), Type.String())),
    finalizers: Type.Optional(Type.Array(Type.String())),
  },
  { description: "Standard object metadata." },
);
