/**
 * One page of GET /v2/deployments over the store's ordered deployments: the filters of the
 * spec, the listing faults, and the JSON of the page built from cached per-deployment JSON (the
 * hot path of the simulator: no copy of the store, no re-serialization of unchanged items).
 */
import type { ListQuery } from "./query.ts";
import type { DeploymentRecord } from "./record.ts";

/** Listing faults (see `Faults`): lag behind creates, a cap on page size, an offset that does not advance. */
export interface ListingFaults {
  lagMs: number;
  pageCap: number | undefined;
  repeatOffset: boolean;
}

const unfiltered = (q: ListQuery): boolean =>
  q.nameContains === undefined &&
  q.status === undefined &&
  q.remoteReconciled === undefined &&
  q.tagValueIds === undefined &&
  q.imageVersion === undefined &&
  q.deploymentType === undefined &&
  q.deploymentIds === undefined;

/**
 * The page as JSON: `{"resources": [...], "offset": next}` where `next` is the request offset
 * plus the items returned (or the request offset under `repeatOffset`); past the end the page
 * is empty. `name_contains` matches a substring case-insensitively; `tag_value_ids` matches a
 * deployment carrying any of the ids; the other filters match exactly.
 */
export function pageJson(
  ordered: readonly DeploymentRecord[],
  query: ListQuery,
  faults: ListingFaults,
  json: (record: DeploymentRecord) => string,
  status: (record: DeploymentRecord) => string,
  now: number,
): string {
  const cap = faults.pageCap === undefined ? query.limit : Math.min(query.limit, faults.pageCap);
  const parts: string[] = [];
  if (faults.lagMs === 0 && unfiltered(query)) {
    const end = Math.min(ordered.length, query.offset + cap);
    for (let i = query.offset; i < end; i++) {
      const record = ordered[i];
      if (record !== undefined) parts.push(json(record));
    }
  } else {
    const needle = query.nameContains?.toLowerCase();
    const tags = query.tagValueIds;
    let skipped = 0;
    for (const record of ordered) {
      if (faults.lagMs > 0 && now - record.createdAt < faults.lagMs) continue;
      if (needle !== undefined && !record.nameLower.includes(needle)) continue;
      if (query.status !== undefined && status(record) !== query.status) continue;
      if (query.remoteReconciled !== undefined && record.remoteReconciled !== query.remoteReconciled)
        continue;
      if (query.imageVersion !== undefined && record.imageVersion !== query.imageVersion) continue;
      if (query.deploymentType !== undefined && record.sourceConfig.deployment_type !== query.deploymentType)
        continue;
      if (query.deploymentIds !== undefined && !query.deploymentIds.has(record.id)) continue;
      if (tags !== undefined && !record.tagValueIds.some((t) => tags.has(t))) continue;
      if (skipped < query.offset) {
        skipped++;
        continue;
      }
      parts.push(json(record));
      if (parts.length >= cap) break;
    }
  }
  const next = faults.repeatOffset ? query.offset : query.offset + parts.length;
  return `{"resources":[${parts.join(",")}],"offset":${next}}`;
}
