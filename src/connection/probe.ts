/**
 * The credential probe of a connection: `GET /v2/auth/providers` through its client, under a
 * deadline of its own whatever the request timeout, and what each answer means as a verdict (the
 * reason and message of the connection's `Ready` condition, and whether it is retried).
 */
import { ADDRESS_REFUSED } from "../api/address-policy.ts";
import { isServiceError, ServiceError, wholeMessage } from "../api/errors.ts";
import { printableWords } from "../api/printable.ts";
import { redactAndTruncate } from "../api/redact.ts";
import {
  CONNECTION_TLS_FIXES,
  CONNECTION_TLS_FIXES_WITH_CA,
  describeTlsFailure,
  tlsFailureOf,
} from "../api/tls.ts";
import type { ServiceConfig } from "../config.ts";
import type { Clock } from "../runtime/clock.ts";
import type { ConnectionService } from "./registry.ts";
import { CONNECTION_REASON, type ConnectionVerdict } from "./status.ts";

/**
 * Most characters of the service's own answer a failed probe shows (after the status): enough to
 * tell a gateway's page from the service's refusal, too few to carry what a wrong base URL
 * answered (a metadata document, a token).
 */
export const MAX_ANSWER_SHOWN = 80;
/** Most characters of the operator's own account of a failure without an answer (a lost connection). */
const MAX_OWN_DETAIL = 240;
/** Most characters of a failure read at all: every bound above applies within it. */
const MAX_READ = 4_096;

/**
 * What a failed probe's status shows of `error`: the HTTP status and at most
 * {@link MAX_ANSWER_SHOWN} printable characters of the service's answer, or the operator's own
 * account of a failure without one; the API key redacted (after the text is made printable, so
 * a key split by control characters is found whole).
 */
export function probeDetail(error: unknown, apiKey: string): string {
  const keys = [apiKey, printableWords(apiKey)];
  if (error instanceof ServiceError && error.status !== undefined) {
    const own = `HTTP ${error.status}`;
    const answer = redactAndTruncate(printableWords(error.detail.slice(0, MAX_READ)), keys, MAX_ANSWER_SHOWN);
    const said = answer === "" || answer === own ? own : `${own}: ${answer}`;
    return `${error.method} ${error.route} answered ${said}`;
  }
  return redactAndTruncate(printableWords(wholeMessage(error).slice(0, MAX_READ)), keys, MAX_OWN_DETAIL);
}

/** The address policy's refusal carried by `error` (a service client's network failure), if any. */
function addressRefusal(error: unknown): string | undefined {
  if (!isServiceError(error, "network")) return undefined;
  const cause = error.cause as { code?: unknown; message?: unknown } | undefined;
  return cause?.code === ADDRESS_REFUSED ? String(cause.message) : undefined;
}

/** A probe's answer: a verdict, or (a 429) the verdict it would be and how long to wait first. */
export type ProbeResult = ConnectionVerdict | { retryAfterMs: number; verdict: ConnectionVerdict };

/**
 * Probes `service`, built from `config` with `apiKey` (redacted from every message). A service
 * that never answers is `Unreachable` after `deadlineMs`, so the check's worker is free again.
 * Rejects only when `signal` aborts.
 */
export async function probeConnection(
  service: ConnectionService,
  config: ServiceConfig,
  apiKey: string,
  signal: AbortSignal,
  { clock, deadlineMs }: { clock: Clock; deadlineMs: number },
): Promise<ProbeResult> {
  const deadline = new AbortController();
  const cancel = clock.setTimer(deadlineMs, () => deadline.abort(new Error("probe deadline")));
  try {
    const providers = await service.probe(AbortSignal.any([signal, deadline.signal]));
    return {
      ok: true,
      reason: CONNECTION_REASON.Connected,
      providers,
      message: `the service at ${config.baseUrl} accepted the API key`,
    };
  } catch (error) {
    if (signal.aborted) throw error;
    const detail = deadline.signal.aborted
      ? `no answer to GET /v2/auth/providers within the probe's deadline of ${deadlineMs} ms`
      : probeDetail(error, apiKey);
    const refusal = addressRefusal(error);
    // Retried with backoff: the name may resolve elsewhere later. Nothing was sent.
    if (refusal !== undefined)
      return {
        ok: false,
        reason: CONNECTION_REASON.AddressNotAllowed,
        message: `the operator does not connect to the service at ${config.baseUrl}: ${redactAndTruncate(printableWords(refusal), [apiKey], MAX_OWN_DETAIL)}; point spec.baseUrl at the service's own address`,
        transient: true,
      };
    if (isServiceError(error, "too_large"))
      return {
        ok: false,
        reason: CONNECTION_REASON.ResponseTooLarge,
        message: `the service at ${config.baseUrl} answered the probe with more than the operator accepts: ${detail}`,
        transient: true,
      };
    if (isServiceError(error, "tls")) {
      const host = URL.parse(config.baseUrl)?.hostname ?? config.baseUrl;
      // A CA given that does not sign the certificate needs another fix than no CA at all.
      const fixes = config.caBundle === undefined ? CONNECTION_TLS_FIXES : CONNECTION_TLS_FIXES_WITH_CA;
      const failure = tlsFailureOf(error.tlsCode ?? "", host, fixes);
      return {
        ok: false,
        reason: CONNECTION_REASON.CertificateNotTrusted,
        message: `the service at ${config.baseUrl} is not trusted: ${failure ? describeTlsFailure(failure) : detail}`,
        transient: false,
      };
    }
    if (isServiceError(error, "unauthorized"))
      return {
        ok: false,
        reason: CONNECTION_REASON.Unauthorized,
        message: `the service refused the API key (${detail}): put a valid key in the Secret named by spec.apiKeySecretRef${config.tenantId ? ", and check spec.tenantId" : ""}`,
        transient: false,
      };
    const unreachable = {
      ok: false,
      reason: CONNECTION_REASON.Unreachable,
      message: `cannot reach the service at ${config.baseUrl}: ${detail}`,
      transient: true,
    } as const;
    if (isServiceError(error, "rate_limited"))
      return {
        retryAfterMs: Math.max(1_000, (error.retryAfterSeconds ?? 1) * 1_000),
        verdict: unreachable,
      };
    return unreachable;
  } finally {
    cancel();
  }
}
