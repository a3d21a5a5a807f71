/**
 * `status [-n ns | -A]`: one screen of the operator's work, read from the cluster alone (no call
 * to the service): the Deployment resources grouped by their conditions, held changes, failed
 * revisions and connections (status-view.ts reads and renders them, loaded when it runs); with
 * `-o wide` or `--no-headers`, a table of the resources, one line each, as kubectl prints one;
 * `-o name`, `-o json` and `-o yaml` as every listing takes them.
 */
import type { Command } from "commander";
import type { RegisterCommand } from "./context.ts";
import { addOutputOptions } from "./output-options.ts";
import { addKubectlOptions } from "./plugin-flags.ts";

/** Registers `status`. */
export const registerStatusCommand: RegisterCommand = (program, ctx) => {
  const command = program
    .command("status")
    .description(
      "one screen of the operator's work, read from the cluster: Deployment resources by condition (Stalled, not Ready, Reconciling, Ready) with their reasons (and their owning replica under run --sharded), changes held outside the rollout windows and when they go out, failed revisions, and connections with their readiness",
    );
  addOutputOptions(command, { formats: ["table", "wide", "name", "json", "yaml"] });
  addKubectlOptions(command, { allNamespaces: true }).action(async (_flags: unknown, cmd: Command) => {
    const { runStatus } = await import("./status-view.ts");
    await runStatus(cmd.optsWithGlobals(), ctx);
  });
};
