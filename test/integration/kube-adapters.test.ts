// The Kubernetes adapters (src/kube/) against the run's real kube-apiserver: the caches the
// controller is triggered by, the writes it makes, Secrets, Events and the leader Lease.
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { readConnection } from "../../src/connection/read.ts";
import { API_VERSION, KIND } from "../../src/crd/schema.ts";
import { KubeClient } from "../../src/kube/client.ts";
import { loadKubeConfig } from "../../src/kube/config.ts";
import { KubeDeployments } from "../../src/kube/custom-resources.ts";
import { ConflictError, NotFoundError, REFUSALS_IN_A_ROW } from "../../src/kube/errors.ts";
import { KubeEventRecorder, NOTE_LIMIT_BYTES } from "../../src/kube/events.ts";
import { KubeLease } from "../../src/kube/lease.ts";
import type { DeploymentObject } from "../../src/kube/object.ts";
import { KubeSecrets, METADATA_LIST_ACCEPT } from "../../src/kube/secrets.ts";
import type { Clock } from "../../src/runtime/clock.ts";
import { LeaseConflictError } from "../../src/runtime/leader.ts";
import { createTestCa } from "../support/certificates.ts";
import { freshNamespace, kubectl, kubectlOk, testKubeconfigPath, waitFor } from "../support/cluster.ts";
import { capturingLogger } from "../support/logs.ts";

const deploymentYaml = (
  namespace: string,
  name: string,
  extra: { labels?: string; finalizers?: string } = {},
) =>
  `apiVersion: ${API_VERSION}
kind: ${KIND}
metadata:
  name: ${name}
  namespace: ${namespace}
${extra.labels ? `  labels: ${extra.labels}\n` : ""}${extra.finalizers ? `  finalizers: ${extra.finalizers}\n` : ""}spec:
  source: external_docker
`;

const apply = (yaml: string) => kubectlOk(["apply", "-f", "-"], { input: yaml });
const signal = () => AbortSignal.timeout(10_000);

describe("kube adapters", () => {
  let client: KubeClient;
  const stops: Array<() => Promise<void>> = [];

  /** Starts `runnable` until the end of the test. */
  const start = (runnable: { run(signal: AbortSignal): Promise<void> }) => {
    const controller = new AbortController();
    const done = runnable.run(controller.signal);
    stops.push(async () => {
      controller.abort();
      await done;
    });
  };

  beforeAll(() => {
    client = new KubeClient(loadKubeConfig({ kubeconfig: testKubeconfigPath() }).config);
  });

  afterEach(async () => {
    await Promise.all(stops.splice(0).map((stop) => stop()));
  });

  describe("Deployment resource cache", () => {
    it("lists what exists, then follows adds, updates and deletes in order", async () => {
      const ns = await freshNamespace("kube-cache");
      await apply(deploymentYaml(ns, "before"));
      const deployments = new KubeDeployments({ client, scope: { namespaces: [ns] } });
      const seen: string[] = [];
      deployments.subscribe({
        onAdd: (o) => void seen.push(`add ${o.metadata.name}`),
        onUpdate: (_old, o) =>
          void seen.push(
            `update ${o.metadata.name} ${o.metadata.annotations?.["dms.dev/reconcile-requested-at"] ?? ""}`,
          ),
        onDelete: (o) => void seen.push(`delete ${o.metadata.name}`),
      });
      expect(deployments.hasSynced()).toBe(false);
      start(deployments);
      await deployments.synced;

      expect(deployments.hasSynced()).toBe(true);
      expect(deployments.get({ namespace: ns, name: "before" })?.spec.source).toBe("external_docker");
      await apply(deploymentYaml(ns, "after"));
      await kubectlOk([
        "annotate",
        "deployments.dms.dev",
        "after",
        "-n",
        ns,
        "dms.dev/reconcile-requested-at=one",
      ]);
      await kubectlOk(["delete", "deployments.dms.dev", "after", "-n", ns]);

      await waitFor(() => seen.includes("delete after"), { description: "the delete event" });
      expect(seen).toEqual(["add before", "add after", "update after one", "delete after"]);
      expect(deployments.list().map((o) => o.metadata.name)).toEqual(["before"]);
      expect(deployments.get({ namespace: ns, name: "after" })).toBeUndefined();
    });

    it("watches only its namespaces and label selector", async () => {
      const [a, b, other] = await Promise.all([
        freshNamespace("kube-scope-a"),
        freshNamespace("kube-scope-b"),
        freshNamespace("kube-scope-other"),
      ]);
      await apply(
        [
          deploymentYaml(a, "a-mine", { labels: "{shard: one}" }),
          deploymentYaml(a, "a-theirs", { labels: "{shard: two}" }),
          deploymentYaml(b, "b-mine", { labels: "{shard: one}" }),
          deploymentYaml(other, "other-ns", { labels: "{shard: one}" }),
        ].join("---\n"),
      );
      const deployments = new KubeDeployments({
        client,
        scope: { namespaces: [a, b], labelSelector: "shard=one" },
        indexers: { suffix: (o) => [o.metadata.name.split("-")[1] ?? ""] },
      });
      start(deployments);
      await deployments.synced;
      // The cache's keys, over both namespaces' caches, by index or by a test of the object.
      expect(deployments.keysByIndex("suffix", "mine").sort()).toEqual([`${a}/a-mine`, `${b}/b-mine`]);
      expect(deployments.keysByIndex("suffix", "theirs")).toEqual([]);
      expect(deployments.keysWhere((o) => o.metadata.namespace === b)).toEqual([`${b}/b-mine`]);

      expect(
        deployments
          .list()
          .map((o) => `${o.metadata.namespace}/${o.metadata.name}`)
          .sort(),
      ).toEqual([`${a}/a-mine`, `${b}/b-mine`]);
      // Read by namespace and name, and by index, from the namespace's own cache.
      expect(deployments.get({ namespace: b, name: "b-mine" })?.metadata.namespace).toBe(b);
      expect(deployments.get({ namespace: a, name: "b-mine" })).toBeUndefined();
      expect(deployments.get({ namespace: other, name: "other-ns" })).toBeUndefined();
      expect(
        deployments
          .byIndex("suffix", "mine")
          .map((o) => o.metadata.namespace)
          .sort(),
      ).toEqual([a, b].sort());
    });

    it("resumes after the server ends its watch, without relisting or replaying events", async () => {
      const ns = await freshNamespace("kube-resume");
      await apply(deploymentYaml(ns, "first"));
      const { logger, messages } = capturingLogger();
      // A 1-2 s server-side watch timeout makes the API server close the watch while we look.
      const deployments = new KubeDeployments({
        client,
        scope: { namespaces: [ns] },
        logger,
        minWatchTimeoutSeconds: 1,
      });
      const adds: string[] = [];
      deployments.subscribe({ onAdd: (o) => void adds.push(o.metadata.name) });
      start(deployments);
      await deployments.synced;

      await waitFor(() => messages().filter((m) => m === "watch ended; resuming").length >= 2, {
        description: "two watches closed by the server",
      });
      await apply(deploymentYaml(ns, "second"));

      await waitFor(() => adds.includes("second"), { description: "the add after the restarts" });
      expect(adds).toEqual(["first", "second"]);
      expect(messages()).not.toContain("resourceVersion expired; relisting");
    });

    it("logs a throwing handler and keeps serving the cache and the other handlers", async () => {
      const ns = await freshNamespace("kube-handler");
      const { logger, messages } = capturingLogger();
      const deployments = new KubeDeployments({ client, scope: { namespaces: [ns] }, logger });
      const later: string[] = [];
      deployments.subscribe({
        onAdd: () => {
          throw new Error("handler bug");
        },
      });
      deployments.subscribe({ onAdd: () => Promise.reject(new Error("async handler bug")) });
      deployments.subscribe({ onAdd: (o) => void later.push(o.metadata.name) });
      start(deployments);
      await deployments.synced;

      await apply(deploymentYaml(ns, "one"));
      await apply(deploymentYaml(ns, "two"));

      await waitFor(() => later.length === 2, { description: "both adds reaching the healthy handler" });
      expect(deployments.list()).toHaveLength(2);
      expect(messages()).toContain("reflector handler threw");
      expect(messages()).toContain("reflector handler rejected");
    });
  });

  describe("Deployment resource writes", () => {
    let ns: string;
    let deployments: KubeDeployments;
    const live = async (name: string, namespace = ns): Promise<DeploymentObject> => {
      const obj = await deployments.getLive({ namespace, name }, signal());
      if (!obj) throw new Error(`${name} is gone`);
      return obj;
    };
    /** The finalizers on the server (the decode keeps only the operator's own names). */
    const onServer = async (name: string): Promise<string[]> =>
      JSON.parse(
        (await kubectlOk([
          "get",
          "deployments.dms.dev",
          name,
          "-n",
          ns,
          "-o",
          "jsonpath={.metadata.finalizers}",
        ])) || "[]",
      ) as string[];
    /** Another controller removes the finalizer at `index` on the server. */
    const removeOnServer = (name: string, index: number) =>
      kubectlOk([
        "patch",
        "deployments.dms.dev",
        name,
        "-n",
        ns,
        "--type=json",
        "-p",
        JSON.stringify([{ op: "remove", path: `/metadata/finalizers/${index}` }]),
      ]);

    beforeAll(async () => {
      ns = await freshNamespace("kube-writes");
      deployments = new KubeDeployments({ client, scope: { namespaces: [ns] } });
    });

    it("getLive reads the server, and answers undefined for an object that does not exist", async () => {
      await apply(deploymentYaml(ns, "present"));
      expect((await live("present")).metadata.generation).toBe(1);
      expect(await deployments.getLive({ namespace: ns, name: "absent" }, signal())).toBeUndefined();
    });

    it("writes status without bumping generation, and a later status drops the fields it leaves out", async () => {
      await apply(deploymentYaml(ns, "status"));
      const ref = { namespace: ns, name: "status" };

      const first = await deployments.patchStatus(
        ref,
        { deploymentId: "d-1", observedGeneration: 1 },
        signal(),
      );
      expect(first.status).toEqual({ deploymentId: "d-1", observedGeneration: 1 });
      expect(first.metadata.generation).toBe(1);

      const second = await deployments.patchStatus(
        ref,
        { remoteStatus: "READY", observedGeneration: 1 },
        signal(),
      );
      expect(second.status).toEqual({ remoteStatus: "READY", observedGeneration: 1 });
      expect((await live("status")).metadata.generation).toBe(1);
      expect((await live("status")).spec.source).toBe("external_docker");
    });

    it("keeps on the server the labels and annotations its decode drops, through status and finalizer writes", async () => {
      await apply(deploymentYaml(ns, "trimmed", { labels: "{team: billing}" }));
      const notes = "n".repeat(100 * 1024);
      await kubectlOk(["annotate", "deployments.dms.dev", "trimmed", "-n", ns, `example.com/notes=${notes}`]);
      const read = await live("trimmed");
      expect(read.metadata.labels).toBeUndefined();
      expect(read.metadata.annotations).toBeUndefined();

      const ref = { namespace: ns, name: "trimmed" };
      await deployments.patchStatus(ref, { observedGeneration: 1 }, signal(), read.metadata.resourceVersion);
      const added = await deployments.addFinalizer(await live("trimmed"), "dms.dev/finalizer", signal());
      await deployments.removeFinalizer(added, "dms.dev/finalizer", signal());

      const raw = (await client.request({
        method: "GET",
        path: `/apis/dms.dev/v1alpha1/namespaces/${ns}/deployments/trimmed`,
        signal: signal(),
      })) as { metadata: { labels?: Record<string, string>; annotations?: Record<string, string> } };
      expect(raw.metadata.labels).toEqual({ team: "billing" });
      expect(raw.metadata.annotations?.["example.com/notes"]).toBe(notes);
    });

    it("fails a status write for a missing object with NotFoundError", async () => {
      await expect(
        deployments.patchStatus({ namespace: ns, name: "absent" }, {}, signal()),
      ).rejects.toBeInstanceOf(NotFoundError);
    });

    it("adds and removes its finalizer without touching another controller's", async () => {
      await apply(deploymentYaml(ns, "fin", { finalizers: "[other.example/keep]" }));

      // The decode keeps another controller's name as "", at its index: what the patches need.
      const added = await deployments.addFinalizer(await live("fin"), "dms.dev/finalizer", signal());
      expect(added.metadata.finalizers).toEqual(["", "dms.dev/finalizer"]);
      expect(await onServer("fin")).toEqual(["other.example/keep", "dms.dev/finalizer"]);
      expect(await deployments.addFinalizer(added, "dms.dev/finalizer", signal())).toBe(added);

      const removed = await deployments.removeFinalizer(added, "dms.dev/finalizer", signal());
      expect(removed.metadata.finalizers).toEqual([""]);
      expect(await onServer("fin")).toEqual(["other.example/keep"]);
    });

    it("adds the first finalizer to an object that has none", async () => {
      await apply(deploymentYaml(ns, "fin-empty"));
      const added = await deployments.addFinalizer(await live("fin-empty"), "dms.dev/finalizer", signal());
      expect(added.metadata.finalizers).toEqual(["dms.dev/finalizer"]);
    });

    it("refuses a finalizer change based on a stale read with ConflictError, dropping nobody's finalizer", async () => {
      await apply(deploymentYaml(ns, "race"));
      const stale = await live("race");
      // Another controller adds its finalizer after our read.
      await kubectlOk([
        "patch",
        "deployments.dms.dev",
        "race",
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"metadata":{"finalizers":["other.example/late"]}}',
      ]);

      await expect(deployments.addFinalizer(stale, "dms.dev/finalizer", signal())).rejects.toBeInstanceOf(
        ConflictError,
      );
      expect(await onServer("race")).toEqual(["other.example/late"]);

      const fresh = await deployments.addFinalizer(await live("race"), "dms.dev/finalizer", signal());
      await kubectlOk([
        "patch",
        "deployments.dms.dev",
        "race",
        "-n",
        ns,
        "--type=json",
        "-p",
        '[{"op":"add","path":"/metadata/finalizers/-","value":"other.example/third"}]',
      ]);
      await expect(deployments.removeFinalizer(fresh, "dms.dev/finalizer", signal())).rejects.toBeInstanceOf(
        ConflictError,
      );
      expect(await onServer("race")).toEqual([
        "other.example/late",
        "dms.dev/finalizer",
        "other.example/third",
      ]);
    });

    it("refuses a finalizer change whose patch no longer fits the list with ConflictError, not a 422", async () => {
      await apply(deploymentYaml(ns, "shrunk", { finalizers: "[other.example/first]" }));
      const added = await deployments.addFinalizer(await live("shrunk"), "dms.dev/finalizer", signal());
      expect(added.metadata.finalizers).toEqual(["", "dms.dev/finalizer"]);
      // Another controller removes its finalizer: ours moves to index 0, index 1 is gone.
      await removeOnServer("shrunk", 0);
      await expect(deployments.removeFinalizer(added, "dms.dev/finalizer", signal())).rejects.toBeInstanceOf(
        ConflictError,
      );
      expect(await onServer("shrunk")).toEqual(["dms.dev/finalizer"]);

      // Read with another controller's finalizer, which it removes (the list goes) before ours is added.
      await apply(deploymentYaml(ns, "emptied", { finalizers: "[other.example/first]" }));
      const before = await live("emptied");
      await removeOnServer("emptied", 0);
      await expect(deployments.addFinalizer(before, "dms.dev/finalizer", signal())).rejects.toBeInstanceOf(
        ConflictError,
      );
      expect(await onServer("emptied")).toEqual([]);
    });

    it("keeps an admission policy's refusal of a finalizer change a refusal (a 422 naming its cause), not a ConflictError", async () => {
      const policy = `${ns}-no-dms-finalizer`;
      await apply(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: ${policy}}
spec:
  failurePolicy: Fail
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ${ns}}}
    resourceRules: [{apiGroups: [dms.dev], apiVersions: ["*"], operations: [UPDATE], resources: [deployments]}]
  validations:
  - expression: "!has(object.metadata.finalizers) || !object.metadata.finalizers.exists(f, f == 'dms.dev/finalizer')"
    message: no dms.dev finalizer here
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: ${policy}}
spec:
  policyName: ${policy}
  validationActions: [Deny]
`);
      try {
        await apply(deploymentYaml(ns, "refused", { finalizers: "[other.example/first]" }));
        const add = JSON.stringify([
          { op: "add", path: "/metadata/finalizers/-", value: "dms.dev/finalizer" },
        ]);
        // The policy is in force once a server-side dry run of the same change is refused.
        await waitFor(
          async () => {
            const args = [
              "patch",
              "deployments.dms.dev",
              "refused",
              "-n",
              ns,
              "--type=json",
              "--dry-run=server",
            ];
            return (await kubectl([...args, "-p", add])).code !== 0;
          },
          { description: "the admission policy in force" },
        );
        const error = await deployments
          .addFinalizer(await live("refused"), "dms.dev/finalizer", signal())
          .catch((e: unknown) => e);
        expect(error).not.toBeInstanceOf(ConflictError);
        expect(error).toMatchObject({
          status: 422,
          message: expect.stringContaining("no dms.dev finalizer here"),
        });
        expect(await onServer("refused")).toEqual(["other.example/first"]);
      } finally {
        await kubectlOk(["delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", policy]);
      }
    });

    it("says a validating webhook's bare 422, which reads as a race, once it repeats: the fifth write in a row is the refusal it is", async () => {
      const ca = await createTestCa("Webhook CA");
      const leaf = await ca.leaf({ hosts: ["127.0.0.1"] });
      let reviews = 0;
      const webhook = createHttpsServer(leaf, (req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => {
          reviews += 1;
          const review = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { request: { uid: string } };
          res.writeHead(200, { "content-type": "application/json" });
          res.end(
            JSON.stringify({
              apiVersion: "admission.k8s.io/v1",
              kind: "AdmissionReview",
              // No details: the API server relays the code and the message as they are.
              response: {
                uid: review.request.uid,
                allowed: false,
                status: { code: 422, message: "finalizers are the platform's" },
              },
            }),
          );
        });
      });
      await new Promise<void>((resolve) => webhook.listen(0, "127.0.0.1", resolve));
      const { port } = webhook.address() as AddressInfo;
      // A namespace of its own: the admission policy of the case before may still be in force in ns.
      const own = await freshNamespace("kube-webhook");
      const name = `${own}-finalizers`;
      await apply(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: ${name}}
webhooks:
- name: finalizers.platform.example
  clientConfig: {url: "https://127.0.0.1:${port}/", caBundle: ${Buffer.from(ca.cert).toString("base64")}}
  rules: [{apiGroups: [dms.dev], apiVersions: ["*"], operations: [UPDATE], resources: [deployments]}]
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ${own}}}
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 5
`);
      try {
        await apply(deploymentYaml(own, "denied"));
        // The webhook is in force once it reviewed a server-side dry run of a change.
        await waitFor(
          async () =>
            (
              await kubectl([
                "annotate",
                "deployments.dms.dev",
                "denied",
                "-n",
                own,
                "probe=1",
                "--dry-run=server",
              ])
            ).code !== 0 && reviews > 0,
          { description: "the webhook in force" },
        );
        const attempts: unknown[] = [];
        for (let i = 0; i < REFUSALS_IN_A_ROW; i++)
          attempts.push(
            await deployments
              .addFinalizer(await live("denied", own), "dms.dev/finalizer", signal())
              .catch((e: unknown) => e),
          );
        // Read as races at first (a patch that no longer applies answers a bare 422 too)...
        for (const error of attempts.slice(0, -1)) expect(error).toBeInstanceOf(ConflictError);
        // ...then what denies the write is said.
        const said = attempts.at(-1);
        expect(said).not.toBeInstanceOf(ConflictError);
        expect(said).toMatchObject({
          status: 422,
          message: expect.stringContaining(
            'admission webhook "finalizers.platform.example" denied the request: finalizers are the platform\'s',
          ),
        });
        expect((said as Error).message).toContain(`${REFUSALS_IN_A_ROW} times in a row`);
        expect(await live("denied", own)).not.toHaveProperty("metadata.finalizers");
      } finally {
        await kubectlOk(["delete", "validatingwebhookconfiguration", name]);
        webhook.close();
      }
    });
  });

  describe("Secrets", () => {
    /** The run's client, recording the path of every request it is asked to send into `paths`. */
    const recordingClient = (paths: string[]) =>
      ({
        request: (req: { path: string }) => {
          paths.push(req.path);
          return client.request(req as Parameters<KubeClient["request"]>[0]);
        },
      }) as unknown as KubeClient;

    it("follows Secret changes through a metadata-only watch that never holds a value", async () => {
      const ns = await freshNamespace("kube-secrets");
      const secrets = new KubeSecrets({ client, namespaces: [ns] });
      const changed: string[] = [];
      secrets.onChange((ref) => void changed.push(`${ref.namespace}/${ref.name}`));
      start(secrets);
      await secrets.synced;

      // kubectl apply copies the whole manifest, value included, into an annotation.
      const secretYaml = (value: string) =>
        `apiVersion: v1\nkind: Secret\nmetadata: {name: api-key, namespace: ${ns}}\nstringData: {token: ${value}}\n`;
      await kubectlOk(["apply", "-f", "-"], { input: secretYaml("first-s3cret-value") });
      await waitFor(() => changed.length === 1, { description: "the create" });
      await kubectlOk(["apply", "-f", "-"], { input: secretYaml("second-s3cret-value") });
      await waitFor(() => changed.length === 2, { description: "the rotation" });

      expect(changed).toEqual([`${ns}/api-key`, `${ns}/api-key`]);
      expect(secrets.has({ namespace: ns, name: "api-key" })).toBe(true);
      const cached = JSON.stringify(secrets.list());
      expect(cached).not.toContain("s3cret");
      expect(cached).not.toContain(Buffer.from("second-s3cret-value").toString("base64"));
      expect(Object.keys(secrets.list()[0]?.metadata ?? {}).sort()).toEqual([
        "name",
        "namespace",
        "resourceVersion",
      ]);

      await kubectlOk(["delete", "secret", "api-key", "-n", ns]);
      await waitFor(() => changed.length === 3, { description: "the delete" });
      expect(secrets.has({ namespace: ns, name: "api-key" })).toBe(false);
    });

    it("is served PartialObjectMetadata by the API server, so Secret data never crosses the wire", async () => {
      const ns = await freshNamespace("kube-secrets-wire");
      await kubectlOk(["create", "secret", "generic", "wire", "-n", ns, "--from-literal=k=wire-s3cret"]);
      const list = await client.request({
        method: "GET",
        path: `/api/v1/namespaces/${ns}/secrets`,
        accept: METADATA_LIST_ACCEPT,
        signal: signal(),
      });
      expect(list).toMatchObject({
        kind: "PartialObjectMetadataList",
        items: [{ metadata: { name: "wire" } }],
      });
      expect(JSON.stringify(list)).not.toContain(Buffer.from("wire-s3cret").toString("base64"));
    });

    it("reads a value at reconcile time, and names a missing Secret or key", async () => {
      const ns = await freshNamespace("kube-secret-values");
      await kubectlOk(["create", "secret", "generic", "creds", "-n", ns, "--from-literal=token=välue-1"]);
      const secrets = new KubeSecrets({ client, namespaces: [ns] });

      expect(await secrets.getSecretValue({ namespace: ns, name: "creds" }, "token", signal())).toEqual({
        kind: "found",
        value: "välue-1",
      });
      expect(await secrets.getSecretValue({ namespace: ns, name: "creds" }, "other", signal())).toEqual({
        kind: "missing-key",
        namespace: ns,
        name: "creds",
        key: "other",
      });
      expect(await secrets.getSecretValue({ namespace: ns, name: "nope" }, "token", signal())).toEqual({
        kind: "missing-secret",
        namespace: ns,
        name: "nope",
      });
    });

    it("sends no read for a Secret name no Secret can have: never the namespace's list of Secrets", async () => {
      const ns = await freshNamespace("kube-secret-names");
      await kubectlOk(["create", "secret", "generic", "creds", "-n", ns, "--from-literal=token=v"]);
      const paths: string[] = [];
      const recording = recordingClient(paths);
      const secrets = new KubeSecrets({ client: recording, namespaces: [ns] });
      for (const name of [".", "..", "", `../../${ns}/secrets/creds`, "creds%2F..", "a/b"]) {
        expect(await secrets.getSecretValue({ namespace: ns, name }, "token", signal())).toEqual({
          kind: "missing-secret",
          namespace: ns,
          name,
        });
      }
      expect(paths).toEqual([]);
    });

    it("a spec.connectionRef naming . or ..: that connection is not found, and neither the list of connections nor the API group is read as it", async () => {
      const ns = await freshNamespace("kube-connection-names");
      await apply(`apiVersion: ${API_VERSION}
kind: ServiceConnection
metadata:
  name: prod
  namespace: ${ns}
spec:
  baseUrl: https://service.example
  apiKeySecretRef: { name: creds, key: token }
`);
      const paths: string[] = [];
      const recording = recordingClient(paths);
      const secrets = new KubeSecrets({ client: recording, namespaces: [ns] });
      for (const [kind, name] of [
        ["ServiceConnection", "."],
        ["ServiceConnection", ".."],
        ["ClusterServiceConnection", ".."],
      ] as const) {
        const id = { kind, namespace: kind === "ServiceConnection" ? ns : "", name };
        await expect(readConnection({ client: recording, secrets }, id, signal())).rejects.toThrow(
          new RegExp(
            `^${kind} ${kind === "ServiceConnection" ? `${ns}/` : ""}\\.+ not found: check the name`,
          ),
        );
      }
      // Only the discovery document that tells a missing object from a missing CRD.
      expect(new Set(paths)).toEqual(new Set([`/apis/${API_VERSION}`]));
    });
  });

  describe("Events", () => {
    interface EventList {
      items: {
        metadata: { name: string };
        reason: string;
        note: string;
        type: string;
        action: string;
        reportingController: string;
        reportingInstance: string;
        regarding: { kind: string; name: string; uid?: string };
        series?: { count: number; lastObservedTime: string };
      }[];
    }
    const events = async (ns: string): Promise<EventList["items"]> =>
      (JSON.parse(await kubectlOk(["get", "events.events.k8s.io", "-n", ns, "-o", "json"])) as EventList)
        .items;

    it("records an Event once and counts its repeats in the series", async () => {
      const ns = await freshNamespace("kube-events");
      await apply(deploymentYaml(ns, "evented"));
      let now = Date.parse("2030-01-01T00:00:00Z");
      const clock: Clock = { now: () => now, setTimer: () => () => {}, sleep: async () => {} };
      const recorder = new KubeEventRecorder({ client, reportingInstance: "operator-pod-1", clock });
      const regarding = { apiVersion: API_VERSION, kind: KIND, namespace: ns, name: "evented", uid: "u-1" };
      const drift = {
        type: "Normal" as const,
        reason: "DriftCorrected",
        action: "Update",
        note: "image changed",
      };

      await recorder.record(regarding, drift);
      now += 1_000;
      await recorder.record(regarding, drift);
      now += 1_000;
      await recorder.record(regarding, drift);
      await recorder.record(regarding, {
        ...drift,
        type: "Warning",
        reason: "UpdateFailed",
        note: "x".repeat(5000),
      });

      const recorded = await events(ns);
      expect(recorded).toHaveLength(2);
      const corrected = recorded.find((e) => e.reason === "DriftCorrected");
      expect(corrected).toMatchObject({
        type: "Normal",
        action: "Update",
        note: "image changed",
        reportingController: "dms.dev/operator",
        reportingInstance: "operator-pod-1",
        regarding: { kind: "Deployment", name: "evented", uid: "u-1" },
        series: { count: 3, lastObservedTime: "2030-01-01T00:00:02.000000Z" },
      });
      const failed = recorded.find((e) => e.reason === "UpdateFailed");
      expect(Buffer.byteLength(failed?.note ?? "")).toBeLessThanOrEqual(NOTE_LIMIT_BYTES);
      expect(failed?.note.endsWith("…")).toBe(true);
      expect(failed?.series).toBeUndefined();

      // Once the dedupe window has passed since the last repeat, the next occurrence is a new Event.
      now += 11 * 60_000;
      await recorder.record(regarding, drift);
      expect((await events(ns)).filter((e) => e.reason === "DriftCorrected")).toHaveLength(2);
    });

    it("never throws to the caller when the API server refuses the Event", async () => {
      const { logger, messages } = capturingLogger();
      const recorder = new KubeEventRecorder({ client, reportingInstance: "pod", logger });
      const regarding = { apiVersion: API_VERSION, kind: KIND, namespace: "no-such-namespace-x", name: "d" };
      await expect(
        recorder.record(regarding, { type: "Normal", reason: "Created", action: "Create", note: "n" }),
      ).resolves.toBeUndefined();
      expect(messages()).toContain("failed to record an event");
    });
  });

  describe("Lease", () => {
    it("creates, reads and updates the Lease, and reports lost races as LeaseConflictError", async () => {
      const ns = await freshNamespace("kube-lease");
      const lease = new KubeLease(client, { namespace: ns, name: "dms-operator" });
      const acquired = new Date("2030-01-01T00:00:00.123Z");
      const record = {
        holderIdentity: "pod-a",
        leaseDurationSeconds: 15,
        acquireTime: acquired,
        renewTime: acquired,
        leaseTransitions: 0,
      };

      expect(await lease.get(signal())).toBeUndefined();
      const created = await lease.create(record, signal());
      expect(created.record).toEqual(record);
      await expect(lease.create({ ...record, holderIdentity: "pod-b" }, signal())).rejects.toBeInstanceOf(
        LeaseConflictError,
      );

      const renewed = new Date("2030-01-01T00:00:02.456Z");
      const updated = await lease.update(
        { ...record, renewTime: renewed },
        created.resourceVersion,
        signal(),
      );
      expect(updated.record.renewTime).toEqual(renewed);
      expect(await lease.get(signal())).toEqual(updated);

      // pod-b read the lease before pod-a's renewal: its takeover must fail.
      await expect(
        lease.update(
          { ...record, holderIdentity: "pod-b", leaseTransitions: 1 },
          created.resourceVersion,
          signal(),
        ),
      ).rejects.toBeInstanceOf(LeaseConflictError);
      expect((await lease.get(signal()))?.record.holderIdentity).toBe("pod-a");
    });
  });
});
