/**
 * A sharder's pass, phase three: the label writes decided, in order and bounded, a few at once.
 * Admission's denials are counted and reported once per pass, with the fix.
 */
import type { Logger } from "pino";
import { MAX_WRITES_PER_PASS, type PlannedWrite, type ShardedResource } from "./pass.ts";

/**
 * Thrown by a label write when the API server denied it (HTTP 403): by `policy`, a
 * ValidatingAdmissionPolicy that does not admit this process's ServiceAccount, else by RBAC. The
 * sharder reports it once per pass, with the fix, instead of once per resource.
 */
export class ShardLabelsDenied extends Error {
  override readonly name = "ShardLabelsDenied";
  readonly byPolicy: boolean;
  constructor(message: string, byPolicy: boolean, options?: ErrorOptions) {
    super(message, options);
    this.byPolicy = byPolicy;
  }
}

/** The one line a pass logs for its denied label writes: what denied them and the fix. */
export function deniedMessage(denied: ShardLabelsDenied): string {
  return denied.byPolicy
    ? `the shard-label policy does not admit this service account: ${denied.message}. Name the operator's ServiceAccount (system:serviceaccount:<namespace>:<name>) in the policy's matchConditions (manifests/components/sharding/shard-label-policy.yaml), or turn the policy off`
    : `this service account may not patch Deployment resources: ${denied.message}. Grant it patch on deployments.dms.dev (the operator's ClusterRole)`;
}

/**
 * The writes of a pass in the order they go out, at most `max`: those whose write failed last pass
 * go last, so that a head of failing writes does not starve the rest. `later` counts those left out.
 */
export function orderWrites<W extends { resource: { readonly uid: string } }>(
  writes: readonly W[],
  failedBefore: ReadonlySet<string>,
  max = MAX_WRITES_PER_PASS,
): { ordered: W[]; later: number } {
  const ordered = [
    ...writes.filter((w) => !failedBefore.has(w.resource.uid)),
    ...writes.filter((w) => failedBefore.has(w.resource.uid)),
  ];
  const later = Math.max(0, ordered.length - max);
  if (later > 0) ordered.length = max;
  return { ordered, later };
}

/** How one write ended: written, lost a race (tried again next pass), or not made (its reason gone). */
export type WriteResult = "written" | "lost" | "skipped";

/** What the writes of a pass did. */
export interface WriteOutcome {
  assigned: number;
  drained: number;
  lost: number;
  denied: number;
  /** The resources (uids) whose write failed: tried after the others next pass. */
  failed: Set<string>;
}

/** Options of {@link runWrites}. */
export interface RunWritesOptions<R extends ShardedResource> {
  write(planned: PlannedWrite<R>, signal: AbortSignal): Promise<WriteResult>;
  /** Writes at once. */
  concurrency: number;
  signal: AbortSignal;
  logger: Logger;
}

/**
 * Runs `ordered`, `concurrency` at once, none once `signal` aborted. A failed write is counted and
 * logged (denials once, see {@link deniedMessage}); it never stops the others.
 */
export async function runWrites<R extends ShardedResource>(
  ordered: readonly PlannedWrite<R>[],
  o: RunWritesOptions<R>,
): Promise<WriteOutcome> {
  const outcome: WriteOutcome = { assigned: 0, drained: 0, lost: 0, denied: 0, failed: new Set() };
  let denial: ShardLabelsDenied | undefined;
  let next = 0;
  /** Makes one write: true when it was written. */
  const one = async (planned: PlannedWrite<R>): Promise<boolean> => {
    try {
      const result = await o.write(planned, o.signal);
      if (result === "lost") outcome.lost += 1;
      else if (result === "written") outcome[planned.kind === "assign" ? "assigned" : "drained"] += 1;
      return result === "written";
    } catch (err) {
      outcome.failed.add(planned.resource.uid);
      if (err instanceof ShardLabelsDenied) {
        outcome.denied += 1;
        denial ??= err;
      } else o.logger.warn({ err }, "shard label write failed; retried next pass");
      return false;
    }
  };
  const worker = async () => {
    while (next < ordered.length) {
      const planned = ordered[next++];
      if (planned === undefined || o.signal.aborted || !(await one(planned))) continue;
      // A claim's younger rivals, each once the one before it was written (see `chooseMoves`).
      for (const younger of planned.kind === "assign" ? (planned.after ?? []) : [])
        if (o.signal.aborted || !(await one(younger))) break;
    }
  };
  await Promise.all(Array.from({ length: Math.min(o.concurrency, ordered.length) }, worker));
  if (denial !== undefined) o.logger.error({ denied: outcome.denied }, deniedMessage(denial));
  return outcome;
}
