/**
 * The service's TLS, as the operator and the CLI judge it: a CA bundle to trust (PEM text from a
 * connection's spec or Secret, or `--ca-file`), checked before it is used, and the certificate
 * failures of a call named by their cause, each with its fix. Pure. Node's crypto is loaded only
 * to read a bundle: naming a failure needs none.
 */
import type { X509Certificate } from "node:crypto";

/**
 * Most bytes a CA bundle may have (64 KiB): a private CA with its intermediates is a few KiB, and
 * even a hundred certificates fit. The CRD bounds `spec.caBundle` to it too.
 */
export const MAX_CA_BUNDLE_BYTES = 65_536;

/** One certificate of a bundle, as messages name it. */
export interface BundleCertificate {
  /** The certificate's subject, e.g. `CN=Corp Root CA`. */
  subject: string;
  /** Its expiry, ISO 8601. */
  validTo: string;
}

// PEM blocks (RFC 7468): `-----BEGIN <label>-----`, then the text up to `-----END <label>-----`.
// Text outside blocks (comments such as a distribution bundle's `# Subject:` lines) is allowed, as
// OpenSSL allows it. Node's X509Certificate then parses each certificate for real; framing is all
// that is read here (@peculiar/x509 would need a Reflect metadata polyfill loaded into the
// operator for its PemConverter). Found with `indexOf` from where the last block ended, never
// searching a character more than a few times: a regular expression with a lazy body took
// ~300 ms on 64 KiB of BEGIN lines without an END (each one searched the rest of the text).
const BEGIN = "-----BEGIN ";
const END = "-----END ";
const DASHES = "-----";
/** A label (`CERTIFICATE`, `PRIVATE KEY`): capitals, digits and spaces, at most 64 of them. */
const LABEL = /^[A-Z0-9 ]{1,64}$/;

/** One PEM block of a text: its labels and its whole text, BEGIN and END lines included. */
interface PemBlock {
  label: string;
  endLabel: string;
  text: string;
}

/**
 * The PEM blocks of `text` in order, or what is wrong with its framing (said after `what`).
 * Linear in the text's length.
 */
function pemBlocks(
  text: string,
  what: string,
): { ok: true; blocks: PemBlock[] } | { ok: false; problem: string } {
  const blocks: PemBlock[] = [];
  let at = 0;
  for (;;) {
    const begin = text.indexOf(BEGIN, at);
    if (begin < 0) return { ok: true, blocks };
    const index = blocks.length + 1;
    const labelEnd = text.indexOf(DASHES, begin + BEGIN.length);
    const label = labelEnd < 0 ? "" : text.slice(begin + BEGIN.length, labelEnd);
    if (!LABEL.test(label))
      return {
        ok: false,
        problem: `${what}: block ${index} does not begin with a BEGIN line such as -----BEGIN CERTIFICATE-----`,
      };
    const body = labelEnd + DASHES.length;
    const end = text.indexOf(END, body);
    const next = text.indexOf(BEGIN, body);
    if (next >= 0 && (end < 0 || next < end))
      return { ok: false, problem: `${what}: block ${index} has no END line before the next BEGIN line` };
    if (end < 0) return { ok: false, problem: `${what}: the last PEM block has no END line` };
    const endLabelEnd = text.indexOf(DASHES, end + END.length);
    const endLabel = endLabelEnd < 0 ? "" : text.slice(end + END.length, endLabelEnd);
    if (!LABEL.test(endLabel))
      return {
        ok: false,
        problem: `${what}: block ${index} does not end with an END line such as -----END CERTIFICATE-----`,
      };
    at = endLabelEnd + DASHES.length;
    blocks.push({ label, endLabel, text: text.slice(begin, at) });
  }
}

/**
 * The certificates of a CA bundle, or what is wrong with it, naming the certificate (its place,
 * counted from 1, and its subject when it parses) and the fix. `what` names the bundle's source,
 * e.g. `spec.caBundle` or `--ca-file /etc/ca.pem`.
 *
 * Contract: refuses a bundle larger than {@link MAX_CA_BUNDLE_BYTES}, one without any
 * `CERTIFICATE` block, any block of another kind (a private key pasted by mistake must not be
 * kept in a readable field), a block whose BEGIN and END labels differ or that never ends, and a
 * certificate Node's X.509 parser refuses. An expired certificate is accepted (it may sit beside
 * a valid one in a bundle); a handshake it alone would sign fails and says so. Linear in the
 * bundle's length, besides Node's parse of each certificate.
 */
export function parseCaBundle(
  text: string,
  what: string,
): { ok: true; certificates: BundleCertificate[] } | { ok: false; problem: string } {
  const size = Buffer.byteLength(text, "utf8");
  if (size > MAX_CA_BUNDLE_BYTES)
    return {
      ok: false,
      problem: `${what} has ${size} bytes, more than ${MAX_CA_BUNDLE_BYTES}: give only the CA certificates that sign the service's certificate`,
    };
  const framed = pemBlocks(text, what);
  if (!framed.ok) return framed;
  const certificates: BundleCertificate[] = [];
  const crypto = process.getBuiltinModule("node:crypto") as typeof import("node:crypto");
  for (const [i, { label, endLabel, text: block }] of framed.blocks.entries()) {
    const index = i + 1;
    if (label !== endLabel)
      return {
        ok: false,
        problem: `${what}: block ${index} begins as ${label} and ends as ${endLabel}: fix its BEGIN or END line`,
      };
    if (label !== "CERTIFICATE")
      return {
        ok: false,
        problem: `${what}: block ${index} is a ${label}, not a CERTIFICATE: keep only the CA certificates (never a private key)`,
      };
    let certificate: X509Certificate;
    try {
      certificate = new crypto.X509Certificate(block);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      return {
        ok: false,
        problem: `${what}: certificate ${index} is not a valid X.509 certificate (${reason}): copy it again whole, BEGIN and END lines included`,
      };
    }
    certificates.push({
      subject: certificate.subject.replaceAll("\n", ", "),
      validTo: certificate.validToDate.toISOString(),
    });
  }
  if (certificates.length === 0)
    return {
      ok: false,
      problem: `${what} holds no PEM certificate: give the CA certificate that signs the service's certificate, from -----BEGIN CERTIFICATE----- to -----END CERTIFICATE-----`,
    };
  return { ok: true, certificates };
}

/** Why a certificate was not accepted, in a user's words, and what to do about it. */
export interface TlsFailure {
  /** Node's (OpenSSL's) error code, e.g. `SELF_SIGNED_CERT_IN_CHAIN`. */
  code: string;
  /** The cause, e.g. `the certificate has expired`. */
  cause: string;
  /** The fix, naming the settings that give a CA (see {@link TlsFixes}). */
  fix: string;
}

/**
 * How the fixes name the settings of the caller: a connection's spec fields, or the flags of a
 * command. `ca`: where a CA is given (`set spec.caBundle or spec.caSecretRef`).
 */
export interface TlsFixes {
  ca: string;
}

/** The fixes of a connection resource's status. */
export const CONNECTION_TLS_FIXES: TlsFixes = {
  ca: "set spec.caBundle or spec.caSecretRef to the CA that signed it",
};

/** The fixes of a connection resource that already names a CA (which does not sign the certificate). */
export const CONNECTION_TLS_FIXES_WITH_CA: TlsFixes = {
  ca: "the CA in spec.caBundle or spec.caSecretRef does not sign it: give the CA that issued the service's certificate (with the intermediates, if the service does not send them)",
};

/** The fixes of the CLI and of the operator's own connection. */
export const FLAG_TLS_FIXES: TlsFixes = {
  ca: "pass --ca-file (env DMS_CA_FILE) with the CA that signed it (--insecure-skip-tls-verify for a test service only)",
};

/** The fixes of the CLI and of the operator's own connection when `--ca-file` was given. */
export const FLAG_TLS_FIXES_WITH_CA: TlsFixes = {
  ca: "the CA of --ca-file (env DMS_CA_FILE) does not sign it: give the CA that issued the service's certificate (with the intermediates, if the service does not send them)",
};

// Node's codes of a certificate it does not accept. Other TLS failures (a protocol or cipher
// mismatch, a reset during the handshake) are connection failures, not the certificate's.
const UNKNOWN_AUTHORITY = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "UNABLE_TO_GET_ISSUER_CERT",
]);
const EXPIRED = new Set(["CERT_HAS_EXPIRED", "CRL_HAS_EXPIRED"]);
const NOT_YET_VALID = new Set(["CERT_NOT_YET_VALID", "CRL_NOT_YET_VALID"]);
const WRONG_HOST = new Set(["ERR_TLS_CERT_ALTNAME_INVALID", "HOSTNAME_MISMATCH"]);
const OTHER_CERTIFICATE = new Set([
  "CERT_SIGNATURE_FAILURE",
  "CERT_REVOKED",
  "CERT_UNTRUSTED",
  "CERT_REJECTED",
  "INVALID_CA",
  "INVALID_PURPOSE",
  "PATH_LENGTH_EXCEEDED",
  "UNABLE_TO_DECRYPT_CERT_SIGNATURE",
  "UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY",
  "ERROR_IN_CERT_NOT_BEFORE_FIELD",
  "ERROR_IN_CERT_NOT_AFTER_FIELD",
]);

/**
 * The certificate failure a Node error code means, or undefined when the code is not about the
 * service's certificate. `host` is the base URL's host, for the wrong-host cause.
 */
export function tlsFailureOf(code: string, host: string, fixes: TlsFixes): TlsFailure | undefined {
  if (UNKNOWN_AUTHORITY.has(code))
    return {
      code,
      cause:
        code === "DEPTH_ZERO_SELF_SIGNED_CERT" || code === "SELF_SIGNED_CERT_IN_CHAIN"
          ? "the service's certificate is signed by a self-signed certificate no trusted CA vouches for (unknown authority)"
          : "the service's certificate is signed by an authority that is not trusted (unknown authority)",
      fix: fixes.ca,
    };
  if (EXPIRED.has(code))
    return {
      code,
      cause: "the service's certificate (or one of its chain) has expired",
      fix: "renew the service's certificate; check the clocks of the service and of this machine",
    };
  if (NOT_YET_VALID.has(code))
    return {
      code,
      cause: "the service's certificate (or one of its chain) is not valid yet",
      fix: "check the clocks of the service and of this machine, or wait until the certificate's start date",
    };
  if (WRONG_HOST.has(code))
    return {
      code,
      cause: `the service's certificate is not for ${host} (its subject alternative names do not include it)`,
      fix: "use the host name the certificate was issued for in the base URL, or reissue the certificate with this host in its subject alternative names",
    };
  if (OTHER_CERTIFICATE.has(code))
    return {
      code,
      cause: "the service's certificate was refused",
      fix: `check the certificate chain the service sends; ${fixes.ca}`,
    };
  return undefined;
}

/** A {@link TlsFailure} as one line: `cause (CODE): fix`. */
export function describeTlsFailure(failure: TlsFailure): string {
  return `TLS verification failed: ${failure.cause} (${failure.code}); ${failure.fix}`;
}
