/**
 * Items a group at a time in turn: one of each group, then the second of each, and so on, each
 * group's in their order, the groups in the order first seen. Where a budget (reports a look,
 * label writes a pass) is spent on a list that one tenant can fill, so that its thousands do not
 * crowd another's few out. O(items).
 */
export function inTurns<T>(
  items: Iterable<T>,
  groupOf: (item: T) => string,
  max = Number.POSITIVE_INFINITY,
): T[] {
  const lines = new Map<string, T[]>();
  let count = 0;
  for (const item of items) {
    const group = groupOf(item);
    const line = lines.get(group);
    if (line) line.push(item);
    else lines.set(group, [item]);
    count += 1;
  }
  const out: T[] = [];
  const wanted = Math.min(max, count);
  // Each round takes one of every group with any left (a group is dropped once it has none).
  for (let round = 0; out.length < wanted; round++)
    for (const [group, line] of lines) {
      if (out.length >= wanted) break;
      out.push(line[round] as T);
      if (line.length === round + 1) lines.delete(group);
    }
  return out;
}
