/**
 * commander's imports of Node's own modules, answered lightly while the program loads.
 *
 * commander imports `node:child_process`, `node:fs`, `node:process` and `node:util` as ES modules,
 * and Node builds the namespace of a builtin imported so by reading every export of it once: the
 * lazy ones load what no command uses (`node:fs`'s promises and streams, with readline and the
 * REPL's history; `node:process`'s report; `node:util`'s `parseArgs` and diff), and
 * `node:child_process` itself loads its internals, `dgram` and `net` for the executable
 * subcommands commander can spawn, which this program does not have. A profile of
 * `deployments list` put them at ~10 % of its instructions (docs/benchmarks.md, "CLI start").
 *
 * So while the program's modules load, a resolve hook (`module.registerHooks`) gives commander's
 * imports of those four modules a small module each ({@link COMMANDER_BUILTINS}) exporting what
 * commander imports, taken from Node with `process.getBuiltinModule` (no namespace);
 * `node:child_process` is loaded only if commander reaches for it. The hook is removed once the
 * modules are loaded: nothing else resolves through it (the operator's own modules, Kubernetes'
 * client). Without `module.registerHooks` (Node < 22.15) the modules load as they are.
 * test/unit/cli-commander-builtins.test.ts checks that every name commander imports from them is
 * exported.
 */

/** What commander imports from each builtin, as module code taking it from Node without a namespace. */
export const COMMANDER_BUILTINS: Readonly<Record<string, string>> = {
  // Every property read (commander's `childProcess.spawn`) loads the module then.
  "node:child_process":
    'export default new Proxy({}, { get: (_, name) => process.getBuiltinModule("node:child_process")[name] });',
  "node:fs": 'export default process.getBuiltinModule("node:fs");',
  "node:process": "export default process;",
  "node:util": 'export const { stripVTControlCharacters } = process.getBuiltinModule("node:util");',
};

/**
 * Runs `load` (the program's dynamic imports) with commander's imports of Node's modules answered
 * by {@link COMMANDER_BUILTINS}; see the module comment.
 */
export async function withLightCommanderBuiltins<T>(load: () => Promise<T>): Promise<T> {
  const { registerHooks } = process.getBuiltinModule("node:module");
  if (typeof registerHooks !== "function") return load();
  // commander's folder: its index and its lib/ files are the importers answered.
  const commander = new URL(".", import.meta.resolve("commander")).href;
  const hooks = registerHooks({
    resolve(specifier, context, nextResolve) {
      const source = COMMANDER_BUILTINS[specifier];
      if (source === undefined || !context.parentURL?.startsWith(commander))
        return nextResolve(specifier, context);
      return { url: `data:text/javascript,${encodeURIComponent(source)}`, shortCircuit: true };
    },
  });
  try {
    return await load();
  } finally {
    hooks.deregister();
  }
}
