// Private CAs and proxies at unit speed: which CA bundles are accepted and how a bad one is
// named, what each certificate error code is said to mean, which proxy variables are kept and
// on which Node, and the settings `--ca-file` and a connection's TLS fields make.
import tls, { rootCertificates } from "node:tls";
import { beforeAll, describe, expect, it, vi } from "vitest";
import {
  defaultCertificateAuthorities,
  nodeHasProxySupport,
  proxyEnvOf,
  proxySupportProblem,
  redactProxyUrl,
  serviceAgents,
} from "../../src/api/agent.ts";
import {
  CONNECTION_TLS_FIXES,
  describeTlsFailure,
  FLAG_TLS_FIXES,
  MAX_CA_BUNDLE_BYTES,
  parseCaBundle,
  tlsFailureOf,
} from "../../src/api/tls.ts";
import { serviceConfigFrom } from "../../src/config.ts";
import { caSecretOf, serviceConfigOf, tlsSpecProblems } from "../../src/connection/settings.ts";
import { createTestCa, EXPIRED, type PemPair, type TestCa } from "../support/certificates.ts";

let ca: TestCa;
let intermediate: TestCa;
let expiredLeaf: PemPair;

beforeAll(async () => {
  ca = await createTestCa("Corp Root CA");
  intermediate = await createTestCa("Corp Issuing CA");
  expiredLeaf = await ca.leaf(EXPIRED);
});

const BROKEN = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n";

describe("parseCaBundle", () => {
  it("reads every certificate of a bundle, comments between them allowed", () => {
    const parsed = parseCaBundle(
      `# Corp Root CA\n${ca.cert}\n# Issuing\r\n${intermediate.cert}`,
      "spec.caBundle",
    );
    expect(parsed.ok && parsed.certificates.map((c) => c.subject)).toEqual([
      "CN=Corp Root CA",
      "CN=Corp Issuing CA",
    ]);
  });

  it("accepts an expired certificate beside the others: the handshake names it if it matters", () => {
    expect(parseCaBundle(`${ca.cert}${expiredLeaf.cert}`, "spec.caBundle").ok).toBe(true);
  });

  it.each([
    { name: "no certificate at all", text: "hello", problem: "spec.caBundle holds no PEM certificate" },
    { name: "an empty text", text: "", problem: "spec.caBundle holds no PEM certificate" },
    {
      name: "a certificate that does not parse, named by its place",
      text: () => `${ca.cert}${BROKEN}`,
      problem: "spec.caBundle: certificate 2 is not a valid X.509 certificate",
    },
    {
      name: "a private key",
      text: () => `${ca.cert}${ca.key}`,
      problem:
        "spec.caBundle: block 2 is a PRIVATE KEY, not a CERTIFICATE: keep only the CA certificates (never a private key)",
    },
    {
      name: "a block that never ends",
      text: () => `${ca.cert}-----BEGIN CERTIFICATE-----\nMIIB`,
      problem: "spec.caBundle: the last PEM block has no END line",
    },
    {
      name: "a block left open before another",
      text: () => `-----BEGIN CERTIFICATE-----\nMIIB\n${ca.cert}`,
      problem: "spec.caBundle: block 1 has no END line before the next BEGIN line",
    },
    {
      name: "mismatched labels",
      text: () => "-----BEGIN CERTIFICATE-----\nAAAA\n-----END PUBLIC KEY-----\n",
      problem: "spec.caBundle: block 1 begins as CERTIFICATE and ends as PUBLIC KEY",
    },
    {
      name: "more than 64 KiB",
      text: () => `${ca.cert}${"#".repeat(MAX_CA_BUNDLE_BYTES)}`,
      problem: `more than ${MAX_CA_BUNDLE_BYTES}`,
    },
    {
      name: "a BEGIN line with a label that is not one",
      text: () => `-----BEGIN certificate-----\nMIIB\n-----END certificate-----\n${ca.cert}`,
      problem: "spec.caBundle: block 1 does not begin with a BEGIN line such as -----BEGIN CERTIFICATE-----",
    },
    {
      name: "an END line that is not closed",
      text: () => "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE",
      problem: "spec.caBundle: block 1 does not end with an END line such as -----END CERTIFICATE-----",
    },
  ])("refuses $name", ({ text, problem }) => {
    const parsed = parseCaBundle(typeof text === "function" ? text() : text, "spec.caBundle");
    expect(parsed.ok).toBe(false);
    expect(!parsed.ok && parsed.problem).toContain(problem);
  });

  // A regular expression with a lazy body searched the rest of the text from every BEGIN line:
  // ~300 ms per parse of these 64 KiB (measured before the scanner replaced it). The framing reads
  // the text with `indexOf` alone, each character a few times: counted here, the characters those
  // searches pass over stay within a small multiple of the text's length, and no regular
  // expression runs over more than a line of it. Counted, not timed: a loaded machine's speed
  // does not decide the case.
  const FILL = MAX_CA_BUNDLE_BYTES - 1_024;
  /** What parsing `text` read of it: characters searched by `indexOf`, longest regex input. */
  const readingOf = (text: string, parse: () => unknown) => {
    const indexOf = String.prototype.indexOf;
    const exec = RegExp.prototype.exec;
    let searched = 0;
    let longestRegexInput = 0;
    String.prototype.indexOf = function (this: string, search: string, from?: number) {
      const at = indexOf.call(this, search, from);
      if (this === text) searched += (at < 0 ? this.length : at + search.length) - Math.max(0, from ?? 0);
      return at;
    };
    RegExp.prototype.exec = function (this: RegExp, input: string) {
      longestRegexInput = Math.max(longestRegexInput, String(input).length);
      return exec.call(this, input);
    };
    try {
      parse();
    } finally {
      String.prototype.indexOf = indexOf;
      RegExp.prototype.exec = exec;
    }
    return { searched, longestRegexInput };
  };
  it.each([
    { name: "BEGIN lines without an END", text: () => "-----BEGIN A-----".repeat(FILL / 17) },
    {
      name: "an END line, then BEGIN lines",
      text: () => `-----END CERTIFICATE-----${"-----BEGIN A-----".repeat(FILL / 17)}`,
    },
    { name: "one BEGIN line and no END", text: () => `-----BEGIN CERTIFICATE-----${"A".repeat(FILL)}` },
    {
      name: "thousands of small blocks, each framed",
      text: () => "-----BEGIN X-----a-----END X-----\n".repeat(FILL / 34),
    },
    {
      name: "a certificate, then BEGIN lines without an END",
      text: () => `${ca.cert}${"-----BEGIN CERTIFICATE-----".repeat((FILL - ca.cert.length) / 27)}`,
    },
  ])("frames a crafted 64 KiB bundle ($name) reading each character a few times", ({ text }) => {
    const crafted = text();
    expect(crafted.length).toBeGreaterThan(60_000);
    expect(crafted.length).toBeLessThanOrEqual(MAX_CA_BUNDLE_BYTES);
    let parsed: ReturnType<typeof parseCaBundle> | undefined;
    const { searched, longestRegexInput } = readingOf(crafted, () => {
      parsed = parseCaBundle(crafted, "spec.caBundle");
    });
    expect(parsed?.ok).toBe(false);
    expect(searched).toBeGreaterThan(0);
    expect(searched).toBeLessThanOrEqual(4 * crafted.length);
    expect(longestRegexInput).toBeLessThanOrEqual(64);
  });
});

describe("tlsFailureOf", () => {
  it.each([
    ["UNABLE_TO_VERIFY_LEAF_SIGNATURE", "unknown authority", CONNECTION_TLS_FIXES.ca],
    ["UNABLE_TO_GET_ISSUER_CERT_LOCALLY", "unknown authority", CONNECTION_TLS_FIXES.ca],
    ["SELF_SIGNED_CERT_IN_CHAIN", "self-signed", CONNECTION_TLS_FIXES.ca],
    ["DEPTH_ZERO_SELF_SIGNED_CERT", "self-signed", CONNECTION_TLS_FIXES.ca],
    ["CERT_HAS_EXPIRED", "has expired", "renew the service's certificate"],
    ["CERT_NOT_YET_VALID", "not valid yet", "check the clocks"],
    ["ERR_TLS_CERT_ALTNAME_INVALID", "not for dms.corp.example", "subject alternative names"],
    ["CERT_SIGNATURE_FAILURE", "was refused", CONNECTION_TLS_FIXES.ca],
  ])("%s: %s", (code, cause, fix) => {
    const failure = tlsFailureOf(code, "dms.corp.example", CONNECTION_TLS_FIXES);
    expect(failure?.cause).toContain(cause);
    expect(failure?.fix).toContain(fix);
    expect(describeTlsFailure(failure ?? { code, cause, fix })).toBe(
      `TLS verification failed: ${failure?.cause} (${code}); ${failure?.fix}`,
    );
  });

  it("the connection's fix names its fields, the CLI's its flag", () => {
    expect(CONNECTION_TLS_FIXES.ca).toBe("set spec.caBundle or spec.caSecretRef to the CA that signed it");
    expect(FLAG_TLS_FIXES.ca).toContain("--ca-file (env DMS_CA_FILE)");
  });

  it("is undefined for a failure that is not the certificate's", () => {
    expect(tlsFailureOf("ECONNRESET", "h", FLAG_TLS_FIXES)).toBeUndefined();
    expect(tlsFailureOf("ERR_SSL_WRONG_VERSION_NUMBER", "h", FLAG_TLS_FIXES)).toBeUndefined();
  });
});

describe("the proxy variables", () => {
  it("keeps the six variables that are set, and nothing else of the environment", () => {
    expect(
      proxyEnvOf({
        HTTPS_PROXY: "http://p:3128",
        no_proxy: " .svc,10.0.0.0/8 ",
        HTTP_PROXY: "",
        PATH: "/bin",
      }),
    ).toEqual({ HTTPS_PROXY: "http://p:3128", no_proxy: ".svc,10.0.0.0/8" });
    expect(proxyEnvOf({ PATH: "/bin" })).toBeUndefined();
  });

  it.each([
    ["22.19.0", false],
    ["22.20.0", false],
    ["22.21.0", true],
    ["23.11.0", false],
    ["24.4.1", false],
    ["24.5.0", true],
    ["24.21.0", true],
    ["26.0.0", true],
  ])("Node %s has the agents' proxy support: %s", (version, supported) => {
    expect(nodeHasProxySupport(version)).toBe(supported);
  });

  it("refuses a proxy on a Node without support, naming the versions that have it", () => {
    expect(proxySupportProblem({ HTTPS_PROXY: "http://p:3128" }, "22.19.0")).toEqual([
      "HTTPS_PROXY / HTTP_PROXY: set, but Node 22.19.0 cannot send the service's calls through a proxy (its agents' proxy support came in Node 22.21 and 24.5); run on Node >= 22.21 (24.5 on Node 24), or unset the variables",
    ]);
    expect(proxySupportProblem({ NO_PROXY: "localhost" }, "22.19.0")).toEqual([]);
    expect(proxySupportProblem({ HTTPS_PROXY: "http://p:3128" }, "24.21.0")).toEqual([]);
  });

  it("refuses a proxy that is not an http(s) URL, without its password", () => {
    expect(proxySupportProblem({ https_proxy: "socks5://u:hunter2@p:1080" }, "24.21.0")).toEqual([
      'https_proxy: "socks5://u:REDACTED@p:1080" is not an http:// or https:// proxy URL with a host, e.g. http://proxy.example.com:3128',
    ]);
    expect(redactProxyUrl("http://u:hunter2@p:3128")).toBe("http://u:REDACTED@p:3128/");
    expect(redactProxyUrl("not a url://u:hunter2@x")).not.toContain("hunter2");
  });
});

describe("serviceAgents", () => {
  it("adds a CA bundle to Node's default CA set, in one secure context, and keeps connections alive", () => {
    const made = vi.spyOn(tls, "createSecureContext");
    try {
      const { https } = serviceAgents({ caBundle: ca.cert, proxyEnv: undefined });
      expect(https.options.secureContext).toBe(made.mock.results[0]?.value);
      expect(made.mock.calls).toEqual([[{ ca: [...defaultCertificateAuthorities(), ca.cert] }]]);
      expect(https.options.keepAlive).toBe(true);
    } finally {
      made.mockRestore();
    }
    // The default set holds at least Node's bundled roots.
    expect(defaultCertificateAuthorities().length).toBeGreaterThanOrEqual(rootCertificates.length);
  });

  it("leaves Node's roots alone without a bundle", () => {
    const { options } = serviceAgents({ caBundle: undefined, proxyEnv: undefined }).https;
    expect([options.ca, options.secureContext]).toEqual([undefined, undefined]);
  });
});

describe("--ca-file and the proxy in the service settings", () => {
  const files = (contents: Record<string, string>) => (path: string) => {
    const found = contents[path];
    if (found === undefined) throw Object.assign(new Error("ENOENT"), { code: "ENOENT" });
    return found;
  };

  it("reads the CA file (flag or DMS_CA_FILE) and the proxy variables", () => {
    const result = serviceConfigFrom(
      { baseUrl: "https://dms.corp.example/api-host" },
      { DMS_CA_FILE: "/etc/dms/ca.crt", HTTPS_PROXY: "http://user:pw@proxy:3128", NO_PROXY: ".svc" },
      files({ "/etc/dms/ca.crt": ca.cert }),
      "24.21.0",
    );
    expect(result.ok && result.config).toMatchObject({
      baseUrl: "https://dms.corp.example/api-host",
      caBundle: ca.cert,
      proxyEnv: { HTTPS_PROXY: "http://user:pw@proxy:3128", NO_PROXY: ".svc" },
    });
  });

  it("names an unreadable file, a bad certificate in it, and a CA with verification skipped", () => {
    const read = files({ "/bad.crt": `${ca.cert}${BROKEN}` });
    const missing = serviceConfigFrom({ baseUrl: "https://x", caFile: "/nope" }, {}, read, "24.21.0");
    expect(!missing.ok && missing.problems).toEqual([
      "--ca-file / DMS_CA_FILE: cannot read /nope (ENOENT); point it at the PEM file of the CA that signs the service's certificate",
    ]);
    const bad = serviceConfigFrom({ baseUrl: "https://x", caFile: "/bad.crt" }, {}, read, "24.21.0");
    expect(!bad.ok && bad.problems[0]).toContain(
      "--ca-file / DMS_CA_FILE /bad.crt: certificate 2 is not a valid X.509 certificate",
    );
    const both = serviceConfigFrom(
      { baseUrl: "https://x", caFile: "/ca.crt", insecureSkipTlsVerify: true },
      {},
      files({ "/ca.crt": ca.cert }),
      "24.21.0",
    );
    expect(!both.ok && both.problems[0]).toContain(
      "--ca-file / DMS_CA_FILE and --insecure-skip-tls-verify / DMS_INSECURE_SKIP_TLS_VERIFY: give one of them",
    );
  });

  it("refuses a proxy on an old Node at start-up, not silently bypassing it", () => {
    const result = serviceConfigFrom(
      { baseUrl: "https://x" },
      { HTTPS_PROXY: "http://p:3128" },
      files({}),
      "22.19.0",
    );
    expect(!result.ok && result.problems[0]).toContain(
      "Node 22.19.0 cannot send the service's calls through a proxy",
    );
  });
});

describe("a connection's TLS fields", () => {
  const SPEC = {
    baseUrl: "https://dms.corp.example/api-host",
    apiKeySecretRef: { name: "dms", key: "api-key" },
  };

  it("refuses a CA given twice, a CA with verification skipped, and a bundle that is not certificates", () => {
    expect(tlsSpecProblems({ caBundle: ca.cert, caSecretRef: { name: "ca" } })).toEqual([
      "spec.caBundle and spec.caSecretRef: give one of them, the CA's certificates inline or the Secret holding them",
    ]);
    expect(tlsSpecProblems({ caSecretRef: { name: "ca" }, insecureSkipTLSVerify: true })).toEqual([
      "spec.insecureSkipTLSVerify: not with spec.caBundle or spec.caSecretRef; set it to false to verify the service's certificate with the CA",
    ]);
    expect(tlsSpecProblems({ caBundle: `${ca.cert}${BROKEN}` })[0]).toContain(
      "spec.caBundle: certificate 2 is not a valid X.509 certificate",
    );
    expect(tlsSpecProblems({ caBundle: ca.cert, insecureSkipTLSVerify: false })).toEqual([]);
  });

  it("finds the CA Secret in the connection's namespace, or the one a cluster connection names; key ca.crt by default", () => {
    const namespaced = { kind: "ServiceConnection", namespace: "team-a", name: "prod" } as const;
    const cluster = { kind: "ClusterServiceConnection", namespace: "", name: "shared" } as const;
    expect(caSecretOf(namespaced, { caSecretRef: { name: "corp-ca" } })).toEqual({
      namespace: "team-a",
      name: "corp-ca",
      key: "ca.crt",
    });
    expect(
      caSecretOf(cluster, { caSecretRef: { name: "corp-ca", key: "root.pem", namespace: "dms-system" } }),
    ).toEqual({
      namespace: "dms-system",
      name: "corp-ca",
      key: "root.pem",
    });
    expect(caSecretOf(namespaced, {})).toBeUndefined();
  });

  it("trusts its own CA, never the operator's --ca-file, and goes through the operator's proxy", () => {
    const defaults = serviceConfigFrom(
      { baseUrl: "https://default.example", caFile: "/ca.crt" },
      { HTTPS_PROXY: "http://proxy:3128" },
      () => intermediate.cert,
      "24.21.0",
    );
    if (!defaults.ok) throw new Error(defaults.problems.join("; "));
    const own = serviceConfigOf({ ...SPEC, caBundle: ca.cert }, "k", defaults.config);
    expect(own).toMatchObject({ caBundle: ca.cert, proxyEnv: { HTTPS_PROXY: "http://proxy:3128" } });
    expect(serviceConfigOf(SPEC, "k", defaults.config).caBundle).toBeUndefined();
    expect(
      serviceConfigOf({ ...SPEC, caSecretRef: { name: "ca" } }, "k", defaults.config, ca.cert).caBundle,
    ).toBe(ca.cert);
  });
});
