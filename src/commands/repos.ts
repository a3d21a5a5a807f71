/**
 * `dms-operator repos list --integration <id>`: repositories reachable through a GitHub forge
 * integration, with the values to use when declaring a deployment from one of them.
 */
import type { Command } from "commander";
import type { ForgeRepo } from "../api/wire.ts";
import type { ServiceFlags } from "../config.ts";
import {
  addOutputOption,
  addServiceOptions,
  type OutputFormat,
  outputFormat,
  type RegisterCommand,
  serviceClientFrom,
  uuidArgument,
} from "./context.ts";
import { type Column, renderRows } from "./output.ts";

const COLUMNS: readonly Column<ForgeRepo>[] = [
  { header: "REPOSITORY", value: (r) => `${r.owner}/${r.name}` },
  { header: "DEFAULT BRANCH", value: (r) => r.default_branch },
  { header: "URL", value: (r) => r.url },
  { header: "INTEGRATION ID", value: (r) => r.host_integration_id },
];

/** Registers `repos list` on `program`. */
export const registerReposCommand: RegisterCommand = (program, ctx) => {
  const repos = program.command("repos").description("repositories of a GitHub forge integration");
  const list = repos
    .command("list")
    .description(
      "list repositories (GET /v1/integrations/forge/github/{integration_id}/repos); their url, default " +
        "branch and integration id are the values of source_config.repo_url, source_revision_config.repo_ref " +
        "and source_config.integration_id",
    )
    .requiredOption("--integration <id>", "forge GitHub integration id (uuid)", uuidArgument);
  addServiceOptions(addOutputOption(list)).action(async (_flags: unknown, command: Command) => {
    const flags = command.optsWithGlobals<ServiceFlags & { output?: OutputFormat; integration: string }>();
    const client = serviceClientFrom(flags, ctx);
    const rows = await client.listRepos(flags.integration, { signal: ctx.stopSignal });
    ctx.out(renderRows(outputFormat(flags, ctx), rows, COLUMNS, "No repositories."));
  });
};
