/**
 * What a connection may not say, written once for the two places that refuse it: the CRDs' CEL
 * rules (the API server refuses the object) and the operator (a connection stored before those
 * rules, or the operator's own `--base-url` / `--api-key-header` / `--tenant-header`). Pure.
 *
 * The transport builds every request URL as `baseUrl + path` and sends the API key and the tenant
 * id under header names the connection chooses, with values the tenant chooses (the key is
 * whatever the Secret holds). So a base URL must end where the path can begin, and the header
 * names must be ones that carry a value to the service and nothing more. And neither may aim the
 * operator at a cloud metadata service (`api/address-policy.ts`).
 */
import { hostProblem, METADATA_HOSTS } from "../api/address-policy.ts";

/** Why a header name is refused, and the names refused for that reason (lower case). */
export interface RefusedHeaderGroup {
  why: string;
  names: readonly string[];
}

/**
 * Header names a connection may not use for its API key or tenant id, compared case-insensitively.
 * Each group says why; a name is refused when its value could change how the request is framed,
 * routed or read by something other than the service's API-key check.
 */
export const REFUSED_HEADER_GROUPS: readonly RefusedHeaderGroup[] = [
  {
    // A tenant-chosen value here sends the request to another virtual host, or splits one request
    // into two for a proxy the operator shares with every tenant (request smuggling).
    why: "it frames or routes the request (the HTTP client sets it)",
    names: ["host", "content-length", "transfer-encoding", "expect", "http2-settings"],
  },
  {
    // RFC 9110 §7.6.1: meant for the next hop only; a proxy acts on them and strips them.
    why: "it is a hop-by-hop header, acted on by the next proxy",
    names: [
      "connection",
      "keep-alive",
      "proxy-connection",
      "te",
      "trailer",
      "upgrade",
      "proxy-authorization",
      "proxy-authenticate",
    ],
  },
  {
    // The client sends and accepts JSON: another value makes the service read or answer
    // something the client does not parse or bound (a compressed body it did not ask for).
    why: "the HTTP client sets it for the JSON it sends and accepts",
    names: ["content-type", "content-encoding", "accept", "accept-encoding", "user-agent"],
  },
  {
    // State and identity a proxy or the service attaches to a caller beyond this one tenant.
    why: "it carries a session or a client's identity, which a proxy or the service trusts",
    names: ["cookie", "forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-real-ip"],
  },
  {
    // Frameworks honour these to turn a GET (the listing, the probe) into a DELETE or a PATCH.
    why: "it overrides the request's method",
    names: ["x-http-method-override", "x-http-method", "x-method-override"],
  },
  {
    // The headers a cloud metadata service requires of a caller (Google's, Azure's, AWS's
    // IMDSv2): with the tenant's Secret as the value, a request could pass its check.
    why: "a cloud metadata service requires it of its callers",
    names: [
      "metadata-flavor",
      "metadata",
      "x-aws-ec2-metadata-token",
      "x-aws-ec2-metadata-token-ttl-seconds",
      "x-google-metadata-request",
    ],
  },
];

/** Every refused header name, lower case. */
export const REFUSED_HEADERS: readonly string[] = REFUSED_HEADER_GROUPS.flatMap((g) => g.names);

/** Token characters of RFC 9110: what a header name is made of. */
export const HEADER_NAME_PATTERN = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";
const HEADER_NAME = new RegExp(HEADER_NAME_PATTERN);

/**
 * What is wrong with `name` as the name of a header carrying the API key or the tenant id, said
 * after the setting's name (`spec.apiKeyHeader …`, `--api-key-header: …`), or undefined.
 */
export function headerNameProblem(name: string): string | undefined {
  if (!HEADER_NAME.test(name))
    return `${JSON.stringify(name)} is not a valid header name (letters, digits and !#$%&'*+.^_\`|~-), e.g. X-Api-Key`;
  const group = REFUSED_HEADER_GROUPS.find((g) => g.names.includes(name.toLowerCase()));
  if (group) return `must not be ${name}: ${group.why}; choose a header of your own, e.g. X-Api-Key`;
  return undefined;
}

/**
 * An `@` before the end of the authority. A `\` does not end it here (the WHATWG parser ends it
 * there, Go's does not): `http://a\@b/` is refused, whichever host a parser would read.
 */
const USER_INFO = "^[^:/?#]+://[^/?#]*@";
const hasUserInfo = (url: string) => new RegExp(USER_INFO).test(url);

/**
 * An authority holding a full-width form of an ASCII character (U+FF01 to U+FF5E: digits,
 * letters, the full-width full stop U+FF0E) or an ideographic full stop (U+3002, U+FF61). URL
 * parsers map them to ASCII (IDNA), so `１６９。２５４。１６９。２５４` is 169.254.169.254 to the
 * operator: the other rules, which read the text as written, would not see it.
 */
const WIDE_AUTHORITY = "^[^:/?#]+://[^/?#]*[\\uFF01-\\uFF5E\\u3002\\uFF61]";

/** The base URL problems the CRD's CEL rules also say (their messages start `spec.baseUrl `). */
const BASE_URL_PROBLEM = {
  wideHost:
    "must write its host in ASCII: full-width digits and letters (１, ａ) and ideographic dots (。 ． ｡) are read as ASCII digits, letters and dots by URL parsers; write them as 0-9, a-z and '.', e.g. https://api.example.com",
  userInfo: "must not carry user-info (user:password@host)",
  query:
    'must not have a query (?…): the operator appends API paths such as /v2/deployments to it, and a query would swallow them; remove everything from the "?"',
  fragment:
    'must not have a fragment (#…): the operator appends API paths such as /v2/deployments to it, and a fragment would cut them off; remove everything from the "#"',
} as const;

/**
 * The problems of `url` as a service base URL: not an http(s) URL with a host, or with a query,
 * a fragment or user-info (checked on the text as well as on the parsed URL: `…/token#` parses
 * to an empty fragment, and the WHATWG and Go URL parsers do not agree on every authority).
 * Each problem is said after the setting's name; `keyHint` says where the API key goes instead.
 */
export function baseUrlProblems(url: string, keyHint: string): string[] {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return [`${JSON.stringify(url)} is not a URL, e.g. https://api.example.com`];
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    return [`must start with https:// or http://, got ${parsed.protocol}`];
  const problems: string[] = [];
  if (parsed.hostname === "") problems.push("must name a host, e.g. https://api.example.com");
  if (new RegExp(WIDE_AUTHORITY).test(url)) problems.push(BASE_URL_PROBLEM.wideHost);
  if (hasUserInfo(url) || parsed.username !== "" || parsed.password !== "")
    problems.push(`${BASE_URL_PROBLEM.userInfo}: put the API key in ${keyHint}`);
  if (url.includes("?")) problems.push(BASE_URL_PROBLEM.query);
  if (url.includes("#")) problems.push(BASE_URL_PROBLEM.fragment);
  // The parsed host: the WHATWG parser reads 0xa9fea9fe, 2852039166 and 0251.0376.0251.0376 as
  // 169.254.169.254, as the socket would.
  const host = hostProblem(parsed.hostname, "allow-private");
  if (host) problems.push(`must not aim at a link-local address or a cloud metadata service: ${host}`);
  return problems;
}

/** A CEL rule of a CRD, as `x-kubernetes-validations` lists it. */
export interface CelRule {
  rule: string;
  message: string;
  reason: "FieldValueInvalid" | "FieldValueForbidden";
}

/** A regular expression as the text of a CEL string literal in single quotes. */
const celRegex = (regex: string) => regex.replaceAll("\\", "\\\\");

/**
 * A base URL whose host matches `host` (a regular expression of the host as written, port and
 * user-info aside; any case). Read from the text itself: the host `url()` gives has no size
 * bound the API server's cost estimate could use.
 */
const urlWithHost = (host: string) => `(?i)^https?://(${host})(:[0-9]*)?([/?#]|$)`;

/**
 * Hosts that are link-local addresses or a metadata service's address, as written (the
 * operator's own check reads the parsed, normalized address): 169.254.0.0/16, fe80::/10, an
 * IPv6 address carrying 169.254.x.x (`::ffff:169.254.169.254`, `::ffff:a9fe:a9fe`,
 * `::ffff:0:a9fe:a9fe`, `64:ff9b::a9fe:a9fe`, 6to4's `2002:a9fe:…`), the NAT64 local-use prefix
 * `64:ff9b:1::/48`, and the metadata addresses outside link-local (`address-policy.ts`).
 */
const LINK_LOCAL_HOST = [
  String.raw`169\.254\.[0-9]+\.[0-9]+\.?`,
  String.raw`100\.100\.100\.200\.?`,
  String.raw`168\.63\.129\.16\.?`,
  String.raw`192\.0\.0\.192\.?`,
  String.raw`\[(${[
    String.raw`fe[89ab][0-9a-f]:[^\]]*`,
    String.raw`([0:]*:(ffff:(0{1,4}:)?)?|64:ff9b:[0:]*:)(169\.254\.[0-9.]+|a9fe:[0-9a-f]{1,4})`,
    String.raw`0*2002:a9fe:[^\]]*`,
    String.raw`0*64:0*ff9b:0*1:[^\]]*`,
    "fd00:0*ec2:[0:]*:0*(254|23)",
    "fd20:0*ce:[0:]*:0*254",
  ].join("|")})(%25[^\]]*)?\]`,
].join("|");

/** The names of {@link METADATA_HOSTS}, with or without a final dot. */
const METADATA_HOST = `(${METADATA_HOSTS.map((h) => h.replaceAll(".", "\\.")).join("|")})\\.?`;

/** A host whose last label is a number: the WHATWG parser reads it as an IPv4 address. */
const NUMERIC_HOST = String.raw`([^/?#:\[\]]*\.)?(0x[0-9a-f]*|[0-9]+)\.?`;
/** An IPv4 address as four decimal numbers without leading zeros. */
const OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
const CANONICAL_IPV4 = String.raw`(${OCTET}\.){3}${OCTET}\.?`;

/** The CEL rules of `spec.baseUrl` beyond its being an http(s) URL with a host. */
export const BASE_URL_RULES: readonly CelRule[] = [
  {
    rule: `!self.matches('${celRegex(urlWithHost(METADATA_HOST))}')`,
    message: `spec.baseUrl must not name a cloud metadata service (${METADATA_HOSTS.join(", ")}): the operator never connects to one`,
    reason: "FieldValueForbidden",
  },
  {
    rule: `!self.matches('${celRegex(urlWithHost(LINK_LOCAL_HOST))}')`,
    message:
      "spec.baseUrl must not be a link-local address (169.254.0.0/16, fe80::/10, or an IPv6 address carrying 169.254.x.x such as ::ffff:169.254.169.254 or 2002:a9fe:a9fe::, or the NAT64 local-use prefix 64:ff9b:1::/48) or a cloud metadata service's address (such as 168.63.129.16 or 192.0.0.192): the operator never connects to one",
    reason: "FieldValueForbidden",
  },
  {
    rule: `!self.matches('${celRegex(urlWithHost(NUMERIC_HOST))}') || self.matches('${celRegex(urlWithHost(CANONICAL_IPV4))}')`,
    message:
      "spec.baseUrl: write an IPv4 address as four decimal numbers without leading zeros, e.g. http://10.0.0.12: a hexadecimal, octal or one-number form is read differently by different URL parsers",
    reason: "FieldValueInvalid",
  },
  {
    rule: `!self.matches('${WIDE_AUTHORITY}')`,
    message: `spec.baseUrl ${BASE_URL_PROBLEM.wideHost}`,
    reason: "FieldValueInvalid",
  },
  {
    rule: `!self.matches('${USER_INFO}')`,
    message: `spec.baseUrl ${BASE_URL_PROBLEM.userInfo}: put the API key in the Secret named by spec.apiKeySecretRef`,
    reason: "FieldValueForbidden",
  },
  {
    rule: "!self.contains('?')",
    message: `spec.baseUrl ${BASE_URL_PROBLEM.query}`,
    reason: "FieldValueForbidden",
  },
  {
    rule: "!self.contains('#')",
    message: `spec.baseUrl ${BASE_URL_PROBLEM.fragment}`,
    reason: "FieldValueForbidden",
  },
];

/** The CEL rule refusing the {@link REFUSED_HEADERS} as the header named by `field`. */
export function refusedHeaderRule(field: string): CelRule {
  return {
    rule: `!(self.lowerAscii() in [${REFUSED_HEADERS.map((h) => `'${h}'`).join(", ")}])`,
    message: `spec.${field} must not be a header that frames, routes or proxies the request, that the HTTP client sets, or that a cloud metadata service requires (${REFUSED_HEADERS.join(", ")}; any case): choose a header of your own, e.g. X-Api-Key`,
    reason: "FieldValueForbidden",
  };
}

/**
 * The CEL rules of `spec.caBundle`: PEM certificates, and no private key (a connection is read by
 * more people than its Secrets are). The operator parses each certificate too (`parseCaBundle`,
 * src/api/tls.ts), naming a bad one; CEL cannot parse X.509.
 */
export const CA_BUNDLE_RULES: readonly CelRule[] = [
  {
    rule: "self.contains('-----BEGIN CERTIFICATE-----') && self.contains('-----END CERTIFICATE-----')",
    message:
      "spec.caBundle must hold PEM certificates, from -----BEGIN CERTIFICATE----- to -----END CERTIFICATE-----: paste the CA's certificate file (ca.crt) whole",
    reason: "FieldValueInvalid",
  },
  {
    rule: "!self.contains('PRIVATE KEY-----')",
    message:
      "spec.caBundle must not hold a private key: keep only the CA's certificates (and rotate the key if it was shared)",
    reason: "FieldValueForbidden",
  },
];
