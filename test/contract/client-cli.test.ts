/**
 * The CLI as a user runs it: `node src/cli.ts ...` in a child process against a simulator on
 * loopback, checking what lands on stdout and stderr and the exit status.
 */
import { execFile, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import type { SimulatorSeed } from "../../src/simulator/seed.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { nodeCacheEnv } from "../support/node-env.ts";
import { send, startFakeService } from "./client-fake-service.ts";
import { BASE_SEED, INTEGRATION } from "./seed-fixtures.ts";

const CLI = new URL("../../src/cli.ts", import.meta.url).pathname;
const KEY = "cli-test-key-5b1e";

const SEED: SimulatorSeed = {
  ...BASE_SEED,
  deployments: [
    {
      name: "support-agent",
      source: "github",
      status: "READY",
      secrets: [{ name: "OPENAI_API_KEY", value: "sk-never-print-me" }],
    },
    { name: "billing-agent", source: "external_docker", status: "UNUSED", image_version: "0.4.2" },
  ],
};

let sim: RunningSimulator;
let dir: string;

beforeAll(async () => {
  sim = await startSimulator({ apiKey: KEY, seed: SEED, secretsInResponses: "values" });
  dir = await mkdtemp(join(tmpdir(), "dms-cli-"));
});
afterAll(async () => {
  await sim.close();
  await rm(dir, { recursive: true, force: true });
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** A table's lines as their cells (alignment left out). */
const cells = (table: string) =>
  table
    .trimEnd()
    .split("\n")
    .map((line) => line.split(/\s{2,}/));

async function cli(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const baseEnv = {
    PATH: process.env.PATH ?? "",
    ...nodeCacheEnv(),
    DMS_BASE_URL: sim.url,
    DMS_API_KEY: KEY,
  };
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [CLI, ...args], {
      env: { ...baseEnv, ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const names = (rows: { name: string }[]) => rows.map((r) => r.name).sort();

describe("deployments list", () => {
  it("prints JSON, hiding secret values unless asked", async () => {
    const run = await cli(["deployments", "list", "--output", "json"]);
    expect(run).toMatchObject({ code: 0, stderr: "" });
    const rows = JSON.parse(run.stdout) as { name: string; secrets: { value?: string }[] }[];
    expect(names(rows)).toEqual(["billing-agent", "support-agent"]);
    expect(run.stdout).not.toContain("sk-never-print-me");
    expect(rows.find((r) => r.name === "support-agent")?.secrets[0]?.value).toBe("(hidden)");

    const revealed = await cli(["deployments", "list", "-o", "json", "--show-secret-values"]);
    expect(revealed.stdout).toContain("sk-never-print-me");
  });

  it("shows a status the spec does not list as is, and skips an unreadable deployment with a warning, exit 0", async () => {
    const billing = sim.store.getByName("billing-agent");
    const ghost = sim.store.create({ name: "ghost-agent", source: "external_docker" });
    if (!billing) throw new Error("seeded deployment missing");
    sim.store.drift(billing.id, { status: "AWAITING_FINAL_DELETE" });
    sim.store.drift(ghost.id, { quirks: { omit: ["id"] } });
    try {
      const run = await cli(["deployments", "list", "--output", "table"]);
      expect(run.code).toBe(0);
      expect(run.stdout.split("\n").find((l) => l.startsWith("billing-agent"))).toMatch(
        /external_docker\s+AWAITING_FINAL_DELETE/,
      );
      expect(run.stdout).not.toContain("ghost-agent");
      expect(run.stderr).toBe(
        `warning: skipped: the service's deployment "ghost-agent" cannot be read: id: required field is missing\n`,
      );
      const filtered = await cli(["deployments", "list", "-o", "json", "--status", "AWAITING_FINAL_DELETE"]);
      expect(names(JSON.parse(filtered.stdout))).toEqual(["billing-agent"]);
    } finally {
      sim.store.drift(billing.id, { status: "UNUSED" });
      sim.store.delete(ghost.id);
    }
  });

  it("a hostile service: skipped items named with their controls as escapes, the first ten, the rest counted", async () => {
    // Unreadable items (most fields missing) whose names would retitle and clear the terminal, and a 4xx's
    // detail that would: written as escapes on stderr, the warnings bounded.
    const hostile = (i: number) => ({ name: `ghost-${i}\u001b]0;PWNED\u0007\u001b[2J`, source: "github" });
    const fake = await startFakeService((req, res) => {
      if (req.path !== "/v2/deployments") return send(res, 404, { detail: "gone\u001b]0;PWNED\u0007" });
      const first = req.query.get("offset") === "0";
      send(res, 200, { resources: first ? Array.from({ length: 25 }, (_, i) => hostile(i)) : [] });
    });
    try {
      const run = await cli(["deployments", "list"], { DMS_BASE_URL: fake.url });
      expect(run.code).toBe(0);
      expect(run.stdout).toBe("");
      const lines = run.stderr.trimEnd().split("\n");
      expect(lines).toHaveLength(12);
      expect(lines[11]).toBe("No deployments.");
      expect(lines[0]).toBe(
        'warning: skipped: the service\'s deployment "ghost-0\\x1b]0;PWNED\\x07\\x1b[2J" cannot be read: source_config: required field is missing',
      );
      expect(lines[10]).toBe("warning: skipped 15 more deployments that could not be read");
      expect(run.stderr).not.toContain("\u001b");
      const failed = await cli(["repos", "list", "--integration", INTEGRATION], { DMS_BASE_URL: fake.url });
      expect(failed.code).toBe(1);
      expect(failed.stderr).toContain("404 not_found: gone\\x1b]0;PWNED\\x07");
      expect(failed.stderr).not.toContain("\u001b");
    } finally {
      await fake.close();
    }
  });

  it("prints YAML", async () => {
    const run = await cli(["deployments", "list", "--output", "yaml"]);
    expect(run.code).toBe(0);
    expect(names(parseYaml(run.stdout) as { name: string }[])).toEqual(["billing-agent", "support-agent"]);
  });

  it("prints a table with a header and one line per deployment", async () => {
    const run = await cli(["deployments", "list", "--output", "table"]);
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^NAME\s+ID\s+SOURCE\s+STATUS\s+IMAGE VERSION\s+ACTIVE REVISION\s+AGE$/);
    expect(lines).toHaveLength(3);
    // Short ids (8 characters) and an age, as kubectl shows them.
    expect(lines.find((l) => l.startsWith("billing-agent"))).toMatch(
      /^billing-agent\s+[0-9a-f]{8}\s+external_docker\s+UNUSED\s+0\.4\.2\s+\S+\s+\d+(s|m|h|d|y)\S*$/,
    );
    // Piped, without FORCE_COLOR: no escape codes.
    expect(run.stdout).not.toContain("\u001b[");
  });

  it("-o wide: whole ids and times, and the columns a table leaves out", async () => {
    const run = await cli(["deployments", "list", "-o", "wide"]);
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/\sLATEST REVISION\s+CREATED\s+UPDATED$/);
    expect(lines.find((l) => l.startsWith("billing-agent"))).toMatch(
      /\s[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\s.*\d{4}-\d\d-\d\dT\S+$/,
    );
  });

  it("-o name: the bare name per line (not a Kubernetes object); --no-headers: the table without its header", async () => {
    const names = await cli(["deployments", "list", "-o", "name"]);
    expect(names.stdout.endsWith("\n")).toBe(true);
    expect(names.stdout.trimEnd().split("\n").sort()).toEqual(["billing-agent", "support-agent"]);
    // Piped (as here), --no-headers is honoured: a table to read with awk, not JSON.
    const bare = await cli(["deployments", "list", "--no-headers"]);
    const full = await cli(["deployments", "list", "-o", "table"]);
    // The same cells (but the age, which moves on); widths are measured without the header, as kubectl does.
    const noAge = (rows: string[][]) => rows.map((row) => row.slice(0, -1));
    expect(noAge(cells(bare.stdout))).toEqual(noAge(cells(full.stdout).slice(1)));
  });

  it("colours the status under FORCE_COLOR and never under NO_COLOR", async () => {
    const forced = await cli(["deployments", "list", "-o", "table"], { FORCE_COLOR: "1" });
    expect(forced.stdout).toContain("\u001b[32mREADY\u001b[39m");
    const off = await cli(["deployments", "list", "-o", "table"], { NO_COLOR: "1" });
    expect(off.stdout).not.toContain("\u001b[");
  });

  it("prints a table by default when stdout is not a terminal, as kubectl does", async () => {
    const run = await cli(["deployments", "list"]);
    const [head, ...rows] = cells(run.stdout);
    expect(head?.[0]).toBe("NAME");
    expect(rows.map((row) => row[0]).sort()).toEqual(["billing-agent", "support-agent"]);
    expect(run.stdout).not.toContain("\u001b[");
  });

  it("passes filters through", async () => {
    const run = await cli(["deployments", "list", "-o", "json", "--status", "UNUSED", "--limit", "1"]);
    expect(names(JSON.parse(run.stdout))).toEqual(["billing-agent"]);
    const none = await cli(["deployments", "list", "-o", "table", "--name-contains", "nothing-like-this"]);
    expect(none.stdout).toBe("");
    expect(none.stderr).toBe("No deployments.\n");
  });

  it("reads the key from a file", async () => {
    const keyFile = join(dir, "key");
    await writeFile(keyFile, `${KEY}\n`);
    const run = await cli(["deployments", "list", "-o", "json", "--api-key-file", keyFile], {
      DMS_API_KEY: "",
    });
    expect(run.code).toBe(0);
  });
});

describe("providers and repos", () => {
  it("lists providers with defaults filled in", async () => {
    const run = await cli(["providers", "list", "-o", "json"]);
    expect(JSON.parse(run.stdout)).toMatchObject([{ provider_id: "github", is_dynamic_client: false }]);
  });

  it("lists the repositories of an integration", async () => {
    const run = await cli(["repos", "list", "--integration", INTEGRATION, "-o", "table"]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/acme\/support-agent\s+main\s+https:\/\/github\.com\/acme\/support-agent/);
  });
});

describe("errors", () => {
  const oneLine = (run: Run) => {
    expect(run.stdout).toBe("");
    expect(run.stderr.trimEnd().split("\n")).toHaveLength(1);
    return run.stderr.trim();
  };

  it("an unknown flag: one line, exit 1", async () => {
    const run = await cli(["deployments", "list", "--colour", "red"]);
    expect(run.code).toBe(1);
    expect(oneLine(run)).toBe("error: unknown option '--colour'");
  });

  it("a bad flag value: one line naming it, exit 1", async () => {
    const run = await cli(["deployments", "list", "--deployment-ids", "abc"]);
    expect(run.code).toBe(1);
    expect(oneLine(run)).toMatch(/^error: option '--deployment-ids <ids>' argument 'abc' is invalid/);
  });

  it("missing configuration: one line naming the flag and variable, exit 1", async () => {
    const run = await cli(["providers", "list"], { DMS_BASE_URL: "" });
    expect(run.code).toBe(1);
    expect(oneLine(run)).toBe("error: --base-url / DMS_BASE_URL: required, e.g. https://api.example.com");
  });

  it("a refusal by the service: one line and a hint naming the key's flag and variable, no stack, exit 1; the stack only with --verbose", async () => {
    const run = await cli(["deployments", "list"], { DMS_API_KEY: "wrong-key" });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    const [error, hint, ...rest] = run.stderr.trimEnd().split("\n");
    expect(error).toMatch(/^error: GET \/v2\/deployments: 401 unauthorized: /);
    expect(hint).toMatch(
      /^hint: the service did not accept the API key: check --api-key-file \/ DMS_API_KEY_FILE or --api-key \/ DMS_API_KEY/,
    );
    expect(rest).toEqual([]);

    const verbose = await cli(["deployments", "list", "--verbose"], { DMS_API_KEY: "wrong-key" });
    expect(verbose.code).toBe(1);
    expect(verbose.stderr).toMatch(/\n\s+at /);
    expect(verbose.stderr).not.toContain("wrong-key");
  });
});

describe("simulator", () => {
  it("serves a seed file until told to stop", async () => {
    const seedFile = join(dir, "seed.json");
    await writeFile(seedFile, JSON.stringify(SEED));
    const child = spawn(process.execPath, [CLI, "simulator", "--port", "0", "--seed", seedFile], {
      env: { PATH: process.env.PATH ?? "", ...nodeCacheEnv() },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = "";
        child.stdout.on("data", (chunk: Buffer) => {
          out += chunk.toString();
          const match = /listening on (http:\/\/\S+)/.exec(out);
          if (match?.[1]) resolve(match[1]);
        });
        child.on("exit", () => reject(new Error(`simulator exited early: ${out}`)));
      });
      const run = await cli(["deployments", "list", "-o", "json"], { DMS_BASE_URL: url, DMS_API_KEY: "" });
      expect(names(JSON.parse(run.stdout))).toEqual(["billing-agent", "support-agent"]);
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
  });
});
