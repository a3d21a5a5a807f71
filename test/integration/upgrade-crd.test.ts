// Upgrading the Deployment CRD from the last release on a real kube-apiserver: objects stored under
// 0.1.0's CRD (test/fixtures/0.1.0: the CRD as released, the resources as its operator left them,
// and the status this version's operator writes over each at its first reconcile) stay writable
// once this version's CRD is applied over it: a label, the operator's status write, a finalizer
// added and removed. The API server ratchets what an unchanged field no longer satisfies, but not
// a CEL rule that cannot be evaluated on the stored data. A rollback to 0.1.0's CRD loses what it
// does not declare from each object written meanwhile (docs/guide/install.md, Rolling back). Both
// CRDs are installed under a group of their own, without short names or categories, so that no
// other test's `dmsd` reaches them.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { parse } from "yaml";
import { crdObject, DEPLOYMENT_CRD } from "../../src/crd/render.ts";
import { freshNamespace, kubectl, kubectlOk, waitFor } from "../support/cluster.ts";

const FIXTURES = join(import.meta.dirname, "..", "fixtures", "0.1.0");
const GROUP = "upgrade.test.dms.dev";
const PLURAL = "upgradeddeployments";
const CRD = `${PLURAL}.${GROUP}`;

interface StoredDeployment {
  metadata: { name: string; annotations?: Record<string, string>; finalizers?: string[] };
  spec: Record<string, unknown>;
  status: Record<string, unknown>;
  statusAfterUpgrade: Record<string, unknown>;
}
const STORED: StoredDeployment[] = JSON.parse(readFileSync(join(FIXTURES, "deployments.json"), "utf8"));

/** `crd` under {@link GROUP}: the same schema, names no other CRD of the cluster uses. */
function regrouped(crd: Record<string, unknown>): Record<string, unknown> {
  const spec = crd.spec as Record<string, unknown>;
  return {
    ...crd,
    metadata: { name: CRD },
    spec: {
      ...spec,
      group: GROUP,
      names: {
        plural: PLURAL,
        singular: "upgradeddeployment",
        kind: "UpgradedDeployment",
        listKind: "UpgradedDeploymentList",
      },
    },
  };
}

const apply = (object: object) => kubectlOk(["apply", "-f", "-"], { input: JSON.stringify(object) });
const resource = (name: string, spec: object, metadata: object = {}) => ({
  apiVersion: `${GROUP}/v1alpha1`,
  kind: "UpgradedDeployment",
  metadata: { ...metadata, name, namespace },
  spec,
});

let namespace: string;

beforeAll(async () => {
  namespace = await freshNamespace("upgrade-crd");
  await apply(regrouped(parse(readFileSync(join(FIXTURES, "dms.dev_deployments.yaml"), "utf8"))));
  await kubectlOk(["wait", "--for=condition=Established", "--timeout=60s", `crd/${CRD}`]);
  const store = async (stored: StoredDeployment) => {
    await kubectlOk(["create", "-f", "-"], {
      input: JSON.stringify(resource(stored.metadata.name, stored.spec, stored.metadata)),
    });
    await kubectlOk(
      [
        "patch",
        PLURAL,
        stored.metadata.name,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
      ].concat(JSON.stringify({ status: stored.status })),
    );
  };
  await Promise.all(STORED.map(store));
  // The upgrade: this version's CRD applied over the released one, as install.yaml is.
  await apply(regrouped(crdObject(DEPLOYMENT_CRD)));
  // In effect once a type only this version knows is refused (0.1.0's schema prunes the field).
  const probe = resource("probe", { source: "internal_docker", sourceConfig: { deploymentType: "none" } });
  await waitFor(
    async () =>
      (await kubectl(["create", "--dry-run=server", "-f", "-"], { input: JSON.stringify(probe) })).code !== 0,
    { timeoutMs: 30_000, description: "the new CRD's schema in effect" },
  );
}, 120_000);

afterAll(async () => {
  if (!namespace) return;
  for (const stored of STORED)
    await kubectl(
      ["patch", PLURAL, stored.metadata.name, "-n", namespace, "--type=merge", "-p"].concat(
        '{"metadata":{"finalizers":null}}',
      ),
    );
  await kubectl(["delete", "crd", CRD, "--wait=false"]);
});

it("keeps every resource 0.1.0 stored writable: a label, the new status, a finalizer on and off", async () => {
  const refused: string[] = [];
  const write = async (name: string, what: string, args: string[]) => {
    const result = await kubectl([...args, "-n", namespace]);
    if (result.code !== 0) refused.push(`${name} ${what}: ${result.stderr.trim()}`);
  };
  // Each resource's writes in order (the finalizer on before off); the resources at once.
  const upgrade = async ({ metadata, statusAfterUpgrade }: StoredDeployment) => {
    const name = metadata.name;
    await write(name, "label", ["label", PLURAL, name, "team=platform"]);
    await write(name, "status", [
      "patch",
      PLURAL,
      name,
      "--subresource=status",
      "--type=merge",
      "-p",
      JSON.stringify({ status: statusAfterUpgrade }),
    ]);
    const finalizers = (list: string[] | null) => JSON.stringify({ metadata: { finalizers: list } });
    await write(name, "finalizer added", [
      "patch",
      PLURAL,
      name,
      "--type=merge",
      "-p",
      finalizers(["dms.dev/finalizer"]),
    ]);
    await write(name, "finalizer removed", ["patch", PLURAL, name, "--type=merge", "-p", finalizers(null)]);
  };
  await Promise.all(STORED.map(upgrade));
  expect(refused).toEqual([]);
});

it("still refuses a fractional count written after the upgrade", async () => {
  const result = await kubectl(
    ["patch", PLURAL, "fractional-counts", "-n", namespace, "--type=merge", "-p"].concat(
      JSON.stringify({ spec: { sourceConfig: { resourceSpec: { minScale: 2.5 } } } }),
    ),
  );
  expect(result.code).not.toBe(0);
  expect(result.stderr).toMatch(
    /spec\.sourceConfig\.resourceSpec\.minScale: Invalid value: 2\.5: .*multiple of 1/,
  );
});

it("rolled back to 0.1.0's CRD and forward again, a resource written meanwhile keeps only the fields 0.1.0 knows", async () => {
  // What the install guide's rollback says: the older CRD hides what it does not declare at once,
  // and any write under it (a label here; the older operator's status write) stores the object
  // without it. A resource left unwritten has it back once this version's CRD is applied again.
  const spec = { ...STORED[0]?.spec, deletionProtection: true, driftPolicy: "Report" };
  const status = { observedGeneration: 1, lastHandledRebuildAt: "2026-12-07T10:00:00Z" };
  const names = ["rolled-back-written", "rolled-back-untouched"];
  for (const name of names) {
    await kubectlOk(["create", "-f", "-"], { input: JSON.stringify(resource(name, spec)) });
    await kubectlOk(
      ["patch", PLURAL, name, "-n", namespace, "--subresource=status", "--type=merge", "-p"].concat(
        JSON.stringify({ status }),
      ),
    );
  }
  const get = async (name: string) =>
    JSON.parse(await kubectlOk(["get", PLURAL, name, "-n", namespace, "-o", "json"])) as {
      spec: Record<string, unknown>;
      status: Record<string, unknown>;
    };
  await apply(regrouped(parse(readFileSync(join(FIXTURES, "dms.dev_deployments.yaml"), "utf8"))));
  for (const name of names)
    await waitFor(async () => (await get(name)).spec.driftPolicy === undefined, {
      timeoutMs: 30_000,
      description: `0.1.0's schema in effect for ${name}`,
    });
  await kubectlOk(["label", PLURAL, "rolled-back-written", "-n", namespace, "team=platform"]);
  await apply(regrouped(crdObject(DEPLOYMENT_CRD)));
  await waitFor(async () => (await get("rolled-back-untouched")).spec.driftPolicy === "Report", {
    timeoutMs: 30_000,
    description: "this version's schema in effect again",
  });
  expect(await get("rolled-back-untouched")).toMatchObject({ spec, status });
  const written = await get("rolled-back-written");
  expect(written.spec).toEqual(STORED[0]?.spec);
  expect(written.status).toEqual({ observedGeneration: 1 });
});
