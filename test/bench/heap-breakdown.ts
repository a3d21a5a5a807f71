/**
 * Where a heap snapshot's bytes are held, by structure: the retained size of each large subtree
 * of the snapshot's dominator tree (what a collection would free if that one object went away),
 * named by the fields that hold it (`Reflector.#cache`, `Entries.#byId`), so that the bytes per
 * resource of the watch cache, the service snapshot or the work queue can be read at N resources:
 *
 *   node test/bench/heap-breakdown.ts <file.heapsnapshot> [--n <resources>] [--idle <idle.heapsnapshot>] [--min-kib <KiB>]
 *
 * `scale --heap-breakdown` writes one of a heap snapshot holding N (see scale.bench.ts). The
 * dominator tree is computed as Chrome DevTools computes it (Cooper, Harvey and Kennedy's
 * iterative algorithm over a depth-first postorder; weak edges hold nothing), so its retained
 * sizes are DevTools' own. A string shared by two structures (an interned namespace, a key held
 * by the cache and by the work queue) is retained by neither: it counts where their paths meet.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

/** The parts of V8's heap snapshot format that are read here. */
export interface HeapSnapshotFile {
  snapshot: {
    meta: {
      node_fields: string[];
      node_types: [string[], ...unknown[]];
      edge_fields: string[];
      edge_types: [string[], ...unknown[]];
    };
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

/** One structure of the breakdown: the fields that lead to it, its retained bytes and objects. */
export interface HeapRow {
  /** `Holder.field › Holder.field`, the last steps of the path of dominators to it. */
  path: string;
  /** What the structure is (`Map`, `Array`, a class's name), with the count of its entries for a Map or Set. */
  kind: string;
  bytes: number;
  /** The objects it retains (itself included). */
  objects: number;
  /** `bytes` ÷ `resources`, when a number of resources was given. */
  bytesPerResource?: number;
  /** The category of {@link CATEGORIES} the path falls under, or `other`. */
  category: string;
  /**
   * For a Map or Set of many entries (at least {@link FIELDS_FROM} objects): its bytes by what
   * they are in an entry — `key`, the entry's `(record)` itself, and each field of the records
   * two levels deep (`metadata`, `status.conditions`), largest first; `(table)` is the map's own.
   */
  fields?: Array<{ field: string; bytes: number; bytesPerResource?: number }>;
}

/** A collection of at least this many objects has its bytes split by field ({@link HeapRow.fields}). */
export const FIELDS_FROM = 1000;

/** The breakdown of one snapshot. */
export interface HeapBreakdown {
  totalBytes: number;
  /** The live heap of the same program holding nothing, when given ({@link heapBreakdown}'s `idleBytes`). */
  idleBytes: number | undefined;
  resources: number | undefined;
  /** Structures of at least the threshold, largest first. */
  rows: HeapRow[];
  /** Bytes of the structures below the threshold (and of the ones holding them), summed. */
  restBytes: number;
  /** Bytes per category (the rows' sum), with per resource; `other` holds what no pattern named. */
  categories: Array<{ category: string; bytes: number; bytesPerResource?: number }>;
}

/**
 * The structures the operator holds per resource, by the fields they hang from (matched against
 * a row's whole path of dominators): what docs/benchmarks.md reports per resource.
 */
export const CATEGORIES: ReadonlyArray<readonly [string, RegExp]> = [
  ["watch cache: Deployment records", /Reflector\(deployments\)\.#cache/],
  ["watch cache: indexes", /Reflector\(deployments\)\.#indexes/],
  ["watch cache: other kinds", /Reflector\([^)]*\)\.#(cache|indexes)/],
  ["service snapshot", /RemoteSnapshot\./],
  ["work queue", /(WorkQueue|Queue)\.#/],
  ["controller", /Controller\.#/],
  ["metrics", /(Registry|Counter|Gauge|Histogram|Summary)\.|hashMap|Metrics\./],
  ["sharding", /(LeaseHolds|Sharder|LabelStates|ShardMember|RingChoices|RingMembership)\.#/],
  ["events", /KubeEventRecorder\.#/],
  ["string table", /Interner\.#table/],
  ["compiled code", /^\(code\)|\(compiled code\)/],
];

const NONE = 0xffffffff;

/** The breakdown of `file` (see the module comment); rows retain at least `minBytes`. */
export function heapBreakdown(
  file: HeapSnapshotFile,
  options: { resources?: number; minBytes?: number; idleBytes?: number } = {},
): HeapBreakdown {
  const graph = new Graph(file);
  const { order, postOf } = graph.postorder();
  const count = order.length;
  const idom = graph.dominators(order, postOf);
  // Retained sizes, children before their dominators (postorder).
  const retained = new Float64Array(count);
  const objects = new Uint32Array(count);
  for (let p = 0; p < count; p++) {
    retained[p] = graph.selfSize(order[p] as number);
    objects[p] = 1;
  }
  for (let p = 0; p < count - 1; p++) {
    const d = idom[p] as number;
    retained[d] = (retained[d] as number) + (retained[p] as number);
    objects[d] = (objects[d] as number) + (objects[p] as number);
  }
  // The dominator tree's children, by postorder index.
  const { start: childStart, items: children } = grouped(count, (put) => {
    for (let p = 0; p < count - 1; p++) put(idom[p] as number, p);
  });

  const resources = options.resources;
  const minBytes = options.minBytes ?? Math.max(64 * 1024, (resources ?? 0) * 16);
  const rows: HeapRow[] = [];
  let restBytes = 0;
  const root = count - 1;
  // Depth first: a structure large enough is split into its large parts, unless it is a
  // collection (its entries are the structure) or nothing in it is large on its own.
  const visit = (p: number, path: readonly string[]) => {
    const bytes = retained[p] as number;
    const node = order[p] as number;
    const big: number[] = [];
    for (let c = childStart[p] as number; c < (childStart[p + 1] as number); c++) {
      const child = children[c] as number;
      if ((retained[child] as number) >= minBytes) big.push(child);
    }
    if (p !== root && (graph.isCollection(node) || big.length === 0)) {
      const found = row(path, graph.kind(node), bytes, objects[p] as number);
      if ((objects[p] as number) >= FIELDS_FROM && /^(Map|Set)\b/.test(found.kind))
        found.fields = fieldsOf(p);
      rows.push(found);
      return;
    }
    let inParts = 0;
    for (const child of big) {
      inParts += retained[child] as number;
      const step = graph.stepTo(order[child] as number, node);
      visit(child, [...path, step]);
    }
    const own = bytes - inParts;
    if (p !== root && own >= minBytes) rows.push(row([...path, "(own)"], graph.kind(node), own, 0));
    else restBytes += own;
  };
  /** The bytes of the collection at postorder index `p` by field of its entries (see {@link HeapRow.fields}). */
  const fieldsOf = (p: number): HeapRow["fields"] => {
    const bytesOf = new Map<string, number>();
    const stack: Array<[number, string]> = [[p, "(table)"]];
    while (stack.length > 0) {
      const [at, label] = stack.pop() as [number, string];
      const node = order[at] as number;
      bytesOf.set(label, (bytesOf.get(label) ?? 0) + graph.selfSize(node));
      for (let c = childStart[at] as number; c < (childStart[at + 1] as number); c++) {
        const child = children[c] as number;
        const to = order[child] as number;
        let next = label;
        if (label === "(table)")
          next = graph.isString(to) ? "key" : graph.isObject(to) ? "(record)" : "(table)";
        else if (label === "(record)" || !label.includes(".")) {
          const edge = graph.edgeLabel(node, to);
          // Past the first two field names, a part counts with its field (an array's elements too).
          next =
            edge === undefined || edge.startsWith("[")
              ? label
              : label === "(record)"
                ? edge
                : label === "key"
                  ? label
                  : `${label}.${edge}`;
        }
        stack.push([child, next]);
      }
    }
    return [...bytesOf]
      .sort((a, b) => b[1] - a[1])
      .map(([field, bytes]) => ({
        field,
        bytes,
        ...(resources ? { bytesPerResource: bytes / resources } : {}),
      }));
  };
  const row = (path: readonly string[], kind: string, bytes: number, n: number): HeapRow => {
    const whole = path.join(" › ");
    const category = CATEGORIES.find(([, pattern]) => pattern.test(whole))?.[0] ?? "other";
    return {
      path: path.slice(-3).join(" › "),
      kind,
      bytes,
      objects: n,
      ...(resources ? { bytesPerResource: bytes / resources } : {}),
      category,
    };
  };
  visit(root, []);
  rows.sort((a, b) => b.bytes - a.bytes);
  const byCategory = new Map<string, number>();
  for (const r of rows) byCategory.set(r.category, (byCategory.get(r.category) ?? 0) + r.bytes);
  const categories = [...byCategory]
    .sort((a, b) => b[1] - a[1])
    .map(([category, bytes]) => ({
      category,
      bytes,
      ...(resources ? { bytesPerResource: bytes / resources } : {}),
    }));
  return {
    totalBytes: retained[root] as number,
    idleBytes: options.idleBytes,
    resources,
    rows,
    restBytes,
    categories,
  };
}

/**
 * Values grouped by key (`0..keys-1`) in two flat arrays: the values of key `k` are
 * `items[start[k]..start[k+1]]`. `each` gives every (key, value) pair; it is called twice.
 */
function grouped(
  keys: number,
  each: (put: (key: number, value: number) => void) => void,
): { start: Uint32Array; items: Uint32Array } {
  const start = new Uint32Array(keys + 1);
  each((key) => {
    start[key + 1] = (start[key + 1] as number) + 1;
  });
  for (let k = 0; k < keys; k++) start[k + 1] = (start[k + 1] as number) + (start[k] as number);
  const items = new Uint32Array(start[keys] as number);
  const next = start.slice(0, keys);
  each((key, value) => {
    const at = next[key] as number;
    items[at] = value;
    next[key] = at + 1;
  });
  return { start, items };
}

/** The snapshot's nodes and edges, read in place from its flat arrays. */
class Graph {
  readonly #file: HeapSnapshotFile;
  readonly #nodeFields: number;
  readonly #edgeFields: number;
  readonly #type: number;
  readonly #name: number;
  readonly #size: number;
  readonly #edgeCount: number;
  readonly #edgeType: number;
  readonly #edgeName: number;
  readonly #edgeTo: number;
  readonly #nodeTypes: string[];
  readonly #edgeTypes: string[];
  readonly #weak: number;
  /** The index in `edges` of each node's first edge (and one past the last). */
  readonly #firstEdge: Uint32Array;
  readonly nodeCount: number;

  constructor(file: HeapSnapshotFile) {
    this.#file = file;
    const meta = file.snapshot.meta;
    this.#nodeFields = meta.node_fields.length;
    this.#edgeFields = meta.edge_fields.length;
    const field = (fields: string[], name: string) => {
      const at = fields.indexOf(name);
      if (at < 0) throw new Error(`the heap snapshot's meta has no field '${name}'`);
      return at;
    };
    this.#type = field(meta.node_fields, "type");
    this.#name = field(meta.node_fields, "name");
    this.#size = field(meta.node_fields, "self_size");
    this.#edgeCount = field(meta.node_fields, "edge_count");
    this.#edgeType = field(meta.edge_fields, "type");
    this.#edgeName = field(meta.edge_fields, "name_or_index");
    this.#edgeTo = field(meta.edge_fields, "to_node");
    this.#nodeTypes = meta.node_types[0];
    this.#edgeTypes = meta.edge_types[0];
    this.#weak = this.#edgeTypes.indexOf("weak");
    this.nodeCount = file.nodes.length / this.#nodeFields;
    this.#firstEdge = new Uint32Array(this.nodeCount + 1);
    for (let i = 0; i < this.nodeCount; i++) {
      const edges = file.nodes[i * this.#nodeFields + this.#edgeCount] as number;
      this.#firstEdge[i + 1] = (this.#firstEdge[i] as number) + edges * this.#edgeFields;
    }
  }

  selfSize(node: number): number {
    return this.#file.nodes[node * this.#nodeFields + this.#size] as number;
  }

  #typeOf(node: number): string {
    return this.#nodeTypes[this.#file.nodes[node * this.#nodeFields + this.#type] as number] ?? "?";
  }

  #nameOf(node: number): string {
    return this.#file.strings[this.#file.nodes[node * this.#nodeFields + this.#name] as number] ?? "";
  }

  /** The targets of `node`'s edges that hold (not weak), as node numbers. */
  *#holds(node: number): Generator<number> {
    const edges = this.#file.edges;
    for (
      let e = this.#firstEdge[node] as number;
      e < (this.#firstEdge[node + 1] as number);
      e += this.#edgeFields
    )
      if (edges[e + this.#edgeType] !== this.#weak)
        yield (edges[e + this.#edgeTo] as number) / this.#nodeFields;
  }

  /** The nodes reachable from the root (node 0) in depth-first postorder; the root is last. */
  postorder(): { order: Uint32Array; postOf: Uint32Array } {
    const postOf = new Uint32Array(this.nodeCount).fill(NONE);
    const visited = new Uint8Array(this.nodeCount);
    const order: number[] = [];
    const edges = this.#file.edges;
    const stackNode: number[] = [0];
    const stackEdge: number[] = [this.#firstEdge[0] as number];
    visited[0] = 1;
    while (stackNode.length > 0) {
      const top = stackNode.length - 1;
      const node = stackNode[top] as number;
      const e = stackEdge[top] as number;
      if (e >= (this.#firstEdge[node + 1] as number)) {
        postOf[node] = order.length;
        order.push(node);
        stackNode.pop();
        stackEdge.pop();
        continue;
      }
      stackEdge[top] = e + this.#edgeFields;
      if (edges[e + this.#edgeType] === this.#weak) continue;
      const to = (edges[e + this.#edgeTo] as number) / this.#nodeFields;
      if (visited[to]) continue;
      visited[to] = 1;
      stackNode.push(to);
      stackEdge.push(this.#firstEdge[to] as number);
    }
    return { order: Uint32Array.from(order), postOf };
  }

  /** The immediate dominator of each reachable node, by postorder index (the root's is itself). */
  dominators(order: Uint32Array, postOf: Uint32Array): Uint32Array {
    const count = order.length;
    // Predecessors by postorder index, in one flat array.
    const { start: predStart, items: preds } = grouped(count, (put) => {
      for (let p = 0; p < count; p++)
        for (const to of this.#holds(order[p] as number)) put(postOf[to] as number, p);
    });
    const root = count - 1;
    const idom = new Uint32Array(count).fill(NONE);
    idom[root] = root;
    const intersect = (a: number, b: number) => {
      while (a !== b) {
        while (a < b) a = idom[a] as number;
        while (b < a) b = idom[b] as number;
      }
      return a;
    };
    for (let changed = true; changed; ) {
      changed = false;
      for (let p = root - 1; p >= 0; p--) {
        let next = NONE;
        for (let i = predStart[p] as number; i < (predStart[p + 1] as number); i++) {
          const pred = preds[i] as number;
          if (idom[pred] === NONE) continue;
          next = next === NONE ? pred : intersect(pred, next);
        }
        if (next !== NONE && idom[p] !== next) {
          idom[p] = next;
          changed = true;
        }
      }
    }
    return idom;
  }

  /** Whether `node` is a collection: its entries, not its own fields, are what it holds. */
  isCollection(node: number): boolean {
    const type = this.#typeOf(node);
    if (type === "array" || type === "string" || type === "concatenated string" || type === "code")
      return true;
    return type === "object" && COLLECTIONS.has(this.#nameOf(node));
  }

  /** What `node` is: its constructor's name (a Reflector with its resource), or its kind. */
  kind(node: number): string {
    const type = this.#typeOf(node);
    const name = this.#nameOf(node);
    if (type === "object" || type === "native") {
      if (name === "Map" || name === "Set") {
        const size = this.#mapSize(node);
        return size === undefined ? name : `${name}(${size})`;
      }
      if (name === "Reflector") return `Reflector(${this.#reflectorPlural(node) ?? "?"})`;
      return name;
    }
    if (type === "closure") return `${name || "(anonymous)"}()`;
    if (type === "hidden" || type === "array") return `(${name.slice(0, 40)})`;
    return `(${type})`;
  }

  /** `Holder.field`: the edge from `from` (or, when it holds none, from the first holder found) to `node`. */
  /** Whether `node` is a string of any kind. */
  isString(node: number): boolean {
    return this.#typeOf(node).includes("string");
  }

  /** Whether `node` is a JavaScript object (not an array of V8's, a string or code). */
  isObject(node: number): boolean {
    return this.#typeOf(node) === "object";
  }

  stepTo(node: number, from: number): string {
    const via = this.edgeLabel(from, node);
    if (via !== undefined) return `${this.kind(from)}.${via}`;
    return `${this.kind(node)}`;
  }

  /** The name of the first edge from `from` to `to` (`[i]` for an element), undefined when there is none. */
  edgeLabel(from: number, to: number): string | undefined {
    const edges = this.#file.edges;
    for (
      let e = this.#firstEdge[from] as number;
      e < (this.#firstEdge[from + 1] as number);
      e += this.#edgeFields
    ) {
      if ((edges[e + this.#edgeTo] as number) / this.#nodeFields !== to) continue;
      const type = this.#edgeTypes[edges[e + this.#edgeType] as number];
      const name = edges[e + this.#edgeName] as number;
      return type === "element" || type === "hidden" ? `[${name}]` : (this.#file.strings[name] ?? "?");
    }
    return undefined;
  }

  /** The node `from.name` points to, following non-weak named edges. */
  #field(from: number, name: string): number | undefined {
    const edges = this.#file.edges;
    for (
      let e = this.#firstEdge[from] as number;
      e < (this.#firstEdge[from + 1] as number);
      e += this.#edgeFields
    ) {
      const type = this.#edgeTypes[edges[e + this.#edgeType] as number];
      if (type === "element" || type === "hidden" || type === "weak") continue;
      if (this.#file.strings[edges[e + this.#edgeName] as number] === name)
        return (edges[e + this.#edgeTo] as number) / this.#nodeFields;
    }
    return undefined;
  }

  /** A Reflector's `#opts.resource.plural`, which says what it caches. */
  #reflectorPlural(node: number): string | undefined {
    const opts = this.#field(node, "#opts");
    const resource = opts === undefined ? undefined : this.#field(opts, "resource");
    const plural = resource === undefined ? undefined : this.#field(resource, "plural");
    return plural === undefined ? undefined : this.#nameOf(plural);
  }

  /** The entries of a Map or Set: its hash table's element count, as V8 lays it out. */
  #mapSize(node: number): number | undefined {
    const table = this.#field(node, "table");
    if (table === undefined) return undefined;
    // An OrderedHashMap/Set's first elements: the count of elements, then of deleted ones.
    const edges = this.#file.edges;
    let count: number | undefined;
    for (
      let e = this.#firstEdge[table] as number;
      e < (this.#firstEdge[table + 1] as number);
      e += this.#edgeFields
    ) {
      const to = (edges[e + this.#edgeTo] as number) / this.#nodeFields;
      if (this.#typeOf(to) === "number" && edges[e + this.#edgeName] === 0) count = Number(this.#nameOf(to));
    }
    return Number.isFinite(count) ? count : undefined;
  }
}

const COLLECTIONS = new Set(["Map", "Set", "Array", "WeakMap", "WeakSet"]);

/** The breakdown as Markdown: categories, then the rows. */
export function breakdownTable(breakdown: HeapBreakdown, top = 25): string {
  const kib = (bytes: number) => (bytes / 1024).toFixed(0);
  const per = (bytes?: number) => (bytes === undefined ? "" : bytes.toFixed(0));
  const { totalBytes, idleBytes, resources } = breakdown;
  const mib = (bytes: number) => `${(bytes / 1048576).toFixed(1)} MiB`;
  // The structures that grow with the resources: every category but what no pattern named.
  const named = breakdown.categories
    .filter((c) => c.category !== "other" && c.category !== "compiled code")
    .reduce((sum, c) => sum + c.bytes, 0);
  const growth =
    idleBytes === undefined || !resources
      ? []
      : [
          `idle ${mib(idleBytes)}: (holding − idle) ÷ N = ${per((totalBytes - idleBytes) / resources)} bytes per resource, ` +
            `of which the structures named below ${per(named / resources)}, anything else ${per((totalBytes - idleBytes - named) / resources)}`,
        ];
  const lines = [
    `live heap ${mib(totalBytes)}${resources ? ` holding ${resources.toLocaleString("en-US")} resources` : ""}`,
    ...growth,
    "",
    "| structure | KiB | bytes per resource |",
    "|---|---|---|",
    ...breakdown.categories.map((c) => `| ${c.category} | ${kib(c.bytes)} | ${per(c.bytesPerResource)} |`),
    `| below the threshold, each | ${kib(breakdown.restBytes)} |  |`,
    "",
    "| path | kind | objects | KiB | bytes per resource | counted as |",
    "|---|---|---|---|---|---|",
    ...breakdown.rows
      .slice(0, top)
      .map(
        (r) =>
          `| ${r.path} | ${r.kind} | ${r.objects} | ${kib(r.bytes)} | ${per(r.bytesPerResource)} | ${r.category} |`,
      ),
  ];
  for (const r of breakdown.rows
    .slice(0, top)
    .filter((r) => r.fields !== undefined)
    .slice(0, 3)) {
    lines.push(
      "",
      `${r.path}, by field of its entries:`,
      "",
      "| field | KiB | bytes per resource |",
      "|---|---|---|",
      ...(r.fields ?? [])
        .slice(0, 16)
        .map((f) => `| ${f.field} | ${kib(f.bytes)} | ${per(f.bytesPerResource)} |`),
    );
  }
  return lines.join("\n");
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      n: { type: "string" },
      idle: { type: "string" },
      "min-kib": { type: "string" },
      top: { type: "string", default: "40" },
    },
  });
  const [file] = positionals;
  if (file === undefined) {
    process.stderr.write(
      "usage: node test/bench/heap-breakdown.ts <file.heapsnapshot> [--n <resources>] [--idle <idle.heapsnapshot>] [--min-kib <KiB>] [--top <rows>]\n",
    );
    process.exit(2);
  }
  const read = (path: string) => JSON.parse(readFileSync(path, "utf8")) as HeapSnapshotFile;
  const breakdown = heapBreakdown(read(file), {
    ...(values.n === undefined ? {} : { resources: Number(values.n) }),
    ...(values["min-kib"] === undefined ? {} : { minBytes: Number(values["min-kib"]) * 1024 }),
    ...(values.idle === undefined ? {} : { idleBytes: heapBreakdown(read(values.idle)).totalBytes }),
  });
  process.stdout.write(`${breakdownTable(breakdown, Number(values.top))}\n`);
}
