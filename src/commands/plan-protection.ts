/**
 * `plan`'s reading of the cluster for its deletion protection check (gitops/protection.ts says
 * what counts): the Deployment resources of the namespaces of the files' resources and of
 * `--protection-namespaces`, then, across the cluster, those carrying a GitOps tool's label mark
 * that the files' live resources carry (a file dropped with its namespace's last resource, or
 * placed elsewhere by Argo CD's destination or Flux's targetNamespace, is found by it).
 *
 * Advisory, and bounded: small pages, each at most {@link PROTECTION_BUDGET}'s `pageBytes`; at
 * most its `items` resources, `bytes` read and `ms` for the whole check. Whatever could not be
 * read (a forbidden or failed list, a spent budget, a mark a list cannot select) is said in
 * `unchecked`; only the caller's own abort fails the plan.
 */

import { cutToBytes, printableLine } from "../api/printable.ts";
import type { ManifestProblem } from "../gitops/manifests.ts";
import { invalidDocuments, type PlanReport } from "../gitops/plan-report.ts";
import { filesMarks, gitopsMark, type LiveMarks, protectedRemovals } from "../gitops/protection.ts";
import { DEPLOYMENTS } from "../kube/custom-resources.ts";
import { AnswerTooLargeError, KubeApiError } from "../kube/errors.ts";
import { listItems, listMeta } from "../kube/listing.ts";
import { collectionPath } from "../kube/object.ts";
import { isRecord } from "../runtime/json.ts";
import type { CommandCluster } from "./connections.ts";

/** What the deletion protection check asks of the cluster: list requests. */
export type ListingCluster = { client: Pick<CommandCluster["client"], "request"> };

/**
 * The check's bounds. A resource's size is its writer's (up to ~1.5 MiB): pages of 50 keep a page
 * within `pageBytes`, which a page of ordinary resources (a few KB each) is far from.
 */
export const PROTECTION_BUDGET: ProtectionBudget = {
  pageSize: 50,
  pageBytes: 8 * 1024 * 1024,
  bytes: 64 * 1024 * 1024,
  items: 5000,
  ms: 30_000,
};

/** The bounds of {@link PROTECTION_BUDGET}: a page's resources and bytes; the check's resources, bytes, milliseconds. */
export interface ProtectionBudget {
  pageSize: number;
  pageBytes: number;
  bytes: number;
  items: number;
  ms: number;
}

/** Options of {@link protectionCheck}. */
export interface ProtectionOptions {
  signal: AbortSignal;
  /** `--protection-namespaces`: more namespaces to check. */
  namespaces?: readonly string[];
  /**
   * The names of the files' resources without `metadata.namespace`: each counts as in each of
   * `namespaces` too (Argo CD's destination or Flux's targetNamespace may have put it there).
   */
  unnamespaced?: readonly string[];
  /** The clock of the time budget (milliseconds); `Date.now` by default. */
  now?: () => number;
  budget?: Partial<ProtectionBudget>;
}

/**
 * The cluster's protected Deployment resources that the files (`entries`) no longer hold, and
 * what could not be checked (`unchecked`, why); invalid documents (which may be the resources
 * the check would find missing) stop it.
 */
export async function protectionCheck(
  kube: ListingCluster,
  entries: readonly { namespace: string; name: string }[],
  fileErrors: readonly ManifestProblem[],
  options: ProtectionOptions,
): Promise<NonNullable<PlanReport["protection"]>> {
  const invalid = invalidDocuments(fileErrors);
  if (invalid > 0)
    return {
      removals: [],
      unchecked: `(${invalid} invalid ${invalid === 1 ? "document" : "documents"} may hold resources it would find missing: fix them first)`,
    };
  const extra = options.namespaces ?? [];
  const planned = [
    ...entries,
    ...extra.flatMap((namespace) => (options.unnamespaced ?? []).map((name) => ({ namespace, name }))),
  ];
  const reader = new Reader(kube, options);
  const live = new Map<string, LiveMarks>();
  const unchecked: string[] = [];
  const read = async (where: string, namespace?: string, selector?: string) => {
    const result = await reader.list(namespace, selector);
    for (const m of result.marks) live.set(`${m.namespace}/${m.name}`, m);
    if (result.unchecked) unchecked.push(`${where} (${result.unchecked})`);
  };
  for (const namespace of new Set([...entries.map((e) => e.namespace), ...extra]))
    await read(`in namespace ${namespace}`, namespace);
  for (const mark of filesMarks(planned, [...live.values()])) {
    const where = `applied by ${mark.owner} outside the namespaces checked`;
    if (mark.selector) await read(where, undefined, mark.selector);
    else
      unchecked.push(
        `${where} (its mark is an annotation, which a list cannot select: --protection-namespaces names more namespaces to check)`,
      );
  }
  const removals = protectedRemovals(planned, [...live.values()]);
  return unchecked.length === 0 ? { removals } : { removals, unchecked: unchecked.join("; ") };
}

/** Lists pages within the check's budget; what it could not read is a reason, not an error. */
class Reader {
  readonly #kube: ListingCluster;
  readonly #signal: AbortSignal;
  readonly #now: () => number;
  readonly #budget: ProtectionBudget;
  readonly #deadline: number;
  #items = 0;
  #bytes = 0;

  constructor(kube: ListingCluster, options: ProtectionOptions) {
    this.#kube = kube;
    this.#signal = options.signal;
    this.#now = options.now ?? Date.now;
    this.#budget = { ...PROTECTION_BUDGET, ...options.budget };
    this.#deadline = this.#now() + this.#budget.ms;
  }

  /** The Deployment resources of `namespace` (all without), with `selector`, a page at a time. */
  async list(namespace?: string, selector?: string): Promise<{ marks: LiveMarks[]; unchecked?: string }> {
    const marks: LiveMarks[] = [];
    const b = this.#budget;
    let token: string | undefined;
    do {
      const left = this.#deadline - this.#now();
      if (left <= 0) return { marks, unchecked: `the check's ${b.ms / 1000} s were spent` };
      if (this.#items >= b.items) return { marks, unchecked: `the check's ${b.items} resources were read` };
      if (this.#bytes >= b.bytes) return { marks, unchecked: `the check's ${size(b.bytes)} were read` };
      let page: unknown;
      try {
        page = await this.#kube.client.request({
          method: "GET",
          path: collectionPath(DEPLOYMENTS, namespace),
          query: { limit: b.pageSize, continue: token, labelSelector: selector },
          maxBytes: Math.min(b.pageBytes, b.bytes - this.#bytes),
          timeoutMs: left,
          signal: this.#signal,
        });
      } catch (error) {
        if (this.#signal.aborted) throw error;
        return { marks, unchecked: this.#reason(error, namespace) };
      }
      // The bytes read, as the page's JSON text (the client keeps no count).
      this.#bytes += Buffer.byteLength(JSON.stringify(page) ?? "");
      for (const item of listItems(page)) {
        this.#items++;
        const found = liveMarks(item, namespace);
        if (found) marks.push(found);
      }
      token = listMeta(page).continue;
    } while (token !== undefined);
    return { marks };
  }

  #reason(error: unknown, namespace: string | undefined): string {
    if (error instanceof KubeApiError && error.status === 403)
      return namespace
        ? "this kubeconfig may not list its Deployment resources"
        : "this kubeconfig may not list Deployment resources across namespaces: --protection-namespaces names more namespaces to check";
    if (error instanceof KubeApiError && error.status === 404)
      return "the cluster does not serve deployments.dms.dev: is the CRD installed?";
    if (error instanceof AnswerTooLargeError)
      return `a page of ${this.#budget.pageSize} resources is larger than ${size(error.maxBytes)}, the most a page or what is left of the check's ${size(this.#budget.bytes)} may take`;
    const message = error instanceof Error ? error.message : String(error);
    return `the list failed: ${printableLine(cutToBytes(message, 300))}`;
  }
}

const size = (bytes: number) =>
  bytes >= 1024 * 1024 ? `${Math.round((bytes / 1024 / 1024) * 10) / 10} MiB` : `${bytes} bytes`;

/** What the check reads of one listed Deployment resource, or undefined when it is not one. */
function liveMarks(item: unknown, listed: string | undefined): LiveMarks | undefined {
  if (!isRecord(item) || !isRecord(item.metadata)) return undefined;
  const { name, labels, annotations } = item.metadata;
  const namespace = typeof item.metadata.namespace === "string" ? item.metadata.namespace : listed;
  if (typeof name !== "string" || namespace === undefined) return undefined;
  const mark = gitopsMark({
    labels: isRecord(labels) ? (labels as Record<string, string>) : undefined,
    annotations: isRecord(annotations) ? (annotations as Record<string, string>) : undefined,
  });
  return {
    namespace,
    name,
    protected: isRecord(item.spec) && item.spec.deletionProtection === true,
    ...(mark ? { owner: mark.owner, ...(mark.selector ? { selector: mark.selector } : {}) } : {}),
  };
}
