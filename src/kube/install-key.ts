/**
 * The install key: random bytes in a Secret of the operator's own namespace, read by every
 * replica, that keys what the operator shows and must not be guessable or aimable — the secrets'
 * digests in status (`reconcile/secret-hash.ts`) and the sharding ring's hash
 * (`sharding/ring.ts`). Created at the first start when absent; Kubernetes decides between two
 * replicas starting at once: one create wins, the other gets 409 AlreadyExists and reads the
 * winner's. See docs/guide/security.md, "Install key".
 */
import { randomBytes } from "node:crypto";
import { isRecord } from "../runtime/json.ts";
import type { KubeClient } from "./client.ts";
import { ConflictError, KubeApiError, NotFoundError } from "./errors.ts";
import { collectionPath, itemPath } from "./object.ts";
import { SECRETS } from "./secrets.ts";

/** The Secret's name, in the operator's namespace (the Role of manifests/rbac names it). */
export const INSTALL_KEY_SECRET = "dms-operator-install-key";
/** The Secret's data key holding the bytes. */
export const INSTALL_KEY_FIELD = "key";
/** Bytes of a new key: 256 bits, HMAC-SHA256's block-size-safe strength. */
const KEY_BYTES = 32;
/** The fewest bytes accepted in a key someone else wrote. */
const MIN_KEY_BYTES = 16;

/** The key cannot be used (a Secret without a usable `key`, or no right to read or create it). */
export class InstallKeyError extends Error {
  override readonly name = "InstallKeyError";
}

/** The key's bytes in a Secret read from the API server; an {@link InstallKeyError} when unusable. */
function keyOf(secret: unknown, namespace: string): Buffer {
  const data = isRecord(secret) && isRecord(secret.data) ? secret.data : {};
  const encoded = data[INSTALL_KEY_FIELD];
  const bytes = typeof encoded === "string" ? Buffer.from(encoded, "base64") : Buffer.alloc(0);
  if (bytes.length < MIN_KEY_BYTES)
    throw new InstallKeyError(
      `the Secret ${namespace}/${INSTALL_KEY_SECRET} must hold at least ${MIN_KEY_BYTES} random bytes in data.${INSTALL_KEY_FIELD} (it has ${bytes.length}): delete it and the operator creates a new one (the secrets' digests in status and the sharding ring change with it)`,
    );
  return bytes;
}

/**
 * The key of the install in `namespace`: read, else created (32 random bytes) and, when another
 * replica created it first (409), read. Rejects with an {@link InstallKeyError} on an unusable
 * Secret or a 403 (RBAC), with the API's error on anything else (5xx, no connection).
 */
export async function ensureInstallKey(
  client: KubeClient,
  namespace: string,
  signal: AbortSignal,
): Promise<Buffer> {
  try {
    return await readInstallKey(client, namespace, signal);
  } catch (error) {
    if (!(error instanceof NotFoundError)) throw error;
  }
  const body = {
    apiVersion: "v1",
    kind: "Secret",
    metadata: {
      name: INSTALL_KEY_SECRET,
      namespace,
      labels: { "app.kubernetes.io/name": "dms-operator", "app.kubernetes.io/component": "install-key" },
    },
    type: "Opaque",
    data: { [INSTALL_KEY_FIELD]: randomBytes(KEY_BYTES).toString("base64") },
  };
  try {
    // Create only: an existing Secret is never overwritten, so every replica ends with the one.
    return keyOf(
      await client.request({ method: "POST", path: collectionPath(SECRETS, namespace), body, signal }),
      namespace,
    );
  } catch (error) {
    if (error instanceof ConflictError) return readInstallKey(client, namespace, signal);
    throw forbidden(error, namespace, "create");
  }
}

/**
 * The key of the install in `namespace`, read only (`plan`). Rejects with NotFoundError when
 * there is none yet, an {@link InstallKeyError} on an unusable Secret or a 403.
 */
export async function readInstallKey(
  client: KubeClient,
  namespace: string,
  signal: AbortSignal,
): Promise<Buffer> {
  try {
    return keyOf(
      await client.request({
        method: "GET",
        path: itemPath(SECRETS, { namespace, name: INSTALL_KEY_SECRET }),
        signal,
      }),
      namespace,
    );
  } catch (error) {
    throw forbidden(error, namespace, "get");
  }
}

/** A 401/403 as an {@link InstallKeyError} naming the Role to grant; any other error as it is. */
function forbidden(error: unknown, namespace: string, verb: "get" | "create"): unknown {
  if (!(error instanceof KubeApiError) || (error.status !== 403 && error.status !== 401)) return error;
  return new InstallKeyError(
    `the operator may not ${verb} the Secret ${namespace}/${INSTALL_KEY_SECRET}, its install key (${error.message}): bind its ServiceAccount to the Role dms-operator-install-key of manifests/rbac (get on that Secret, create on secrets in ${namespace})`,
    { cause: error },
  );
}
