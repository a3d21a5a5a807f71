// Output piped into a reader that stops early (`dms-operator … | head -1`): the process ends at
// once, with no stack trace, as kubectl does (killed by SIGPIPE: the shell's status 141). The
// reader is gone before the command writes anything: `plan -f -` writes its report only once its
// standard input has ended, which the test ends only after closing the reading end.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CLOSED_PIPE } from "../../src/commands/process-context.ts";

const BIN = join(import.meta.dirname, "..", "..", "bin", "dms-operator.mjs");

const MANIFEST = `apiVersion: dms.dev/v1alpha1
kind: Deployment
metadata: {name: web, namespace: team-a}
spec:
  source: internal_docker
  sourceRevisionConfig: {imageUri: registry.example.com/agent:1}
`;

/** Runs the CLI with `stdin`, its standard output read by nobody; what it said on stderr. */
async function withReaderGone(args: string[], stdin: string) {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ["pipe", "pipe", "pipe"] });
  let said = "";
  child.stderr.on("data", (chunk: Buffer) => {
    said += chunk.toString();
  });
  child.stdout.destroy();
  await once(child.stdout, "close");
  child.stdin.end(stdin);
  const [code, signal] = (await once(child, "exit")) as [number | null, NodeJS.Signals | null];
  return { code, signal, said };
}

describe("output piped into a reader that has gone", () => {
  it("ends the command at once with the status of SIGPIPE, and no stack trace on stderr", async () => {
    const run = await withReaderGone(["plan", "--offline", "-f", "-"], MANIFEST);
    expect(run).toEqual({ code: EXIT_CLOSED_PIPE, signal: null, said: "" });
  }, 30_000);
});
