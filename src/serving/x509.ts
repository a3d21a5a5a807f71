/**
 * `@peculiar/x509`, loaded on demand and ready to use: it resolves its parts through tsyringe,
 * which needs the Reflect metadata API (`reflect-metadata`, the polyfill its README names) before
 * it loads. One loader for the operator's self-signed metrics certificate and the tests'
 * certificates, so neither carries a metadata shim of its own.
 */
import { webcrypto } from "node:crypto";

/** The X.509 library, with Node's WebCrypto as its crypto provider. */
export async function loadX509(): Promise<typeof import("@peculiar/x509")> {
  await import("reflect-metadata");
  const x509 = await import("@peculiar/x509");
  x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
  return x509;
}
