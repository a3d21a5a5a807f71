/**
 * What a connection's client is built from, as its controller reads it: the spec checked, the
 * API key from the Secret `spec.apiKeySecretRef` names and the CA bundle from the one
 * `spec.caSecretRef` names, over the operator's own settings. Each way it can fail is a verdict
 * whose message names the Secret (or the field) and the fix; the key never appears in one.
 */

import type { ServiceConfig } from "../config.ts";
import type { ConnectionSpec } from "../crd/connection-schema.ts";
import type { ConnectionId, Failure } from "../crd/conventions.ts";
import type { SecretRead, SecretsPort } from "../reconcile/ports.ts";
import type { ObjectRef } from "../runtime/queue-records.ts";
import {
  apiKeyFrom,
  apiKeySecretOf,
  caBundleFrom,
  caSecretOf,
  connectionSpecProblems,
  serviceConfigOf,
} from "./settings.ts";
import { CONNECTION_REASON } from "./status.ts";

/** A connection's client settings (`apiKey` among them, also given alone to redact it), or why not. */
export type Credentials =
  | { ok: true; config: ServiceConfig; apiKey: string }
  | { ok: false; failure: Failure };

/**
 * The settings of connection `id`: `InvalidSpec` when its spec holds what the operator refuses
 * to send (the CRD refuses it too, but not in a connection stored before its rules; nothing is
 * read then), `SecretUnreadable` (transient) when a Secret cannot be read, `SecretMissing` when
 * it or its key is not there, `InvalidCABundle` when the CA Secret holds no PEM certificates.
 * Rejects only when `signal` aborts.
 */
export async function readCredentials(
  id: ConnectionId,
  spec: ConnectionSpec,
  { secrets, defaults }: { secrets: SecretsPort; defaults: ServiceConfig },
  signal: AbortSignal,
): Promise<Credentials> {
  const invalid = connectionSpecProblems(spec);
  if (invalid.length > 0)
    return fail(CONNECTION_REASON.InvalidSpec, invalid.join("; "), { transient: false });

  const secret = apiKeySecretOf(id, spec);
  const read = await readSecret(secrets, secret, "spec.apiKeySecretRef", signal);
  if (!read.ok) return read;
  const apiKey = apiKeyFrom(read.read, secret);
  if (!apiKey.ok)
    return fail(
      CONNECTION_REASON.SecretMissing,
      `Secret ${secret.namespace}/${secret.name} (spec.apiKeySecretRef) ${apiKey.problem}`,
      { transient: false },
    );

  const caSecret = caSecretOf(id, spec);
  let caBundle: string | undefined;
  if (caSecret) {
    const caRead = await readSecret(secrets, caSecret, "spec.caSecretRef", signal);
    if (!caRead.ok) return caRead;
    const bundle = caBundleFrom(caRead.read, caSecret);
    if (!bundle.ok)
      return fail(
        caRead.read.kind === "found" ? CONNECTION_REASON.InvalidCABundle : CONNECTION_REASON.SecretMissing,
        `Secret ${caSecret.namespace}/${caSecret.name} (spec.caSecretRef) ${bundle.problem}`,
        { transient: false },
      );
    caBundle = bundle.caBundle;
  }
  return {
    ok: true,
    config: serviceConfigOf(spec, apiKey.apiKey, defaults, caBundle),
    apiKey: apiKey.apiKey,
  };
}

/**
 * The Secret `secret` as read, or `SecretUnreadable` (retried): said on the connection and its
 * resources, not only in the log, since it is a Secret the operator may not read (a namespaced
 * install, a ClusterServiceConnection's Secret elsewhere).
 */
async function readSecret(
  secrets: SecretsPort,
  secret: ObjectRef & { key: string },
  field: string,
  signal: AbortSignal,
): Promise<{ ok: true; read: SecretRead } | { ok: false; failure: Failure }> {
  try {
    return { ok: true, read: await secrets.read(secret.namespace, secret.name, secret.key, signal) };
  } catch (error) {
    if (signal.aborted) throw error;
    return fail(
      CONNECTION_REASON.SecretUnreadable,
      `cannot read Secret ${secret.namespace}/${secret.name} (${field}): ${error instanceof Error ? error.message : String(error)}; the operator needs get on Secrets in namespace ${secret.namespace}`,
      { transient: true },
    );
  }
}

function fail(
  reason: string,
  message: string,
  { transient }: { transient: boolean },
): { ok: false; failure: Failure } {
  return { ok: false, failure: { ok: false, reason, message, transient } };
}
