/**
 * The API server's failures as a command reports them: one line naming the server, the kubeconfig
 * and context it was found in, what went wrong and what to do, as kubectl says "The connection to
 * the server … was refused - did you specify the right host or port?" rather than a socket's code.
 * The commands' clients of a cluster are {@link ClusterClient}s (plugin-cluster.ts,
 * connections.ts).
 */
import { KubeClient, type KubeClientOptions, type KubeRequest } from "../kube/client.ts";
import type { KubeCredentials } from "../kube/credentials.ts";
import { KubeApiError } from "../kube/errors.ts";

/** Where a client's cluster came from: its server and `kubeconfig <path>, context <name>`. */
export interface ClusterOrigin {
  server: string;
  description: string;
}

const PICK_ANOTHER = "pick another with --context or --kubeconfig";

/** The codes of a connection that could not be made or was lost, and what each says. */
const UNREACHABLE: Readonly<Record<string, string>> = {
  ECONNREFUSED: "connection refused",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host name lookup failed",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  ECONNRESET: "connection reset",
  ETIMEDOUT: "connection timed out",
};

/** The errors of a certificate Node does not accept (OpenSSL's codes, and Node's own). */
const TLS_CODE = /^(ERR_TLS_|ERR_SSL_)|CERT|_SIGNATURE|_ISSUER|SELF_SIGNED/;

/**
 * `error`, thrown by a call to the cluster of `origin`, told as one line with the fix; an error of
 * another kind, or an interruption (`signal` aborted), as it is. An answer of the API server stays
 * a {@link KubeApiError} of the same status, for the callers that branch on it. A 403 is left as
 * it is unless `forbidden`: the reads of a connection name the permission they lack themselves.
 */
export function explainClusterError(
  error: unknown,
  origin: ClusterOrigin,
  signal?: AbortSignal,
  forbidden = true,
): unknown {
  if (signal?.aborted || !(error instanceof Error)) return error;
  const where = `${origin.server} (${origin.description})`;
  if (error instanceof KubeApiError) {
    if (error.status === 401)
      return new KubeApiError(
        401,
        error.reason,
        `the API server ${where} did not accept the credentials (401 Unauthorized): log in again (a token may have expired), or ${PICK_ANOTHER}`,
        { cause: error },
      );
    if (error.status === 403 && forbidden) {
      const refused = serverMessage(error);
      // The roles this project installs for teams, when it is one of our kinds that was refused.
      const roles = refused.includes('in API group "dms.dev"')
        ? " (the ClusterRoles dms-operator-edit and dms-operator-view, bound in a namespace, give a team the verbs and status)"
        : "";
      return new KubeApiError(
        403,
        error.reason,
        `the API server ${where} refused: ${refused}: ask a cluster admin for that access${roles}, or ${PICK_ANOTHER}`,
        { cause: error, detailed: error.detailed },
      );
    }
    return error;
  }
  if (isTimeout(error))
    return new Error(
      `the API server ${where} gave no complete answer in time (${error.message}): retry, and check that the cluster is healthy and reachable`,
      { cause: error },
    );
  const code = codeOf(error);
  if (code === undefined) return error;
  const unreachable = UNREACHABLE[code];
  if (unreachable !== undefined)
    return new Error(
      `cannot reach the API server ${where}: ${unreachable}: is the cluster running, and is it the one meant? Or ${PICK_ANOTHER}`,
      { cause: error },
    );
  if (TLS_CODE.test(code))
    return new Error(`the API server ${where} ${certificateProblem(code, error)}, or ${PICK_ANOTHER}`, {
      cause: error,
    });
  return error;
}

/**
 * What is wrong with the certificate Node refused (`code`), and the fix: a certificate issued for
 * other names, or out of its dates, is not mended by the CA; any other by the CA that signed it.
 */
function certificateProblem(code: string, error: Error): string {
  const why = causeMessage(error);
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID")
    return `has a certificate issued for other names than its host (${why}): set the cluster's server in the kubeconfig to a name the certificate is issued for (or its tls-server-name to one)`;
  if (code === "CERT_HAS_EXPIRED" || code === "CERT_NOT_YET_VALID")
    return `has a certificate outside its dates (${why}): renew the API server's certificate (or check this machine's clock)`;
  return `has a certificate the kubeconfig does not trust (${why}): set the cluster's certificate-authority-data (or certificate-authority) in the kubeconfig to the CA that signed it`;
}

/** The API server's own message of a {@link KubeApiError} (after `<method> <path>: HTTP <status> <reason>: `). */
function serverMessage(error: KubeApiError): string {
  const head = `HTTP ${error.status}${error.reason ? ` ${error.reason}` : ""}: `;
  const at = error.message.indexOf(head);
  return at === -1 ? error.message : error.message.slice(at + head.length);
}

/** The first `code` (a string) in the chain of causes of `error`. */
function codeOf(error: Error): string | undefined {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; depth++) {
    const { code } = e as { code?: unknown };
    if (typeof code === "string") return code;
    e = e.cause;
  }
  return undefined;
}

/** The message of the innermost cause: Node's own words for a certificate. */
function causeMessage(error: Error): string {
  let e: Error = error;
  for (let depth = 0; e.cause instanceof Error && depth < 5; depth++) e = e.cause;
  return e.message;
}

/** Whether the client's own timeout ended the call (a `TimeoutError` among the causes). */
function isTimeout(error: Error): boolean {
  for (let e: unknown = error, depth = 0; e !== undefined && depth < 5; depth++) {
    if ((e instanceof Error || e instanceof DOMException) && e.name === "TimeoutError") return true;
    e = e instanceof Error ? e.cause : undefined;
  }
  return false;
}

/**
 * A client of a command's cluster whose failures are told by {@link explainClusterError}; a 403
 * too when `forbidden` (the verbs', `status`'s and `version`'s cluster).
 */
export class ClusterClient extends KubeClient {
  readonly #origin: ClusterOrigin;
  readonly #forbidden: boolean;

  constructor(
    kc: KubeCredentials,
    origin: ClusterOrigin,
    options: KubeClientOptions & { forbidden?: boolean } = {},
  ) {
    super(kc, options);
    this.#origin = origin;
    this.#forbidden = options.forbidden ?? false;
  }

  /** `error`, thrown by a call of this client, with a 403 told as {@link explainClusterError} tells it. */
  explainForbidden(error: unknown, signal?: AbortSignal): unknown {
    if (this.#forbidden || !(error instanceof KubeApiError) || error.status !== 403) return error;
    return explainClusterError(error, this.#origin, signal);
  }

  override async request(req: KubeRequest): Promise<unknown> {
    try {
      return await super.request(req);
    } catch (error) {
      throw explainClusterError(error, this.#origin, req.signal, this.#forbidden);
    }
  }

  override async stream(req: KubeRequest): Promise<AsyncIterable<unknown>> {
    try {
      return await super.stream(req);
    } catch (error) {
      throw explainClusterError(error, this.#origin, req.signal, this.#forbidden);
    }
  }
}
