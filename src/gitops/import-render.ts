/**
 * Writing an import as YAML: one document per resource (with a comment saying where it came from
 * and what it needs), the Secret manifest, and the deployments that were skipped. Pure.
 */
import { escapeYamlText, yamlText } from "../api/terminal-text.ts";
import type { ImportedResource, ImportResult, SecretKey } from "./importer.ts";

/** A YAML file to write (with `--out-dir`) or a part of the single stream. */
export interface RenderedFile {
  /** File name inside the output directory. */
  name: string;
  text: string;
  /** True when the text holds secret values: never printed by accident. */
  sensitive: boolean;
  /**
   * Written with mode 0600 (`--out-dir`): the Secret manifest, whether it holds the values or
   * placeholders the user replaces with them in this very file.
   */
  ownerOnly: boolean;
}

// Every physical line is commented, so a name holding a line break cannot turn into YAML, and
// what the service named is shown with the characters of the printable rule as escapes.
const comment = (lines: readonly string[]) =>
  lines
    .flatMap((l) => l.split(/\r\n|\r|\n/))
    .map((l) => escapeYamlText(`# ${l}`.trimEnd()))
    .join("\n");

/** The resource's document, headed by comments on its origin, its Secret and its warnings. */
export function renderResource(imported: ImportedResource, manifestProduced: boolean): string {
  const d = imported.deployment;
  const ref = imported.resource.spec.connectionRef;
  const through = ref ? ` through ${ref.kind}/${ref.name}` : "";
  const lines = [
    `Imported from the service's deployment ${JSON.stringify(d.name)} (id ${d.id}, source ${d.source}, status ${d.status})${through}.`,
  ];
  if (imported.secretName) {
    const keys = imported.keys.map((k) => k.key).join(", ");
    lines.push(
      manifestProduced
        ? `Its secrets are read from Secret ${imported.secretName} (keys ${keys}), produced by this import.`
        : `Its secrets are read from Secret ${imported.secretName}, which must hold keys ${keys} before this is applied (import --secrets-from <name> writes a manifest).`,
    );
  }
  if (imported.protectedBecause)
    lines.push(
      `spec.deletionProtection: true because ${imported.protectedBecause}: the API server refuses to delete this resource (a pruned file, kubectl delete) until spec.deletionProtection is set to false; set it to false here if it may be deleted from Git.`,
    );
  for (const w of imported.warnings) lines.push(`warning: ${w}`);
  return `${comment(lines)}\n${yamlText(imported.resource)}`;
}

/**
 * The manifest of Secret `name` holding `keys` under `stringData`, or undefined when no resource
 * reads a secret. Values the service did not show are commented-out placeholders: an unfilled
 * placeholder is a missing key, which the operator reports without sending anything, where a
 * placeholder value would have been sent to the service as the secret.
 */
export function renderSecret(
  name: string,
  namespace: string | undefined,
  keys: readonly SecretKey[],
): RenderedFile | undefined {
  if (keys.length === 0) return undefined;
  const sorted = [...keys].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const missing = sorted.filter((k) => k.value === undefined);
  const header = [
    "Secret values of the imported deployments. Do not commit this file as it is: seal it or store it",
    "in your secret manager, and apply it before (or with) the Deployment resources.",
  ];
  if (missing.length > 0) {
    header.push(
      `FILL IN: the service did not return ${missing.length} of the values (masked or left out). For each`,
      "commented line below, put the real value and uncomment it; until then the operator reports the",
      "missing key and sends nothing to the service.",
    );
  }
  const metadata = namespace === undefined ? { name } : { name, namespace };
  const head = yamlText({ apiVersion: "v1", kind: "Secret", metadata, type: "Opaque" });
  const body = sorted.map((k) => {
    if (k.value !== undefined) return indent(yamlText({ [k.key]: k.value }));
    const why = k.state === "masked" ? "masked by the service" : "not returned by the service";
    const what = `FILL IN: value of secret ${JSON.stringify(k.name)} of deployment ${JSON.stringify(k.deployment)}, ${why}`;
    return escapeYamlText(`  # ${k.key}: ${JSON.stringify(what)}`);
  });
  return {
    name: `${name}.secret.yaml`,
    text: `${comment(header)}\n${head}stringData:\n${body.join("\n")}\n`,
    sensitive: sorted.some((k) => k.value !== undefined),
    ownerOnly: true,
  };
}

// Only the text's final line break goes: a value ending in blank lines is a block scalar whose
// trailing empty lines are part of the value (`|+`), and an empty line needs no indent.
function indent(text: string): string {
  return text
    .replace(/\n$/u, "")
    .split("\n")
    .map((l) => (l === "" ? l : `  ${l}`))
    .join("\n");
}

/** Lines (without `#`) listing the skipped deployments, or none. */
export function skippedLines(result: ImportResult): string[] {
  return result.skipped.map((s) => `skipped ${JSON.stringify(s.name)} (id ${s.id}): ${s.reason}`);
}

/**
 * The files of an import: one per resource (`<metadata.name>.yaml`) and the Secret manifest when
 * `secretsFrom` is set. With `--out-dir` each is written as is; without, {@link renderStream}
 * joins them.
 */
export function renderFiles(
  result: ImportResult,
  settings: { namespace?: string; secretsFrom?: string },
): RenderedFile[] {
  const manifest = settings.secretsFrom !== undefined;
  const files: RenderedFile[] = result.resources.map((r) => ({
    name: `${r.resource.metadata.name}.yaml`,
    text: renderResource(r, manifest),
    sensitive: false,
    ownerOnly: false,
  }));
  if (settings.secretsFrom !== undefined) {
    const secret = renderSecret(
      settings.secretsFrom,
      settings.namespace,
      result.resources.flatMap((r) => r.keys),
    );
    if (secret) files.push(secret);
  }
  return files;
}

/** One multi-document YAML stream: a comment listing what was skipped, then every file. */
export function renderStream(result: ImportResult, files: readonly RenderedFile[]): string {
  const head = [
    `dms-operator import: ${result.resources.length} deployment(s) as resources, ${result.skipped.length} skipped.`,
    ...skippedLines(result),
  ];
  const docs = files.map((f) => f.text);
  return `${comment(head)}\n${docs.length > 0 ? `---\n${docs.join("---\n")}` : ""}`;
}
