// The README is the way in: short enough to read at once, and every command it gives exists as
// written. The npm scripts are package.json's, the `dms-operator` subcommands and the flags given
// to `import` are the program's, the files, directories and kustomizations it names are in the
// repository, the chart values it sets are the chart's, the table it shows has the CRD's
// columns, and the Secret it creates is the one the chart reads.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { registerImportCommand } from "../../src/commands/import-command.ts";
import { DEPLOYMENT_CRD } from "../../src/crd/render.ts";
import { runCli } from "../support/cli.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const README = readFileSync(join(ROOT, "README.md"), "utf8");
const MAX_LINES = 200;

/** The README's shell commands: its `sh` blocks, `\` continuations joined, comments dropped. */
const COMMANDS: string[][] = [...README.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap(([, block]) =>
  (block ?? "")
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((line) => line.replace(/(^|\s)#.*$/, "").trim())
    .filter(Boolean)
    .flatMap((line) => line.split(/\s*(?:&&|\||;)\s*/))
    .map((command) => command.split(/\s+/).filter(Boolean))
    .filter((words) => words.length > 0),
);

/** Commands in inline code too (`npm run demo -- --keep`, `dms-operator plan -f <file>`). */
const INLINE: string[][] = [...README.replace(/```[\s\S]*?```/g, "").matchAll(/`([^`\n]+)`/g)]
  .map(([, span]) => (span ?? "").split(/\s+/))
  .filter((words) => words[0] === "npm" || words[0] === "dms-operator");
const ALL = [...COMMANDS, ...INLINE];

const PKG = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  scripts: Record<string, string>;
};

/** The program's subcommands: those `src/cli.ts` lists and those the command files register. */
function subcommands(): Set<string> {
  const names = new Set<string>();
  const cli = readFileSync(join(ROOT, "src", "cli.ts"), "utf8");
  for (const [, name] of cli.matchAll(/\bname: "([a-z-]+)"/g)) names.add(name ?? "");
  const dir = join(ROOT, "src", "commands");
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".ts"))) {
    const source = readFileSync(join(dir, file), "utf8");
    for (const [, name] of source.matchAll(/\.command\("([a-z-]+)/g)) names.add(name ?? "");
  }
  return names;
}

describe("README.md", () => {
  it(`stays within ${MAX_LINES} lines`, () => {
    expect(README.split("\n").length).toBeLessThanOrEqual(MAX_LINES);
  });

  it("names npm scripts that package.json has", () => {
    const npm = ALL.filter((c) => c[0] === "npm");
    expect(npm.length).toBeGreaterThan(2);
    const builtins = new Set(["ci", "link", "install"]);
    const missing = npm.flatMap((c) => {
      const script = c[1] === "run" ? c[2] : c[1];
      if (c[1] !== "run" && builtins.has(script ?? "")) return [];
      return script !== undefined && script in PKG.scripts ? [] : [c.join(" ")];
    });
    expect(missing).toEqual([]);
    // The two commands, exactly as CI runs one of them.
    expect(README).toContain("npm run demo   #");
    expect(README).toContain("npm test       # lint, type-check, and every test");
  });

  it("names dms-operator subcommands the program has", () => {
    const known = subcommands();
    expect(known.has("import")).toBe(true);
    const used = ALL.filter((c) => c[0] === "dms-operator").map((c) => c[1] ?? "");
    expect(used.length).toBeGreaterThan(0);
    expect(used.filter((name) => !known.has(name))).toEqual([]);
  });

  it("gives import only flags it takes", async () => {
    const help = await runCli(["import", "--help"], { commands: [registerImportCommand] });
    expect(help.code, help.stderr).toBe(0);
    const flags = new Set(
      help.stdout
        .split("\n")
        .filter((line) => /^\s+-/.test(line))
        .flatMap((line) =>
          [...(line.split(/\s{2,}/)[1] ?? "").matchAll(/--?[a-z][a-z-]*/g)].map((m) => m[0]),
        ),
    );
    expect(flags.has("--name-contains")).toBe(true);
    const given = ALL.filter((c) => c[0] === "dms-operator" && c[1] === "import").flatMap((c) =>
      c.filter((w) => w.startsWith("-")).map((w) => w.split("=")[0] ?? ""),
    );
    expect(given.length).toBeGreaterThan(0);
    expect(given.filter((flag) => !flags.has(flag))).toEqual([]);
  });

  it("names files and directories that exist, and kustomizations that are ones", () => {
    const prose = README.replace(/```[\s\S]*?```/g, "");
    const named = [
      ...[...prose.matchAll(/`((?:manifests|charts|docs|src|test|scripts)\/[^`\s]*)`/g)].map(
        (m) => m[1] ?? "",
      ),
      ...[...prose.matchAll(/`(Dockerfile|[A-Z]+\.md)`/g)].map((m) => m[1] ?? ""),
    ];
    expect(named.length).toBeGreaterThan(0);
    expect(named.filter((path) => !existsSync(join(ROOT, path)))).toEqual([]);
    for (const c of COMMANDS.filter((c) => c[0] === "kubectl" && c.includes("-k")))
      expect(existsSync(join(ROOT, c[c.indexOf("-k") + 1] ?? "", "kustomization.yaml")), c.join(" ")).toBe(
        true,
      );
    // `docker build .` builds the Dockerfile of the clone.
    const build = COMMANDS.find((c) => c[0] === "docker" && c[1] === "build");
    expect(build?.at(-1)).toBe(".");
    expect(existsSync(join(ROOT, "Dockerfile"))).toBe(true);
  });

  it("installs the chart with values the chart has, and the image it built", () => {
    const values = parse(readFileSync(join(ROOT, "charts", "dms-operator", "values.yaml"), "utf8"));
    const installs = COMMANDS.filter((c) => c[0] === "helm" && c[1] === "install");
    expect(installs.length).toBe(3); // from a release, from source, on kind with the simulator
    const sets = installs.flatMap((c) => c.flatMap((w, i) => (c[i - 1] === "--set" ? [w] : [])));
    for (const set of sets) {
      const [key = "", value] = set.split("=");
      const leaf = key
        .split(".")
        .reduce<unknown>((node, part) => (node as Record<string, unknown>)?.[part], values);
      expect(leaf, `${key} is no value of the chart`).not.toBeUndefined();
      expect(value, key).toBeDefined();
    }
    const image = Object.fromEntries(sets.map((s) => s.split("=") as [string, string]));
    const built = COMMANDS.find((c) => c[0] === "docker" && c[1] === "build");
    const tag = built?.[built.indexOf("-t") + 1];
    expect(`${image["image.repository"]}:${image["image.tag"]}`).toBe(tag);
    const loaded = COMMANDS.find((c) => c[0] === "kind" && c[1] === "load" && c[2] === "docker-image");
    expect(loaded?.[3]).toBe(tag);
  });

  it("creates the credentials Secret the chart reads, with its keys, where it is installed", () => {
    const values = parse(readFileSync(join(ROOT, "charts", "dms-operator", "values.yaml"), "utf8"));
    const create = COMMANDS.find((c) => c.includes("secret") && c.includes("create"));
    const cmd = create ?? [];
    expect(cmd[cmd.indexOf("generic") + 1]).toBe(values.credentials.name);
    const keys = cmd.filter((a) => a.startsWith("--from-literal=")).map((a) => a.slice(15).split("=")[0]);
    expect(keys).toEqual(expect.arrayContaining(["base-url", "api-key"]));
    const namespace = cmd[cmd.indexOf("-n") + 1];
    for (const install of COMMANDS.filter((c) => c[0] === "helm" && c[1] === "install"))
      expect(install[install.indexOf("-n") + 1], install.join(" ")).toBe(namespace);
  });

  it("says early that our Deployment is dmsd, not apps/v1's", () => {
    const early = README.split("\n").slice(0, 20).join(" ").replace(/\s+/g, " ");
    expect(early).toContain("`kubectl get deployment <name>` means the built-in `apps/v1` Deployment");
    expect(early).toContain("`dmsd`");
    expect(early).toContain("`deployments.dms.dev`");
  });

  it("shows the columns kubectl get dmsd prints, by default and under -o wide", () => {
    const columns = DEPLOYMENT_CRD.printerColumns.map((c) => ({
      name: String(c.name).toUpperCase(),
      wide: c.priority === 1,
    }));
    const block = /```text\n\$ kubectl get dmsd\n([\s\S]*?)```/.exec(README)?.[1] ?? "";
    const [header = "", ...rest] = block.split("\n");
    expect(header.split(/\s+/)).toEqual(["NAME", ...columns.filter((c) => !c.wide).map((c) => c.name)]);
    const wide = rest.find((line) => line.startsWith("$ kubectl get dmsd -o wide")) ?? "";
    for (const c of columns.filter((c) => c.wide)) expect(wide).toContain(c.name);
  });
});
