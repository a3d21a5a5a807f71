/**
 * The bearer token of a scrape's `Authorization` header, as `/metrics` takes it before any review
 * (metrics-auth.ts): one the API server could be asked about, or none, refused at no cost to it.
 */

/**
 * Longest bearer token reviewed. ServiceAccount tokens are about 1 KiB; an OIDC token with many
 * groups a few KiB. Anything longer is refused without costing the API server a review (Node's
 * default limit on a request's headers, 16 KiB in all, refuses most of those before this).
 */
export const MAX_TOKEN_LENGTH = 16_384;

/**
 * The token of an `Authorization: Bearer <token>` header (scheme in any case), if it can be a
 * token at all; undefined refuses the scrape without a review. `header` is as Node gives it: one
 * Latin-1 character per byte.
 *
 * What the API server accepts as a bearer token is wider than any one format: ServiceAccount and
 * OIDC tokens are JWTs and bootstrap tokens are `[a-z0-9]{6}.[a-z0-9]{16}`, but a static token
 * file and a webhook token authenticator (OpenShift's `sha256~…`, EKS's `k8s-aws-v1.…`) accept
 * any string the header carries. The API server takes the text between the first and a second
 * space, so a token is one run without spaces; what remains to refuse is only what no
 * authenticator can be given: an empty or over-long token, control characters (Node answers 400
 * to those before this is asked), and bytes that are not UTF-8 (a TokenReview's JSON cannot
 * carry them). Node reads header bytes as Latin-1; they are decoded as UTF-8 here, as the API
 * server's Go strings hold them, so a non-ASCII static token is reviewed as sent.
 */
export function bearerToken(header: string | undefined): string | undefined {
  const match = /^bearer +(\S+) *$/i.exec(header ?? "");
  const raw = match?.[1];
  if (raw === undefined || raw.length > MAX_TOKEN_LENGTH) return undefined;
  let ascii = true;
  for (let i = 0; i < raw.length; i++) {
    const code = raw.charCodeAt(i);
    // \S leaves out tab and line feed, not the other control characters: refuse them here.
    if (code < 0x20 || code === 0x7f) return undefined;
    // Not a header as Node reads it (one character per byte): nothing a client could have sent.
    if (code > 0xff) return undefined;
    if (code > 0x7f) ascii = false;
  }
  if (ascii) return raw;
  try {
    return UTF8.decode(Buffer.from(raw, "latin1"));
  } catch {
    return undefined;
  }
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });
