/**
 * `spec.namespaceSelector` of a ClusterServiceConnection as its CRD schema: a standard
 * `metav1.LabelSelector`, with the bounds and CEL rules the API server checks at admission (the
 * selector's reading and matching are in label-selector.ts). Part of connection-schema.ts's
 * resources, from which `render.ts` makes the CRD.
 */
import { Type } from "@sinclair/typebox";
import {
  LABEL_NAME_PATTERN,
  LABEL_PREFIX_PATTERN,
  MAX_LABEL_KEY_LENGTH,
  MAX_LABEL_PREFIX_LENGTH,
  MAX_LABEL_VALUE_LENGTH,
  SELECTOR_OPERATORS,
} from "./label-selector.ts";
import { StringEnum } from "./openapi-types.ts";

/** Most `matchLabels` entries and `matchExpressions` of a namespace selector, and values of one. */
const MAX_SELECTOR_LABELS = 32;
const MAX_SELECTOR_EXPRESSIONS = 32;
const MAX_SELECTOR_VALUES = 64;

/** A label key as CEL checks it: `[prefix/]name`, the name at most 63 characters (the pattern). */
const LABEL_KEY_REGEX = `^(${LABEL_PREFIX_PATTERN.slice(1, -1)}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`;
/** The prefix of a label key is at most 253 characters (the regex cannot count it). */
const labelKeyRule = (key: string) =>
  `${key}.matches('${LABEL_KEY_REGEX.replaceAll("\\", "\\\\")}') && (!${key}.contains('/') || ${key}.matches('^[^/]{1,${MAX_LABEL_PREFIX_LENGTH}}/'))`;
const LABEL_KEY_MESSAGE = `a label key is [prefix/]name: the prefix a DNS subdomain of at most ${MAX_LABEL_PREFIX_LENGTH} characters, the name at most 63 alphanumerics, "-", "_" or "." beginning and ending with an alphanumeric`;
const labelValue = (description: string) =>
  Type.String({
    maxLength: MAX_LABEL_VALUE_LENGTH,
    pattern: `^(${LABEL_NAME_PATTERN.slice(1, -1)})?$`,
    description,
  });

/**
 * `spec.namespaceSelector` of a ClusterServiceConnection: a standard `metav1.LabelSelector`,
 * bounded like the API server bounds labels (a key at most 317 characters, a value at most 63).
 */
export const NamespaceSelectorSchema = Type.Object(
  {
    matchLabels: Type.Optional(
      Type.Record(Type.String(), labelValue("The label's value."), {
        maxProperties: MAX_SELECTOR_LABELS,
        description: "Labels the namespace must have, each with exactly this value.",
        "x-kubernetes-validations": [
          // The length first, alone: the rule the CRD size check reads a map's key bound from.
          {
            rule: `self.all(k, k.size() <= ${MAX_LABEL_KEY_LENGTH})`,
            message: `spec.namespaceSelector.matchLabels: a label key is at most ${MAX_LABEL_KEY_LENGTH} characters`,
            reason: "FieldValueInvalid",
          },
          {
            rule: `self.all(k, ${labelKeyRule("k")})`,
            message: `spec.namespaceSelector.matchLabels: ${LABEL_KEY_MESSAGE}`,
            reason: "FieldValueInvalid",
          },
        ],
      }),
    ),
    matchExpressions: Type.Optional(
      Type.Array(
        Type.Object(
          {
            key: Type.String({
              minLength: 1,
              maxLength: MAX_LABEL_KEY_LENGTH,
              description: "The label key the requirement is about.",
              "x-kubernetes-validations": [
                {
                  rule: labelKeyRule("self"),
                  message: `spec.namespaceSelector.matchExpressions[].key: ${LABEL_KEY_MESSAGE}`,
                  reason: "FieldValueInvalid",
                },
              ],
            }),
            operator: StringEnum(SELECTOR_OPERATORS, {
              description:
                "In, NotIn (the label's value is, or is not, one of values), Exists, DoesNotExist.",
            }),
            values: Type.Optional(
              Type.Array(labelValue("A label value."), {
                maxItems: MAX_SELECTOR_VALUES,
                description: "The values of In and NotIn (at least one); empty for Exists and DoesNotExist.",
              }),
            ),
          },
          {
            description: "A requirement on one label of the namespace.",
            "x-kubernetes-validations": [
              {
                rule: "self.operator in ['In', 'NotIn'] ? has(self.values) && size(self.values) > 0 : !has(self.values) || size(self.values) == 0",
                message:
                  "spec.namespaceSelector.matchExpressions[].values: In and NotIn need at least one value; Exists and DoesNotExist take none",
                fieldPath: ".values",
                reason: "FieldValueInvalid",
              },
            ],
          },
        ),
        {
          maxItems: MAX_SELECTOR_EXPRESSIONS,
          description: "Requirements on the namespace's labels; all must hold.",
        },
      ),
    ),
  },
  {
    description:
      "The namespaces whose Deployment resources may use this connection, by their labels (a standard label selector: matchLabels and matchExpressions, all of which must hold). Left out: every namespace. A Deployment in a namespace it does not select is refused (Synced=False, reason ConnectionNotAllowed) and makes no service call. {} selects every namespace.",
  },
);
