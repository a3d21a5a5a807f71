// The static word lists the CLI answers from without loading a command: the completion table of
// `kubectl dms` (completion-plugin.ts), written out from the commands themselves, and the copies of
// the service's and the CRDs' words (words.ts) that flags and help are written with.

import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LOG_TYPES } from "../../src/api/revision-logs.ts";
import { completionNodes, completionTableSource } from "../../src/commands/completion.ts";
import { PLUGIN_COMPLETION } from "../../src/commands/completion-table.ts";
import { createProgram, loadCommands } from "../../src/commands/program.ts";
import { KUBECTL_PLUGIN_NAME } from "../../src/commands/program-name.ts";
import { COMMANDS } from "../../src/commands/registry.ts";
import { RUN_SETTINGS } from "../../src/commands/settings.ts";
import * as words from "../../src/commands/words.ts";
import { DEFAULT_MAX_CONNECTIONS_PER_NAMESPACE } from "../../src/connection/registry.ts";
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
