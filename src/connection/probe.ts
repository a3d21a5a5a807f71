/**
 * The credential probe of a connection: `GET /v2/auth/providers` through its client, under a
 * deadline of its own whatever the request timeout, and what each answer means as a verdict (the
 * reason and message of the connection's `Ready` condition, and whether it is retried).
 */
import { isServiceError, wholeMessage } from "../api/errors.ts";
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
    // Redacted whole, then cut (to leave room for the fix): a key cut in two would escape redaction.
    const detail = deadline.signal.aborted
      ? `no answer to GET /v2/auth/providers within the probe's deadline of ${deadlineMs} ms`
      : redactAndTruncate(wholeMessage(error), [apiKey], 2000);
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
