/**
 * How many watched resources a V8 heap limit supports, from measured costs, and the check that
 * warns when the operator watches more: past that point it spends its CPU on garbage collection
 * and is eventually OOM-killed, far from the cause (a `NODE_OPTIONS` / memory limit sized for
 * fewer resources). The figures come from docs/benchmarks.md, section "Memory".
 */
import { getHeapStatistics } from "node:v8";

/** What the heap must hold: a fixed part, a part per watched resource, and room for garbage. */
export interface HeapBudget {
  /** Live heap with nothing watched: code, clients, metrics. */
  baseBytes: number;
  /** Live heap per watched Deployment resource, everything it entails (cache, queue, listing). */
  bytesPerResource: number;
  /**
   * Share of the heap limit the live set may fill. The rest is room for the garbage of a resync
   * pass and of watch events, so that the collector keeps up without running back to back.
   */
  liveFraction: number;
}

/** The budget measured on the compiled operator (docs/benchmarks.md, "Memory"). */
export const MEASURED_HEAP_BUDGET: HeapBudget = {
  // Live heap after creating N resources (a heap snapshot's): 20.2 MiB at 0, 30.2 MiB at 3,000,
  // 46.5 MiB at 10,000, i.e. 2.7 KiB per resource on average (3.4 up to 3,000, compiled code
  // growing with use), rounded up.
  baseBytes: 21 * 2 ** 20,
  bytesPerResource: 2.75 * 1024,
  liveFraction: 0.5,
};

/**
 * The number of watched resources a heap limit of `heapLimitBytes` (V8's `heap_size_limit`)
 * supports under `budget`; 0 when even the base does not fit.
 */
export function supportedResources(
  heapLimitBytes: number,
  budget: HeapBudget = MEASURED_HEAP_BUDGET,
): number {
  const forResources = heapLimitBytes * budget.liveFraction - budget.baseBytes;
  return Math.max(0, Math.floor(forResources / budget.bytesPerResource));
}

/** The heap limit, in MiB rounded up, that supports `resources` under `budget`. */
export function heapLimitMiBFor(resources: number, budget: HeapBudget = MEASURED_HEAP_BUDGET): number {
  const bytes = (budget.baseBytes + resources * budget.bytesPerResource) / budget.liveFraction;
  return Math.ceil(bytes / 2 ** 20);
}

/** The fields of the warning, for a structured log line. */
export interface HeapBudgetWarning {
  watched: number;
  supported: number;
  heapLimitMiB: number;
  neededHeapLimitMiB: number;
}

/**
 * Counts watched resources (call `add(1)` on each add, `add(-1)` on each delete: O(1), no scan of
 * the cache) and calls `warn` once when the count first exceeds what the heap limit supports,
 * then again only after it went back under and crossed once more.
 */
export class HeapBudgetCheck {
  readonly #supported: number;
  readonly #heapLimitBytes: number;
  readonly #budget: HeapBudget;
  readonly #warn: (fields: HeapBudgetWarning, message: string) => void;
  #watched = 0;
  #over = false;

  /** `heapLimitBytes` defaults to this process's V8 `heap_size_limit`. */
  constructor(
    warn: (fields: HeapBudgetWarning, message: string) => void,
    options: { heapLimitBytes?: number; budget?: HeapBudget } = {},
  ) {
    this.#heapLimitBytes = options.heapLimitBytes ?? getHeapStatistics().heap_size_limit;
    this.#budget = options.budget ?? MEASURED_HEAP_BUDGET;
    this.#supported = supportedResources(this.#heapLimitBytes, this.#budget);
    this.#warn = warn;
  }

  /** The number of resources the heap limit supports. */
  get supported(): number {
    return this.#supported;
  }

  /** Records `delta` more (or fewer) watched resources. */
  add(delta: number): void {
    this.#watched = Math.max(0, this.#watched + delta);
    const over = this.#watched > this.#supported;
    if (over && !this.#over) {
      const fields: HeapBudgetWarning = {
        watched: this.#watched,
        supported: this.#supported,
        heapLimitMiB: Math.floor(this.#heapLimitBytes / 2 ** 20),
        neededHeapLimitMiB: heapLimitMiBFor(this.#watched, this.#budget),
      };
      this.#warn(
        fields,
        `watching more Deployment resources (${fields.watched}) than the heap limit of ${fields.heapLimitMiB} MiB ` +
          `supports (${fields.supported}): raise --max-old-space-size in NODE_OPTIONS and the container's memory ` +
          `limit with it (about ${fields.neededHeapLimitMiB} MiB of heap for this many), or watch fewer namespaces`,
      );
    }
    this.#over = over;
  }
}
