/**
 * The reference pages of the operator's kinds (`docs/reference/<kind>.md`), rendered from the same
 * CRD objects `render.ts` builds from the schemas: every field with its type, default, bounds and
 * description, which ones cannot change, the CEL rules, and the columns of `kubectl get`. Pure:
 * `generate.ts` writes the pages, and a unit test compares each with `renderReference()` so the
 * reference cannot drift from the schema any more than `crds/` can.
 */
import { type CrdDefinition, crdObject } from "./render.ts";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Node = { [key: string]: Json };

interface Rule {
  rule: string;
  message?: string;
  fieldPath?: string;
}

interface Row {
  path: string;
  node: Node;
  required: boolean;
}

const isNode = (value: Json | undefined): value is Node =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** Path of the reference page of one kind, relative to the repository root. */
export const referenceFile = (crd: CrdDefinition): string => `docs/reference/${crd.kind.toLowerCase()}.md`;

/** A Markdown table cell: one line, pipes escaped. */
const cell = (text: string): string => text.replace(/\s*\n\s*/g, " ").replace(/\|/g, "\\|");
/** Prose for Markdown: `<id>` outside code spans is written as text, not taken for an HTML tag. */
const prose = (text: string): string =>
  text
    .split("`")
    .map((part, i) => (i % 2 === 0 ? part.replace(/</g, "&lt;").replace(/>/g, "&gt;") : part))
    .join("`");
const code = (value: Json): string => `\`${typeof value === "string" ? value : JSON.stringify(value)}\``;

/** The type as a reader writes it: `string`, `[]object`, `map[string]integer`, `object (kept as given)`. */
function typeOf(node: Node): string {
  if (node.type === "array" && isNode(node.items)) return `[]${typeOf(node.items)}`;
  if (node.type === "object" && isNode(node.additionalProperties))
    return `map[string]${typeOf(node.additionalProperties)}`;
  if (node["x-kubernetes-preserve-unknown-fields"] === true) return "object (kept as given)";
  return typeof node.type === "string" ? node.type : "any";
}

/** Every bound the schema sets on a node, in words. */
function boundsOf(node: Node): string[] {
  const out: string[] = [];
  if (Array.isArray(node.enum)) out.push(`one of ${node.enum.map(code).join(", ")}`);
  if (typeof node.format === "string") out.push(`format ${node.format}`);
  if (typeof node.minimum === "number" && typeof node.maximum === "number")
    out.push(`${node.minimum} to ${node.maximum}`);
  else if (typeof node.minimum === "number") out.push(`at least ${node.minimum}`);
  else if (typeof node.maximum === "number") out.push(`at most ${node.maximum}`);
  if (typeof node.minLength === "number") out.push(`length at least ${node.minLength}`);
  if (typeof node.maxLength === "number") out.push(`length at most ${node.maxLength}`);
  if (typeof node.pattern === "string") out.push(`matches ${code(node.pattern)}`);
  if (typeof node.minItems === "number") out.push(`at least ${node.minItems} items`);
  if (typeof node.maxItems === "number") out.push(`at most ${node.maxItems} items`);
  if (typeof node.maxProperties === "number") out.push(`at most ${node.maxProperties} entries`);
  if (node["x-kubernetes-list-type"] === "map" && Array.isArray(node["x-kubernetes-list-map-keys"]))
    out.push(`items unique by ${node["x-kubernetes-list-map-keys"].map(code).join(", ")}`);
  else if (node["x-kubernetes-list-type"] === "set") out.push("items unique");
  return out;
}

/** The fields below `node`, depth first, each with its path (`spec.secrets[].name`, `spec.labels.*`). */
function rowsOf(node: Node, path: string, required: boolean, rows: Row[] = []): Row[] {
  if (path !== "") rows.push({ path, node, required });
  if (isNode(node.properties)) {
    const needed = new Set(Array.isArray(node.required) ? node.required : []);
    for (const [key, child] of Object.entries(node.properties))
      if (isNode(child)) rowsOf(child, path === "" ? key : `${path}.${key}`, needed.has(key), rows);
  }
  if (isNode(node.items) && (isNode(node.items.properties) || isNode(node.items.additionalProperties)))
    rowsOf(node.items, `${path}[]`, false, rows);
  if (isNode(node.additionalProperties) && isNode(node.additionalProperties.properties))
    rowsOf(node.additionalProperties, `${path}.*`, false, rows);
  return rows;
}

const rulesOf = (node: Node): Rule[] =>
  Array.isArray(node["x-kubernetes-validations"])
    ? (node["x-kubernetes-validations"] as unknown as Rule[])
    : [];

/** The field a rule reports: its node's path, joined with its `fieldPath` when it names one. */
function ruleTarget(path: string, rule: Rule): string {
  if (!rule.fieldPath) return path;
  const rest = rule.fieldPath.replace(/^\./, "");
  return path === "" ? rest : `${path}.${rest}`;
}

/** A rule on the old object (a transition rule): the field it guards cannot change as it says. */
const isTransition = (rule: Rule): boolean => /\boldSelf\b/.test(rule.rule);

/** The Markdown reference page of one kind. Deterministic. */
export function renderReference(crd: CrdDefinition): string {
  const object = crdObject(crd) as Node;
  const spec = object.spec as Node;
  const names = spec.names as Node;
  const version = (spec.versions as Node[])[0] as Node;
  const schema = (version.schema as Node).openAPIV3Schema as Node;
  const columns = version.additionalPrinterColumns as Node[];
  const rows = rowsOf(schema, "", false);

  const immutable = new Map<string, string>();
  const rules: { path: string; rule: Rule }[] = [];
  for (const { path, node } of [{ path: "", node: schema }, ...rows]) {
    for (const rule of rulesOf(node)) {
      const target = ruleTarget(path, rule);
      rules.push({ path: target, rule });
      if (isTransition(rule)) immutable.set(target, rule.message ?? "cannot change");
    }
  }

  const lines: string[] = [
    `# ${crd.kind} (\`${object.metadata && (object.metadata as Node).name}\`)`,
    "",
    `<!-- Generated by \`npm run generate\` from ${crd.source}. Do not edit. -->`,
    "",
    prose(String(schema.description ?? "")),
    "",
    "| | |",
    "|---|---|",
    `| API version | \`${spec.group}/${version.name}\` |`,
    `| Kind | \`${names.kind}\` |`,
    `| Scope | ${spec.scope} |`,
    `| Short names | ${(names.shortNames as string[]).map((n) => `\`${n}\``).join(", ")} |`,
    `| Categories | ${(names.categories as string[]).map((n) => `\`${n}\``).join(", ")} |`,
    `| Subresources | \`status\` (written by the operator only) |`,
    "",
    "## Columns of `kubectl get`",
    "",
    "| Column | Shown | Value | Meaning |",
    "|---|---|---|---|",
    ...columns.map(
      (c) =>
        `| ${String(c.name).toUpperCase()} | ${c.priority === 1 ? "`-o wide`" : "always"} | ${cell(code(String(c.jsonPath)))} | ${cell(prose(String(c.description)))} |`,
    ),
    "",
    "## Fields",
    "",
    "Paths are written from the object's root: `a[]` is each item of the list `a`, `a.*` each value",
    "of the map `a`. A field that cannot change after creation says so; the API server refuses the",
    "change with the message quoted. `metadata` is the standard Kubernetes object metadata.",
    "",
    "| Field | Type | Default | Bounds | Description |",
    "|---|---|---|---|---|",
  ];
  for (const { path, node, required } of rows) {
    const type = `${typeOf(node)}${required ? ", required" : ""}`;
    const fixed = immutable.get(path);
    const description = [
      fixed !== undefined ? `**Cannot change**: ${fixed}.` : "",
      typeof node.description === "string"
        ? node.description
        : path === "metadata"
          ? "Standard object metadata."
          : "",
    ]
      .filter(Boolean)
      .join(" ");
    const defaultValue = node.default === undefined ? "" : code(node.default);
    lines.push(
      `| \`${path}\` | ${cell(type)} | ${cell(defaultValue)} | ${cell(boundsOf(node).join("; "))} | ${cell(prose(description))} |`,
    );
  }
  lines.push(
    "",
    "## Validation rules",
    "",
    "The CEL rules (`x-kubernetes-validations`) the API server checks on every create and update,",
    "by the field it reports. Rules on `oldSelf` compare with the stored object: they make a field",
    "immutable.",
    "",
    "| Field | Rule | Message |",
    "|---|---|---|",
    ...rules.map(
      ({ path, rule }) =>
        `| \`${path === "" ? "(object)" : path}\` | ${cell(code(rule.rule))} | ${cell(prose(rule.message ?? ""))} |`,
    ),
    "",
  );
  return lines.join("\n");
}
