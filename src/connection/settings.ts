/**
 * The service settings a connection's spec and Secret make (how connections are named and keyed
 * is `crd/conventions.ts`). Pure: the connection controller and the
 * `plan`/`import` commands share it.
 */
import { parseCaBundle } from "../api/tls.ts";
import type { ServiceConfig } from "../config.ts";
import { baseUrlProblems, headerNameProblem } from "../crd/connection-rules.ts";
import {
  CLUSTER_SERVICE_CONNECTION_KIND,
  type ConnectionKind,
  type ConnectionSpec,
  DEFAULT_CA_SECRET_KEY,
  SERVICE_CONNECTION_KIND,
} from "../crd/connection-schema.ts";
import { type ConnectionId, type ConnectionRef, describeConnection } from "../crd/conventions.ts";
import type { SecretRead } from "../reconcile/ports.ts";
import type { InheritedWindows } from "../reconcile/rollout-gate.ts";
import type { ObjectRef } from "../runtime/queue-records.ts";

/**
 * A connection's `spec.rolloutWindows` as its resources inherit them, binding under
 * `spec.rolloutWindowsPolicy: Binding` (with who may lift them: who may edit the connection);
 * undefined when it sets none. What the controller and `plan` read alike.
 */
export function connectionWindows(
  id: ConnectionId,
  spec: Pick<ConnectionSpec, "rolloutWindows" | "rolloutWindowsPolicy">,
): InheritedWindows | undefined {
  const windows = spec.rolloutWindows;
  if (!windows) return undefined;
  const from = describeConnection(id);
  if (spec.rolloutWindowsPolicy !== "Binding") return { windows, from };
  const liftedBy =
    id.kind === CLUSTER_SERVICE_CONNECTION_KIND
      ? "cluster admins (a team's roles do not write ClusterServiceConnections)"
      : `whoever may edit ServiceConnections in namespace ${id.namespace}`;
  return { windows, from, binding: { liftedBy } };
}

/** Where a connection's API key is: its own namespace for the namespaced kind. */
export function apiKeySecretOf(id: ConnectionId, spec: ConnectionSpec): ObjectRef & { key: string } {
  const namespace =
    id.kind === CLUSTER_SERVICE_CONNECTION_KIND ? (spec.apiKeySecretRef.namespace ?? "") : id.namespace;
  return { namespace, name: spec.apiKeySecretRef.name, key: spec.apiKeySecretRef.key };
}

/**
 * Where a connection's CA certificates are (`spec.caSecretRef`, its key defaulted to `ca.crt`):
 * its own namespace for the namespaced kind. Undefined when it names none.
 */
export function caSecretOf(
  id: ConnectionId,
  spec: Pick<ConnectionSpec, "caSecretRef">,
): (ObjectRef & { key: string }) | undefined {
  const ref = spec.caSecretRef;
  if (!ref) return undefined;
  const namespace = id.kind === CLUSTER_SERVICE_CONNECTION_KIND ? (ref.namespace ?? "") : id.namespace;
  return { namespace, name: ref.name, key: ref.key ?? DEFAULT_CA_SECRET_KEY };
}

/** The Secrets a connection reads: its API key's, and its CA's when it names one. */
export function secretsOf(id: ConnectionId, spec: ConnectionSpec): (ObjectRef & { key: string })[] {
  const ca = caSecretOf(id, spec);
  return ca ? [apiKeySecretOf(id, spec), ca] : [apiKeySecretOf(id, spec)];
}

/**
 * The CA bundle a read of a connection's CA Secret gives, checked as PEM certificates, or what is
 * wrong with the Secret (said after `Secret ns/name (spec.caSecretRef)`), naming the fix.
 */
export function caBundleFrom(
  read: SecretRead,
  secret: ObjectRef & { key: string },
): { ok: true; caBundle: string } | { ok: false; problem: string } {
  if (read.kind === "missing-secret")
    return {
      ok: false,
      problem: `not found: create it with the CA's PEM certificates under key ${secret.key}, e.g. kubectl create secret generic ${secret.name} -n ${secret.namespace} --from-file=${secret.key}=ca.crt`,
    };
  if (read.kind === "missing-key")
    return {
      ok: false,
      problem: `has no key ${secret.key}: add the CA's PEM certificates under that key, or point spec.caSecretRef.key at the key that holds them`,
    };
  const parsed = parseCaBundle(read.value, `key ${secret.key}`);
  if (!parsed.ok) return { ok: false, problem: parsed.problem };
  return { ok: true, caBundle: read.value };
}

/**
 * Longest API key a connection's Secret may hold (characters, ASCII: bytes too). Every call
 * carries it in a header, and each connection's client keeps it: a Secret of up to 1 MiB would
 * cost a tenant's every connection that much memory, and every call a refusal (servers and
 * proxies take 8 to 16 KiB of headers at most). Far above any real key or token.
 */
export const MAX_API_KEY_LENGTH = 8_192;

/**
 * The API key a read of a connection's Secret gives, trimmed (a key written with `echo` ends with
 * a newline, as `--api-key-file`'s may), or what is wrong with the Secret, naming the fix.
 */
export function apiKeyFrom(
  read: SecretRead,
  secret: ObjectRef & { key: string },
): { ok: true; apiKey: string } | { ok: false; problem: string } {
  if (read.kind === "missing-secret")
    return {
      ok: false,
      problem: `not found: create it with the API key under key ${secret.key}, e.g. kubectl create secret generic ${secret.name} -n ${secret.namespace} --from-literal=${secret.key}=<key>`,
    };
  if (read.kind === "missing-key")
    return {
      ok: false,
      problem: `has no key ${secret.key}: add the API key under that key, or point spec.apiKeySecretRef.key at the key that holds it`,
    };
  const apiKey = read.value.trim();
  if (apiKey === "") return { ok: false, problem: `key ${secret.key} is empty: put the API key in it` };
  if (apiKey.length > MAX_API_KEY_LENGTH)
    return {
      ok: false,
      problem: `key ${secret.key} holds ${apiKey.length} characters, more than the ${MAX_API_KEY_LENGTH} an API key may have: put the API key alone in it, not a file or bundle holding it`,
    };
  const bad = unsendableIn(apiKey);
  if (bad)
    return {
      ok: false,
      problem: `key ${secret.key} holds ${bad.what} (character ${bad.at} of ${apiKey.length}), which an HTTP header cannot carry as written: put the API key alone in it, on one line, in printable ASCII (a file saved as UTF-16 holds NULs), e.g. with kubectl create secret generic ${secret.name} -n ${secret.namespace} --from-literal=${secret.key}=<key>`,
    };
  return { ok: true, apiKey };
}

/**
 * The first character of `key` a header value cannot carry as written, and what it is: a line
 * break or another control character (Node refuses to send the header, so every call would fail
 * as if the service were unreachable), or one outside printable ASCII (sent as one Latin-1 byte
 * at best, never the UTF-8 text the Secret holds). Never the character itself: it is the key's.
 */
function unsendableIn(key: string): { what: string; at: number } | undefined {
  const index = key.search(/[^\x20-\x7e]/);
  if (index < 0) return undefined;
  const code = key.charCodeAt(index);
  const what =
    code === 0x0a || code === 0x0d
      ? "a line break"
      : code < 0x20 || code === 0x7f
        ? "a control character"
        : "a character outside printable ASCII";
  return { what, at: index + 1 };
}

/**
 * What the operator refuses to send in a connection's spec, each problem naming the field and the
 * fix; empty when it may be used. The CRD refuses the same, but a connection stored before its
 * rules (or under an older CRD) reaches the operator anyway: its base URL must leave room for the
 * API paths, and its header names must carry a value and nothing more (see `connection-rules.ts`).
 */
export function connectionSpecProblems(
  spec: Pick<
    ConnectionSpec,
    "baseUrl" | "apiKeyHeader" | "tenantIdHeader" | "caBundle" | "caSecretRef" | "insecureSkipTLSVerify"
  >,
): string[] {
  const problems = baseUrlProblems(spec.baseUrl, "the Secret named by spec.apiKeySecretRef").map(
    (p) => `spec.baseUrl ${p}`,
  );
  for (const field of ["apiKeyHeader", "tenantIdHeader"] as const) {
    const name = spec[field];
    const problem = name === undefined ? undefined : headerNameProblem(name);
    if (problem) problems.push(`spec.${field} ${problem}`);
  }
  problems.push(...tlsSpecProblems(spec));
  return problems;
}

/**
 * What is wrong with a connection's TLS fields: a CA given twice, a CA with verification
 * skipped, or a `spec.caBundle` that is not PEM certificates (naming the bad one). The CRD's CEL
 * rules refuse the first two and the shape of the third; only the operator parses certificates.
 */
export function tlsSpecProblems(
  spec: Pick<ConnectionSpec, "caBundle" | "caSecretRef" | "insecureSkipTLSVerify">,
): string[] {
  const problems: string[] = [];
  if (spec.caBundle !== undefined && spec.caSecretRef !== undefined)
    problems.push(
      "spec.caBundle and spec.caSecretRef: give one of them, the CA's certificates inline or the Secret holding them",
    );
  if ((spec.caBundle !== undefined || spec.caSecretRef !== undefined) && spec.insecureSkipTLSVerify)
    problems.push(
      "spec.insecureSkipTLSVerify: not with spec.caBundle or spec.caSecretRef; set it to false to verify the service's certificate with the CA",
    );
  if (spec.caBundle !== undefined) {
    const parsed = parseCaBundle(spec.caBundle, "spec.caBundle");
    if (!parsed.ok) problems.push(parsed.problem);
  }
  return problems;
}

/**
 * The service settings of a connection: its spec and API key over the operator's own settings
 * (`defaults`, from its flags and env), which give what the spec leaves out (headers, QPS, burst,
 * timeouts, the proxy variables). The default connection's tenant, key and CA (`--ca-file`) are
 * never inherited: a connection trusts its own CA (`caBundle`: `spec.caBundle`, or the PEM text
 * read from `spec.caSecretRef`'s Secret) besides the system's, as its TLS setting is its own.
 */
export function serviceConfigOf(
  spec: ConnectionSpec,
  apiKey: string,
  defaults: ServiceConfig,
  caBundle?: string,
): ServiceConfig {
  const { tenantId: _tenant, apiKey: _key, caBundle: _ca, ...inherited } = defaults;
  const ca = caBundle ?? spec.caBundle;
  return {
    ...inherited,
    baseUrl: spec.baseUrl,
    apiKey,
    tenantId: spec.tenantId,
    ...(spec.apiKeyHeader ? { apiKeyHeader: spec.apiKeyHeader } : {}),
    ...(spec.tenantIdHeader ? { tenantHeader: spec.tenantIdHeader } : {}),
    ...(spec.qps !== undefined ? { qps: spec.qps } : {}),
    ...(spec.burst !== undefined ? { burst: spec.burst } : {}),
    insecureSkipTlsVerify: spec.insecureSkipTLSVerify ?? false,
    ...(ca === undefined ? {} : { caBundle: ca }),
  };
}

/** Kind names `--connection` accepts, lower-cased: the kinds, their plurals and short names. */
const KIND_ALIASES: Record<string, ConnectionKind> = {
  serviceconnection: SERVICE_CONNECTION_KIND,
  serviceconnections: SERVICE_CONNECTION_KIND,
  dmsconn: SERVICE_CONNECTION_KIND,
  clusterserviceconnection: CLUSTER_SERVICE_CONNECTION_KIND,
  clusterserviceconnections: CLUSTER_SERVICE_CONNECTION_KIND,
  dmscconn: CLUSTER_SERVICE_CONNECTION_KIND,
};

/**
 * Parses `--connection <kind/name>` (`ServiceConnection/prod`, `dmscconn/shared`, as `kubectl`
 * spells them). Returns a problem naming the flag and the fix for anything else.
 */
export function parseConnectionArg(
  text: string,
): { ok: true; ref: ConnectionRef } | { ok: false; problem: string } {
  const slash = text.indexOf("/");
  const kind = KIND_ALIASES[text.slice(0, Math.max(slash, 0)).toLowerCase()];
  const name = text.slice(slash + 1);
  if (slash < 0 || !kind || name === "" || name.includes("/"))
    return {
      ok: false,
      problem: `--connection ${JSON.stringify(text)}: give <kind>/<name>, with kind ServiceConnection (in --namespace) or ClusterServiceConnection, e.g. --connection ServiceConnection/prod`,
    };
  return { ok: true, ref: { kind, name } };
}
