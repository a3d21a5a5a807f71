// The program knows its commands from light registry entries (src/commands/registry.ts) and loads
// the code of the one command named only: `--version`, `--help` and a typo load none. The kubectl
// plugin lists the commands a kubectl user reaches for, not the operator's own `run` and
// `simulator`. Each entry says what the loaded command says.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { Help } from "commander";
import { describe, expect, it } from "vitest";
import type { CliContext, RegisterCommand } from "../../src/commands/context.ts";
import { createProgram, EXIT, runCommands } from "../../src/commands/program.ts";
import { KUBECTL_PLUGIN_NAME, PROGRAM_NAME } from "../../src/commands/program-name.ts";
import { COMMANDS, type CommandEntry } from "../../src/commands/registry.ts";
import { startSimulator } from "../../src/simulator/server.ts";

const ROOT = join(import.meta.dirname, "..", "..");

function context() {
  const seen = { stdout: "", stderr: "" };
  const ctx: CliContext = {
    out: (t) => {
      seen.stdout += t;
    },
    err: (t) => {
      seen.stderr += t;
    },
    stdoutIsTTY: false,
    env: {},
    stopSignal: new AbortController().signal,
  };
  return { ctx, seen };
}

/** The command names a help text lists, in order. */
const listedCommands = (help: string) =>
  [...(help.split("Commands:\n")[1] ?? "").matchAll(/^ {2}([\w-]+)/gm)].map((m) => m[1]);

/** The registry with each load counted. */
function counted(): { entries: CommandEntry[]; loaded: string[] } {
  const loaded: string[] = [];
  const entries = COMMANDS.map((c) => ({
    ...c,
    load: async (): Promise<RegisterCommand> => {
      loaded.push(c.name);
      return c.load();
    },
  }));
  return { entries, loaded };
}

describe("the command registry", () => {
  it("says each command's name and help term as the loaded command does", async () => {
    const { ctx } = context();
    for (const entry of COMMANDS) {
      const program = createProgram(ctx, [await entry.load()]);
      const [command] = program.commands;
      expect(command?.name(), entry.name).toBe(entry.name);
      if (command) expect(new Help().subcommandTerm(command), entry.name).toBe(entry.term);
    }
  });

  it("imports nothing at run time (it is read before any command is chosen)", () => {
    const source = readFileSync(join(ROOT, "src", "commands", "registry.ts"), "utf8");
    const imports = [...source.matchAll(/^import .*$/gm)].map((m) => m[0]);
    expect(imports.every((line) => line.startsWith("import type "))).toBe(true);
  });
});

describe("runCommands", () => {
  it("loads no command for --version, --help or a typo, and only the named one otherwise", async () => {
    for (const argv of [["--version"], ["--help"], ["plna"], []]) {
      const { entries, loaded } = counted();
      await runCommands(argv, context().ctx, PROGRAM_NAME, entries);
      expect(loaded, argv.join(" ")).toEqual([]);
    }
    const { entries, loaded } = counted();
    const { ctx, seen } = context();
    expect(await runCommands(["plan", "--help"], ctx, PROGRAM_NAME, entries)).toBe(EXIT.ok);
    expect(loaded).toEqual(["plan"]);
    expect(seen.stdout).toMatch(/^Usage: dms-operator plan \[options\]\n/);
    const help = counted();
    await runCommands(["help", "status"], context().ctx, KUBECTL_PLUGIN_NAME, help.entries);
    expect(help.loaded).toEqual(["status"]);
  });

  it("lists every command in the program's help, from the entries alone", async () => {
    const { ctx, seen } = context();
    expect(await runCommands(["--help"], ctx, PROGRAM_NAME, COMMANDS)).toBe(EXIT.ok);
    const listed = listedCommands(seen.stdout);
    expect(listed).toEqual([...COMMANDS.map((c) => c.name), "help"]);
    for (const c of COMMANDS) expect(seen.stdout).toContain(`  ${c.term} `);
  });

  it("the kubectl plugin's help lists the kubectl verbs and not run or simulator", async () => {
    const { ctx, seen } = context();
    expect(await runCommands(["--help"], ctx, KUBECTL_PLUGIN_NAME, COMMANDS)).toBe(EXIT.ok);
    expect(seen.stdout).toMatch(/^Usage: kubectl dms \[options\] \[command\]\n/);
    const listed = listedCommands(seen.stdout);
    for (const verb of [
      "status",
      "reconcile",
      "suspend",
      "resume",
      "rollout-now",
      "rebuild",
      "version",
      "completion",
    ])
      expect(listed).toContain(verb);
    expect(listed).not.toContain("run");
    expect(listed).not.toContain("simulator");
    expect(listed).toContain("plan");
  });

  it("under the plugin, refuses run and simulator with a line saying they are dms-operator's", async () => {
    for (const command of ["run", "simulator"]) {
      const { ctx, seen } = context();
      const { entries, loaded } = counted();
      expect(await runCommands([command, "--help"], ctx, KUBECTL_PLUGIN_NAME, entries)).toBe(EXIT.failed);
      expect(seen.stderr).toBe(
        `error: unknown command '${command}': it is a command of dms-operator, not of kubectl dms; run dms-operator ${command}\n`,
      );
      expect(loaded).toEqual([]);
    }
  });

  it("every command exits 1 on an unknown flag, as kubectl does (2 is only plan's changes planned)", async () => {
    for (const entry of COMMANDS) {
      const { ctx, seen } = context();
      expect(await runCommands([entry.name, "--no-such-flag"], ctx, PROGRAM_NAME, COMMANDS), entry.name).toBe(
        EXIT.failed,
      );
      // One error line (plan names its required -f first), never a stack trace.
      expect(seen.stderr, entry.name).toMatch(/^error: (unknown|required) option '-/);
    }
  });

  it("a command group named alone prints its help on stdout and exits 0, as kubectl config does", async () => {
    for (const [name, argv, usage] of [
      [KUBECTL_PLUGIN_NAME, [], "Usage: kubectl dms [options] [command]\n"],
      [KUBECTL_PLUGIN_NAME, ["--verbose"], "Usage: kubectl dms [options] [command]\n"],
      [KUBECTL_PLUGIN_NAME, ["deployments"], "Usage: kubectl dms deployments [options] [command]\n"],
      [PROGRAM_NAME, ["repos"], "Usage: dms-operator repos [options] [command]\n"],
    ] as const) {
      const { ctx, seen } = context();
      expect(await runCommands([...argv], ctx, name, COMMANDS), argv.join(" ")).toBe(EXIT.ok);
      expect(seen.stderr, argv.join(" ")).toBe("");
      expect(seen.stdout.startsWith(usage), argv.join(" ")).toBe(true);
      expect(seen.stdout, argv.join(" ")).toContain("\nCommands:\n");
    }
    // Under it, an unknown subcommand or flag is still an error, with commander's suggestion.
    for (const [argv, line] of [
      [["deployments", "lst"], "error: unknown command 'lst'\n(Did you mean list?)\n"],
      [["deployments", "--no-such-flag"], "error: unknown option '--no-such-flag'\n"],
      [["--no-such-flag"], "error: unknown option '--no-such-flag'\n"],
    ] as const) {
      const { ctx, seen } = context();
      expect(await runCommands([...argv], ctx, KUBECTL_PLUGIN_NAME, COMMANDS), argv.join(" ")).toBe(
        EXIT.failed,
      );
      expect(seen.stdout, argv.join(" ")).toBe("");
      expect(seen.stderr, argv.join(" ")).toBe(line);
    }
  });

  it("keeps commander's suggestions for a misspelt command", async () => {
    const { ctx, seen } = context();
    expect(await runCommands(["reconcil", "x"], ctx, KUBECTL_PLUGIN_NAME, COMMANDS)).toBe(EXIT.failed);
    expect(seen.stderr).toContain("error: unknown command 'reconcil'");
    expect(seen.stderr).toContain("(Did you mean reconcile?)");
  });
});

/**
 * The modules a start of `bin/<script> ...args` loads, in order (a resolve hook prints each on
 * stderr), Node's own modules it loaded by the end (however they were asked for, e.g.
 * `process.getBuiltinModule`), and how many `Intl.ListFormat`s it constructed (each reads ICU's
 * list data into memory).
 */
async function modulesLoaded(
  script: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ stdout: string; loaded: string[]; builtins: string[]; listFormats: number }> {
  const hook = `data:text/javascript,${encodeURIComponent(
    [
      'import{registerHooks}from"node:module";registerHooks({resolve(s,c,n){const r=n(s,c);process.stderr.write("LOADED "+r.url+"\\n");return r;}});',
      "const R=Intl.ListFormat;let made=0;Intl.ListFormat=class extends R{constructor(...a){super(...a);made+=1;}};",
      'process.on("exit",()=>{for(const m of process.moduleLoadList)if(m.startsWith("NativeModule "))process.stderr.write("BUILTIN "+m.slice(13)+"\\n");process.stderr.write("LISTFORMATS "+made+"\\n");});',
    ].join(""),
  )}`;
  const { stdout, stderr } = await promisify(execFile)(
    process.execPath,
    ["--import", hook, join(ROOT, "bin", script), ...args],
    { encoding: "utf8", env: { ...process.env, KUBECONFIG: "/nonexistent/kubeconfig", ...env } },
  );
  const lines = (prefix: string) =>
    stderr
      .split("\n")
      .filter((l) => l.startsWith(prefix))
      .map((l) => l.slice(prefix.length));
  const loaded = [...new Set(lines("LOADED "))];
  return { stdout, loaded, builtins: lines("BUILTIN "), listFormats: Number(lines("LISTFORMATS ")[0]) };
}

/** The command modules among `loaded` (the launcher runs dist/ when a build is there, else the sources). */
const commandModulesOf = (loaded: readonly string[]) =>
  loaded
    .filter((url) => /\/(src|dist)\/commands\/[\w-]+\.(ts|js)$/.test(url))
    .map((url) => url.slice(url.lastIndexOf("/") + 1).replace(/\.(ts|js)$/, ""))
    .sort();

/** The heavy libraries: Kubernetes', YAML, TypeBox, the logger, CEL, the retries. */
const HEAVY = /node_modules\/(@kubernetes|yaml|@sinclair|pino|@marcbachmann|p-retry)\//;

/** What a command reading the service does without: the schemas' library, the logger, Kubernetes', YAML, CEL. */
const READ_HEAVY = /node_modules\/(@kubernetes|yaml|@sinclair|pino|@marcbachmann)\//;

/** Node's modules a listing over plain HTTP does without: TLS, crypto, compression, HTTP/2. */
const SERVICE_HEAVY_BUILTINS =
  /^(tls|_tls_\w+|https|crypto|zlib|http2|internal\/http2\/.*|internal\/crypto\/.*)$/;

/**
 * What Node loads only to build the ES namespace of `node:fs`, `node:dns`, `node:net` or
 * `node:stream/consumers` (an `import` of it reads every export once, the lazy ones too): our own
 * modules take Node's with `process.getBuiltinModule`, and commander's imports are answered without
 * (src/commands/commander-builtins.ts).
 */
const NAMESPACE_ONLY_BUILTINS =
  /^(internal\/dns\/promises|internal\/blocklist|internal\/socketaddress|stream\/consumers)$/;
const FS_NAMESPACE_ONLY_BUILTINS = /^internal\/(fs\/(promises|streams|dir|watchers)|repl\/history)$/;

/**
 * What Node loads only for commander's imports of `node:child_process`, `node:fs`, `node:process` and
 * `node:util` when they are not answered by src/commands/commander-builtins.ts: their namespaces, and
 * `node:child_process` with its internals and `dgram`.
 */
const COMMANDER_ONLY_BUILTINS =
  /^(child_process|internal\/child_process|dgram|internal\/process\/report|internal\/util\/parse_args\/parse_args)$/;

/** The only libraries `deployments list` loads: the command line's and the retries'. */
const LIST_PACKAGES = new Set(["commander", "p-retry", "is-network-error"]);

/** The packages of node_modules among `loaded`. */
const packagesOf = (loaded: readonly string[]) => [
  ...new Set(loaded.flatMap((url) => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1] ?? [])),
];

describe("bin/dms-operator.mjs --version", () => {
  it("loads no command module, no service client and no Kubernetes client", async () => {
    const { stdout, loaded } = await modulesLoaded("dms-operator.mjs", ["--version"]);
    expect(stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
    expect(commandModulesOf(loaded)).toEqual([
      "commander-builtins",
      // The harness's reading of flags before the command's name: no import of its own.
      "leading-flags",
      "process-context",
      "program",
      "program-name",
      "registry",
      "usage-error",
    ]);
    expect(loaded.filter((url) => HEAVY.test(url))).toEqual([]);
  }, 30_000);
});

describe("a command's help and a TAB load what they need only", () => {
  it("every command's --help (run's too), and version --client, load none of the heavy libraries", async () => {
    const plugin = COMMANDS.filter((c) => !c.operatorOnly);
    for (const args of [
      ...plugin.map((c) => [c.name, "--help"]),
      ["deployments", "list", "--help"],
      ["version", "--client"],
    ]) {
      const { loaded, builtins } = await modulesLoaded("kubectl-dms.mjs", args);
      expect(
        loaded.filter((url) => HEAVY.test(url)),
        args.join(" "),
      ).toEqual([]);
      expect(
        builtins.filter(
          (name) => COMMANDER_ONLY_BUILTINS.test(name) || FS_NAMESPACE_ONLY_BUILTINS.test(name),
        ),
        args.join(" "),
      ).toEqual([]);
    }
    // The operator's own: its settings' table, not the operator, the server or the schemas.
    const run = await modulesLoaded("dms-operator.mjs", ["run", "--help"]);
    expect(run.loaded.filter((url) => HEAVY.test(url) || /\/(src|dist)\/main\.(ts|js)$/.test(url))).toEqual(
      [],
    );
  }, 120_000);

  it("deployments list and providers list read the service without TypeBox, the logger or Kubernetes' client", async () => {
    const sim = await startSimulator({
      seed: {
        deployments: [
          { name: "agent", source: "internal_docker", source_revision_config: { image_uri: "img:1" } },
        ],
      },
    });
    try {
      const env = { DMS_BASE_URL: sim.url, DMS_API_KEY: "k" };
      const { stdout, loaded, builtins, listFormats } = await modulesLoaded(
        "kubectl-dms.mjs",
        ["deployments", "list", "-o", "name"],
        env,
      );
      expect(stdout).toBe("agent\n");
      expect(loaded.filter((url) => READ_HEAVY.test(url))).toEqual([]);
      // The service's transport is Node's own HTTP client: over http://, an answer not
      // compressed, no TLS, no zlib, no HTTP/2, no crypto, and of the libraries only these.
      expect(builtins.filter((name) => SERVICE_HEAVY_BUILTINS.test(name))).toEqual([]);
      expect(builtins.filter((name) => NAMESPACE_ONLY_BUILTINS.test(name))).toEqual([]);
      expect(
        builtins.filter(
          (name) => COMMANDER_ONLY_BUILTINS.test(name) || FS_NAMESPACE_ONLY_BUILTINS.test(name),
        ),
      ).toEqual([]);
      expect(packagesOf(loaded).filter((name) => !LIST_PACKAGES.has(name))).toEqual([]);
      expect(listFormats).toBe(0);
      const providers = await modulesLoaded("kubectl-dms.mjs", ["providers", "list"], env);
      expect(providers.loaded.filter((url) => READ_HEAVY.test(url))).toEqual([]);
    } finally {
      await sim.close();
    }
  }, 60_000);

  it("kubectl_complete-dms answers commands, flags and flag values without commander or a command", async () => {
    for (const words of [
      ["s"],
      ["status", "--a"],
      ["status", "-o", ""],
      ["deployments", "list", "--status", ""],
    ]) {
      const { stdout, loaded, builtins } = await modulesLoaded("kubectl_complete-dms.mjs", words);
      expect(stdout).toMatch(/\n:4\n$/);
      expect(
        builtins.filter(
          (name) => NAMESPACE_ONLY_BUILTINS.test(name) || FS_NAMESPACE_ONLY_BUILTINS.test(name),
        ),
      ).toEqual([]);
      expect(commandModulesOf(loaded), words.join(" ")).toEqual([
        "completion-plugin",
        "completion-table",
        "process-context",
        "program-name",
        "words",
      ]);
      expect(loaded.filter((url) => /node_modules\//.test(url))).toEqual([]);
    }
  }, 60_000);
});

/**
 * Runs `dms-operator run --help` with `hook` (module code, one line per string) imported first,
 * and returns what the hook wrote on exit as `REPORT <json>` on stderr.
 */
async function runHelpReport(hook: readonly string[]): Promise<unknown> {
  // `deployments list` with no service named: it loads the service client (node:http) to run,
  // then stops with a usage error before sending anything.
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("DMS_")));
  const { stderr } = await promisify(execFile)(
    process.execPath,
    [
      "--import",
      `data:text/javascript,${encodeURIComponent(hook.join(""))}`,
      join(ROOT, "bin", "dms-operator.mjs"),
      "deployments",
      "list",
    ],
    { encoding: "utf8", env },
  ).catch((error: { code?: number; stderr?: string }) => {
    expect(error.code).toBe(EXIT.failed);
    return { stderr: error.stderr ?? "" };
  });
  expect(stderr).toContain("--base-url");
  const report = stderr.split("\n").find((l) => l.startsWith("REPORT "));
  return JSON.parse(report?.slice("REPORT ".length) ?? "{}");
}

describe("bin/dms-operator.mjs running a command", () => {
  it("imports node:http without loading Node's WebSocket client (undici), which stays reachable", async () => {
    // On exit: whether the ES module namespace of node:http was made, whether undici was loaded
    // (before anything reads it), then whether http.WebSocket still answers.
    const report = await runHelpReport([
      'import{registerHooks}from"node:module";',
      'let linked=false;registerHooks({resolve(s,c,n){const r=n(s,c);if(r.url==="node:http")linked=true;return r;}});',
      'process.on("exit",()=>{const undici=process.moduleLoadList.some(m=>m.includes("deps/undici/undici"));',
      'const ws=typeof process.getBuiltinModule("node:http").WebSocket;',
      'process.stderr.write("REPORT "+JSON.stringify({linked,undici,ws})+"\\n");});',
    ]);
    expect(report).toEqual({
      linked: true,
      undici: false,
      ws: "function",
    });
  }, 30_000);
});
