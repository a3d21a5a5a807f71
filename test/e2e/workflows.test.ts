// The GitHub Actions workflows pass actionlint (built from Go modules like the control plane, and
// cached), so a typo in an expression, an unknown input or a job dependency that does not exist
// is found here rather than on the first tag pushed.
import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { ACTIONLINT, ensureGoTool } from "../controlplane/binaries.ts";

const WORKFLOWS = join(import.meta.dirname, "..", "..", ".github", "workflows");

async function actionlint(bin: string, files: string[]) {
  try {
    const { stdout } = await promisify(execFile)(bin, ["-no-color", "-oneline", ...files], {
      encoding: "utf8",
    });
    return { code: 0, stdout };
  } catch (error) {
    const e = error as { code: number; stdout: string };
    return { code: e.code, stdout: e.stdout };
  }
}

describe(".github/workflows", () => {
  let bin: string;
  beforeAll(async () => {
    bin = await ensureGoTool(ACTIONLINT);
  }, 600_000);

  it("has the CI and release workflows, and actionlint finds no problem in them", async () => {
    const files = readdirSync(WORKFLOWS).filter((f) => /\.ya?ml$/.test(f));
    expect(files.sort()).toEqual(["ci.yml", "release.yml"]);
    const result = await actionlint(
      bin,
      files.map((f) => join(WORKFLOWS, f)),
    );
    expect(result.stdout).toBe("");
    expect(result.code).toBe(0);
  });

  it("the pull-request workflow docs/gitops.md tells GitOps repositories to use passes actionlint", async () => {
    const doc = readFileSync(join(WORKFLOWS, "..", "..", "docs", "gitops.md"), "utf8");
    const block = /### A CI gate \(GitHub Actions\)[\s\S]*?```yaml\n([\s\S]*?)```/.exec(doc)?.[1];
    expect(block).toBeDefined();
    const dir = mkdtempSync(join(tmpdir(), "dms-actionlint-doc-"));
    try {
      writeFileSync(join(dir, "plan.yml"), block ?? "");
      const result = await actionlint(bin, [join(dir, "plan.yml")]);
      expect(result.stdout).toBe("");
      expect(result.code).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("actionlint does report a broken workflow (the check above can fail)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dms-actionlint-"));
    try {
      const broken = join(dir, "broken.yml");
      writeFileSync(
        broken,
        "on: push\njobs:\n  a:\n    needs: missing\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo hello\n",
      );
      const result = await actionlint(bin, [broken]);
      expect(result.code).toBe(1);
      expect(result.stdout).toContain('job "a" needs job "missing" which does not exist');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
