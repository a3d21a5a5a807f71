/**
 * The Deployment resource's secrets (part of `schema.ts`): `spec.secrets`, each a literal value
 * or a key of a Secret in the resource's namespace, and `spec.secretReferences`, the Secrets the
 * deployment's runtime reads itself, with their bounds.
 */
import { Type } from "@sinclair/typebox";
import { MAX_NAME_LENGTH } from "./object-meta.ts";

/**
 * Most secrets (and secret references) one resource may list: bounds the cost of their CEL rules
 * and, with the other bounds, the size of the resource (see `test/unit/crd-size.test.ts`).
 */
export const MAX_SECRETS = 256;
/** Most Secret references one resource may list (each names a Secret and a key of its own). */
export const MAX_SECRET_REFERENCES = 64;
/**
 * Longest secret name: the name the deployment sees, an environment variable's (128, as in a
 * container's `env`).
 */
export const MAX_SECRET_NAME_LENGTH = 128;
/** Longest literal secret value: a longer one belongs in a Kubernetes Secret (valueFrom). */
export const MAX_SECRET_VALUE_LENGTH = 512;

/** An item of `spec.secrets`. */
export const SpecSecretSchema = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: MAX_SECRET_NAME_LENGTH,
      description: "Name of the secret (case kept), at most 128 characters.",
    }),
    value: Type.Optional(
      Type.String({
        maxLength: MAX_SECRET_VALUE_LENGTH,
        description:
          "Literal value, at most 512 characters. Prefer valueFrom: this one is stored in the resource.",
      }),
    ),
    valueFrom: Type.Optional(
      Type.Object(
        {
          secretKeyRef: Type.Object(
            {
              name: Type.String({
                minLength: 1,
                maxLength: MAX_NAME_LENGTH,
                description: "Name of a Secret in the resource's own namespace.",
              }),
              key: Type.String({
                minLength: 1,
                maxLength: MAX_NAME_LENGTH,
                pattern: "^[-._a-zA-Z0-9]+$",
                description: "Key in that Secret's data.",
              }),
            },
            { description: "A key of a Kubernetes Secret in the resource's own namespace (never another)." },
          ),
        },
        { description: "Where the value comes from." },
      ),
    ),
  },
  {
    description: "A secret of the deployment: a name and exactly one of value or valueFrom.",
    "x-kubernetes-validations": [
      {
        rule: "has(self.value) != has(self.valueFrom)",
        message: "spec.secrets[]: set exactly one of value or valueFrom.secretKeyRef",
        reason: "FieldValueInvalid",
      },
    ],
  },
);

/** An item of `spec.secretReferences`. */
export const SpecSecretReferenceSchema = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: MAX_SECRET_NAME_LENGTH,
      description: "Name the deployment sees, at most 128 characters.",
    }),
    secretName: Type.String({
      minLength: 1,
      maxLength: MAX_NAME_LENGTH,
      description: "Kubernetes Secret name.",
    }),
    secretKey: Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH, description: "Key in that Secret." }),
  },
  { description: "A Kubernetes Secret the deployment's runtime reads itself (source external_docker only)." },
);
