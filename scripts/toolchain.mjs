#!/usr/bin/env node
// Provides the toolchain the project needs on a fresh machine, then runs an npm script with it.
//
// Usage: node scripts/toolchain.mjs <npm-script> [args...]
//
// Written for any Node >= 18 on purpose: the machines this project is built on ship an older
// Node than the one it runs on. When the running Node is too old, Node 24 LTS is installed from
// the npm registry (package node-<platform>-<arch>) into a per-user cache and used instead.
// Dependencies are installed with `npm ci` whenever package-lock.json changed since the last run.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const NODE_VERSION = "24.21.0";
const MIN_NODE = [22, 19];
const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const cacheRoot =
  process.env.DMS_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "dms-operator");

function say(message) {
  process.stderr.write(`toolchain: ${message}\n`);
}

function run(cmd, args, options = {}) {
  const result = spawnSync(cmd, args, { stdio: "inherit", ...options });
  if (result.error) throw result.error;
  return result.status ?? 1;
}

function nodeIsRecentEnough(version) {
  const [major, minor] = version.replace(/^v/, "").split(".").map(Number);
  return major > MIN_NODE[0] || (major === MIN_NODE[0] && minor >= MIN_NODE[1]);
}

/** The directory holding a suitable `node` binary, installing Node 24 when needed. */
function nodeBinDir() {
  if (nodeIsRecentEnough(process.version)) return dirname(process.execPath);
  const pkg = `node-${process.platform}-${process.arch}`;
  const prefix = join(cacheRoot, "node", NODE_VERSION);
  const bin = join(prefix, "node_modules", pkg, "bin");
  if (!existsSync(join(bin, "node"))) {
    say(`Node ${process.version} is too old; installing Node ${NODE_VERSION} (${pkg}) into ${prefix}`);
    mkdirSync(prefix, { recursive: true });
    const status = run("npm", [
      "install",
      "--prefix",
      prefix,
      "--no-save",
      "--no-audit",
      "--no-fund",
      "--loglevel=error",
      `${pkg}@${NODE_VERSION}`,
    ]);
    if (status !== 0 || !existsSync(join(bin, "node"))) {
      say(
        `could not install ${pkg}@${NODE_VERSION} from the npm registry; install Node >= ${MIN_NODE.join(".")} and retry`,
      );
      process.exit(1);
    }
  }
  return bin;
}

function ensureDependencies(env) {
  const lock = readFileSync(join(root, "package-lock.json"));
  const manifest = readFileSync(join(root, "package.json"));
  const digest = createHash("sha256").update(lock).update(manifest).update(NODE_VERSION).digest("hex");
  const stamp = join(root, "node_modules", ".dms-lock-sha256");
  if (existsSync(stamp) && readFileSync(stamp, "utf8") === digest) return;
  // `npm ci`: exactly what package-lock.json pins, refusing a lockfile that disagrees with
  // package.json. The lockfile records every platform's optional binaries, so this works on
  // any machine the dev tools support.
  say("installing dependencies (npm ci, from package-lock.json)");
  const status = run("npm", ["ci", "--no-audit", "--no-fund", "--loglevel=error"], {
    cwd: root,
    env,
  });
  if (status !== 0) process.exit(status);
  writeFileSync(stamp, digest);
}

const [script, ...args] = process.argv.slice(2);
if (!script) {
  say("usage: node scripts/toolchain.mjs <npm-script> [args...]");
  process.exit(2);
}
const binDir = nodeBinDir();
const env = {
  ...process.env,
  PATH: [binDir, join(root, "node_modules", ".bin"), process.env.PATH].join(delimiter),
};
ensureDependencies(env);
process.exit(
  run("npm", ["run", "--silent", script, ...(args.length ? ["--", ...args] : [])], { cwd: root, env }),
);
