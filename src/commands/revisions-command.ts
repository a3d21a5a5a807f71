/**
 * Registers `revisions <resource>` (revisions.ts, loaded when it runs, does the work; its comment
 * says where `<resource>` is looked up).
 */
import type { Command } from "commander";
import { addServiceOptions, integerArgument, type RegisterCommand } from "./context.ts";
import { addOutputOptions } from "./output-options.ts";
import { addResourceLookupOptions } from "./resource-flags.ts";

/** Registers `revisions` on `program`. */
export const registerRevisionsCommand: RegisterCommand = (program, ctx) => {
  const command = program
    .command("revisions")
    .argument(
      "<resource>",
      "a Deployment resource's name (of --kubeconfig, KUBECONFIG or ~/.kube/config); with --service or --connection the service's deployment name or id",
    )
    .description(
      "list a deployment's revisions, newest first, marking the active (live) and the latest one (GET /v2/deployments/{id}/revisions)",
    )
    .option(
      "--max-items <n>",
      "read at most this many revisions (default 1000)",
      integerArgument(1, 100_000),
    );
  addResourceLookupOptions(command, "the service's deployment name or id");
  addServiceOptions(addOutputOptions(command)).action(
    async (resource: string, _flags: unknown, cmd: Command) => {
      const { runRevisions } = await import("./revisions.ts");
      await runRevisions(resource, cmd.optsWithGlobals(), ctx);
    },
  );
};
