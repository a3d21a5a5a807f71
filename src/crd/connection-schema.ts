/**
 * The connection resources (`serviceconnections.dms.dev`, `clusterserviceconnections.dms.dev`):
 * how the operator reaches one tenant of the service, with its own key, rate limit and listing.
 * Written once, like the Deployment's schema: `render.ts` turns these TypeBox schemas into CRDs
 * and `Static<>` into the types the connection controller uses.
 */
import { type Static, type TSchema, Type } from "@sinclair/typebox";
// For its side effect too: it registers TypeBox's `uuid` format (spec.tenantId), without which
// checking a connection against these schemas fails with "Unknown format".
import "../api/wire.ts";
import {
  BASE_URL_RULES,
  CA_BUNDLE_RULES,
  HEADER_NAME_PATTERN,
  refusedHeaderRule,
} from "./connection-rules.ts";
import { NamespaceSelectorSchema } from "./namespace-selector-schema.ts";
import { ObjectMetaSchema } from "./object-meta.ts";
import { StringEnum } from "./openapi-types.ts";
import { rolloutWindowsSchema } from "./rollout-windows-schema.ts";
import { conditionsSchema, ObservedGenerationSchema, statusFieldsOf } from "./status-schema.ts";

/** Kind of the namespaced connection: usable by the Deployment resources of its own namespace. */
export const SERVICE_CONNECTION_KIND = "ServiceConnection";
/** Kind of the cluster-scoped connection: usable from every namespace. */
export const CLUSTER_SERVICE_CONNECTION_KIND = "ClusterServiceConnection";
/** The kinds `spec.connectionRef.kind` of a Deployment may name. */
export const CONNECTION_KINDS = [SERVICE_CONNECTION_KIND, CLUSTER_SERVICE_CONNECTION_KIND] as const;
export type ConnectionKind = (typeof CONNECTION_KINDS)[number];

/**
 * `spec.rolloutWindowsPolicy`: whether the Deployment resources using a connection may lift its
 * rollout windows (`Advisory`, the default: a resource's own list replaces them, and
 * `dms.dev/rollout-now` lets a held change out) or not (`Binding`: a resource's own windows only
 * narrow them, and `dms.dev/rollout-now` does not lift them; an edit of the connection does).
 */
export const ROLLOUT_WINDOWS_POLICIES = ["Advisory", "Binding"] as const;
export type RolloutWindowsPolicy = (typeof ROLLOUT_WINDOWS_POLICIES)[number];
export const DEFAULT_ROLLOUT_WINDOWS_POLICY: RolloutWindowsPolicy = "Advisory";

/** Plural resource names (URL path segments). */
export const SERVICE_CONNECTION_PLURAL = "serviceconnections";
export const CLUSTER_SERVICE_CONNECTION_PLURAL = "clusterserviceconnections";

/**
 * Finalizer every connection carries: deleting a connection still used by Deployment resources is
 * held until none uses it (they may still need it to clean up their deployments).
 */
export const CONNECTION_FINALIZER = "dms.dev/connection-in-use";

/** Longest name or key a reference may carry (a Kubernetes object name). */
const MAX_NAME = 253;
/** Longest base URL: what browsers and most proxies accept in a request line. */
export const MAX_BASE_URL_LENGTH = 2048;
/** Longest header name: far above any real one, far below what a proxy refuses. */
export const MAX_HEADER_NAME_LENGTH = 256;

const secretRefFields = {
  name: Type.String({ minLength: 1, maxLength: MAX_NAME, description: "Name of the Secret." }),
  key: Type.String({
    minLength: 1,
    maxLength: MAX_NAME,
    pattern: "^[-._a-zA-Z0-9]+$",
    description: "Key in that Secret's data holding the API key.",
  }),
};

/** Longest `spec.caBundle` (characters; PEM is ASCII, so bytes too): `MAX_CA_BUNDLE_BYTES`. */
export const MAX_CA_BUNDLE_LENGTH = 65_536;

/** Key of `spec.caSecretRef` when it names none: the key cert-manager and most tools write. */
export const DEFAULT_CA_SECRET_KEY = "ca.crt";

const caSecretRefFields = {
  name: Type.String({ minLength: 1, maxLength: MAX_NAME, description: "Name of the Secret." }),
  key: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: MAX_NAME,
      pattern: "^[-._a-zA-Z0-9]+$",
      default: DEFAULT_CA_SECRET_KEY,
      description: `Key in that Secret's data holding the PEM certificates. Default ${DEFAULT_CA_SECRET_KEY} (as cert-manager writes it).`,
    }),
  ),
};

const CA_SECRET_REF_DESCRIPTION =
  "A Secret key holding the PEM certificates of the CA that signs the service's certificate, trusted besides the system's CAs (a private CA of a self-hosted service). A change of the Secret reaches the connection. Not with caBundle or insecureSkipTLSVerify.";

const specFields = <R extends TSchema, C extends TSchema>(secretRef: R, caSecretRef: C) => ({
  baseUrl: Type.String({
    minLength: 1,
    maxLength: MAX_BASE_URL_LENGTH,
    pattern: "^https?://[^\\s/?#]+([/?#]\\S*)?$",
    description:
      "Base URL of the service, such as https://api.example.com (http or https, at most 2048 characters). The API paths are appended to it, so it has no query (?), fragment (#) or user-info (user:password@). Never a link-local address or a cloud metadata service (169.254.169.254, fe80::/10, metadata.google.internal, …), whether written here or resolved when connecting; an IPv4 address is written as four decimal numbers.",
    "x-kubernetes-validations": [
      {
        // The pattern is the shape TypeBox checks too; the URL library also parses the host and port.
        rule: "isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",
        message: "spec.baseUrl must be an http or https URL with a host, such as https://api.example.com",
        reason: "FieldValueInvalid",
      },
      ...BASE_URL_RULES,
    ],
  }),
  apiKeySecretRef: secretRef,
  tenantId: Type.Optional(
    Type.String({
      format: "uuid",
      maxLength: 36,
      description: "Tenant to act as, sent in tenantIdHeader. Left out: the key's own tenant.",
    }),
  ),
  apiKeyHeader: Type.Optional(
    Type.String({
      maxLength: MAX_HEADER_NAME_LENGTH,
      pattern: HEADER_NAME_PATTERN,
      description:
        "Header carrying the API key. Default: the operator's (--api-key-header, X-Api-Key). Not a header that frames, routes or proxies the request, that the HTTP client sets, or that a cloud metadata service requires (Host, Content-Length, Transfer-Encoding, Connection, Cookie, Metadata-Flavor, Metadata, X-aws-ec2-metadata-token, …: see docs/crd-validation.md).",
      "x-kubernetes-validations": [refusedHeaderRule("apiKeyHeader")],
    }),
  ),
  tenantIdHeader: Type.Optional(
    Type.String({
      maxLength: MAX_HEADER_NAME_LENGTH,
      pattern: HEADER_NAME_PATTERN,
      description:
        "Header carrying the tenant id. Default: the operator's (--tenant-header, X-Tenant-Id). Not a header that frames, routes or proxies the request or that the HTTP client sets (Host, Content-Length, Transfer-Encoding, Connection, Cookie, …: see docs/crd-validation.md).",
      "x-kubernetes-validations": [refusedHeaderRule("tenantIdHeader")],
    }),
  ),
  qps: Type.Optional(
    Type.Number({
      minimum: 0.001,
      maximum: 100_000,
      description: "Most requests per second to this service, sustained. Default: the operator's --qps.",
      "x-kubernetes-validations": [
        {
          // The API server compares a whole-number value with the minimum truncated to an
          // integer, so `minimum` alone lets qps: 0 (no request ever) through.
          rule: "self >= 0.001",
          message:
            "spec.qps must be at least 0.001 requests per second: leave it out to use the operator's --qps",
          reason: "FieldValueInvalid",
        },
      ],
    }),
  ),
  burst: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: 100_000,
      description: "Most requests in one burst. Default: the operator's --burst.",
    }),
  ),
  insecureSkipTLSVerify: Type.Optional(
    Type.Boolean({
      default: false,
      description:
        "Skip verifying the service's TLS certificate (a test service only: the key can then be read by anyone in the path). A Warning event says so.",
    }),
  ),
  caBundle: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: MAX_CA_BUNDLE_LENGTH,
      description:
        "PEM certificates (-----BEGIN CERTIFICATE----- …) of the CA that signs the service's certificate, trusted besides the system's CAs: a private CA of a self-hosted service, while public services keep working. At most 64 KiB; no private key. Not with caSecretRef or insecureSkipTLSVerify.",
      "x-kubernetes-validations": CA_BUNDLE_RULES,
    }),
  ),
  caSecretRef: Type.Optional(caSecretRef),
  rolloutWindows: Type.Optional(
    rolloutWindowsSchema(
      "Rollout windows of the Deployment resources using this connection: a change that makes a new revision rolls out only when they allow it. Under spec.rolloutWindowsPolicy Advisory (the default) they are the default of the resources that set no spec.rolloutWindows of their own (a Deployment's own list, even empty, replaces this one); under Binding they hold every resource using the connection, whatever it sets.",
    ),
  ),
  rolloutWindowsPolicy: Type.Optional(
    StringEnum(ROLLOUT_WINDOWS_POLICIES, {
      default: DEFAULT_ROLLOUT_WINDOWS_POLICY,
      description:
        "Whether the Deployment resources using this connection may lift its spec.rolloutWindows. Advisory (default): they are a default; a Deployment's own spec.rolloutWindows replaces them (an empty list: roll out any time) and the annotation dms.dev/rollout-now (kubectl dms rollout-now) lets a held change out. Binding: they hold every Deployment using this connection: its own spec.rolloutWindows only narrow them (a change goes out when both allow it; an empty list lifts nothing) and dms.dev/rollout-now lifts only its own; only an edit of this connection lifts them (its spec.rolloutWindows, or this field back to Advisory), so only who may edit the connection can: for a ClusterServiceConnection, cluster admins (a team's roles do not write ClusterServiceConnections).",
    }),
  ),
});

/**
 * Rules of both kinds' spec. The tenant a connection names cannot change: the Deployment resources
 * using it live on that tenant, and pointing them at another would re-home them silently (as a
 * changed `connectionRef` would; see the Deployment's schema).
 */
const CONNECTION_SPEC_RULES = [
  {
    rule: "!(has(self.caBundle) && has(self.caSecretRef))",
    message:
      "spec.caBundle and spec.caSecretRef: give one of them, the CA's certificates inline or the Secret holding them",
    reason: "FieldValueForbidden",
  },
  {
    rule: "!((has(self.caBundle) || has(self.caSecretRef)) && has(self.insecureSkipTLSVerify) && self.insecureSkipTLSVerify)",
    message:
      "spec.insecureSkipTLSVerify: not with spec.caBundle or spec.caSecretRef: a CA is given to verify the service's certificate, and skipping verification would ignore it; set insecureSkipTLSVerify to false (or remove the CA, for a test service only)",
    fieldPath: ".insecureSkipTLSVerify",
    reason: "FieldValueForbidden",
  },
  {
    rule: "has(self.tenantId) == has(oldSelf.tenantId) && (!has(self.tenantId) || self.tenantId == oldSelf.tenantId)",
    message:
      "spec.tenantId is immutable, adding or removing it included: the Deployment resources using this connection live on that tenant; create another connection for another tenant",
    fieldPath: ".tenantId",
    reason: "FieldValueForbidden",
  },
];

/** `spec` of a ServiceConnection: the Secret is read from the connection's own namespace. */
export const ServiceConnectionSpecSchema = Type.Object(
  specFields(
    Type.Object(secretRefFields, {
      description: "The Secret key holding the API key, in this connection's own namespace.",
    }),
    Type.Object(caSecretRefFields, {
      description: `${CA_SECRET_REF_DESCRIPTION} The Secret is in this connection's own namespace.`,
    }),
  ),
  {
    description: "How to reach one tenant of the Deployment Management Service.",
    "x-kubernetes-validations": CONNECTION_SPEC_RULES,
  },
);

/** `spec` of a ClusterServiceConnection: the Secret's namespace is named. */
export const ClusterServiceConnectionSpecSchema = Type.Object(
  {
    ...specFields(
      Type.Object(
        {
          ...secretRefFields,
          namespace: Type.String({
            minLength: 1,
            maxLength: 63,
            pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            description: "Namespace of the Secret (a cluster-scoped connection has none of its own).",
          }),
        },
        { description: "The Secret key holding the API key." },
      ),
      Type.Object(
        {
          ...caSecretRefFields,
          namespace: Type.String({
            minLength: 1,
            maxLength: 63,
            pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            description: "Namespace of the Secret (a cluster-scoped connection has none of its own).",
          }),
        },
        { description: CA_SECRET_REF_DESCRIPTION },
      ),
    ),
    namespaceSelector: Type.Optional(NamespaceSelectorSchema),
  },
  {
    description: "How to reach one tenant of the Deployment Management Service, from every namespace.",
    "x-kubernetes-validations": CONNECTION_SPEC_RULES,
  },
);

export type ServiceConnectionSpec = Static<typeof ServiceConnectionSpecSchema>;
export type ClusterServiceConnectionSpec = Static<typeof ClusterServiceConnectionSpecSchema>;
/** The spec of either kind: the cluster kind's Secret reference names its namespace. */
export type ConnectionSpec = ServiceConnectionSpec & {
  apiKeySecretRef: ServiceConnectionSpec["apiKeySecretRef"] & { namespace?: string };
  caSecretRef?: NonNullable<ServiceConnectionSpec["caSecretRef"]> & { namespace?: string };
  namespaceSelector?: ClusterServiceConnectionSpec["namespaceSelector"];
};

/** `status` of either connection kind, written by the operator only. */
export const ConnectionStatusSchema = Type.Object(
  {
    observedGeneration: ObservedGenerationSchema,
    conditions: conditionsSchema(
      8,
      "Ready (reasons Connected, Unauthorized, Unreachable, AddressNotAllowed, CertificateNotTrusted, SecretMissing, SecretUnreadable, InvalidCABundle, TooManyConnections), Reconciling or Stalled when they apply (kstatus conventions), and OpenToAllNamespaces (reason NoNamespaceSelector) on a ClusterServiceConnection without spec.namespaceSelector: it serves every namespace.",
    ),
    providers: Type.Optional(
      Type.Integer({
        minimum: 0,
        description:
          "How many OAuth providers the service listed at the last probe (GET /v2/auth/providers).",
      }),
    ),
    lastProbeTime: Type.Optional(
      Type.String({ format: "date-time", description: "When the credentials were last probed." }),
    ),
    deployments: Type.Optional(
      Type.Integer({ minimum: 0, description: "How many Deployment resources use this connection." }),
    ),
    refused: Type.Optional(
      Type.Integer({
        minimum: 0,
        description:
          "How many Deployment resources name this connection from a namespace its spec.namespaceSelector does not select (refused: reason ConnectionNotAllowed).",
      }),
    ),
  },
  { description: "Whether the operator can reach the service with this connection." },
);
export type ConnectionStatus = Static<typeof ConnectionStatusSchema>;
/**
 * The top-level status fields of either connection kind this version knows; a status write keeps
 * any other as read (see `statusFieldsOf`).
 */
export const CONNECTION_STATUS_FIELDS = statusFieldsOf(ConnectionStatusSchema);

const resourceSchema = <S extends TSchema>(kind: string, spec: S, description: string) =>
  Type.Object(
    {
      apiVersion: Type.Optional(Type.String({ description: "dms.dev/v1alpha1." })),
      kind: Type.Optional(Type.String({ description: `${kind}.` })),
      metadata: Type.Optional(ObjectMetaSchema),
      spec,
      status: Type.Optional(ConnectionStatusSchema),
    },
    { description },
  );

/** A whole ServiceConnection object. */
export const ServiceConnectionSchema = resourceSchema(
  SERVICE_CONNECTION_KIND,
  ServiceConnectionSpecSchema,
  "A connection to one tenant of the Deployment Management Service, for the Deployment resources of its namespace (spec.connectionRef).",
);
/** A whole ClusterServiceConnection object. */
export const ClusterServiceConnectionSchema = resourceSchema(
  CLUSTER_SERVICE_CONNECTION_KIND,
  ClusterServiceConnectionSpecSchema,
  "A connection to one tenant of the Deployment Management Service, for the Deployment resources of every namespace (spec.connectionRef).",
);
