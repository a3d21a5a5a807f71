// A self-hosted service behind a private CA, reached through a ServiceConnection: without the CA
// the connection says its certificate is not trusted (CertificateNotTrusted, naming the fix) and
// its Deployments wait (ConnectionNotReady); with spec.caSecretRef it becomes Ready and they
// deploy; a change of the CA Secret reaches the connection; the API server refuses a CA given
// twice, a caBundle that is no PEM certificate, and a CA with verification skipped.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import type { ConnectionObject } from "../../src/kube/connections.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { createTestCa, type TestCa } from "../support/certificates.ts";
import { freshNamespace, kubectl, kubectlOk } from "../support/cluster.ts";
import { startOperator, startTestSimulator, TEST_API_KEY, type TestOperator } from "../support/operator.ts";
import { ClusterUser, conditionOf, hasCondition } from "../support/resources.ts";

const spec: DeploymentSpec = {
  source: "internal_docker",
  sourceConfig: { resourceSpec: { minScale: 1, maxScale: 2 } },
  sourceRevisionConfig: { imageUri: "registry.example.com/shop:1" },
  connectionRef: { kind: "ServiceConnection", name: "self-hosted" },
};

describe("controller: a service behind a private CA", () => {
  const user = new ClusterUser();
  let ns: string;
  let ca: TestCa;
  let otherCa: TestCa;
  /** The self-hosted service, its certificate signed by the private CA. */
  let selfHosted: RunningSimulator;
  /** The default connection's service (plain HTTP), which these tests do not use. */
  let plain: RunningSimulator;
  let op: TestOperator;

  const reason = (wanted: string) => (c: ConnectionObject | undefined) =>
    c?.status?.conditions?.find((x) => x.type === "Ready")?.reason === wanted;
  const connection = (wanted: string) =>
    user.waitForConnection("ServiceConnection", "self-hosted", ns, reason(wanted), `Ready reason ${wanted}`);
  const apply = (object: object) => kubectl(["apply", "-f", "-"], { input: JSON.stringify(object) });
  const connectionObject = (extra: Record<string, unknown>) => ({
    apiVersion: "dms.dev/v1alpha1",
    kind: "ServiceConnection",
    metadata: { name: "self-hosted", namespace: ns },
    spec: { baseUrl: selfHosted.url, apiKeySecretRef: { name: "dms", key: "api-key" }, ...extra },
  });

  beforeAll(async () => {
    ns = await freshNamespace("private-ca");
    ca = await createTestCa("Corp Root CA");
    otherCa = await createTestCa("Another CA");
    selfHosted = await startTestSimulator({ tls: await ca.leaf(), seed: { providers: [] } });
    plain = await startTestSimulator();
    await user.putSecret(ns, "dms", { "api-key": TEST_API_KEY });
    await kubectlOk(["apply", "-f", "-"], { input: JSON.stringify(connectionObject({})) });
    op = startOperator({ simulator: plain, namespaces: [ns] });
    await op.started();
  });

  afterAll(async () => {
    await kubectl(["delete", "deployments.dms.dev", "--all", "-n", ns, "--wait=false"]);
    await op?.stop();
    await selfHosted?.close();
    await plain?.close();
  });

  it("without the CA: CertificateNotTrusted, naming the cause and the fix; its Deployment waits", async () => {
    const untrusted = await connection("CertificateNotTrusted");
    const ready = conditionOf(untrusted, "Ready");
    expect(ready?.status).toBe("False");
    expect(ready?.message).toContain(`the service at ${selfHosted.url} is not trusted`);
    expect(ready?.message).toContain("unknown authority");
    expect(ready?.message).toContain("set spec.caBundle or spec.caSecretRef to the CA that signed it");
    expect(hasCondition(untrusted, "Stalled", "True", "CertificateNotTrusted")).toBe(true);

    await user.create(ns, "shop", spec);
    const waiting = await user.waitFor(
      ns,
      "shop",
      (o) => hasCondition(o, "Synced", "False", "ConnectionNotReady"),
      "ConnectionNotReady",
    );
    expect(conditionOf(waiting, "Synced")?.message).toContain(
      `ServiceConnection ${ns}/self-hosted is not Ready (CertificateNotTrusted)`,
    );
    expect(selfHosted.store.list()).toEqual([]);
  });

  it("with spec.caSecretRef (key ca.crt by default): Ready, and the Deployment deploys", async () => {
    await user.putSecret(ns, "corp-ca", { "ca.crt": ca.cert });
    await kubectlOk(["apply", "-f", "-"], {
      input: JSON.stringify(connectionObject({ caSecretRef: { name: "corp-ca" } })),
    });
    const connected = await connection("Connected");
    expect(connected.spec.caSecretRef).toEqual({ name: "corp-ca", key: "ca.crt" });
    await user.waitReady(ns, "shop");
    expect(selfHosted.store.list().map((d) => d.name)).toEqual(["shop"]);
  });

  it("a change of the CA Secret reaches the connection", async () => {
    await user.putSecret(ns, "corp-ca", { "ca.crt": otherCa.cert });
    const untrusted = await connection("CertificateNotTrusted");
    expect(conditionOf(untrusted, "Ready")?.message).toContain(
      "the CA in spec.caBundle or spec.caSecretRef does not sign it",
    );
    await user.putSecret(ns, "corp-ca", { "ca.crt": "not a certificate" });
    const invalid = await connection("InvalidCABundle");
    expect(conditionOf(invalid, "Ready")?.message).toContain(
      `Secret ${ns}/corp-ca (spec.caSecretRef) key ca.crt holds no PEM certificate`,
    );
    await user.putSecret(ns, "corp-ca", { "ca.crt": ca.cert });
    await connection("Connected");
  });

  it("the API server refuses a CA given twice, a caBundle without certificates, and a CA with verification skipped", async () => {
    const both = await apply(connectionObject({ caBundle: ca.cert, caSecretRef: { name: "corp-ca" } }));
    expect(both.code).not.toBe(0);
    expect(both.stderr).toContain("spec.caBundle and spec.caSecretRef: give one of them");
    const notPem = await apply(connectionObject({ caBundle: "hello" }));
    expect(notPem.stderr).toContain("spec.caBundle must hold PEM certificates");
    const key = await apply(connectionObject({ caBundle: `${ca.cert}${ca.key}` }));
    expect(key.stderr).toContain("spec.caBundle must not hold a private key");
    const insecure = await apply(connectionObject({ caBundle: ca.cert, insecureSkipTLSVerify: true }));
    expect(insecure.stderr).toContain(
      "spec.insecureSkipTLSVerify: not with spec.caBundle or spec.caSecretRef",
    );
    // The inline bundle alone is accepted, and trusted like the Secret's.
    expect((await apply(connectionObject({ caBundle: ca.cert }))).code).toBe(0);
    const inline = await user.waitForConnection(
      "ServiceConnection",
      "self-hosted",
      ns,
      (c) => reason("Connected")(c) && conditionOf(c, "Ready")?.observedGeneration === c?.metadata.generation,
      "Connected at the generation with caBundle",
    );
    expect(inline.spec.caSecretRef).toBeUndefined();
    expect(inline.spec.caBundle).toBe(ca.cert);
  });
});
