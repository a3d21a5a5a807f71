// The operator's Lease requests under API Priority and Fairness, on the real API server: the
// FlowSchema of manifests/default, as `kubectl kustomize` renders it for an overlay that moves the
// operator to another namespace (this test's) and prefixes its names, classifies the requests the
// operator's ServiceAccount makes on the Leases of its namespace into the built-in
// `leader-election` priority level, ahead of `service-accounts` (`workload-low`). The API server
// names the FlowSchema and priority level of each request in its answer's
// X-Kubernetes-PF-FlowSchema-UID and X-Kubernetes-PF-PriorityLevel-UID headers. The same
// account's other requests (a list of Deployments, a Lease of another namespace) stay where
// they were.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import {
  freshNamespace,
  kubectl,
  kubectlOk,
  testKubeconfigPath,
  testServer,
  waitFor,
} from "../support/cluster.ts";
import { MANIFESTS, renderOverlay } from "../support/overlay.ts";

/** The rendered objects, as far as this test reads them. */
interface Manifest {
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: unknown;
}

/** The FlowSchema and priority level the API server classified one request into, and its status. */
interface Classified {
  status: number;
  flowSchema: string | undefined;
  priorityLevel: string | undefined;
}

/** `method path` with `token` as its bearer, on the run's API server; resolves with the APF headers. */
async function classify(token: string, method: string, path: string, body?: unknown): Promise<Classified> {
  // The API server's CA, from the admin kubeconfig the run writes (certificate-authority-data).
  const kubeconfig = parse(await readFile(testKubeconfigPath(), "utf8")) as {
    clusters: { cluster: { "certificate-authority-data": string } }[];
  };
  const ca = Buffer.from(kubeconfig.clusters[0]?.cluster["certificate-authority-data"] ?? "", "base64");
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, testServer()),
      {
        method,
        ca,
        headers: {
          authorization: `Bearer ${token}`,
          accept: "application/json",
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        timeout: 30_000,
      },
      (res) => {
        res.resume();
        res.on("end", () => {
          const header = (name: string) => {
            const value = res.headers[name];
            return typeof value === "string" ? value : undefined;
          };
          resolve({
            status: res.statusCode ?? 0,
            flowSchema: header("x-kubernetes-pf-flowschema-uid"),
            priorityLevel: header("x-kubernetes-pf-prioritylevel-uid"),
          });
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error(`${method} ${path}: no answer in 30 s`)));
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/** The uid of a cluster-scoped object. */
async function uidOf(resource: string, name: string): Promise<string> {
  return (await kubectlOk(["get", resource, name, "-o", "jsonpath={.metadata.uid}"])).trim();
}

describe("the operator's Lease requests under API Priority and Fairness", () => {
  const cleanup: string[][] = [];
  let work = "";
  afterAll(async () => {
    for (const args of cleanup.reverse()) await kubectl(args);
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("go to the leader-election priority level by the install's FlowSchema, in the namespace an overlay gives, and nothing else of the operator's does", {
    timeout: 120_000,
  }, async () => {
    const namespace = await freshNamespace("lease-flowschema");
    const elsewhere = await freshNamespace("lease-flowschema-other");
    const suffix = namespace.split("-").at(-1) ?? "x";
    work = await mkdtemp(join(tmpdir(), "lease-flowschema-"));
    // The prefix names the FlowSchema (cluster-scoped, on an API server the test files share)
    // for this test alone.
    const { find } = await renderOverlay<Manifest>(work, { namespace, namePrefix: `t${suffix}-` });
    const account = find("ServiceAccount", `t${suffix}-dms-operator`);
    const flowSchema = find("FlowSchema", `t${suffix}-dms-operator-leader-election`);
    // The operator's account and what lets it hold its Lease, and the FlowSchema, as installed.
    const objects = [
      account,
      find("Role", `t${suffix}-dms-operator-leader-election`),
      find("RoleBinding", `t${suffix}-dms-operator-leader-election`),
      flowSchema,
    ];
    cleanup.push(["delete", "flowschema", flowSchema.metadata.name, "--ignore-not-found"]);
    await kubectlOk(["apply", "-f", "-"], {
      input: JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }),
    });
    // As applied, so as a GitOps tool compares it: the API server defaults nothing into its spec.
    const live = JSON.parse(
      await kubectlOk(["get", "flowschema", flowSchema.metadata.name, "-o", "json"]),
    ) as Manifest & { spec: unknown };
    expect(live.spec).toEqual(flowSchema.spec);
    const token = (await kubectlOk(["create", "token", account.metadata.name, "-n", namespace])).trim();

    const ours = await uidOf("flowschema", flowSchema.metadata.name);
    const leaderElection = await uidOf("prioritylevelconfiguration", "leader-election");
    const generic = {
      flowSchema: await uidOf("flowschema", "service-accounts"),
      priorityLevel: await uidOf("prioritylevelconfiguration", "workload-low"),
    };
    const leases = `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`;
    const lease = {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "dms-operator-leader" },
      spec: { holderIdentity: "replica-a", leaseDurationSeconds: 15 },
    };
    // The API server takes a new FlowSchema in once its configuration controller has seen it:
    // the operator's first Lease read (404: none yet) is classified by it from then on.
    await waitFor(
      async () => (await classify(token, "GET", `${leases}/dms-operator-leader`)).flowSchema === ours,
      {
        timeoutMs: 60_000,
        intervalMs: 250,
        description: `a Lease read classified by ${flowSchema.metadata.name}`,
      },
    );
    const created = await classify(token, "POST", leases, lease);
    const read = await classify(token, "GET", `${leases}/dms-operator-leader`);
    expect([created, read]).toEqual([
      { status: 201, flowSchema: ours, priorityLevel: leaderElection },
      { status: 200, flowSchema: ours, priorityLevel: leaderElection },
    ]);

    // The operator's other traffic keeps the generic schema: a list of Deployments (forbidden or
    // not, it is classified before it is authorized), and a Lease of another namespace.
    const deployments = await classify(token, "GET", `/apis/apps/v1/namespaces/${namespace}/deployments`);
    const otherLease = await classify(
      token,
      "GET",
      `/apis/coordination.k8s.io/v1/namespaces/${elsewhere}/leases/dms-operator-leader`,
    );
    for (const other of [deployments, otherLease])
      expect({ flowSchema: other.flowSchema, priorityLevel: other.priorityLevel }).toEqual(generic);
  });

  it("is left out by the overlay docs/guide/operating.md shows, and nothing else is", async () => {
    const guide = await readFile(join(MANIFESTS, "..", "docs", "guide", "operating.md"), "utf8");
    const at = guide.indexOf("**Turn it off**");
    const block = /```yaml\n([\s\S]*?)```/.exec(guide.slice(at))?.[1] ?? "";
    const dir = await mkdtemp(join(tmpdir(), "lease-flowschema-off-"));
    try {
      // The guide's block is indented under its list item: YAML takes it as it is once dedented.
      const patch = block.replace(/^ {2}/gm, "");
      await writeFile(
        join(dir, "kustomization.yaml"),
        `resources: [${relative(dir, join(MANIFESTS, "default"))}]\n${patch}`,
      );
      const kinds = async (path: string) =>
        parseAllDocuments(await kubectlOk(["kustomize", path]))
          .map((d) => (d.toJS() as Manifest).kind)
          .sort();
      const all = await kinds(join(MANIFESTS, "default"));
      expect(all).toContain("FlowSchema");
      expect(await kinds(dir)).toEqual(all.filter((k) => k !== "FlowSchema"));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
