/**
 * Deployment resources out of manifest text (multi-document YAML, or JSON): the documents of
 * kind `Deployment` in group `dms.dev` are validated (see `validate.ts`) and each problem is
 * reported with the file, line and column of the node it concerns. Documents of other kinds
 * (a Secret, an `apps/v1` Deployment, a Kustomization) are skipped. Pure: text in, data out.
 */

import { isNode, LineCounter, type Node, parseAllDocuments } from "yaml";
import { API_VERSION, type DeploymentResource, GROUP, KIND } from "../crd/schema.ts";
import { isRecord } from "../runtime/json.ts";
import { type DocPath, validateResource } from "./validate.ts";

/** A problem in a manifest file, at a 1-based line and column. */
export interface ManifestProblem {
  file: string;
  line: number;
  column: number;
  /** 1-based index of the YAML document (`---`-separated) in the file. */
  document: number;
  message: string;
}

/** A valid Deployment resource and where its document starts. */
export interface ManifestResource {
  file: string;
  line: number;
  resource: DeploymentResource & { metadata: { name: string } };
}

/** What one file holds. */
export interface ParsedManifests {
  resources: ManifestResource[];
  problems: ManifestProblem[];
}

/**
 * Parses `text` (the content of `file`) and returns its valid Deployment resources and the
 * problems of the others.
 *
 * Contract: a document with YAML syntax errors is one problem, at its first error's position,
 * naming the document (its index and first line), and the document is skipped; a
 * document of kind Deployment whose apiVersion is in group dms.dev but not `dms.dev/v1alpha1`
 * is a problem; every schema or rule violation is reported at the line of the node it names, or
 * of its nearest existing parent when the node is missing.
 */
export function parseManifests(text: string, file: string): ParsedManifests {
  const lineCounter = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter, keepSourceTokens: true, uniqueKeys: true });
  const out: ParsedManifests = { resources: [], problems: [] };
  let document = 0;
  const at = (offset: number, message: string): ManifestProblem => {
    const pos = lineCounter.linePos(offset);
    return { file, line: pos.line, column: pos.col, document, message };
  };
  for (const doc of docs) {
    document++;
    const [first, ...more] = doc.errors;
    if (first) {
      // One broken document is one error: the parser's follow-on complaints add nothing.
      const rest = more.length === 0 ? "" : ` (and ${more.length} more syntax error(s) after it)`;
      const start = lineCounter.linePos(doc.range[0]).line;
      out.problems.push(
        at(first.pos[0], `document ${document} (from line ${start}): ${firstLine(first.message)}${rest}`),
      );
      continue;
    }
    if (doc.contents === null) continue;
    const value: unknown = doc.toJS();
    if (!isRecord(value) || value.kind !== KIND || typeof value.apiVersion !== "string") continue;
    const [group] = value.apiVersion.split("/");
    if (group !== GROUP) continue;
    const start = doc.contents.range[0];
    if (value.apiVersion !== API_VERSION) {
      out.problems.push(
        at(nodeOffset(doc.contents, ["apiVersion"]) ?? start, `apiVersion must be ${API_VERSION}`),
      );
      continue;
    }
    const violations = validateResource(value);
    if (violations.length > 0) {
      // A note of the whole document (the rules not checked) follows the errors it is about.
      let last = start;
      for (const v of violations) {
        const offset = v.path.length === 0 ? last : (nodeOffset(doc.contents, v.path) ?? start);
        last = Math.max(last, offset);
        out.problems.push(at(offset, v.message));
      }
      continue;
    }
    out.resources.push({
      file,
      line: lineCounter.linePos(start).line,
      resource: value as unknown as ManifestResource["resource"],
    });
  }
  out.problems.sort((a, b) => a.line - b.line || a.column - b.column);
  return out;
}

/** The first line of a YAML error, without the position the report shows anyway. */
function firstLine(message: string): string {
  return (message.split("\n")[0] ?? message).replace(/ at line \d+, column \d+:?$/, "");
}

/** Offset of the node at `path`, or of its deepest existing ancestor (a pair's key for a map entry). */
function nodeOffset(root: Node, path: DocPath): number | undefined {
  let node: Node = root;
  let offset = root.range?.[0];
  for (const part of path) {
    const next = childOf(node, part);
    offset = next?.key?.range?.[0] ?? next?.value?.range?.[0] ?? offset;
    if (!next?.value) break;
    node = next.value;
  }
  return offset;
}

function childOf(node: Node, part: string | number): { key?: Node; value?: Node } | undefined {
  const items = (node as { items?: unknown[] }).items;
  if (!Array.isArray(items)) return undefined;
  if (typeof part === "number") {
    const item = items[part];
    return isNode(item) ? { value: item } : undefined;
  }
  for (const pair of items) {
    if (!isRecord(pair) || !isNode(pair.key)) continue;
    const key = pair.key as Node & { value?: unknown };
    if (key.toJSON() !== part) continue;
    return { key, ...(isNode(pair.value) ? { value: pair.value } : {}) };
  }
  return undefined;
}
