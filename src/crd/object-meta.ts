/**
 * The object metadata every resource of the operator reads; the CRDs leave `metadata` to the API
 * server, so this schema only types it. With it, the longest object name a resource's spec may
 * give.
 */
import { Type } from "@sinclair/typebox";

/**
 * Longest name we accept for a deployment, and for the objects a resource names (Secrets and their
 * keys, its connection, its ConfigMap): bounded so the CEL immutability rule stays cheap.
 */
export const MAX_NAME_LENGTH = 253;

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
