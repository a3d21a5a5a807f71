// A finalizer write's 422, as the API server answers it: the bare 422 of a JSON Patch that no
// longer applies to the list (another controller shortened it) is the race (ConflictError, retried
// quietly); the 422 of a ValidatingAdmissionPolicy, a CRD schema or CEL rule refusing the object
// names the object and its causes, and stays the refusal it is (reported, not retried quietly).
import { describe, expect, it } from "vitest";
import { KubeDeployments } from "../../src/kube/custom-resources.ts";
import { ConflictError, KubeApiError, REFUSALS_IN_A_ROW } from "../../src/kube/errors.ts";
import { kubeStub } from "../support/kube-stub.ts";

/** Both bodies as kube-apiserver v1.35 answers them. */
const PATCH_DOES_NOT_APPLY = {
  kind: "Status",
  apiVersion: "v1",
  metadata: {},
  status: "Failure",
  message: "the server rejected our request due to an error in our request",
  reason: "Invalid",
  details: {},
  code: 422,
};
const POLICY_REFUSED = {
  kind: "Status",
  apiVersion: "v1",
  metadata: {},
  status: "Failure",
  message:
    "deployments.dms.dev \"agent\" is forbidden: ValidatingAdmissionPolicy 'no-fin' with binding 'no-fin' denied request: finalizer refused",
  reason: "Invalid",
  details: {
    name: "agent",
    group: "dms.dev",
    kind: "deployments",
    causes: [
      {
        message: "ValidatingAdmissionPolicy 'no-fin' with binding 'no-fin' denied request: finalizer refused",
      },
    ],
  },
  code: 422,
};

/** A validating admission webhook denying with code 422 and no details, as the API server relays it. */
const WEBHOOK_DENIED = {
  kind: "Status",
  apiVersion: "v1",
  metadata: {},
  status: "Failure",
  message:
    'admission webhook "finalizers.platform.example" denied the request: finalizers are the platform\'s',
  code: 422,
};

/** A stub API server answering each request with `answer()`'s status and body (422 and `body` by default). */
async function answering(
  body: unknown,
  answer: () => { status: number; body: unknown } = () => ({ status: 422, body }),
) {
  const { client } = await kubeStub((req, res) => {
    req.resume();
    req.on("end", () => {
      const { status, body } = answer();
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    });
  });
  return new KubeDeployments({ client, scope: { namespaces: ["default"] } });
}

const stored = (finalizers: string[], { name = "agent", resourceVersion = "7" } = {}) =>
  ({
    apiVersion: "dms.dev/v1alpha1",
    kind: "Deployment",
    metadata: { namespace: "default", name, resourceVersion, finalizers },
    spec: { source: "external_docker" },
  }) as never;

describe("finalizer writes answered 422", () => {
  it("a patch that no longer applies is the race: ConflictError", async () => {
    const deployments = await answering(PATCH_DOES_NOT_APPLY);
    const signal = AbortSignal.timeout(10_000);
    await expect(deployments.addFinalizer(stored([]), "dms.dev/finalizer", signal)).rejects.toBeInstanceOf(
      ConflictError,
    );
    await expect(
      deployments.removeFinalizer(
        stored(["other.example/a", "dms.dev/finalizer"]),
        "dms.dev/finalizer",
        signal,
      ),
    ).rejects.toBeInstanceOf(ConflictError);
  });

  it("an admission policy's refusal stays a refusal, not a ConflictError", async () => {
    const deployments = await answering(POLICY_REFUSED);
    const signal = AbortSignal.timeout(10_000);
    for (const write of [
      deployments.addFinalizer(stored(["other.example/a"]), "dms.dev/finalizer", signal),
      deployments.removeFinalizer(stored(["dms.dev/finalizer"]), "dms.dev/finalizer", signal),
    ]) {
      const error = await write.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(KubeApiError);
      expect(error).not.toBeInstanceOf(ConflictError);
      expect((error as KubeApiError).status).toBe(422);
      expect((error as Error).message).toContain("finalizer refused");
    }
  });
});

describe("finalizer writes answered a bare 422 again and again", () => {
  const signal = () => AbortSignal.timeout(10_000);
  const add = (deployments: KubeDeployments) =>
    deployments.addFinalizer(stored([]), "dms.dev/finalizer", signal()).catch((e: unknown) => e);

  it("a race repeats no more once the object is read again: from the fifth in a row on, the refusal it is, named", async () => {
    const deployments = await answering(WEBHOOK_DENIED);
    for (let i = 1; i < REFUSALS_IN_A_ROW; i++) expect(await add(deployments)).toBeInstanceOf(ConflictError);
    for (let i = 0; i < 2; i++) {
      const error = await add(deployments);
      expect(error).toBeInstanceOf(KubeApiError);
      expect(error).not.toBeInstanceOf(ConflictError);
      expect((error as KubeApiError).status).toBe(422);
      expect((error as Error).message).toContain(
        'admission webhook "finalizers.platform.example" denied the request',
      );
      expect((error as Error).message).toContain(`answered ${REFUSALS_IN_A_ROW + i} times in a row`);
    }
    // Another object's write is its own count.
    const other = await deployments
      .removeFinalizer(stored(["dms.dev/finalizer"], { name: "other" }), "dms.dev/finalizer", signal())
      .catch((e: unknown) => e);
    expect(other).toBeInstanceOf(ConflictError);
  });

  it("a write answered in between starts the count again", async () => {
    let answers = 0;
    const deployments = await answering(WEBHOOK_DENIED, () =>
      ++answers === REFUSALS_IN_A_ROW - 1
        ? {
            status: 200,
            body: stored(["dms.dev/finalizer"], { resourceVersion: "8" }),
          }
        : { status: 422, body: WEBHOOK_DENIED },
    );
    for (let i = 1; i < REFUSALS_IN_A_ROW - 1; i++)
      expect(await add(deployments)).toBeInstanceOf(ConflictError);
    expect(await add(deployments)).toMatchObject({ metadata: { resourceVersion: "8" } });
    for (let i = 1; i < REFUSALS_IN_A_ROW; i++) expect(await add(deployments)).toBeInstanceOf(ConflictError);
  });
});
