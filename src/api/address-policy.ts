/**
 * Which addresses the operator's service clients may connect to. A connection's base URL is
 * chosen by whoever may create a ServiceConnection, and the operator runs with a pod's network:
 * a base URL aimed at the cloud's metadata service (169.254.169.254, `metadata.google.internal`)
 * would have the operator fetch the node's credentials and reflect them into a status. So
 * link-local addresses and the metadata services' known names and addresses are never connected
 * to; loopback and private (cluster-internal) addresses are, unless the install asks for public
 * addresses only (`--connection-address-policy=public-only`). Pure, but for {@link checkedLookup},
 * which wraps a resolver.
 */
import type { LookupFunction } from "node:net";

// Node's module by `process.getBuiltinModule`, not `import` (docs/internals/architecture.md, "Node's
// own modules"): a command's start does without what its ES namespace would load.
const { isIPv4, isIPv6 } = process.getBuiltinModule("node:net");

/** `--connection-address-policy`: what, beyond link-local and metadata addresses, is refused. */
export const ADDRESS_POLICIES = ["allow-private", "public-only"] as const;
export type AddressPolicy = (typeof ADDRESS_POLICIES)[number];

/**
 * Host names of cloud metadata services (lower case, without a trailing dot), refused whatever
 * they resolve to: Google Cloud (`metadata`, `metadata.google.internal`, `metadata.goog`),
 * Azure (`metadata.azure.com`), Tencent Cloud (`metadata.tencentyun.com`) and AWS
 * (`instance-data`, `instance-data.ec2.internal`). Most resolve to a link-local address, which
 * is refused anyway; the names are refused too so that the refusal shows where the name is
 * written (the CRD, a proxy that resolves the name itself).
 */
export const METADATA_HOSTS = [
  "metadata",
  "metadata.google.internal",
  "metadata.goog",
  "metadata.azure.com",
  "metadata.tencentyun.com",
  "instance-data",
  "instance-data.ec2.internal",
] as const;

/** What an address is, as far as the policy cares. */
export type AddressClass = "metadata" | "loopback" | "private" | "public";

interface Range {
  /** The first address, and how many leading bits are fixed. */
  address: string;
  bits: number;
  class: Exclude<AddressClass, "public">;
  /** What the range is, in a message: `a link-local address (…)`. */
  what: string;
}

const LINK_LOCAL = "a link-local address (where cloud metadata services answer)";

/**
 * The ranges that are not public, most specific first. IPv4 ranges also cover their
 * IPv4-mapped (`::ffff:a.b.c.d`), IPv4-translated (`::ffff:0:a.b.c.d`), IPv4-compatible
 * (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) and 6to4 (`2002:AABB:CCDD::/48`) IPv6 forms (see
 * {@link classifyAddress}). The NAT64 local-use prefix is refused whole: where it carries the
 * IPv4 address depends on a prefix length only its translator knows.
 */
const RANGES: readonly Range[] = [
  { address: "169.254.0.0", bits: 16, class: "metadata", what: LINK_LOCAL },
  { address: "fe80::", bits: 10, class: "metadata", what: LINK_LOCAL },
  { address: "100.100.100.200", bits: 32, class: "metadata", what: "Alibaba Cloud's metadata service" },
  {
    address: "168.63.129.16",
    bits: 32,
    class: "metadata",
    what: "Azure's platform endpoint (WireServer, which hands out the VM's configuration)",
  },
  { address: "192.0.0.192", bits: 32, class: "metadata", what: "Oracle Cloud's metadata service" },
  {
    address: "64:ff9b:1::",
    bits: 48,
    class: "metadata",
    what: "a NAT64 local-use address (64:ff9b:1::/48), which a translator may send to any IPv4 address, link-local included",
  },
  { address: "fd00:ec2::254", bits: 128, class: "metadata", what: "AWS's IPv6 metadata service" },
  { address: "fd00:ec2::23", bits: 128, class: "metadata", what: "EKS Pod Identity's IPv6 agent" },
  { address: "fd20:ce::254", bits: 128, class: "metadata", what: "Google Cloud's IPv6 metadata service" },
  { address: "127.0.0.0", bits: 8, class: "loopback", what: "a loopback address" },
  { address: "::1", bits: 128, class: "loopback", what: "a loopback address" },
  { address: "0.0.0.0", bits: 8, class: "loopback", what: "an unspecified address (this host)" },
  { address: "::", bits: 128, class: "loopback", what: "an unspecified address (this host)" },
  { address: "10.0.0.0", bits: 8, class: "private", what: "a private address" },
  { address: "172.16.0.0", bits: 12, class: "private", what: "a private address" },
  { address: "192.168.0.0", bits: 16, class: "private", what: "a private address" },
  { address: "100.64.0.0", bits: 10, class: "private", what: "a shared (carrier-grade NAT) address" },
  { address: "192.0.0.0", bits: 24, class: "private", what: "an IETF protocol address" },
  { address: "198.18.0.0", bits: 15, class: "private", what: "a benchmarking address" },
  { address: "224.0.0.0", bits: 4, class: "private", what: "a multicast address" },
  { address: "240.0.0.0", bits: 4, class: "private", what: "a reserved address" },
  { address: "fc00::", bits: 7, class: "private", what: "a unique local (private) address" },
  { address: "fec0::", bits: 10, class: "private", what: "a site-local (private) address" },
  { address: "ff00::", bits: 8, class: "private", what: "a multicast address" },
];

/**
 * 4 or 6 when `address` is an IPv4 or IPv6 address, else 0: `net.isIP`'s answer, without asking
 * about IPv6 for a text with no colon (a name): the first such question compiles Node's IPv6
 * pattern, ~5 ms, which a command's call to a named service or to 127.0.0.1 never needs.
 */
export function ipFamily(address: string): 0 | 4 | 6 {
  return isIPv4(address) ? 4 : address.includes(":") && isIPv6(address) ? 6 : 0;
}

/** `address` as 16 bytes (an IPv4 address as its IPv4-mapped IPv6 form), or undefined. */
export function addressBytes(address: string): Uint8Array | undefined {
  const family = ipFamily(address);
  return family === 0 ? undefined : bytesOf(address, family);
}

/** A valid IPv4 (`family` 4) or IPv6 address as 16 bytes. */
function bytesOf(address: string, family: 4 | 6): Uint8Array {
  if (family === 4) return mapped(address.split(".").map(Number));
  // A zone (`fe80::1%eth0`) names an interface, not a part of the address.
  let text = address.toLowerCase().replace(/%.*$/, "");
  const bytes = new Uint8Array(16);
  // An embedded IPv4 tail (`::ffff:169.254.169.254`) is two groups.
  const tail = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (tail) {
    const [a, b, c, d] = tail.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, tail.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", rest] = text.split("::");
  const groups = (part: string) => (part === "" ? [] : part.split(":").map((g) => Number.parseInt(g, 16)));
  const front = groups(head);
  const back = rest === undefined ? [] : groups(rest);
  const all = [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
  all.forEach((group, i) => {
    bytes[2 * i] = group >> 8;
    bytes[2 * i + 1] = group & 0xff;
  });
  return bytes;
}

function mapped(octets: number[]): Uint8Array {
  const bytes = new Uint8Array(16);
  bytes[10] = 0xff;
  bytes[11] = 0xff;
  bytes.set(octets, 12);
  return bytes;
}

/**
 * The ranges of one family as bytes, in their order, made at the first check of an address of that
 * family (a command's `--help` imports this module for its flags; a command's check of
 * `127.0.0.1` parses no IPv6 range, cold code that takes a millisecond). An IPv4 range is in the
 * mapped form: none of the IPv6 ranges overlaps it (`::ffff:0:0/96`), so an address in that form
 * can only be in an IPv4 range, and any other only in an IPv6 one.
 */
const rangeBytes = new Map<4 | 6, { range: (typeof RANGES)[number]; bytes: Uint8Array; bits: number }[]>();
function rangesAsBytes(family: 4 | 6) {
  let ranges = rangeBytes.get(family);
  if (ranges === undefined) {
    // The ranges are addresses as written here: an IPv6 one has a colon, and needs no check.
    ranges = RANGES.filter((range) => (range.address.includes(":") ? 6 : 4) === family).map((range) => ({
      range,
      bytes: bytesOf(range.address, family),
      // An IPv4 range's bits count from the mapped form's 96th.
      bits: family === 6 ? range.bits : 96 + range.bits,
    }));
    rangeBytes.set(family, ranges);
  }
  return ranges;
}

function inPrefix(address: Uint8Array, prefix: Uint8Array, bits: number): boolean {
  for (let i = 0; i < bits; i++) {
    const mask = 0x80 >> (i % 8);
    if (((address[i >> 3] ?? 0) & mask) !== ((prefix[i >> 3] ?? 0) & mask)) return false;
  }
  return true;
}

const zeros = (bytes: Uint8Array, from: number, to: number) => bytes.slice(from, to).every((b) => b === 0);

/** Whether `bytes` is an IPv4-mapped address (`::ffff:0:0/96`). */
const isMapped = (bytes: Uint8Array) => zeros(bytes, 0, 10) && bytes[10] === 0xff && bytes[11] === 0xff;

/**
 * The IPv4 address an IPv6 address carries to an IPv4 host, as a mapped address: IPv4-mapped
 * (`::ffff:0:0/96`, already that form), IPv4-translated (`::ffff:0:0:0/96`, SIIT),
 * IPv4-compatible (`::/96`, but `::` and `::1`), the NAT64 well-known prefix (`64:ff9b::/96`,
 * which a translator sends to the IPv4 address) and 6to4 (`2002::/16`, the relay's IPv4 address
 * in bytes 2 to 5).
 */
function embeddedIpv4(bytes: Uint8Array): Uint8Array {
  const compatible = zeros(bytes, 0, 12) && !zeros(bytes, 12, 15);
  const translated = zeros(bytes, 0, 8) && bytes[8] === 0xff && bytes[9] === 0xff && zeros(bytes, 10, 12);
  const nat64 =
    bytes[0] === 0 && bytes[1] === 0x64 && bytes[2] === 0xff && bytes[3] === 0x9b && zeros(bytes, 4, 12);
  if (compatible || translated || nat64) return mapped([...bytes.slice(12)]);
  if (bytes[0] === 0x20 && bytes[1] === 0x02) return mapped([...bytes.slice(2, 6)]);
  return bytes;
}

/** What `address` (an IP literal) is: its class and, unless public, what range it is in. */
export function classifyAddress(address: string): { class: AddressClass; what: string } | undefined {
  const raw = addressBytes(address);
  if (!raw) return undefined;
  const bytes = embeddedIpv4(raw);
  const found = rangesAsBytes(isMapped(bytes) ? 4 : 6).find((r) => inPrefix(bytes, r.bytes, r.bits));
  return found
    ? { class: found.range.class, what: found.range.what }
    : { class: "public", what: "a public address" };
}

/** Whether `policy` refuses an address of class `c`. */
export function refuses(policy: AddressPolicy, c: AddressClass): boolean {
  return c === "metadata" || (policy === "public-only" && c !== "public");
}

/** A host name as compared with {@link METADATA_HOSTS}: lower case, brackets and a final dot removed. */
export function normalHost(host: string): string {
  const lower = host.toLowerCase().replace(/\.$/, "");
  return lower.startsWith("[") && lower.endsWith("]") ? lower.slice(1, -1) : lower;
}

/**
 * Why `host` (a URL's host name or an address) may not be connected to under `policy`, or
 * undefined: a metadata service's name, or an IP literal the policy refuses. A name that is
 * neither is checked by the addresses it resolves to ({@link checkedLookup}).
 */
export function hostProblem(host: string, policy: AddressPolicy): string | undefined {
  const name = normalHost(host);
  if ((METADATA_HOSTS as readonly string[]).includes(name))
    return `${name} is the name of a cloud metadata service, which the operator never connects to`;
  return addressProblem(name, policy, undefined);
}

/**
 * Why the address `address` may not be connected to under `policy` (`host`: the name it was
 * resolved from, for the message), or undefined.
 */
export function addressProblem(
  address: string,
  policy: AddressPolicy,
  host: string | undefined,
): string | undefined {
  const found = classifyAddress(address);
  if (!found || !refuses(policy, found.class)) return undefined;
  const subject = host === undefined ? `${address} is` : `${host} resolves to ${address}, which is`;
  return found.class === "metadata"
    ? `${subject} ${found.what}: the operator never connects to link-local or metadata addresses`
    : `${subject} ${found.what}: --connection-address-policy=public-only refuses loopback and private addresses`;
}

/** The code of the error a refused address fails a connection with. */
export const ADDRESS_REFUSED = "ERR_ADDRESS_REFUSED";

/** A connection refused by the address policy, before any packet was sent. */
export class AddressRefusedError extends Error {
  override readonly name = "AddressRefusedError";
  readonly code = ADDRESS_REFUSED;
}

/**
 * `resolve` (a `dns.lookup`), checking every address it answers before the socket may use one:
 * an answer with any refused address fails whole with an {@link AddressRefusedError}. The socket
 * connects only to the addresses checked here (a DNS answer that changes after a check does not
 * reach it).
 */
export function checkedLookup(resolve: LookupFunction, policy: AddressPolicy): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, options, (error, address, family) => {
      if (error) return callback(error, address, family);
      const answers = typeof address === "string" ? [address] : address.map((a) => a.address);
      for (const answer of answers) {
        const problem = addressProblem(answer, policy, hostname);
        if (problem) return callback(new AddressRefusedError(problem), "", 0);
      }
      callback(null, address, family);
    });
  };
}
