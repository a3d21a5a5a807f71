/**
 * `dms-operator repos list --integration <id>`: repositories reachable through a GitHub forge
 * integration, with the values to use when declaring a deployment from one of them.
 */
import type { Command } from "commander";
import type { ForgeRepo } from "../api/wire.ts";
import type { ServiceFlags } from "../config.ts";
import { addServiceOptions, type RegisterCommand, uuidArgument } from "./context.ts";
import type { Listing, OutputFlags } from "./output.ts";
import { addOutputOptions } from "./output-options.ts";
import { printServiceListing } from "./service-listing.ts";

const LISTING: Listing<ForgeRepo> = {
  columns: [
    { header: "REPOSITORY", value: (r) => `${r.owner}/${r.name}` },
    { header: "DEFAULT BRANCH", value: (r) => r.default_branch },
    { header: "URL", value: (r) => r.url },
    { header: "INTEGRATION ID", value: (r) => r.host_integration_id, show: "id" },
  ],
  name: (r) => `repository/${r.owner}/${r.name}`,
  empty: "No repositories.",
};

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
  addServiceOptions(addOutputOptions(list)).action(async (_flags: unknown, command: Command) => {
    const flags = command.optsWithGlobals<ServiceFlags & OutputFlags & { integration: string }>();
    await printServiceListing(ctx, flags, LISTING, (client) =>
      client.listRepos(flags.integration, { signal: ctx.stopSignal }),
    );
  });
};
