/**
 * Certificates made in the test (never kept, never trusted elsewhere): a private CA, leaves it
 * signs for 127.0.0.1/localhost or for another host, an expired one, one not valid yet, and a
 * self-signed leaf, with @peculiar/x509 over Node's WebCrypto (EC P-256).
 */
import { webcrypto } from "node:crypto";
import { loadX509 } from "../../src/serving/x509.ts";

const x509 = await loadX509();

const ALGORITHM = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const DAY = 86_400_000;

/** A certificate and its key, PEM. */
export interface PemPair {
  cert: string;
  key: string;
}

/** A CA that can sign leaves. */
export interface TestCa extends PemPair {
  /** A leaf signed by this CA; `hosts` are IPs or DNS names (default 127.0.0.1 and localhost). */
  leaf(options?: { hosts?: string[]; notBefore?: Date; notAfter?: Date }): Promise<PemPair>;
}

let serial = 1;
const nextSerial = () => (serial++).toString(16).padStart(2, "0");

type KeyPair = webcrypto.CryptoKeyPair;

async function keyPem(keys: KeyPair): Promise<string> {
  const pkcs8 = await webcrypto.subtle.exportKey("pkcs8", keys.privateKey as webcrypto.CryptoKey);
  return x509.PemConverter.encode(pkcs8, "PRIVATE KEY");
}

const generate = async () =>
  (await webcrypto.subtle.generateKey(ALGORITHM, true, ["sign", "verify"])) as KeyPair;

function altNames(hosts: string[]) {
  return new x509.SubjectAlternativeNameExtension(
    hosts.map((h) =>
      /^[\d.]+$/.test(h) ? { type: "ip" as const, value: h } : { type: "dns" as const, value: h },
    ),
  );
}

/** A new private CA named `name`, valid from yesterday for a year. */
export async function createTestCa(name = "Test Private CA"): Promise<TestCa> {
  const keys = await generate();
  const now = Date.now();
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: nextSerial(),
    name: `CN=${name}`,
    notBefore: new Date(now - DAY),
    notAfter: new Date(now + 365 * DAY),
    keys,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return {
    cert: ca.toString("pem"),
    key: await keyPem(keys),
    leaf: async (options = {}) => {
      const leafKeys = await generate();
      const hosts = options.hosts ?? ["127.0.0.1", "localhost"];
      const leaf = await x509.X509CertificateGenerator.create({
        serialNumber: nextSerial(),
        subject: `CN=${hosts[0]}`,
        issuer: ca.subject,
        notBefore: options.notBefore ?? new Date(now - DAY),
        notAfter: options.notAfter ?? new Date(now + 30 * DAY),
        signingKey: keys.privateKey,
        publicKey: leafKeys.publicKey,
        signingAlgorithm: ALGORITHM,
        extensions: [
          new x509.BasicConstraintsExtension(false, undefined, true),
          new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
          altNames(hosts),
          await x509.AuthorityKeyIdentifierExtension.create(ca),
        ],
      });
      return { cert: leaf.toString("pem"), key: await keyPem(leafKeys) };
    },
  };
}

/** A self-signed leaf for 127.0.0.1 (no CA at all). */
export async function createSelfSigned(): Promise<PemPair> {
  const keys = await generate();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: nextSerial(),
    name: "CN=127.0.0.1",
    notBefore: new Date(Date.now() - DAY),
    notAfter: new Date(Date.now() + 30 * DAY),
    keys,
    signingAlgorithm: ALGORITHM,
    extensions: [altNames(["127.0.0.1"])],
  });
  return { cert: cert.toString("pem"), key: await keyPem(keys) };
}

/** Dates of a leaf that expired yesterday, and of one valid only from tomorrow. */
export const EXPIRED = { notBefore: new Date(Date.now() - 30 * DAY), notAfter: new Date(Date.now() - DAY) };
export const NOT_YET_VALID = {
  notBefore: new Date(Date.now() + DAY),
  notAfter: new Date(Date.now() + 30 * DAY),
};
