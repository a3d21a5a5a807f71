// What one namespace's connections may cost and reach, on a real API server: past
// --max-connections-per-namespace the newest ServiceConnection gets TooManyConnections and no
// client, and takes a deleted one's place; a ClusterServiceConnection without a namespace selector
// says it serves every namespace; under --connection-address-policy=public-only a connection to a
// loopback service is refused before any request (the simulator, on loopback, counts none).
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ConnectionStatus } from "../../src/crd/connection-schema.ts";
import { buildOperator, type OperatorConfig } from "../../src/main.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { freshNamespace, kubectl, kubectlOk, waitFor } from "../support/cluster.ts";
import { LogCapture } from "../support/logs.ts";
import { startTestSimulator, TEST_API_KEY, testOperatorConfig } from "../support/operator.ts";
import { ClusterUser } from "../support/resources.ts";

interface Connection {
  status?: ConnectionStatus;
}

const apply = (object: object) => kubectlOk(["apply", "-f", "-"], { input: JSON.stringify(object) });
const getConnection = async (kind: string, name: string, namespace?: string) => {
  const result = await kubectl(["get", kind, name, "-o", "json", ...(namespace ? ["-n", namespace] : [])]);
  return result.code === 0 ? (JSON.parse(result.stdout) as Connection) : undefined;
};
const condition = (c: Connection | undefined, type: string) =>
  c?.status?.conditions?.find((x) => x.type === type);
const waitReady = (kind: string, name: string, namespace: string | undefined, reason: string) =>
  waitFor(
    async () => {
      const c = await getConnection(kind, name, namespace);
      return condition(c, "Ready")?.reason === reason ? c : undefined;
    },
    { description: `${kind} ${name} Ready reason ${reason}`, timeoutMs: 20_000 },
  );

/** Starts an operator of `config`; resolves to its stop. */
async function run(config: OperatorConfig, logs: LogCapture): Promise<() => Promise<void>> {
  const operator = buildOperator(config, { logger: logs.logger });
  const abort = new AbortController();
  const running = operator.manager.start(abort.signal).catch((error: unknown) => {
    if (!abort.signal.aborted) throw error;
  });
  await waitFor(() => operator.controller.running, { description: "the operator's workers" });
  return async () => {
    abort.abort(new Error("test stopped the operator"));
    await running;
  };
}

describe("connections: the per-namespace bound, shared connections, the address policy", () => {
  const suffix = randomBytes(3).toString("hex");
  const openName = `open-${suffix}`;
  const user = new ClusterUser();
  const logs = new LogCapture();
  let ns: string;
  let strictNs: string;
  let sim: RunningSimulator;
  /** The public-only install's service: on loopback, so it must never be asked anything. */
  let strictSim: RunningSimulator;
  const stops: (() => Promise<void>)[] = [];

  const connection = (name: string, namespace: string, baseUrl = sim.url) => ({
    apiVersion: "dms.dev/v1alpha1",
    kind: "ServiceConnection",
    metadata: { name, namespace },
    spec: { baseUrl, apiKeySecretRef: { name: "dms", key: "api-key" } },
  });

  beforeAll(async () => {
    ns = await freshNamespace("conn-limits");
    strictNs = await freshNamespace("conn-strict");
    sim = await startTestSimulator();
    strictSim = await startTestSimulator();
    await user.putSecret(ns, "dms", { "api-key": TEST_API_KEY });
    await user.putSecret(strictNs, "dms", { "api-key": TEST_API_KEY });
    const base = testOperatorConfig({ simulator: sim, namespaces: [ns], clusterConnections: true });
    stops.push(await run({ ...base, maxConnectionsPerNamespace: 2 }, logs));
    // Another install, public addresses only, for its own namespace.
    const strict = testOperatorConfig({ simulator: strictSim, namespaces: [strictNs] });
    stops.push(await run({ ...strict, connectionAddressPolicy: "public-only" }, new LogCapture()));
  });

  afterAll(async () => {
    await kubectl(["delete", "clusterserviceconnection", openName, "--wait=false"]);
    for (const stop of stops) await stop();
    await sim?.close();
    await strictSim?.close();
  });

  it("serves the oldest two ServiceConnections of a namespace; the third gets TooManyConnections until one goes", async () => {
    // Created in one second or across two: oldest first, then by name, either way c1, c2, c3.
    for (const name of ["c1", "c2", "c3"]) await apply(connection(name, ns));
    await waitReady("serviceconnection", "c1", ns, "Connected");
    await waitReady("serviceconnection", "c2", ns, "Connected");
    const third = await waitReady("serviceconnection", "c3", ns, "TooManyConnections");
    expect(condition(third, "Ready")).toMatchObject({
      status: "False",
      message: expect.stringContaining(
        `namespace ${ns} has 3 ServiceConnections, more than the 2 per namespace the operator serves (--max-connections-per-namespace)`,
      ),
    });
    expect(condition(third, "Stalled")?.reason).toBe("TooManyConnections");

    await kubectlOk(["delete", "serviceconnection", "c1", "-n", ns]);
    await waitReady("serviceconnection", "c3", ns, "Connected");
  });

  it("marks a ClusterServiceConnection without namespaceSelector OpenToAllNamespaces, and not once it has one", async () => {
    const spec = { baseUrl: sim.url, apiKeySecretRef: { name: "dms", key: "api-key", namespace: ns } };
    await apply({
      apiVersion: "dms.dev/v1alpha1",
      kind: "ClusterServiceConnection",
      metadata: { name: openName },
      spec,
    });
    const open = await waitReady("clusterserviceconnection", openName, undefined, "Connected");
    expect(condition(open, "OpenToAllNamespaces")).toMatchObject({
      status: "True",
      reason: "NoNamespaceSelector",
      message: expect.stringContaining("the Deployment resources of every namespace may use its tenant"),
    });
    await apply({
      apiVersion: "dms.dev/v1alpha1",
      kind: "ClusterServiceConnection",
      metadata: { name: openName },
      spec: { ...spec, namespaceSelector: {} },
    });
    await waitFor(
      async () =>
        condition(await getConnection("clusterserviceconnection", openName), "OpenToAllNamespaces") ===
        undefined,
      { description: "the condition to go", timeoutMs: 20_000 },
    );
  });

  it("logs at start that the default connection serves every watched namespace", () => {
    expect(
      logs.find(
        "the default connection (the operator's own --base-url and API key) serves every watched namespace",
      ),
    ).toHaveLength(1);
  });

  it("under public-only, refuses a connection to a loopback service before sending anything", async () => {
    await apply(connection("local", strictNs, strictSim.url));
    const refused = await waitReady("serviceconnection", "local", strictNs, "AddressNotAllowed");
    expect(condition(refused, "Ready")?.message).toMatch(
      /^the operator does not connect to the service at http:\/\/127\.0\.0\.1:\d+: 127\.0\.0\.1 is a loopback address: --connection-address-policy=public-only refuses loopback and private addresses/,
    );
    // Neither the connection's client nor the install's own default connection reached it.
    expect(strictSim.requests()).toEqual([]);
  });
});
