// The static word lists the CLI answers from without loading a command: the completion table of
// `kubectl dms` (completion-plugin.ts), written out from the commands themselves, and the copies of
// the service's and the CRDs' words (words.ts) that flags and help are written with.

import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOG_TYPES } from "../../src/api/revision-logs.ts";
import { completionNodes, completionTableSource } from "../../src/commands/completion.ts";
import { bashScript, fishScript, zshScript } from "../../src/commands/completion-scripts.ts";
import { PLUGIN_COMPLETION } from "../../src/commands/completion-table.ts";
import { createProgram, loadCommands } from "../../src/commands/program.ts";
import { KUBECTL_PLUGIN_NAME } from "../../src/commands/program-name.ts";
import { COMMANDS } from "../../src/commands/registry.ts";
import { RUN_SETTINGS } from "../../src/commands/settings.ts";
import * as words from "../../src/commands/words.ts";
import { DEFAULT_MAX_CONNECTIONS_PER_NAMESPACE } from "../../src/connection/namespace-bound.ts";
import {
  ANNOTATION_PAUSED,
  ANNOTATION_REBUILD_REQUESTED_AT,
  ANNOTATION_RECONCILE_REQUESTED_AT,
  ANNOTATION_ROLLOUT_NOW,
} from "../../src/crd/schema.ts";
import { LOG_FORMATS } from "../../src/runtime/log.ts";
import { flagOf } from "../../src/setting.ts";
import { silentContext } from "../support/cli.ts";

const ctx = silentContext();

describe("the completion table", () => {
  it("is the plugin's command tree as the loaded commands give it (UPDATE_COMPLETION_TABLE=1 rewrites it)", async () => {
    const registers = await loadCommands(COMMANDS.filter((c) => !c.operatorOnly));
    const nodes = completionNodes(createProgram(ctx, registers, KUBECTL_PLUGIN_NAME));
    if (process.env.UPDATE_COMPLETION_TABLE === "1")
      writeFileSync(
        join(import.meta.dirname, "..", "..", "src", "commands", "completion-table.ts"),
        completionTableSource(nodes),
      );
    expect(JSON.parse(JSON.stringify(PLUGIN_COMPLETION))).toEqual(JSON.parse(JSON.stringify(nodes)));
    // The code around the data (the formatter spreads the data over lines) is the generator's.
    const written = readFileSync(
      join(import.meta.dirname, "..", "..", "src", "commands", "completion-table.ts"),
      "utf8",
    );
    const generated = completionTableSource(nodes);
    const head = (text: string) => text.slice(0, text.indexOf("const FLAGS"));
    const tail = (text: string) => text.slice(text.indexOf("export const PLUGIN_COMPLETION"));
    expect(head(written)).toBe(head(generated));
    expect(tail(written)).toBe(tail(generated));
  });

  it("offers a value of -o, --status and --type with a description for every one", () => {
    const values = PLUGIN_COMPLETION.flatMap((n) => n.flags.flatMap((f) => f.values ?? []));
    expect(values).toEqual(expect.arrayContaining(["wide", "READY", "build"]));
    for (const value of values) expect(words.VALUE_DESCRIPTIONS[value], value).toBeTruthy();
  });
});

describe("the copied words", () => {
  it("equal the constants they copy", () => {
    expect(words.LOG_TYPES).toEqual(LOG_TYPES);
    expect(words.LOG_FORMATS).toEqual(LOG_FORMATS);
    expect(words.DEFAULT_MAX_CONNECTIONS_PER_NAMESPACE).toBe(DEFAULT_MAX_CONNECTIONS_PER_NAMESPACE);
    expect(words.ANNOTATION_PAUSED).toBe(ANNOTATION_PAUSED);
    expect(words.ANNOTATION_RECONCILE_REQUESTED_AT).toBe(ANNOTATION_RECONCILE_REQUESTED_AT);
    expect(words.ANNOTATION_ROLLOUT_NOW).toBe(ANNOTATION_ROLLOUT_NOW);
    expect(words.ANNOTATION_REBUILD_REQUESTED_AT).toBe(ANNOTATION_REBUILD_REQUESTED_AT);
    const secretBytes = RUN_SETTINGS.maxSecretBytes;
    expect(words.PLAN_MAX_SECRET_BYTES).toEqual({
      flag: flagOf("maxSecretBytes"),
      arg: secretBytes.arg,
      default: secretBytes.default,
      env: secretBytes.env,
    });
  });
});

/** Whether `shell` is installed here (`command -v`). */
const installed = (shell: string) => spawnSync("sh", ["-c", `command -v ${shell}`]).status === 0;

describe("the completion scripts, run by their shells", () => {
  let dir: string;
  let env: Record<string, string>;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "dms-completion-"));
    // A kubectl that says what it was asked and answers as kubectl does for two resources, alpha
    // (Ready=True) and beta (no Ready condition yet): names for `-o name`, lines for the jsonpath.
    const kubectl = join(dir, "kubectl");
    writeFileSync(
      kubectl,
      `#!/bin/sh
echo "$*" >> "${join(dir, "asked")}"
case "$*" in
  *"-o name"*) printf 'deployment.dms.dev/alpha\\ndeployment.dms.dev/beta\\n' ;;
  *jsonpath=*) printf 'alpha\\tTrue\\nbeta\\t\\n' ;;
esac
`,
    );
    chmodSync(kubectl, 0o755);
    env = {
      PATH: `${dir}${delimiter}/usr/bin${delimiter}/bin`,
      HOME: dir,
      XDG_CONFIG_HOME: dir,
      LANG: "C.UTF-8",
    };
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const run = (shell: string, script: string, body: string, cwd?: string) => {
    const file = join(dir, `script.${shell}`);
    writeFileSync(file, script);
    const result = spawnSync(shell, ["-c", body.replace("SCRIPT", file)], { env, encoding: "utf8", cwd });
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
    return result.stdout;
  };
  const asked = () => readFileSync(join(dir, "asked"), "utf8");

  it("bash: a name is offered as it is, never expanded, and only when it starts with the word typed", () => {
    // A kubectl (or an API server behind it) answering a name that holds a command substitution.
    const hostile = mkdtempSync(join(tmpdir(), "dms-completion-hostile-"));
    const kubectl = join(hostile, "kubectl");
    const pwned = join(hostile, "PWNED");
    writeFileSync(
      kubectl,
      `#!/bin/sh\nprintf '%s\\n' 'deployment.dms.dev/a$(touch\${IFS}${pwned})' deployment.dms.dev/alpha deployment.dms.dev/beta\n`,
    );
    chmodSync(kubectl, 0o755);
    const script = join(hostile, "script.bash");
    writeFileSync(script, bashScript("kubectl-dms", PLUGIN_COMPLETION));
    const result = spawnSync(
      "bash",
      [
        "-c",
        [
          `source ${script}`,
          // biome-ignore lint/suspicious/noTemplateCurlyInString: a bash expansion, not a template
          'complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _kubectl_dms; printf "%s\\n" "${COMPREPLY[@]}"; }',
          "complete_words kubectl-dms suspend a",
          "complete_words kubectl-dms suspend b",
        ].join("\n"),
      ],
      { env: { ...env, PATH: `${hostile}${delimiter}/usr/bin${delimiter}/bin` }, encoding: "utf8" },
    );
    try {
      expect(result.stderr).toBe("");
      expect(result.stdout.split("\n")).toEqual([`a$(touch\${IFS}${pwned})`, "alpha", "beta", ""]);
      expect(existsSync(pwned)).toBe(false);
    } finally {
      rmSync(hostile, { recursive: true, force: true });
    }
  });

  it("bash: every argument of a verb taking several names is completed with the names, not only the first", () => {
    expect(installed("bash")).toBe(true);
    const out = run(
      "bash",
      bashScript("kubectl-dms", PLUGIN_COMPLETION),
      [
        "source SCRIPT",
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a bash expansion, not a template
        'complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _kubectl_dms; echo "${COMPREPLY[*]}"; }',
        "complete_words kubectl-dms suspend -n team-a ''",
        "complete_words kubectl-dms suspend -n team-a alpha ''",
        "complete_words kubectl-dms suspend alpha --",
        "complete_words kubectl-dms logs alpha ''",
      ].join("\n"),
    );
    // logs takes one name: past it, nothing but its flags.
    const [first, second, flags, logs] = out.split("\n");
    expect([first, second]).toEqual(["alpha beta", "alpha beta"]);
    expect(flags).toMatch(/^--all --selector /);
    expect(logs).toMatch(/^--type /);
    expect(asked()).toContain("get deployments.dms.dev -o name -n team-a");
  });

  it("bash: -f is logs' --follow, which takes no value: the name after it is completed, and then only flags", () => {
    const out = run(
      "bash",
      bashScript("kubectl-dms", PLUGIN_COMPLETION),
      [
        "source SCRIPT",
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a bash expansion, not a template
        'complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _kubectl_dms; echo "${COMPREPLY[*]}"; }',
        "complete_words kubectl-dms logs -f ''",
        "complete_words kubectl-dms logs -f alpha ''",
        "complete_words kubectl-dms plan -f ''",
      ].join("\n"),
      dir,
    );
    const [names, past, files] = out.split("\n");
    expect(names).toBe("alpha beta");
    expect(past).toMatch(/^--type /);
    // plan's -f is --filename: the files of the directory.
    expect(files?.split(" ")).toContain("kubectl");
  });

  it("bash: the names are asked with --namespace=, --context= and --kubeconfig= as typed, whether bash split the word at = or not", () => {
    run(
      "bash",
      bashScript("kubectl-dms", PLUGIN_COMPLETION),
      [
        "source SCRIPT",
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a bash expansion, not a template
        'complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _kubectl_dms; echo "${COMPREPLY[*]}"; }',
        // bash's default COMP_WORDBREAKS holds =: `--namespace=team-d` is three words.
        "complete_words kubectl-dms suspend --namespace = team-d --context = kind-d alpha ''",
        "complete_words kubectl-dms logs --namespace=team-e --kubeconfig=/k/e ''",
      ].join("\n"),
    );
    expect(asked()).toContain("get deployments.dms.dev -o name --namespace team-d --context kind-d\n");
    expect(asked()).toContain("get deployments.dms.dev -o name --namespace=team-e --kubeconfig=/k/e\n");
  });

  // zsh's completion functions need its line editor; the script's calls of them are what is checked.
  const zshHarness = (words: string[]) =>
    [
      "compdef() { print -r -- compdef $@; }",
      "_files() { print -r -- FILES; }",
      // _describe -t <tag> <description> <array>: each entry value:description, a line each.
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a zsh expansion, not a template
      '_describe() { print -rl -- "${(@P)4}"; }',
      "source SCRIPT",
      `words=(${words.map((w) => `'${w}'`).join(" ")}); CURRENT=${words.length}`,
      "_kubectl_dms",
    ].join("\n");

  it.each([
    {
      words: ["kubectl-dms", "status", "-o", ""],
      lines: [
        "table:a table, kubectl-style",
        "wide:a table with more columns, ids and times whole",
        "name:one name per line",
        "json:the data as JSON",
        "yaml:the data as YAML",
      ],
    },
    {
      words: ["kubectl-dms", "deployments", "list", "--status", "R"],
      lines: expect.arrayContaining(["READY:running", "UNUSED:created, never deployed"]),
    },
    {
      words: ["kubectl-dms", "logs", "web", "--type", ""],
      lines: ["build:the build log", "deploy:the deploy log"],
    },
    {
      words: ["kubectl-dms", "suspend", "-n", "team-a", ""],
      lines: ["alpha:Ready=True", "beta:not reconciled yet"],
    },
    // Several names: one typed already is not offered again.
    {
      words: ["kubectl-dms", "reconcile", "--context=kind", "alpha", ""],
      lines: ["beta:not reconciled yet"],
    },
    {
      words: ["kubectl-dms", "status", "--no"],
      lines: ["--no-headers:print tables without their header line"],
    },
    { words: ["kubectl-dms", "plan", "-f", ""], lines: ["FILES"] },
    // logs' -f is --follow: no value, the name still to come.
    { words: ["kubectl-dms", "logs", "-f", ""], lines: ["alpha:Ready=True", "beta:not reconciled yet"] },
    { words: ["kubectl-dms", "deployments", ""], lines: ["list"] },
  ])("zsh: native completion with descriptions for $words", ({ words: typed, lines }) => {
    expect(installed("zsh")).toBe(true);
    const out = run("zsh", zshScript("kubectl-dms", PLUGIN_COMPLETION), zshHarness(typed));
    const offered = out.split("\n").filter((l) => l !== "" && !l.startsWith("compdef "));
    // The stand-in _describe does not filter by the word typed, as zsh's does.
    if (typed.at(-1)?.startsWith("-")) expect(offered).toEqual(expect.arrayContaining(lines as string[]));
    else expect(offered).toEqual(lines);
    expect(out).toContain("compdef _kubectl_dms kubectl-dms\n");
  });

  it("zsh: the names are asked with the namespace, kubeconfig and context typed; the script is zsh's own", () => {
    run(
      "zsh",
      zshScript("kubectl-dms", PLUGIN_COMPLETION),
      zshHarness(["kubectl-dms", "resume", "-n", "team-b", ""]),
    );
    expect(asked()).toMatch(/get deployments\.dms\.dev -n team-b -o jsonpath=\{range/);
    expect(zshScript("dms-operator", PLUGIN_COMPLETION)).not.toContain("bashcompinit");
  });

  it("fish: each value and name with its own description, from fish's own completion", () => {
    expect(installed("fish")).toBe(true);
    const script = fishScript("kubectl-dms", PLUGIN_COMPLETION);
    const complete = (line: string) =>
      run("fish", script, `source SCRIPT; complete -C ${JSON.stringify(line)}`)
        .split("\n")
        .filter(Boolean);
    expect(complete("kubectl-dms status -o ")).toEqual([
      "json\tthe data as JSON",
      "name\tone name per line",
      "table\ta table, kubectl-style",
      "wide\ta table with more columns, ids and times whole",
      "yaml\tthe data as YAML",
    ]);
    expect(complete("kubectl-dms logs web --type ")).toEqual([
      "build\tthe build log",
      "deploy\tthe deploy log",
    ]);
    expect(complete("kubectl-dms suspend -n team-c ")).toEqual([
      "alpha\tReady=True",
      "beta\tnot reconciled yet",
    ]);
    expect(complete("kubectl-dms suspend -n team-c alpha ")).toEqual(["beta\tnot reconciled yet"]);
    complete("kubectl-dms suspend --namespace=team-f --context=kind-f ");
    expect(asked()).toMatch(/get deployments\.dms\.dev --namespace=team-f --context=kind-f -o jsonpath=/);
    // logs takes one name, after its --follow as without it: past the name, nothing but flags.
    expect(complete("kubectl-dms logs -f alpha ")).toEqual([]);
    expect(asked()).toMatch(/get deployments\.dms\.dev -n team-c -o jsonpath=/);
  });
});
