/**
 * Text for a terminal: what the service, a tenant's build or a file wrote, as the commands print
 * it (tables, `-o json|yaml`, `plan`'s report, `import`'s manifests), every character of the
 * printable rule (`runtime/unprintable.ts`) written visibly as an escape, so that it neither drives
 * the terminal nor disguises itself; in JSON and YAML, an escape that means the same character, so
 * the data read back is the same. Every function is one pass of linear regular expressions. Text
 * for people inside Kubernetes objects (conditions, Events, status) is `printable.ts`'s.
 */
import { INVISIBLE, UNPRINTABLE, unicodeEscapes } from "../runtime/unprintable.ts";

/**
 * The YAML library, loaded on the first {@link yamlText} (its 70 modules are not a table's, nor
 * an Event's): the same module as `import * as yaml from "yaml"`.
 */
const loadYaml = (): typeof import("yaml") =>
  process.getBuiltinModule("node:module").createRequire(import.meta.url)("yaml") as typeof import("yaml");

/** Every character {@link escapeForTerminal} writes as an escape (tab excepted). */
const TERMINAL_UNSAFE = new RegExp(`[${UNPRINTABLE}]`, "gu");
const NAMED_ESCAPES: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\x1b": "\\x1b" };

/**
 * `text` for a terminal, every character of the printable rule (controls, bidirectional, zero-width
 * and other invisible characters) written visibly as an escape (`\x1b`, `\n`, `\x9b`, `\u202e`,
 * `\u200c`), so an entry stays on its line and cannot
 * clear the screen, move the cursor, write the clipboard (OSC 52) or reorder what is read. A tab
 * stays (it only moves to the next tab stop). A backslash already in the text is left as it is.
 */
export function escapeForTerminal(text: string): string {
  return text.replace(TERMINAL_UNSAFE, (c) => {
    const named = NAMED_ESCAPES[c];
    if (named !== undefined) return named;
    const code = c.charCodeAt(0);
    return code < 0x100 ? `\\x${hex(code, 2)}` : unicodeEscapes(c);
  });
}

/** JSON.stringify leaves these raw: C1 controls, DEL, the separators, format and invisible characters. */
const JSON_UNSAFE = new RegExp(`[\\x7f-\\x9f\\u2028\\u2029${INVISIBLE}]`, "gu");

/**
 * JSON text (as `JSON.stringify` writes it) with the characters it leaves raw written as `\uXXXX`
 * escapes too: the same JSON value, safe on a terminal. Such characters can only stand inside
 * strings, where the escape means the same character.
 */
export function escapeJsonText(json: string): string {
  return json.replace(JSON_UNSAFE, unicodeEscapes);
}

/** The characters {@link escapeYamlText} escapes: the rule's, but the line break YAML is made of. */
const YAML_UNSAFE = `\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\u2028\\u2029${INVISIBLE}`;
const YAML_UNSAFE_CHARS = new RegExp(`[${YAML_UNSAFE}]`, "gu");
const HAS_YAML_UNSAFE = new RegExp(`[${YAML_UNSAFE}]`, "u");

/**
 * Whether a string holds a character {@link escapeYamlText} escapes: the YAML writer must write
 * it as a double-quoted scalar, the one style in which an escape means the character.
 */
export function needsYamlEscapes(text: string): boolean {
  return HAS_YAML_UNSAFE.test(text);
}

/**
 * YAML text in which every string that {@link needsYamlEscapes} is a double-quoted scalar, with
 * the characters of the rule its writer leaves raw (C1 controls, DEL, the separators, format and
 * invisible characters) written as escapes (`\\x9b`, `\\u202e`, `\\U000e0100`): the same value,
 * safe on a terminal. Line breaks and tabs stay: they are YAML's own.
 */
export function escapeYamlText(yaml: string): string {
  return yaml.replace(YAML_UNSAFE_CHARS, (c) => {
    const code = c.codePointAt(0) ?? 0;
    return code < 0x100 ? `\\x${hex(code, 2)}` : code < 0x10000 ? `\\u${hex(code, 4)}` : `\\U${hex(code, 8)}`;
  });
}

/**
 * `value` as YAML text, as the YAML library's `stringify` writes it, but with each string holding
 * a character of the printable rule (a C1 control, a bidirectional, zero-width or other invisible
 * character, which the library would leave raw even inside quotes) written double-quoted, with
 * those characters as escapes ({@link escapeYamlText}): the same data, read back by any YAML
 * parser (what `import` writes is applied with `kubectl apply` as it is), and nothing in it that
 * drives a terminal or hides in a review. Every YAML the CLI writes goes through here.
 */
export function yamlText(value: unknown): string {
  const { Document, visit } = loadYaml();
  const document = new Document(value);
  visit(document, {
    Scalar(_key, node) {
      if (typeof node.value === "string" && needsYamlEscapes(node.value)) node.type = "QUOTE_DOUBLE";
    },
  });
  return escapeYamlText(document.toString());
}

function hex(code: number, width: number): string {
  return code.toString(16).padStart(width, "0");
}
