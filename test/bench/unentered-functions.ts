/**
 * A bound for `reconcile-path`: were every function an edit never enters taken out of its file, how
 * many lines of the path's files would stay, and in no fewer than how many files of
 * {@link LONG_FILE_LINES} lines each folder could hold them.
 *
 * The method:
 * - **The functions that can be taken out** are found by parsing each file with the TypeScript
 *   compiler (`typescript/unstable/sync`, which reads virtual files): function declarations with a
 *   body, class members that are functions (methods, constructors, accessors, a property whose value
 *   is a function), object-literal methods (and properties whose value is a function), and
 *   variables bound to a function (`const f = () => …`), wherever they are outside any function.
 *   A function inside a function is part of it: it goes or stays with it. A function bound to no
 *   name (a callback passed at a module's top level) stays, as the statement that holds it does.
 * - **Entered** means some function V8 saw run in a window lies within its span, its own or one
 *   nested in it (a closure made before the window and called in it enters the function that made
 *   it). V8's spans alone cannot list the rest: `Profiler.takePreciseCoverage` reports a function
 *   with no calls only when its parent ran in the same window (or it has block counts), and a
 *   module's top level ran at import, before any window, so a method never called in a window is
 *   not listed at all. A class's field initializer, which V8 reports as a function of its own
 *   spanning the fields, starts before any field's function and so enters none.
 * - **Taken out with a function**: its declaration (with a `,` or `;` right after it), the comments
 *   directly above it (no blank line between), and the blank line before those, as deleting it in
 *   an editor would. A line goes when all it holds (apart from spaces) goes; a blank line goes when
 *   it is within what goes. Imports that only those functions used, and types only they named,
 *   are counted as staying: a few lines the bound may count too many.
 * - **Offsets**: V8's are those of the text it ran, the file with its types blanked out by Node's
 *   type stripping (same length, same positions), so they index the source as the compiler's do.
 * - **Packed folder by folder** (`reconcile` and `reconcile/service` are two): moving a file to
 *   another folder would change the layers the README's layout table checks.
 */
import { dirname } from "node:path";
import type {
  FunctionDeclaration,
  Node,
  PropertyAssignment,
  PropertyDeclaration,
  SourceFile,
  VariableDeclaration,
  VariableStatement,
} from "typescript/unstable/ast";
import { SyntaxKind } from "typescript/unstable/ast";
import { getLeadingCommentRanges, skipTrivia } from "typescript/unstable/ast/scanner";
import { createVirtualFileSystem } from "typescript/unstable/fs";
import { API } from "typescript/unstable/sync";
import { LONG_FILE_LINES, lineCount, type UnenteredOut } from "./reconcile-path-report.ts";

/** A function that could be taken out of its file: where it is, and what would go with it. */
export interface TakeableFunction {
  /** Its name as written (`(anonymous)` when it has none). */
  name: string;
  /** The function itself (from its first token, modifiers included, to its end): V8's spans fall within. */
  start: number;
  end: number;
  /** What goes with it: its comments above, the blank line before them, its declaration. */
  from: number;
  to: number;
}

/** The takeable functions of each text, by its name in `texts` (a path relative to a root). */
export function takeableFunctions(texts: Record<string, string>): Record<string, TakeableFunction[]> {
  const root = "/reconcile-path";
  const names = Object.keys(texts);
  const files: Record<string, string> = {
    [`${root}/tsconfig.json`]: JSON.stringify({
      compilerOptions: {
        noResolve: true,
        noLib: true,
        types: [],
        allowImportingTsExtensions: true,
        noEmit: true,
      },
      files: names,
    }),
  };
  for (const name of names) files[`${root}/${name}`] = texts[name] ?? "";
  const api = new API({ cwd: root, fs: createVirtualFileSystem(files) });
  try {
    const program = api.updateSnapshot({ openProject: `${root}/tsconfig.json` }).getProjects()[0]?.program;
    return Object.fromEntries(
      names.map((name) => {
        const source = program?.getSourceFile(`${root}/${name}`);
        if (!source) throw new Error(`the TypeScript compiler did not parse ${name}`);
        return [name, functionsOf(source, texts[name] ?? "")];
      }),
    );
  } finally {
    api.close();
  }
}

/** The kinds of a function with a body of its own. */
const FUNCTION_KINDS = new Set([
  SyntaxKind.FunctionDeclaration,
  SyntaxKind.FunctionExpression,
  SyntaxKind.ArrowFunction,
  SyntaxKind.MethodDeclaration,
  SyntaxKind.Constructor,
  SyntaxKind.GetAccessor,
  SyntaxKind.SetAccessor,
]);

/** A value that is a function, through parentheses, `as` and `satisfies`. */
function functionValue(node: Node | undefined): Node | undefined {
  let value = node;
  while (
    value?.kind === SyntaxKind.ParenthesizedExpression ||
    value?.kind === SyntaxKind.AsExpression ||
    value?.kind === SyntaxKind.SatisfiesExpression
  )
    value = (value as unknown as { expression: Node }).expression;
  return value?.kind === SyntaxKind.FunctionExpression || value?.kind === SyntaxKind.ArrowFunction
    ? value
    : undefined;
}

/** The takeable functions of one parsed file, in the order they appear. */
function functionsOf(source: SourceFile, text: string): TakeableFunction[] {
  const found: TakeableFunction[] = [];
  const nameOf = (node: Node) => {
    const name = (node as unknown as { name?: Node }).name;
    return name ? text.slice(skipTrivia(text, name.pos), name.end) : "(anonymous)";
  };
  const take = (fn: Node, declaration: Node, name: string) =>
    found.push({ name, start: skipTrivia(text, fn.pos), end: fn.end, ...goesWith(text, declaration) });
  const visit = (node: Node): void => {
    switch (node.kind) {
      case SyntaxKind.FunctionDeclaration:
        if ((node as FunctionDeclaration).body) take(node, node, nameOf(node));
        return;
      case SyntaxKind.MethodDeclaration:
      case SyntaxKind.Constructor:
      case SyntaxKind.GetAccessor:
      case SyntaxKind.SetAccessor:
        if ((node as unknown as { body?: Node }).body)
          take(node, node, node.kind === SyntaxKind.Constructor ? "constructor" : nameOf(node));
        return;
      case SyntaxKind.PropertyDeclaration:
      case SyntaxKind.PropertyAssignment: {
        const fn = functionValue((node as PropertyDeclaration | PropertyAssignment).initializer);
        if (fn) take(fn, node, nameOf(node));
        else node.forEachChild(visit);
        return;
      }
      case SyntaxKind.VariableStatement: {
        const declarations = (node as VariableStatement).declarationList.declarations;
        for (const declaration of declarations) {
          const fn = functionValue((declaration as VariableDeclaration).initializer);
          if (fn) take(fn, declarations.length === 1 ? node : declaration, nameOf(declaration));
          else declaration.forEachChild(visit);
        }
        return;
      }
      default:
        // A function bound to no name stays, and what is inside it with it.
        if (!FUNCTION_KINDS.has(node.kind)) node.forEachChild(visit);
    }
  };
  source.forEachChild(visit);
  return found;
}

/**
 * What goes with a declaration: from the comments directly above it (no blank line between), or
 * itself, back over one blank line before (when nothing precedes on that line), to its end and a
 * `,` or `;` right after it.
 */
export function goesWith(text: string, declaration: Node): { from: number; to: number } {
  let from = skipTrivia(text, declaration.pos);
  const comments = getLeadingCommentRanges(text, declaration.pos) ?? [];
  for (let i = comments.length - 1; i >= 0; i--) {
    const comment = comments[i];
    if (!comment || /\n[ \t\r]*\n/.test(text.slice(comment.end, from))) break;
    from = comment.pos;
  }
  const lineStart = text.lastIndexOf("\n", from - 1) + 1;
  if (lineStart > 0 && text.slice(lineStart, from).trim() === "") {
    const previous = text.lastIndexOf("\n", lineStart - 2) + 1;
    from = text.slice(previous, lineStart).trim() === "" ? previous : lineStart;
  }
  let to = declaration.end;
  const after = /^[ \t]*[,;]/.exec(text.slice(to));
  if (after) to += after[0].length;
  return { from, to };
}

/**
 * The lines of `text` that stay when each of `functions` that no span of `ran` (V8's spans of the
 * functions that ran, over every window) falls within is taken out, and the names of those taken.
 */
export function linesLeft(
  text: string,
  functions: readonly TakeableFunction[],
  ran: ReadonlyArray<readonly [number, number]>,
): { lines: number; takenOut: string[] } {
  const gone = new Uint8Array(text.length);
  const takenOut: string[] = [];
  for (const f of functions) {
    if (ran.some(([start, end]) => start >= f.start && end <= f.end)) continue;
    takenOut.push(f.name);
    gone.fill(1, f.from, f.to);
  }
  let removed = 0;
  for (let start = 0; start < text.length; ) {
    const newline = text.indexOf("\n", start);
    const end = newline === -1 ? text.length : newline + 1;
    let touched = false;
    let kept = false;
    for (let i = start; i < end; i++) {
      if (gone[i]) touched = true;
      else if (!/\s/.test(text[i] ?? "")) kept = true;
    }
    if (touched && !kept) removed++;
    start = end;
  }
  return { lines: lineCount(text) - removed, takenOut };
}

/** Packs the lines that stay of each file (`/`-separated paths) folder by folder, the folders sorted. */
export function packByFolder(linesOf: Record<string, number>): UnenteredOut {
  const linesByFolder = new Map<string, number>();
  for (const [file, lines] of Object.entries(linesOf))
    linesByFolder.set(dirname(file), (linesByFolder.get(dirname(file)) ?? 0) + lines);
  const byFolder = Object.fromEntries(
    [...linesByFolder]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([folder, lines]) => [folder, { lines, files: Math.ceil(lines / LONG_FILE_LINES) }]),
  );
  const folders = Object.values(byFolder);
  return {
    lines: folders.reduce((sum, f) => sum + f.lines, 0),
    fewestFiles: folders.reduce((sum, f) => sum + f.files, 0),
    byFolder,
  };
}

/** The line the bench prints for it. */
export function unenteredLine(out: UnenteredOut): string {
  const folders = Object.entries(out.byFolder)
    .map(([folder, f]) => `${folder === "." ? "src/" : `${folder}/`} ${f.files}`)
    .join(", ");
  return `were every function an edit never enters taken out of its file: ${out.lines} lines would stay, ${out.fewestFiles} files of ≤ ${LONG_FILE_LINES} at the fewest, folder by folder (${folders})`;
}

/** The bound for the path's `files`, given their texts and the spans of the functions that ran. */
export function unenteredOut(
  files: readonly string[],
  textOf: (file: string) => string,
  ranOf: (file: string) => ReadonlyArray<readonly [number, number]>,
): UnenteredOut & { takenOut: Record<string, string[]> } {
  const texts = Object.fromEntries(files.map((file) => [file, textOf(file)]));
  const functions = takeableFunctions(texts);
  const linesOf: Record<string, number> = {};
  const takenOut: Record<string, string[]> = {};
  for (const file of files) {
    const left = linesLeft(texts[file] ?? "", functions[file] ?? [], ranOf(file));
    linesOf[file] = left.lines;
    takenOut[file] = left.takenOut;
  }
  return { ...packByFolder(linesOf), takenOut };
}
