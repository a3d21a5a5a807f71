// The CAs a connection's bundle is added to: Node's default set (bundled, system under
// --use-system-ca, NODE_EXTRA_CA_CERTS) where Node can say it, else the bundled roots and the
// NODE_EXTRA_CA_CERTS file, as Node itself would have trusted them.
import { getCACertificates, rootCertificates } from "node:tls";
import { describe, expect, it } from "vitest";
import { defaultCertificateAuthorities } from "../../src/api/agent.ts";

const ROOTS = ["root-1", "root-2"];
const noFile = (path: string): string => {
  throw new Error(`ENOENT: ${path}`);
};

describe("defaultCertificateAuthorities", () => {
  it("is Node's default set where tls.getCACertificates exists", () => {
    expect(defaultCertificateAuthorities()).toEqual(getCACertificates("default"));
    expect(defaultCertificateAuthorities()).toEqual(expect.arrayContaining([...rootCertificates]));
  });

  it("without it: the bundled roots and the NODE_EXTRA_CA_CERTS file", () => {
    const sources = {
      rootCertificates: ROOTS,
      env: { NODE_EXTRA_CA_CERTS: "/etc/proxy-ca.pem" },
      readFile: (path: string) => `pem of ${path}`,
    };
    expect(defaultCertificateAuthorities(sources)).toEqual([...ROOTS, "pem of /etc/proxy-ca.pem"]);
    expect(defaultCertificateAuthorities({ ...sources, env: {} })).toEqual(ROOTS);
    // Node leaves out a file it cannot read (with a warning of its own): so do we.
    expect(defaultCertificateAuthorities({ ...sources, readFile: noFile })).toEqual(ROOTS);
  });
});
