// `plan`'s deletion protection check: which protected resources of the cluster a change of the
// files would have a prune delete (the API server would refuse it until spec.deletionProtection
// is cleared), how a GitOps tool's marks narrow them to the files' owner, and how the report says
// it: a warning naming the resource and the field to clear, never a change of the exit status.
import { describe, expect, it } from "vitest";
import { PROTECTION_BUDGET, protectionCheck } from "../../src/commands/plan-protection.ts";
import { planDocument, planExitStatus, renderPlanText } from "../../src/gitops/plan-report.ts";
import { gitopsMark, type LiveMarks, protectedRemovals } from "../../src/gitops/protection.ts";
import { AnswerTooLargeError, KubeApiError } from "../../src/kube/errors.ts";

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

  it("with a mark, a resource of that owner counts in whatever namespace it lives (its namespace's last file dropped)", () => {
    const flux = "Flux Kustomization flux-system/apps";
    const removals = protectedRemovals(planned, [
      live("web", false, flux),
      live("ledger", true, flux, "team-z"),
      live("other", true, "Flux Kustomization flux-system/infra", "team-z"),
    ]);
    expect(removals.map((r) => `${r.namespace}/${r.name}`)).toEqual(["team-z/ledger"]);
  });

  it("nothing when every protected resource is still in the files", () => {
    expect(protectedRemovals(planned, [live("web", true), live("api", true)])).toEqual([]);
    expect(protectedRemovals([], [live("web", true)])).toEqual([]);
  });
});

describe("gitopsMark", () => {
  it("reads Flux's, Argo CD's, Helm's and ApplySet's marks, and none from plain labels", () => {
    expect(
      gitopsMark({
        labels: {
          "kustomize.toolkit.fluxcd.io/name": "apps",
          "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
        },
      })?.owner,
    ).toBe("Flux Kustomization flux-system/apps");
    expect(
      gitopsMark({
        labels: { "helm.toolkit.fluxcd.io/name": "agents", "helm.toolkit.fluxcd.io/namespace": "team-a" },
      })?.owner,
    ).toBe("Flux HelmRelease team-a/agents");
    expect(
      gitopsMark({
        annotations: { "argocd.argoproj.io/tracking-id": "agents:dms.dev/Deployment:team-a/web" },
        labels: { "app.kubernetes.io/instance": "ignored" },
      })?.owner,
    ).toBe("Argo CD Application agents");
    expect(gitopsMark({ labels: { "app.kubernetes.io/instance": "agents" } })?.owner).toBe(
      "app.kubernetes.io/instance=agents",
    );
    expect(
      gitopsMark({
        annotations: { "meta.helm.sh/release-name": "agents", "meta.helm.sh/release-namespace": "team-a" },
      })?.owner,
    ).toBe("Helm release team-a/agents");
    expect(gitopsMark({ labels: { "applyset.kubernetes.io/part-of": "applyset-abc-v1" } })?.owner).toBe(
      "ApplySet applyset-abc-v1",
    );
    // Whoever may annotate the resource writes it: cut, and one printable line.
    const hostile = gitopsMark({
      annotations: { "argocd.argoproj.io/tracking-id": `app\x1b]52;c;bad\x07\n${"x".repeat(300_000)}` },
    })?.owner;
    expect(hostile).toMatch(/^Argo CD Application app\ufffd x+$/);
    expect(hostile?.length).toBeLessThan(300);
    expect(gitopsMark({ labels: { team: "a" } })?.owner).toBeUndefined();
    expect(gitopsMark({})?.owner).toBeUndefined();
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
  type Req = {
    path: string;
    query?: Record<string, unknown>;
    maxBytes?: number;
    timeoutMs?: number;
  };
  const item = (
    name: string,
    deletionProtection?: boolean,
    labels?: Record<string, string>,
    namespace?: string,
    annotations?: Record<string, string>,
  ) => ({
    metadata: {
      name,
      ...(namespace ? { namespace } : {}),
      ...(labels ? { labels } : {}),
      ...(annotations ? { annotations } : {}),
    },
    spec: deletionProtection === undefined ? {} : { deletionProtection },
  });
  const signal = new AbortController().signal;
  const FLUX = {
    "kustomize.toolkit.fluxcd.io/name": "apps",
    "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
  };
  const names = (c: { removals: { namespace: string; name: string }[] }) =>
    c.removals.map((r) => `${r.namespace}/${r.name}`);

  it("reads the files' namespaces in small pages, and says which it may not list or read whole", async () => {
    const asked: Req[] = [];
    const client = {
      request: async (req: Req) => {
        asked.push(req);
        if (req.path.includes("/namespaces/team-b/")) throw new KubeApiError(403, "Forbidden", "forbidden");
        if (req.path.includes("/namespaces/team-d/")) throw new KubeApiError(404, "NotFound", "not found");
        if (req.path.includes("/namespaces/team-c/"))
          // A namespace whose listing never ends: read up to the check's bound, then said.
          return {
            items: Array.from({ length: Number(req.query?.limit) }, (_, i) => item(`r${i}`)),
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
      { namespace: "team-d", name: "x" },
      { namespace: "team-c", name: "r0" },
    ];
    const checked = await protectionCheck({ client }, entries, [], { signal, budget: { items: 203 } });
    expect(names(checked)).toEqual(["team-a/billing", "team-a/ledger"]);
    expect(checked.unchecked).toBe(
      "in namespace team-b (this kubeconfig may not list its Deployment resources); in namespace team-d (the cluster does not serve deployments.dms.dev: is the CRD installed?); in namespace team-c (the check's 203 resources were read)",
    );
    expect(asked.filter((a) => a.path.includes("/team-a/"))).toHaveLength(2);
    // 3 read in team-a, then pages of 50 up to the bound.
    expect(asked.filter((a) => a.path.includes("/team-c/"))).toHaveLength(4);
    expect(new Set(asked.map((a) => a.query?.limit))).toEqual(new Set([PROTECTION_BUDGET.pageSize]));
    expect(new Set(asked.map((a) => a.maxBytes))).toEqual(new Set([PROTECTION_BUDGET.pageBytes]));
  });

  it("a failed list, a page too large, a spent byte or time budget: a note, never the plan's failure", async () => {
    let now = 0;
    const asked: Req[] = [];
    const big = {
      items: [item("a", true, undefined, undefined, { note: "x".repeat(2_000) })],
      metadata: { continue: "more" },
    };
    const client = {
      request: async (req: Req) => {
        asked.push(req);
        now += 10_000;
        if (req.path.includes("/team-a/"))
          throw new KubeApiError(500, "InternalError", "etcd\x1b[2J is down");
        if (req.path.includes("/team-b/")) throw new Error("GET /apis/x: socket hang up");
        if (req.path.includes("/team-c/")) throw new AnswerTooLargeError("GET x", req.maxBytes ?? 0);
        return big;
      },
    };
    const entries = ["team-a", "team-b", "team-c", "team-d"].map((namespace) => ({ namespace, name: "x" }));
    const bytes = await protectionCheck({ client }, entries, [], {
      signal,
      now: () => now,
      budget: { bytes: 5_000, ms: 1_000_000 },
    });
    expect(bytes.unchecked).toBe(
      "in namespace team-a (the list failed: etcd\ufffd is down); in namespace team-b (the list failed: GET /apis/x: socket hang up); in namespace team-c (a page of 50 resources is larger than 5000 bytes, the most a page or what is left of the check's 5000 bytes may take); in namespace team-d (the check's 5000 bytes were read)",
    );
    // What was read before the budget ran out still counts.
    expect(names(bytes)).toEqual(["team-d/a"]);

    now = 0;
    asked.length = 0;
    const time = await protectionCheck({ client }, [{ namespace: "team-d", name: "x" }], [], {
      signal,
      now: () => now,
      budget: { ms: 25_000 },
    });
    // Each request may take what is left of the check's time, and no more.
    expect(asked.map((a) => a.timeoutMs)).toEqual([25_000, 15_000, 5_000]);
    expect(time.unchecked).toBe("in namespace team-d (the check's 25 s were spent)");
    expect(names(time)).toEqual(["team-d/a"]);
  });

  it("reads no page past the check's byte budget", async () => {
    const asked: Req[] = [];
    const page = {
      items: [item("a", true, undefined, undefined, { note: "x".repeat(2_000) })],
      metadata: { continue: "more" },
    };
    const client = {
      request: async (req: Req) => {
        asked.push(req);
        return page;
      },
    };
    const checked = await protectionCheck({ client }, [{ namespace: "team-a", name: "x" }], [], {
      signal,
      budget: { bytes: 5_000 },
    });
    // Each page may be at most what is left of the budget; once spent, none more is asked.
    const size = Buffer.byteLength(JSON.stringify(page));
    expect(asked.map((a) => a.maxBytes)).toEqual([5_000, 5_000 - size, 5_000 - 2 * size]);
    expect(checked.unchecked).toBe("in namespace team-a (the check's 5000 bytes were read)");
  });

  it("stops on the caller's own abort", async () => {
    const stop = new AbortController();
    const client = {
      request: async () => {
        stop.abort();
        throw new Error("aborted");
      },
    };
    await expect(
      protectionCheck({ client }, [{ namespace: "a", name: "b" }], [], { signal: stop.signal }),
    ).rejects.toThrow("aborted");
  });

  it("finds the protected resource of a dropped namespace by the files' label mark, across the cluster", async () => {
    const asked: Req[] = [];
    let clusterWide: "ok" | "forbidden" = "ok";
    const client = {
      request: async (req: Req) => {
        asked.push(req);
        if (req.path.includes("/namespaces/team-a/"))
          return {
            items: [item("web", false, FLUX, "team-a"), item("api", true, undefined, "team-a")],
            metadata: {},
          };
        if (clusterWide === "forbidden") throw new KubeApiError(403, "Forbidden", "forbidden");
        // Cluster-wide, by the mark: the files' own, and one whose namespace has no file left.
        return {
          items: [item("web", false, FLUX, "team-a"), item("ledger", true, FLUX, "team-z")],
          metadata: {},
        };
      },
    };
    const entries = [{ namespace: "team-a", name: "web" }];
    const checked = await protectionCheck({ client }, entries, [], { signal });
    // team-a/api has another owner (none): a prune of this Kustomization leaves it.
    expect(names(checked)).toEqual(["team-z/ledger"]);
    expect(checked.unchecked).toBeUndefined();
    expect(asked.at(-1)).toMatchObject({
      path: "/apis/dms.dev/v1alpha1/deployments",
      query: {
        labelSelector:
          "kustomize.toolkit.fluxcd.io/name=apps,kustomize.toolkit.fluxcd.io/namespace=flux-system",
      },
    });

    clusterWide = "forbidden";
    expect((await protectionCheck({ client }, entries, [], { signal })).unchecked).toBe(
      "applied by Flux Kustomization flux-system/apps outside the namespaces checked (this kubeconfig may not list Deployment resources across namespaces: --protection-namespaces names more namespaces to check)",
    );
  });

  it("says a mark that is an annotation cannot be followed; --protection-namespaces checks more namespaces", async () => {
    const argo = { "argocd.argoproj.io/tracking-id": "agents:dms.dev/Deployment:prod/web" };
    const asked: string[] = [];
    const client = {
      request: async (req: Req) => {
        asked.push(req.path);
        // The files' web names no namespace (planned in default); Argo CD put it in prod.
        if (req.path.includes("/namespaces/prod/"))
          return {
            items: [
              item("web", false, undefined, "prod", argo),
              item("billing", true, undefined, "prod", argo),
            ],
            metadata: {},
          };
        return { items: [], metadata: {} };
      },
    };
    const entries = [{ namespace: "default", name: "web" }];
    const without = await protectionCheck({ client }, entries, [], { signal, unnamespaced: ["web"] });
    expect(names(without)).toEqual([]);
    const checked = await protectionCheck({ client }, entries, [], {
      signal,
      namespaces: ["prod"],
      unnamespaced: ["web"],
    });
    expect(names(checked)).toEqual(["prod/billing"]);
    expect(checked.removals[0]?.owner).toBe("Argo CD Application agents");
    expect(checked.unchecked).toBe(
      "applied by Argo CD Application agents outside the namespaces checked (its mark is an annotation, which a list cannot select: --protection-namespaces names more namespaces to check)",
    );
    expect(asked.filter((p) => !p.includes("/namespaces/"))).toEqual([]);
  });

  it("with invalid documents in the files, checks nothing and says why", async () => {
    const client = {
      request: async () => {
        throw new Error("not asked");
      },
    };
    const problem = { file: "a.yaml", line: 1, column: 1, document: 1, message: "x" };
    expect(await protectionCheck({ client }, [{ namespace: "a", name: "b" }], [problem], { signal })).toEqual(
      {
        removals: [],
        unchecked: "(1 invalid document may hold resources it would find missing: fix them first)",
      },
    );
  });
});
