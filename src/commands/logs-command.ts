/**
 * Registers `logs <resource>` (logs.ts, loaded when it runs, does the work; its comment says
 * where `<resource>` is looked up).
 */
import { type Command, InvalidArgumentError, Option } from "commander";
import { parseDuration } from "../duration.ts";
import { addServiceOptions, type RegisterCommand, uuidArgument } from "./context.ts";
import { addOutputOptions } from "./output-options.ts";
import { addResourceLookupOptions } from "./resource-flags.ts";
import { LOG_TYPES } from "./words.ts";

/** The formats of `logs`: entries arrive one by one, so json is one object per line (JSON Lines). */
const LOG_FORMATS = ["table", "json", "yaml"] as const;

/** Flag parser: a duration such as `10m`, `1h30m`, `90s`. */
function durationArgument(value: string): number {
  const ms = parseDuration(value);
  if (ms === undefined) throw new InvalidArgumentError("must be a duration such as 10m, 1h30m or 90s.");
  return ms;
}

/** Registers `logs` on `program`. */
export const registerLogsCommand: RegisterCommand = (program, ctx) => {
  const command = program
    .command("logs")
    .description(
      "print the build or deploy log of a deployment's revision (default: its latest); <resource> is a Deployment resource of the kubeconfig's cluster, else (--service, or --connection) the deployment's name on the service",
    )
    .argument(
      "<resource>",
      "Deployment resource (of --kubeconfig, KUBECONFIG or ~/.kube/config), or with --service or --connection a deployment name",
    )
    .addOption(
      new Option(
        "--type <type>",
        "which log (default: build while the revision is being built or failed to be, else deploy)",
      ).choices(LOG_TYPES),
    )
    .option("--revision <id>", "the revision (default: the deployment's latest)", uuidArgument)
    .option(
      "-f, --follow",
      "keep printing new entries until the revision ends (live, skipped or failed) or Ctrl-C",
    )
    .option("--since <duration>", "only entries of the last <duration>, e.g. 10m", durationArgument);
  addResourceLookupOptions(command, "a deployment name");
  // table: time level message; json: one entry per line; yaml: one document per entry.
  addOutputOptions(command, { formats: LOG_FORMATS, textAlias: true, headers: false, default: "table" });
  addServiceOptions(command).action(async (resource: string, _flags: unknown, cmd: Command) => {
    const { runLogs } = await import("./logs.ts");
    await runLogs(resource, cmd.optsWithGlobals(), ctx);
  });
};
