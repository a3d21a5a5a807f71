/**
 * What a status write changed, for the reconciler's debug line of the write (`reconciler.ts`):
 * a status written again and again says which field keeps changing. Entered only with debug
 * logging on.
 */
import { jsonEqual } from "../runtime/json.ts";

/**
 * The fields of a status that differ between `a` and `b` (top-level names; a condition as
 * `conditions.<type>`).
 */
export function changedStatusFields<T extends { conditions?: readonly { type: string }[] }>(
  a: T | undefined,
  b: T | undefined,
): string[] {
  const x: Record<string, unknown> = a ?? {};
  const y: Record<string, unknown> = b ?? {};
  const changed: string[] = [];
  for (const key of new Set([...Object.keys(x), ...Object.keys(y)])) {
    if (key !== "conditions") {
      if (!jsonEqual(x[key], y[key])) changed.push(key);
      continue;
    }
    const types = new Set([...(a?.conditions ?? []), ...(b?.conditions ?? [])].map((c) => c.type));
    for (const type of types) {
      const before = a?.conditions?.find((c) => c.type === type);
      const after = b?.conditions?.find((c) => c.type === type);
      if (!jsonEqual(before, after)) changed.push(`conditions.${type}`);
    }
  }
  return changed;
}
