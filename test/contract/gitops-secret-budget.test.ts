/**
 * `plan --kubeconfig` reads secret values as the operator does, within the operator's limit
 * (`--max-secret-bytes`, 1 MiB by default): a resource over it is an error with the operator's
 * SecretsTooLarge message, each referenced Secret is read once, and the other resources are still
 * planned. The cluster is a fake API server on loopback; the service, the simulator.
 */
import { rm } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { type FakeKube, secretObject, secretPath, startFakeKube } from "./fake-kube.ts";
import { cli, KEY, manifestDir, resourceYaml, SEED } from "./gitops-fixture.ts";

const NS = "team-a";
const agent = (secrets: object[]) => ({
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: "agent:1" },
  secrets,
});
const fromSecret = (count: number, secret: string, key: string) =>
  Array.from({ length: count }, (_, i) => ({
    name: `S_${i}`,
    valueFrom: { secretKeyRef: { name: secret, key } },
  }));

let sim: RunningSimulator;
let kube: FakeKube;
const dirs: string[] = [];

beforeAll(async () => {
  sim = await startSimulator({ apiKey: KEY, seed: SEED });
  kube = await startFakeKube({ namespace: NS });
  kube.put(secretPath(NS, "big"), secretObject(NS, "big", { blob: "x".repeat(700_000) }));
  kube.put(secretPath(NS, "medium"), secretObject(NS, "medium", { blob: "m".repeat(400_000) }));
});
afterAll(async () => {
  await sim.close();
  await kube.close();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

interface JsonPlan {
  resources: Array<{ name: string; action: string; error?: string }>;
}

async function plan(files: Record<string, string>, args: string[] = [], env: Record<string, string> = {}) {
  const dir = await manifestDir(files);
  dirs.push(dir);
  const run = await cli(
    sim.url,
    ["plan", "-o", "json", "-f", dir, "--kubeconfig", kube.kubeconfig, ...args],
    env,
  );
  const found =
    run.stdout === ""
      ? {}
      : Object.fromEntries((JSON.parse(run.stdout) as JsonPlan).resources.map((r) => [r.name, r]));
  return { run, found };
}

const secretGets = (name: string) => kube.requests.filter((r) => r === `GET ${secretPath(NS, name)}`).length;

describe("plan: the secret budget", () => {
  it("200 entries of one 700 KB Secret: an error with the operator's message, the Secret read once", async () => {
    const before = secretGets("big");
    const { run, found } = await plan({
      "a-huge.yaml": resourceYaml("huge", agent(fromSecret(200, "big", "blob"))),
      "b-small.yaml": resourceYaml("small", agent([{ name: "TOKEN", value: "t0k3n" }])),
    });
    expect(found.huge?.action).toBe("error");
    expect(found.huge?.error).toMatch(
      /^the secret values of spec\.secrets come to 140,000,000 bytes, more than the limit of 1,048,576 \(--max-secret-bytes\): /,
    );
    expect(found.small?.action).toBe("create");
    expect(secretGets("big") - before).toBe(1);
    expect(run.stdout).not.toContain("xxxx");
    expect(run.code).toBe(1);
  });

  it("takes the operator's limit from --max-secret-bytes or DMS_MAX_SECRET_BYTES", async () => {
    // 3 × 400,000 bytes: over the default, under 2 MiB.
    const files = { "a.yaml": resourceYaml("medium", agent(fromSecret(3, "medium", "blob"))) };
    expect((await plan(files)).found.medium?.error).toContain("come to 1,200,000 bytes");
    expect((await plan(files, ["--max-secret-bytes", "2097152"])).found.medium?.action).toBe("create");
    expect((await plan(files, [], { DMS_MAX_SECRET_BYTES: "2097152" })).found.medium?.action).toBe("create");
  });

  it("refuses a limit it cannot read, naming the flag and its variable", async () => {
    const { run } = await plan({ "a.yaml": resourceYaml("a", agent([])) }, ["--max-secret-bytes", "1MiB"]);
    expect(run.stderr).toContain(
      '--max-secret-bytes / DMS_MAX_SECRET_BYTES: must be an integer from 1024 to 16777216 (bytes), got "1MiB"',
    );
    expect(run.code).toBe(1);
  });
});
