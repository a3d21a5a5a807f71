// The import graph of src/, read by TypeScript's own parser (the native compiler's API, the
// compiler this project type-checks with), so that every form counts: `import`, `import type`,
// `export … from`, `export * from`, dynamic `import("…")` and `typeof import("…")` types. A
// regular expression would have to know about comments, strings and template literals; the
// parser's `imports` list of a source file already does.
import { globSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { API } from "typescript/unstable/sync";

/** One import of one file of src/ by another, both relative to the repository root. */
export interface ImportEdge {
  /** The importing file, e.g. `src/reconcile/inputs.ts`. */
  readonly from: string;
  /** The imported file, e.g. `src/connection/settings.ts`. */
  readonly to: string;
}

/** The repository root. */
export const ROOT = join(import.meta.dirname, "..", "..");

/**
 * The module specifiers each of `files` (paths relative to `root`) imports, in source order,
 * as the TypeScript parser collects them. Parses through the project's tsconfig.json, so a file
 * outside it is an error rather than a silent gap.
 */
export function readSpecifiers(files: readonly string[], root: string = ROOT): Map<string, string[]> {
  const api = new API({ cwd: root });
  try {
    const snapshot = api.updateSnapshot({ openProject: join(root, "tsconfig.json") });
    const [project] = snapshot.getProjects();
    if (project === undefined) throw new Error(`no TypeScript project in ${root}/tsconfig.json`);
    const out = new Map<string, string[]>();
    for (const file of files) {
      const source = project.program.getSourceFile(join(root, file));
      if (source === undefined) throw new Error(`${file} is not part of tsconfig.json's program`);
      out.set(
        file,
        source.imports.map((node) => {
          if (!("text" in node) || typeof node.text !== "string") {
            throw new Error(`${file}: an import whose specifier is not a string literal`);
          }
          return node.text;
        }),
      );
    }
    return out;
  } finally {
    api.close();
  }
}

/** Every `.ts` file below `src/`, relative to `root`, sorted. */
export function sourceFiles(root: string = ROOT): string[] {
  return globSync("src/**/*.ts", { cwd: root }).sort();
}

/**
 * The edges between files of src/: each relative specifier resolved against its importer and
 * kept when it lands in src/; packages and `node:` modules are not part of the graph.
 */
export function fileEdges(
  specifiers: ReadonlyMap<string, readonly string[]>,
  root: string = ROOT,
): ImportEdge[] {
  const edges: ImportEdge[] = [];
  for (const [from, specs] of specifiers) {
    for (const spec of specs) {
      if (!spec.startsWith(".")) continue;
      const to = relative(root, resolve(root, dirname(from), spec));
      if (to.startsWith("src/")) edges.push({ from, to });
    }
  }
  return edges;
}

/**
 * The folder a file of src/ belongs to in the folder graph: its first folder below src/
 * (`src/kube/reflector.ts` → `kube`), or, for a file directly in src/, the file itself
 * (`src/main.ts` → `main.ts`), so that each root file is a node of its own.
 */
export function folderOf(file: string): string {
  return file.split("/")[1] ?? file;
}

/** A directed graph: each node's successors, each edge with the imports that make it. */
export type Graph = Map<string, Map<string, ImportEdge[]>>;

/**
 * The graph of `edges` with each file mapped to its node by `node`. With `withinNode` false an
 * edge within one node (between two files of one folder) is left out.
 */
export function graphOf(
  edges: readonly ImportEdge[],
  node: (file: string) => string,
  withinNode: boolean,
): Graph {
  const graph: Graph = new Map();
  for (const edge of edges) {
    const a = node(edge.from);
    const b = node(edge.to);
    if (!graph.has(b)) graph.set(b, new Map());
    let out = graph.get(a);
    if (out === undefined) {
      out = new Map();
      graph.set(a, out);
    }
    if (a === b && !withinNode) continue;
    const because = out.get(b) ?? [];
    because.push(edge);
    out.set(b, because);
  }
  return graph;
}

/**
 * The cycles of `graph`: for every node of a strongly connected component that reaches itself
 * (Tarjan's algorithm), the shortest cycle through it and every pair of nodes that import each
 * other, as the path `[a, b, …, a]` from its
 * smallest node, each cycle once. Successors are visited in order, so the answer is the same on
 * every run.
 */
export function cycles(graph: Graph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const nodes = [...graph.keys()].sort();
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v) ?? 0);
    stack.push(v);
    onStack.add(v);
    for (const w of [...(graph.get(v)?.keys() ?? [])].sort()) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) ?? 0, low.get(w) ?? 0));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) ?? 0, index.get(w) ?? 0));
      }
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    for (let w = stack.pop(); w !== undefined; w = stack.pop()) {
      onStack.delete(w);
      component.push(w);
      if (w === v) break;
    }
    const selfLoop = graph.get(v)?.has(v) ?? false;
    if (component.length > 1 || selfLoop) components.push(component.sort());
  };
  for (const v of nodes) if (!index.has(v)) visit(v);
  const found = new Map<string, string[]>();
  for (const component of components) {
    const members = new Set(component);
    // The shortest cycle through each node, and every pair of nodes that import each other.
    const paths = component.map((start) => shortestCycle(graph, members, start));
    for (const a of component)
      for (const b of graph.get(a)?.keys() ?? [])
        if (a !== b && members.has(b) && graph.get(b)?.has(a)) paths.push([a, b, a]);
    for (const path of paths) {
      // One entry per cycle whatever node it is read from: keyed by its rotation that starts
      // at its smallest node.
      const ring = path.slice(0, -1);
      const first = ring.indexOf([...ring].sort()[0] ?? "");
      const rotated = [...ring.slice(first), ...ring.slice(0, first)];
      const key = rotated.join(" ");
      if (!found.has(key)) found.set(key, [...rotated, rotated[0] ?? ""]);
    }
  }
  return [...found.values()];
}

/** The shortest path from `start` back to itself within `members` (breadth first). */
function shortestCycle(graph: Graph, members: ReadonlySet<string>, start: string): string[] {
  const parent = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    const v = queue[i] ?? "";
    for (const w of [...(graph.get(v)?.keys() ?? [])].sort()) {
      if (!members.has(w)) continue;
      if (w === start) {
        const path = [start];
        for (let at: string | undefined = v; at !== undefined && at !== start; at = parent.get(at)) {
          path.splice(1, 0, at);
        }
        if (v !== start) return [...path, start];
        return [start, start];
      }
      if (parent.has(w)) continue;
      parent.set(w, v);
      queue.push(w);
    }
  }
  return [start];
}

/**
 * A cycle written for a failing test: the path, then for each step the imports that make it,
 * e.g. `reconcile → connection → reconcile` then `reconcile → connection: src/reconcile/inputs.ts
 * imports src/connection/settings.ts`.
 */
export function describeCycle(graph: Graph, path: readonly string[]): string {
  const lines = [path.join(" → ")];
  for (let i = 0; i + 1 < path.length; i++) {
    const a = path[i] ?? "";
    const b = path[i + 1] ?? "";
    const because = graph.get(a)?.get(b) ?? [];
    const shown = because.slice(0, 3).map((e) => `${e.from} imports ${e.to}`);
    if (because.length > 3) shown.push(`and ${because.length - 3} more`);
    lines.push(`  ${a} → ${b}: ${shown.join("; ")}`);
  }
  return lines.join("\n");
}
