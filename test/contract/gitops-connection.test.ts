/**
 * `plan` and `import` through connections read from a cluster: two simulators stand for two
 * tenants with different keys (the default one from the environment, another behind a
 * ServiceConnection and a ClusterServiceConnection), and a fake API server on loopback holds the
 * connections and their Secrets. Each resource is reviewed through its own connection;
 * `--connection` selects one; import writes `spec.connectionRef`, and its output plans as
 * adoptions through the same connection.
 */
import { rm } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import {
  clusterServiceConnectionPath,
  connectedResource,
  deploymentPath,
  type FakeKube,
  PROD_CONNECTION as PROD,
  secretObject,
  secretPath,
  serviceConnectionPath,
  startConnectedKube,
  startFakeKube,
} from "./fake-kube.ts";
import { cli, KEY, manifestDir, resourceYaml, SEED } from "./gitops-fixture.ts";

const TENANT_KEY = "tenant-b-key-5e1f";
const PROD_TENANT = "0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e";
const NS = "team-a";
const summarizer = (image: string) => ({
  source: "internal_docker",
  sourceConfig: { resourceSpec: { minScale: 1, maxScale: 2 } },
  sourceRevisionConfig: { imageUri: image },
});
const SHARED = { kind: "ClusterServiceConnection", name: "shared" };

let defaultSim: RunningSimulator;
let tenantSim: RunningSimulator;
let kube: FakeKube;
/** The key and tenant headers of each request the other tenant's simulator received. */
const tenantHeaders: Array<{ key: unknown; tenant: unknown }> = [];
const dirs: string[] = [];

beforeAll(async () => {
  defaultSim = await startSimulator({ apiKey: KEY, seed: SEED });
  // The other tenant has a deployment of the same name as the default tenant's, with another image.
  tenantSim = await startSimulator({
    apiKey: TENANT_KEY,
    onRequest: (req) =>
      tenantHeaders.push({ key: req.headers["x-api-key"], tenant: req.headers["x-tenant-id"] }),
    seed: {
      deployments: [
        {
          name: "summarizer",
          source: "internal_docker",
          source_config: { resource_spec: { min_scale: 1, max_scale: 2 } },
          source_revision_config: { image_uri: "summarizer:tenant-b" },
        },
        {
          name: "tenant-only",
          source: "internal_docker",
          source_config: {},
          source_revision_config: { image_uri: "tenant-only:1" },
        },
      ],
    },
  });
  // The key written with `echo`: the trailing newline is not part of it.
  kube = await startConnectedKube(NS, tenantSim.url, `${TENANT_KEY}\n`, { tenantId: PROD_TENANT });
  // One an older CRD could have let through: refused before any request.
  kube.put(clusterServiceConnectionPath("bad-spec"), {
    metadata: { name: "bad-spec", resourceVersion: "1" },
    spec: {
      baseUrl: "ftp://files.example",
      apiKeySecretRef: { name: "k", key: "k", namespace: "dms-system" },
    },
  });
  // One the schema accepts but the CRD's CEL rules now refuse: the path would land in the fragment.
  kube.put(clusterServiceConnectionPath("bad-url"), {
    metadata: { name: "bad-url", resourceVersion: "1" },
    spec: {
      baseUrl: "http://169.254.169.254/computeMetadata/v1/token#",
      apiKeySecretRef: { name: "k", key: "k", namespace: "dms-system" },
    },
  });
  kube.put(clusterServiceConnectionPath("shared"), {
    metadata: { name: "shared", resourceVersion: "1" },
    spec: {
      baseUrl: `${tenantSim.url}/`,
      apiKeySecretRef: { name: "shared-key", key: "key", namespace: "dms-system" },
    },
  });
  kube.put(
    secretPath("dms-system", "shared-key"),
    secretObject("dms-system", "shared-key", { key: TENANT_KEY }),
  );
  kube.put(clusterServiceConnectionPath("no-secret"), {
    metadata: { name: "no-secret", resourceVersion: "1" },
    spec: {
      baseUrl: tenantSim.url,
      apiKeySecretRef: { name: "missing-key", key: "key", namespace: "dms-system" },
    },
  });
});
afterAll(async () => {
  await defaultSim.close();
  await tenantSim.close();
  await kube.close();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

const requestsTo = (sim: RunningSimulator) =>
  Object.values(sim.counters()).reduce(
    (n, byStatus) => n + Object.values(byStatus).reduce((a, b) => a + b, 0),
    0,
  );

async function dir(files: Record<string, string>): Promise<string> {
  const made = await manifestDir(files);
  dirs.push(made);
  return made;
}

interface JsonEntry {
  name: string;
  namespace: string;
  connection: string;
  action: string;
  deploymentId?: string;
  error?: string;
  skipReason?: string;
  problems: Array<{ reason: string; message: string }>;
}
interface JsonPlan {
  exitCode: number;
  counts: Record<string, number>;
  resources: JsonEntry[];
}
const byName = (doc: JsonPlan) => Object.fromEntries(doc.resources.map((r) => [r.name, r]));

/** `plan -f <files> --kubeconfig <the fake's> <args>`, the default tenant in the environment. */
const planWith = (files: string, args: string[] = [], kubeconfig = kube.kubeconfig) =>
  cli(defaultSim.url, ["plan", "-f", files, "--kubeconfig", kubeconfig, ...args]);

/** The same in JSON, with the entries by name. */
async function planJson(files: string, args: string[] = []) {
  const run = await planWith(files, ["-o", "json", ...args]);
  const doc = JSON.parse(run.stdout) as JsonPlan;
  return { run, doc, found: byName(doc) };
}

/** `args` with `KUBE` standing for the fake's kubeconfig. */
const withKube = (args: string[]) => args.map((a) => (a === "KUBE" ? kube.kubeconfig : a));

/** A directory holding one resource, `a`, on ServiceConnection prod. */
const onProd = () => dir({ "a.yaml": resourceYaml("a", { source: "internal_docker", connectionRef: PROD }) });

/** A directory of resources on every kind of connection, one of each outcome. */
const mixed = () =>
  dir({
    "a-tenant.yaml": resourceYaml("summarizer", {
      ...summarizer("summarizer:tenant-b"),
      connectionRef: PROD,
    }),
    // The same service name on the default connection: another tenant, so no NameConflict.
    "b-default.yaml": resourceYaml("summarizer-default", {
      name: "summarizer",
      ...summarizer("summarizer:2025-06-01"),
    }),
    "c-shared.yaml": resourceYaml("tenant-only", {
      source: "internal_docker",
      sourceRevisionConfig: { imageUri: "tenant-only:1" },
      connectionRef: SHARED,
    }),
    "d-no-secret.yaml": resourceYaml("orphan", {
      source: "internal_docker",
      connectionRef: { kind: "ClusterServiceConnection", name: "no-secret" },
    }),
    "e-missing.yaml": resourceYaml("ghost", {
      source: "internal_docker",
      connectionRef: { kind: "ServiceConnection", name: "nowhere" },
    }),
  });

describe("plan: each resource through its own connection", () => {
  it("reads each connection and its Secret from the cluster, and reports one that cannot be used on its resources", async () => {
    const { run, found } = await planJson(await mixed());
    expect(run.stderr).toBe("");
    expect(found.summarizer).toMatchObject({
      action: "adopt",
      namespace: NS,
      connection: "ServiceConnection/prod",
      deploymentId: tenantSim.store.getByName("summarizer")?.id,
    });
    expect(found["summarizer-default"]).toMatchObject({
      action: "adopt",
      connection: "default",
      deploymentId: defaultSim.store.getByName("summarizer")?.id,
    });
    expect(found["tenant-only"]).toMatchObject({
      action: "adopt",
      connection: "ClusterServiceConnection/shared",
    });
    expect(found.orphan?.action).toBe("error");
    expect(found.orphan?.error).toBe(
      "spec.connectionRef ClusterServiceConnection/no-secret: Secret dms-system/missing-key, named by ClusterServiceConnection no-secret (spec.apiKeySecretRef), not found: create it with the API key under key key, e.g. kubectl create secret generic missing-key -n dms-system --from-literal=key=<key>",
    );
    expect(found.ghost?.error).toBe(
      "spec.connectionRef ServiceConnection/nowhere: ServiceConnection team-a/nowhere not found: check the name with kubectl get serviceconnections -n team-a",
    );
    expect(run.stdout).not.toContain(TENANT_KEY);
    expect(run.code).toBe(1);
  });

  it("needs no service flags when every resource names its connection; the text names the connection", async () => {
    const files = await dir({
      "a.yaml": resourceYaml("summarizer", { ...summarizer("summarizer:tenant-c"), connectionRef: PROD }),
    });
    const run = await cli("", ["plan", "-f", files, "--kubeconfig", kube.kubeconfig], {
      DMS_BASE_URL: "",
      DMS_API_KEY: "",
    });
    expect(run.stderr).toBe("");
    expect(run.stdout).toMatch(
      /^team-a\/summarizer via ServiceConnection\/prod \[.*a\.yaml:1\]: adopt [0-9a-f-]{36} and patch, NEW REVISION$/m,
    );
    expect(run.code).toBe(2);
  });

  it("without --kubeconfig, a resource with spec.connectionRef is an error saying how to read it", async () => {
    const run = await cli(defaultSim.url, ["plan", "-o", "json", "-f", await mixed()]);
    const found = byName(JSON.parse(run.stdout) as JsonPlan);
    expect(found.summarizer?.error).toBe(
      "spec.connectionRef ServiceConnection/prod: the connection's settings and API key are in the cluster; pass --kubeconfig (and --context) to read them",
    );
    expect(found["summarizer-default"]?.action).toBe("adopt");
    expect(run.code).toBe(1);
  });

  it("a name claimed twice in the files conflicts on one connection only", async () => {
    const files = await dir({
      "a.yaml": resourceYaml("one", { name: "tenant-only", source: "internal_docker", connectionRef: PROD }),
      "b.yaml": resourceYaml("two", { name: "tenant-only", source: "internal_docker", connectionRef: PROD }),
      "c.yaml": resourceYaml("three", {
        name: "tenant-only",
        source: "internal_docker",
        connectionRef: SHARED,
      }),
    });
    const { found } = await planJson(files);
    expect(found.one?.problems).toEqual([]);
    expect(found.two?.problems.map((p) => p.reason)).toEqual(["NameConflict"]);
    expect(found.three?.problems).toEqual([]);
  });

  it("says kubectl apply would refuse a file that adds spec.connectionRef to a live resource", async () => {
    const live = deploymentPath(NS, "summarizer");
    kube.put(live, {
      apiVersion: "dms.dev/v1alpha1",
      kind: "Deployment",
      metadata: {
        name: "summarizer",
        namespace: NS,
        resourceVersion: "1",
        creationTimestamp: "2025-01-01T00:00:00Z",
      },
      spec: summarizer("summarizer:tenant-b"),
    });
    try {
      const files = await dir({
        "a.yaml": resourceYaml("summarizer", { ...summarizer("summarizer:tenant-b"), connectionRef: PROD }),
      });
      const { run, found } = await planJson(files);
      expect(found.summarizer?.error).toBe(
        "kubectl apply would be refused: spec.connectionRef is immutable (the cluster's resource uses default, the file ServiceConnection/prod); create a new resource to deploy through another connection",
      );
      expect(run.code).toBe(1);
    } finally {
      kube.remove(live);
    }
  });

  it("says kubectl apply would refuse a file that changes spec.sourceConfig.deploymentType, not one that leaves it out", async () => {
    const typed = (deploymentType?: string) => ({
      source: "internal_docker",
      sourceConfig: deploymentType === undefined ? {} : { deploymentType },
      sourceRevisionConfig: { imageUri: "typed:1" },
    });
    const live = deploymentPath(NS, "typed");
    kube.put(live, {
      apiVersion: "dms.dev/v1alpha1",
      kind: "Deployment",
      metadata: {
        name: "typed",
        namespace: NS,
        resourceVersion: "1",
        creationTimestamp: "2025-01-01T00:00:00Z",
      },
      spec: typed("dev"),
    });
    try {
      // The service has no deployment of that name yet: only the cluster's resource knows the type.
      const changed = await planJson(await dir({ "a.yaml": resourceYaml("typed", typed("prod")) }));
      expect(changed.found.typed?.error).toBe(
        "kubectl apply would be refused: spec.sourceConfig.deploymentType cannot change (the cluster's resource has dev, the file prod): the service fixes a deployment's type at creation; keep dev, or create a new resource (with another spec.name) of the type prod",
      );
      expect(changed.run.code).toBe(1);
      // Left out, the CRD's rule does not apply (the resource then accepts the service's type).
      const left = await planJson(await dir({ "a.yaml": resourceYaml("typed", typed()) }));
      expect(left.found.typed?.action).toBe("create");
    } finally {
      kube.remove(live);
    }
  });
});

describe("plan --connection: only that connection's resources", () => {
  it("reviews the resources using it, lists the others as not reviewed, and never calls the default service", async () => {
    const before = requestsTo(defaultSim);
    const files = await mixed();
    const { run, doc, found } = await planJson(files, ["--connection", "dmsconn/prod"]);
    expect(run.stderr).toBe("");
    expect(doc.resources.map((r) => [r.name, r.action])).toEqual([
      ["summarizer", "adopt"],
      ["summarizer-default", "skipped"],
      ["tenant-only", "skipped"],
      ["orphan", "skipped"],
      ["ghost", "skipped"],
    ]);
    expect(found["summarizer-default"]?.skipReason).toBe(
      "uses the default connection (no spec.connectionRef), not --connection's ServiceConnection team-a/prod; plan without --connection reviews each resource through its own",
    );
    expect(found["tenant-only"]?.skipReason).toMatch(/^uses ClusterServiceConnection shared, not/);
    expect(doc.counts).toMatchObject({ adopt: 1, skipped: 4, error: 0 });
    expect(doc.exitCode).toBe(0);
    expect(run.code).toBe(0);
    expect(requestsTo(defaultSim)).toBe(before);

    const text = await planWith(files, ["--connection", "dmsconn/prod"]);
    expect(text.stdout).toMatch(
      /^team-a\/summarizer-default \(service name "summarizer"\) \[.*\]: skipped \(not reviewed\)$/m,
    );
    expect(text.stdout).toMatch(/^ {4}- uses the default connection/m);
    expect(text.stdout).toMatch(/0 blocked, 0 errors, 4 not reviewed\.$/m);
  });

  it("sends the connection's key and tenant, never the environment's, and to its URL only", async () => {
    tenantHeaders.length = 0;
    const before = requestsTo(defaultSim);
    const files = await onProd();
    const run = await cli(
      defaultSim.url,
      ["plan", "-f", files, "--kubeconfig", kube.kubeconfig, "--connection", "ServiceConnection/prod"],
      { DMS_TENANT_ID: "6f1c1d2e-0000-4000-8000-0000000000aa" },
    );
    expect(run.code).toBe(2);
    expect(tenantHeaders.length).toBeGreaterThan(0);
    expect(new Set(tenantHeaders.map((h) => JSON.stringify(h)))).toEqual(
      new Set([JSON.stringify({ key: TENANT_KEY, tenant: PROD_TENANT })]),
    );
    expect(requestsTo(defaultSim)).toBe(before);
  });

  it("a ServiceConnection is the one of --namespace: a resource of another namespace means another object", async () => {
    const files = await dir({
      "a.yaml": resourceYaml(
        "summarizer",
        { ...summarizer("summarizer:tenant-b"), connectionRef: PROD },
        { namespace: "team-b" },
      ),
    });
    const run = await planWith(files, ["-o", "json", "--connection", "ServiceConnection/prod"]);
    // Nothing of the files uses team-a/prod: a gate must not pass with nothing reviewed.
    expect(run).toMatchObject({
      code: 1,
      stdout: "",
      stderr:
        "error: no resource of the files uses --connection ServiceConnection/prod (1 read, each with another spec.connectionRef or none): check the connection, or plan without --connection\n",
    });
    const other = await planWith(files, ["--connection", "ServiceConnection/prod", "--namespace", "team-b"]);
    expect(other.stderr).toBe(
      "error: --connection ServiceConnection/prod: ServiceConnection team-b/prod not found: check the name with kubectl get serviceconnections -n team-b\n",
    );
    expect(other.code).toBe(1);
  });

  const usage: Array<{ reason: string; args: string[]; stderr: string }> = [
    {
      reason: "--connection without --kubeconfig",
      args: ["--connection", "ServiceConnection/prod"],
      stderr:
        "error: --connection needs --kubeconfig: the connection and the Secret holding its API key are read from the cluster; add --kubeconfig <path> (and --context <name>)\n",
    },
    {
      reason: "the flags whose settings the connection gives",
      args: [
        "--connection",
        "ServiceConnection/prod",
        "--kubeconfig",
        "KUBE",
        "--base-url",
        "http://x",
        "--api-key",
        "k",
      ],
      stderr:
        "error: --base-url, --api-key: not with --connection, whose spec and Secret give the service's URL, API key, tenant and TLS setting; drop them, or drop --connection to give the settings by flags\n",
    },
    {
      reason: "a malformed value",
      args: ["--connection", "Deployment/prod", "--kubeconfig", "KUBE"],
      stderr:
        'error: --connection "Deployment/prod": give <kind>/<name>, with kind ServiceConnection (in --namespace) or ClusterServiceConnection, e.g. --connection ServiceConnection/prod\n',
    },
    {
      reason: "a connection that does not exist",
      args: ["--connection", "ClusterServiceConnection/nope", "--kubeconfig", "KUBE"],
      stderr:
        "error: --connection ClusterServiceConnection/nope: ClusterServiceConnection nope not found: check the name with kubectl get clusterserviceconnections\n",
    },
    {
      reason: "a connection whose spec is invalid",
      args: ["--connection", "ClusterServiceConnection/bad-spec", "--kubeconfig", "KUBE"],
      stderr:
        "error: --connection ClusterServiceConnection/bad-spec: ClusterServiceConnection bad-spec has an invalid spec (spec.baseUrl: Expected string to match '^https?://[^\\s/?#]+([/?#]\\S*)?$'): fix the object; the operator's CRD would refuse it\n",
    },
    {
      reason: "a connection whose spec its CRD's CEL rules refuse",
      args: ["--connection", "ClusterServiceConnection/bad-url", "--kubeconfig", "KUBE"],
      stderr:
        'error: --connection ClusterServiceConnection/bad-url: ClusterServiceConnection bad-url has an invalid spec: spec.baseUrl must not have a fragment (#…): the operator appends API paths such as /v2/deployments to it, and a fragment would cut them off; remove everything from the "#"\n',
    },
  ];
  it.each(usage)("refuses $reason, exit 1, naming the flag and the fix", async ({ args, stderr }) => {
    const files = await onProd();
    const run = await cli(defaultSim.url, ["plan", "-f", files, ...withKube(args)]);
    expect(run).toMatchObject({ code: 1, stdout: "", stderr });
  });

  it("says the CRD is missing when the cluster does not serve the kind, and which permission a 403 lacks", async () => {
    const bare = await startFakeKube({ namespace: NS, served: ["deployments"] });
    try {
      const run = await planWith(await onProd(), ["--connection", "dmsconn/prod"], bare.kubeconfig);
      expect(run.stderr).toBe(
        "error: --connection dmsconn/prod: the cluster does not know ServiceConnection (the CRD serviceconnections.dms.dev is not installed): install the operator's CRDs (crds/) first\n",
      );
    } finally {
      await bare.close();
    }
    kube.forbidden.add(secretPath(NS, "dms-key"));
    try {
      const run = await planWith(await onProd(), ["--connection", "dmsconn/prod"]);
      expect(run.stderr).toMatch(
        /^error: --connection dmsconn\/prod: GET \/api\/v1\/namespaces\/team-a\/secrets\/dms-key: HTTP 403 Forbidden: .*: the kubeconfig's user needs get secrets; use a context that has it \(--context\)\n$/,
      );
      expect(run.code).toBe(1);
    } finally {
      kube.forbidden.clear();
    }
  });
});

describe("import --connection", () => {
  const importWith = (args: string[]) =>
    cli(defaultSim.url, ["import", "--kubeconfig", kube.kubeconfig, ...args]);
  const deployments = (yaml: string) =>
    parseAllDocuments(yaml)
      .map(
        (d) =>
          d.toJS() as {
            kind?: string;
            metadata: { name: string; namespace?: string };
            spec: Record<string, unknown>;
          },
      )
      .filter((d) => d?.kind === "Deployment");

  it("lists that tenant's deployments and writes each with spec.connectionRef, in the connection's namespace", async () => {
    const run = await importWith(["--connection", "ServiceConnection/prod"]);
    expect(run.code).toBe(0);
    const docs = deployments(run.stdout);
    expect(docs.map((d) => [d.metadata.name, d.metadata.namespace, d.spec.connectionRef])).toEqual([
      ["summarizer", NS, PROD],
      ["tenant-only", NS, PROD],
    ]);
    expect(docs[0]?.spec.sourceRevisionConfig).toEqual({ imageUri: "summarizer:tenant-b" });
    // Right after the source, where a reader looks for where the deployment lives.
    expect(Object.keys(docs[0]?.spec ?? {}).slice(0, 3)).toEqual(["name", "source", "connectionRef"]);
    expect(run.stdout).toContain(`status READY) through ServiceConnection/prod.`);
    expect(run.stderr).toBe("imported 2 deployment(s) through ServiceConnection team-a/prod, skipped 0\n");
    expect(run.stdout).not.toContain(TENANT_KEY);
  });

  it("round-trips: plan of its output through the same connection adopts each deployment as it is", async () => {
    const imported = await importWith(["--connection", "dmscconn/shared", "--namespace", "apps"]);
    const docs = deployments(imported.stdout);
    expect(docs.map((d) => [d.metadata.namespace, d.spec.connectionRef])).toEqual([
      ["apps", SHARED],
      ["apps", SHARED],
    ]);
    const files = await dir({ "all.yaml": imported.stdout });
    for (const args of [[], ["--connection", "ClusterServiceConnection/shared"]]) {
      const { run, doc } = await planJson(files, args);
      expect(doc.resources.map((r) => [r.name, r.action, r.connection])).toEqual([
        ["summarizer", "adopt", "ClusterServiceConnection/shared"],
        ["tenant-only", "adopt", "ClusterServiceConnection/shared"],
      ]);
      expect(run.code).toBe(0);
    }
  });

  const refused: Array<{ reason: string; args: string[]; code: number; stderr: string }> = [
    {
      reason: "--kubeconfig without --connection",
      args: ["--kubeconfig", "KUBE"],
      code: 1,
      stderr:
        "error: --kubeconfig is read only for --connection: add --connection <kind/name>, or drop --kubeconfig\n",
    },
    {
      reason: "--connection without --kubeconfig",
      args: ["--connection", "dmsconn/prod"],
      code: 1,
      stderr:
        "error: --connection needs --kubeconfig: the connection and the Secret holding its API key are read from the cluster; add --kubeconfig <path> (and --context <name>)\n",
    },
    {
      reason: "--api-key-file with --connection",
      args: ["--connection", "dmsconn/prod", "--kubeconfig", "KUBE", "--api-key-file", "/k"],
      code: 1,
      stderr:
        "error: --api-key-file: not with --connection, whose spec and Secret give the service's URL, API key, tenant and TLS setting; drop it, or drop --connection to give the settings by flags\n",
    },
    {
      reason: "a connection whose Secret is missing",
      args: ["--connection", "ClusterServiceConnection/no-secret", "--kubeconfig", "KUBE"],
      code: 1,
      stderr:
        "error: --connection ClusterServiceConnection/no-secret: Secret dms-system/missing-key, named by ClusterServiceConnection no-secret (spec.apiKeySecretRef), not found: create it with the API key under key key, e.g. kubectl create secret generic missing-key -n dms-system --from-literal=key=<key>\n",
    },
  ];
  it.each(refused)("refuses $reason, naming the flag and the fix", async ({ args, code, stderr }) => {
    const run = await cli(defaultSim.url, ["import", ...withKube(args)]);
    expect(run).toMatchObject({ code, stdout: "", stderr });
  });

  it("never writes to the cluster: plan and import through connections only read it", async () => {
    const since = kube.requests.length;
    expect((await planJson(await onProd())).run.code).toBe(2);
    expect((await importWith(["--connection", "dmsconn/prod", "--namespace", NS])).code).toBe(0);
    const made = kube.requests.slice(since);
    // What the two commands read: the connection and the Secret holding its key.
    expect(made).toContain(`GET ${serviceConnectionPath(NS, "prod")}`);
    expect(made.some((r) => r.startsWith(`GET ${secretPath(NS, "")}`))).toBe(true);
    expect(made.filter((r) => !r.startsWith("GET "))).toEqual([]);
  });
});

describe("plan: a connection's rollout windows", () => {
  it("hold the new revision of a resource that sets none, naming the connection; its own empty list does not", async () => {
    kube.put(clusterServiceConnectionPath("frozen"), {
      metadata: { name: "frozen", resourceVersion: "1" },
      spec: {
        baseUrl: tenantSim.url,
        apiKeySecretRef: { name: "shared-key", key: "key", namespace: "dms-system" },
        rolloutWindows: [{ kind: "deny", schedule: "0 0 1 1 *", duration: "8784h" }],
      },
    });
    const FROZEN = { kind: "ClusterServiceConnection", name: "frozen" };
    const files = await dir({
      "a.yaml": resourceYaml("tenant-only", {
        source: "internal_docker",
        sourceRevisionConfig: { imageUri: "tenant-only:2" },
        connectionRef: FROZEN,
      }),
    });
    const { doc } = await planJson(files);
    const [entry] = doc.resources as Array<
      JsonEntry & { held?: { windows: string; fields: string[]; when: string } }
    >;
    expect(entry?.action).toBe("patch");
    expect(entry?.held).toEqual({
      windows: "spec.rolloutWindows of ClusterServiceConnection frozen",
      fields: ["sourceRevisionConfig.imageUri"],
      when: "no window opens within 366 days",
    });
    const text = await planWith(files);
    expect(text.stdout).toContain(
      "    held: outside rollout windows (spec.rolloutWindows of ClusterServiceConnection frozen): sourceRevisionConfig.imageUri; no window opens within 366 days",
    );

    const own = await dir({
      "a.yaml": resourceYaml("tenant-only", {
        source: "internal_docker",
        sourceRevisionConfig: { imageUri: "tenant-only:2" },
        connectionRef: FROZEN,
        rolloutWindows: [],
      }),
    });
    const mine = await planJson(own);
    expect(mine.doc.resources[0]).not.toHaveProperty("held");
  });
});

describe("plan: the cluster's name claims", () => {
  it("reads the cluster's Deployment resources page by page, and finds an older claim on a later page", async () => {
    const paths: string[] = [];
    const put = (namespace: string, name: string, claims: string, creationTimestamp?: string) => {
      const path = deploymentPath(namespace, name);
      const object = connectedResource(namespace, name, { source: "internal_docker", name: claims }) as {
        metadata: Record<string, unknown>;
      };
      if (creationTimestamp) object.metadata.creationTimestamp = creationTimestamp;
      kube.put(path, object);
      paths.push(path);
    };
    // 500 others, then the older holder of the name: on the second page of 500.
    for (let i = 0; i < 500; i++) put("others", `filler-${i}`, `filler-${i}`);
    put(NS, "holder", "claimed", "2020-01-01T00:00:00Z");
    try {
      const before = kube.requests.length;
      const files = await dir({
        "a.yaml": resourceYaml("claimer", {
          name: "claimed",
          source: "internal_docker",
          connectionRef: PROD,
        }),
      });
      const { found } = await planJson(files);
      const lists = kube.requests.slice(before).filter((r) => r === "GET /apis/dms.dev/v1alpha1/deployments");
      expect(lists).toHaveLength(2);
      expect(JSON.stringify(found.claimer)).toContain(
        `already claimed by the older resource ${NS}/holder in the cluster`,
      );
    } finally {
      for (const path of paths) kube.remove(path);
    }
  });
});
