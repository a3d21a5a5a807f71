#!/usr/bin/env node
// Entry point of the `dms-operator` command: the compiled CLI when built, the TypeScript
// source otherwise (Node >= 22.18 runs it directly by stripping types).
//
// The Node version is checked first, with nothing else loaded: on an older Node the CLI's
// dependencies fail deep inside their own code (undici's TypeError on Node 20), which tells
// the user nothing. So this file uses only syntax and APIs every Node since 12 has.

// Node's own modules by `process.getBuiltinModule` where there is one (Node >= 22.3): an `import` of
// `node:fs` would read every export of it once, loading its promises and streams for nothing.
const fs = process.getBuiltinModule ? process.getBuiltinModule("node:fs") : await import("node:fs");
const { existsSync, readFileSync } = fs;

const manifest = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
const needed = /(\d+)\.(\d+)/.exec(manifest.engines.node);
const [major, minor] = process.versions.node.split(".").map(Number);
if (major < Number(needed[1]) || (major === Number(needed[1]) && minor < Number(needed[2]))) {
  process.stderr.write(
    `error: dms-operator needs Node >= ${needed[1]}.${needed[2]}; this is Node ${process.versions.node}. Install a newer Node (https://nodejs.org) and retry.\n`,
  );
  process.exit(1);
}

// A command-line start compiles the same modules every time: Node's compile cache (in the temporary
// directory, checked against the sources) spares that from the second start on. Not for the
// operator itself (`run`), which starts once per pod, often on a read-only file system; its help
// (`run --help`) is a command-line start like any other.
const args = process.argv.slice(2);

// The operator's thread pool (libuv's: 4 threads unless told), read when the pool first starts,
// which nothing above does. The service clients' host-name lookups hold its threads until the
// resolver answers, a namespace's at most a quarter of three quarters of them (src/api/lookups.ts).
if (args[0] === "run" && !process.env.UV_THREADPOOL_SIZE) process.env.UV_THREADPOOL_SIZE = "16";
if (args[0] !== "run" || args.includes("--help") || args.includes("-h")) {
  const nodeModule = process.getBuiltinModule
    ? process.getBuiltinModule("node:module")
    : await import("node:module");
  if (typeof nodeModule.enableCompileCache === "function") nodeModule.enableCompileCache();
}

const compiled = new URL("../dist/cli.js", import.meta.url);
await import(existsSync(compiled) ? compiled.href : new URL("../src/cli.ts", import.meta.url).href);
