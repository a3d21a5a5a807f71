/**
 * The writes to each deployment as the simulator saw them, each from its arrival to its answer,
 * and the handovers between replicas (User-Agents): a new writer must arrive only after every
 * earlier write by another replica was answered (a write never answered ends never).
 */
import type { SimRequest } from "../../src/simulator/requests.ts";

/** What {@link handovers} found. */
export interface Handovers {
  /** Changes of writer of one deployment. */
  count: number;
  /** The smallest gap between a previous writer's last answer and the next writer's arrival. */
  smallestGapMs: number;
  /** Where that gap was: `<deployment id>: <previous writer> → <next writer>`. */
  smallestAt: string;
  /** One line per handover whose new writer arrived before another's write was answered. */
  overlaps: string[];
}

/** The deployment id of a write to `/v2/deployments/{id}…`; undefined for any other request. */
function deploymentOf(r: SimRequest): string | undefined {
  if (r.method === "GET" || !r.url.startsWith("/v2/deployments/")) return undefined;
  return r.url.split("/")[3]?.split("?")[0] || undefined;
}

/** The writes of `requests` (oldest first, as the simulator records them) by deployment. */
export function writesByDeployment(requests: readonly SimRequest[]): Map<string, SimRequest[]> {
  const by = new Map<string, SimRequest[]>();
  for (const r of requests) {
    const id = deploymentOf(r);
    if (id !== undefined) by.set(id, [...(by.get(id) ?? []), r]);
  }
  return by;
}

export function handovers(requests: readonly SimRequest[]): Handovers {
  const found: Handovers = {
    count: 0,
    smallestGapMs: Number.POSITIVE_INFINITY,
    smallestAt: "",
    overlaps: [],
  };
  for (const [id, writes] of writesByDeployment(requests)) {
    // Per replica, when its latest-ending write so far was answered (never: +∞).
    const ended = new Map<string, number>();
    let writer: string | undefined;
    for (const w of writes) {
      const agent = w.userAgent ?? "";
      if (writer !== undefined && agent !== writer) {
        found.count += 1;
        const previousEnd = Math.max(...[...ended].filter(([a]) => a !== agent).map(([, end]) => end));
        const gap = w.at - previousEnd;
        if (gap < found.smallestGapMs) {
          found.smallestGapMs = gap;
          found.smallestAt = `${id}: ${writer} → ${agent}`;
        }
        if (!(gap > 0))
          found.overlaps.push(
            `${id}: ${agent}'s ${w.route} arrived at ${w.at}, before ${writer}'s write to it was answered (${previousEnd})`,
          );
      }
      const end = w.answeredAt ?? Number.POSITIVE_INFINITY;
      ended.set(agent, Math.max(ended.get(agent) ?? Number.NEGATIVE_INFINITY, end));
      writer = agent;
    }
  }
  return found;
}

/**
 * The writes of `requests` where a deployment's writer alternated within `windowMs` (A, then B,
 * then A again): two replicas taking turns, which the ring never allows within a Lease duration.
 * One line each, `<deployment id>: <A> <B> <A>`.
 */
export function alternations(requests: readonly SimRequest[], windowMs: number): string[] {
  const found: string[] = [];
  for (const [id, writes] of writesByDeployment(requests))
    for (let i = 2; i < writes.length; i++) {
      const [a, b, c] = [writes[i - 2], writes[i - 1], writes[i]];
      if (!a || !b || !c) continue;
      if (a.userAgent === c.userAgent && a.userAgent !== b.userAgent && c.at - a.at < windowMs)
        found.push(`${id}: ${a.userAgent} ${b.userAgent} ${c.userAgent}`);
    }
  return found;
}
