// While the program loads, commander's imports of `node:child_process`, `node:fs`, `node:process`
// and `node:util` are answered by small modules (src/commands/commander-builtins.ts), so that Node
// builds none of their namespaces. Every name commander imports from them must be there (a name
// missing would fail every start), and commander must work as before.
import { execFile } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { COMMANDER_BUILTINS } from "../../src/commands/commander-builtins.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const COMMANDER = join(ROOT, "node_modules", "commander");

/** Node's modules commander imports without their namespaces mattering: loaded by every start. */
const LIGHT = new Set(["node:events", "node:path"]);

/** What Node loads only for the namespaces of commander's builtins, or for `node:child_process`. */
const NAMESPACE_ONLY =
  /^(child_process|internal\/child_process|dgram|internal\/fs\/(promises|streams|dir|watchers)|internal\/repl\/history|internal\/process\/report|internal\/util\/parse_args\/parse_args)$/;

/** Each import of a builtin in commander's modules: its specifier, and `default` or the names it takes. */
function commanderBuiltinImports(): { specifier: string; names: string[] }[] {
  const files = [
    join(COMMANDER, "index.js"),
    ...readdirSync(join(COMMANDER, "lib")).map((f) => join(COMMANDER, "lib", f)),
  ];
  return files.flatMap((file) =>
    [...readFileSync(file, "utf8").matchAll(/^import\s+([^;]*?)\s+from\s+['"](node:[\w/]+)['"]/gm)].map(
      ([, clause = "", specifier = ""]) => {
        const named = /\{([^}]*)\}/.exec(clause)?.[1] ?? "";
        const names = named
          .split(",")
          .map((n) => n.trim().split(/\s+as\s+/)[0] ?? "")
          .filter((n) => n !== "");
        if (/^\s*[\w$]+\s*(,|$)/.test(clause)) names.push("default");
        return { specifier, names };
      },
    ),
  );
}

/** Runs module code in a new Node (the sources as the launcher runs them), its stdout parsed as JSON. */
async function runModule(code: string): Promise<unknown> {
  const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", code], {
    cwd: ROOT,
    encoding: "utf8",
  });
  return JSON.parse(stdout);
}

describe("commander's imports of Node's modules", () => {
  it("each builtin commander imports is answered, or light", () => {
    const imports = commanderBuiltinImports();
    expect(imports.map((i) => i.specifier)).toContain("node:child_process");
    for (const { specifier } of imports)
      expect(specifier in COMMANDER_BUILTINS || LIGHT.has(specifier), specifier).toBe(true);
  });

  it("exports every name commander imports from them, as Node's own", async () => {
    const wanted = commanderBuiltinImports().filter((i) => i.specifier in COMMANDER_BUILTINS);
    const code = [
      `const shims = ${JSON.stringify(COMMANDER_BUILTINS)};`,
      "const out = {};",
      "for (const [specifier, source] of Object.entries(shims)) {",
      '  const shim = await import("data:text/javascript," + encodeURIComponent(source));',
      "  const real = process.getBuiltinModule(specifier);",
      // The same value as Node's: the module itself for a default, its export for a name.
      "  out[specifier] = Object.keys(shim).filter((name) => name === 'default' ? (specifier === 'node:child_process' ? shim.default.spawn === real.spawn : shim.default === real) : shim[name] === real[name]);",
      "}",
      "process.stdout.write(JSON.stringify(out));",
    ].join("\n");
    const exported = (await runModule(code)) as Record<string, string[]>;
    for (const { specifier, names } of wanted)
      for (const name of names) expect(exported[specifier], `${specifier} ${name}`).toContain(name);
  }, 30_000);

  it("loads commander without those namespaces nor child_process, and commander works", async () => {
    const module = pathToFileURL(join(ROOT, "src", "commands", "commander-builtins.ts")).href;
    const code = [
      `const { withLightCommanderBuiltins } = await import(${JSON.stringify(module)});`,
      'const { Command } = await withLightCommanderBuiltins(() => import("commander"));',
      "let seen;",
      'const program = new Command("p").exitOverride().configureOutput({ writeOut: (s) => { seen = s; } });',
      'program.command("list").option("--limit <n>").action((flags) => { seen = flags; });',
      'program.parse(["list", "--limit", "3"], { from: "user" });',
      "const listed = seen;",
      'try { program.parse(["--help"], { from: "user" }); } catch {}',
      "const builtins = process.moduleLoadList.filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice(13));",
      "process.stdout.write(JSON.stringify({ listed, help: seen, builtins }));",
    ].join("\n");
    const { listed, help, builtins } = (await runModule(code)) as {
      listed: unknown;
      help: string;
      builtins: string[];
    };
    expect(listed).toEqual({ limit: "3" });
    expect(help).toContain("Usage: p [options] [command]");
    expect(builtins.filter((name) => NAMESPACE_ONLY.test(name))).toEqual([]);
  }, 30_000);
});
