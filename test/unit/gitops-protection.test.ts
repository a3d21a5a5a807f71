// `plan`'s deletion protection check: which protected resources of the cluster a change of the
// files would have a prune delete (the API server would refuse it until spec.deletionProtection
// is cleared), how a GitOps tool's marks narrow them to the files' owner, and how the report says
// it: a warning naming the resource and the field to clear, never a change of the exit status.
import { describe, expect, it } from "vitest";
import { MAX_PROTECTION_LISTED, protectionCheck } from "../../src/commands/plan.ts";
import { planDocument, planExitStatus, renderPlanText } from "../../src/gitops/plan-report.ts";
import { gitopsOwner, type LiveMarks, protectedRemovals } from "../../src/gitops/protection.ts";
import { KubeApiError } from "../../src/kube/errors.ts";

const planned = [
  { namespace: "team-a", name: "web" },
  { namespace: "team-a", name: "api" },
];
const live = (name: string, protectedFlag: boolean, owner?: string, namespace = "team-a"): LiveMarks => ({
  namespace,
  name,
  protected: protectedFlag,
  ...(owner ? { owner } : {}),
});

describe("protectedRemovals", () => {
  it("names a protected resource of the files' namespaces that the files no longer hold, and the field to clear", () => {
    const removals = protectedRemovals(planned, [
      live("web", true),
      live("api", false),
      live("billing", true),
      live("scratch", false),
      live("elsewhere", true, undefined, "team-b"),
    ]);
    expect(removals.map((r) => `${r.namespace}/${r.name}`)).toEqual(["team-a/billing"]);
    expect(removals[0]?.message).toBe(
      `team-a/billing has spec.deletionProtection: true and is no longer in the files (in a namespace of the files' resources): a GitOps sync that prunes would delete it, and the API server refuses the delete until spec.deletionProtection is cleared first (kubectl patch dmsd billing -n team-a --type merge -p '{"spec":{"deletionProtection":false}}'); if it was renamed or moved by mistake, keep it in the files`,
    );
  });

  it("with a GitOps tool's mark on the files' live resources, only the resources of that owner count", () => {
    const flux = "Flux Kustomization flux-system/team-a";
    const removals = protectedRemovals(planned, [
      live("web", false, flux),
      live("billing", true, flux),
      live("other-app", true, "Flux Kustomization flux-system/team-a-extra"),
      live("unmarked", true),
    ]);
    expect(removals).toHaveLength(1);
    expect(removals[0]).toMatchObject({ name: "billing", owner: flux });
    expect(removals[0]?.message).toContain(`(applied by the same ${flux} as the files' resources)`);
  });

  it("nothing when every protected resource is still in the files", () => {
    expect(protectedRemovals(planned, [live("web", true), live("api", true)])).toEqual([]);
    expect(protectedRemovals([], [live("web", true)])).toEqual([]);
  });
});

describe("gitopsOwner", () => {
  it("reads Flux's, Argo CD's, Helm's and ApplySet's marks, and none from plain labels", () => {
    expect(
      gitopsOwner({
        labels: {
          "kustomize.toolkit.fluxcd.io/name": "apps",
          "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
        },
      }),
    ).toBe("Flux Kustomization flux-system/apps");
    expect(
      gitopsOwner({
        labels: { "helm.toolkit.fluxcd.io/name": "agents", "helm.toolkit.fluxcd.io/namespace": "team-a" },
      }),
    ).toBe("Flux HelmRelease team-a/agents");
    expect(
      gitopsOwner({
        annotations: { "argocd.argoproj.io/tracking-id": "agents:dms.dev/Deployment:team-a/web" },
        labels: { "app.kubernetes.io/instance": "ignored" },
      }),
    ).toBe("Argo CD Application agents");
    expect(gitopsOwner({ labels: { "app.kubernetes.io/instance": "agents" } })).toBe(
      "app.kubernetes.io/instance=agents",
    );
    expect(
      gitopsOwner({
        annotations: { "meta.helm.sh/release-name": "agents", "meta.helm.sh/release-namespace": "team-a" },
      }),
    ).toBe("Helm release team-a/agents");
    expect(gitopsOwner({ labels: { "applyset.kubernetes.io/part-of": "applyset-abc-v1" } })).toBe(
      "ApplySet applyset-abc-v1",
    );
    // Whoever may annotate the resource writes it: cut, and one printable line.
    const hostile = gitopsOwner({
      annotations: { "argocd.argoproj.io/tracking-id": `app\x1b]52;c;bad\x07\n${"x".repeat(300_000)}` },
    });
    expect(hostile).toMatch(/^Argo CD Application app\ufffd x+$/);
    expect(hostile?.length).toBeLessThan(300);
    expect(gitopsOwner({ labels: { team: "a" } })).toBeUndefined();
    expect(gitopsOwner({})).toBeUndefined();
  });
});

describe("the plan report", () => {
  const removals = protectedRemovals(planned, [live("billing", true)]);

  it("warns in text and lists them in JSON, leaving the exit status as it is", () => {
    const report = { entries: [], fileErrors: [], clusterRead: true, protection: { removals } };
    const text = renderPlanText(report);
    expect(text).toContain(`warning: ${removals[0]?.message}\n`);
    expect(planDocument(report)).toMatchObject({
      protectedRemovals: [{ namespace: "team-a", name: "billing" }],
    });
    expect(planDocument(report)).not.toHaveProperty("protectedRemovalsUnchecked");
    expect(planExitStatus(report)).toBe(planExitStatus({ ...report, protection: { removals: [] } }));
  });

  it("says what it could not check, and without a cluster that the removals are not known", () => {
    const partly = {
      entries: [],
      fileErrors: [],
      clusterRead: true,
      protection: {
        removals: [],
        unchecked: "in namespace team-b (this kubeconfig may not list its Deployment resources)",
      },
    };
    expect(renderPlanText(partly)).toContain(
      "note: deletion protection not checked in namespace team-b (this kubeconfig may not list its Deployment resources)\n",
    );
    expect(planDocument(partly)).toMatchObject({
      protectedRemovals: [],
      protectedRemovalsUnchecked:
        "in namespace team-b (this kubeconfig may not list its Deployment resources)",
    });
    const offline = { entries: [], fileErrors: [], clusterRead: false };
    expect(renderPlanText(offline)).toContain(
      "the resources of the cluster that the files no longer hold are not known (a protected one, spec.deletionProtection: true, that a prune would delete is not flagged)",
    );
    expect(planDocument(offline)).toMatchObject({ protectedRemovals: null });
  });
});

describe("plan's reading of the cluster for it", () => {
  const item = (name: string, deletionProtection?: boolean, labels?: Record<string, string>) => ({
    metadata: { name, ...(labels ? { labels } : {}) },
    spec: deletionProtection === undefined ? {} : { deletionProtection },
  });
  const signal = new AbortController().signal;

  it("reads the files' namespaces a page at a time, and says which it may not list or read whole", async () => {
    const asked: string[] = [];
    const client = {
      request: async (req: { path: string; query?: Record<string, unknown> }) => {
        asked.push(`${req.path}?${String(req.query?.continue ?? "")}`);
        if (req.path.includes("/namespaces/team-b/")) throw new KubeApiError(403, "Forbidden", "forbidden");
        if (req.path.includes("/namespaces/team-d/")) throw new KubeApiError(404, "NotFound", "not found");
        if (req.path.includes("/namespaces/team-c/"))
          // A namespace whose listing never ends: read up to the cap, then said.
          return {
            items: Array.from({ length: 500 }, (_, i) => item(`r${i}`)),
            metadata: { continue: "more" },
          };
        return req.query?.continue === undefined
          ? { items: [item("web"), item("billing", true)], metadata: { continue: "page2" } }
          : { items: [item("ledger", true)], metadata: {} };
      },
    };
    const entries = [
      { namespace: "team-a", name: "web" },
      { namespace: "team-b", name: "api" },
      { namespace: "team-c", name: "r0" },
      { namespace: "team-d", name: "x" },
    ];
    const checked = await protectionCheck({ client }, entries, [], signal);
    expect(checked.removals.map((r) => `${r.namespace}/${r.name}`)).toEqual([
      "team-a/billing",
      "team-a/ledger",
    ]);
    expect(checked.unchecked).toBe(
      `in namespace team-b (this kubeconfig may not list its Deployment resources); in namespace team-c beyond its first ${MAX_PROTECTION_LISTED} resources; in namespace team-d (the cluster does not serve deployments.dms.dev: is the CRD installed?)`,
    );
    expect(asked.filter((a) => a.includes("/team-a/"))).toHaveLength(2);
    expect(asked.filter((a) => a.includes("/team-c/"))).toHaveLength(MAX_PROTECTION_LISTED / 500);
  });

  it("with invalid documents in the files, checks nothing and says why", async () => {
    const client = {
      request: async () => {
        throw new Error("not asked");
      },
    };
    const problem = { file: "a.yaml", line: 1, column: 1, document: 1, message: "x" };
    expect(await protectionCheck({ client }, [{ namespace: "a", name: "b" }], [problem], signal)).toEqual({
      removals: [],
      unchecked: "(1 invalid document may hold resources it would find missing: fix them first)",
    });
  });
});
