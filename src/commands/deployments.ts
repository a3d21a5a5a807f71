/**
 * `dms-operator deployments list`: the service's deployments, with every filter of the spec.
 * Statuses are shown as the service reports them (also values the spec does not list); a
 * deployment that cannot be read is skipped with a warning on stderr, and the command succeeds.
 */
import { type Command, Option } from "commander";
import { escapeForTerminal } from "../api/terminal-text.ts";
import type { Deployment } from "../api/wire.ts";
import type { DeploymentFilters } from "../api/wire-requests.ts";
import type { ServiceFlags } from "../config.ts";
import {
  addServiceOptions,
  idListArgument,
  integerArgument,
  type RegisterCommand,
  uuidListArgument,
} from "./context.ts";
import type { Listing, OutputFlags } from "./output.ts";
import { addOutputOptions } from "./output-options.ts";
import { printServiceListing } from "./service-listing.ts";
import { DEPLOYMENT_STATUSES, DEPLOYMENT_TYPES, type DeploymentType, PAGE_LIMIT } from "./words.ts";

interface ListFlags extends ServiceFlags, OutputFlags {
  nameContains?: string;
  status?: string;
  remoteReconciled?: "true" | "false";
  tagValueIds?: string[];
  imageVersion?: string;
  deploymentType?: DeploymentType;
  deploymentIds?: string[];
  limit?: number;
  showSecretValues?: boolean;
}

/** `deployments list` for people (short ids, ages), for scripts (`-o name`) and as data (json, yaml). */
export const DEPLOYMENT_LISTING: Listing<Deployment> = {
  columns: [
    { header: "NAME", value: (d) => d.name },
    { header: "ID", value: (d) => d.id, show: "id" },
    { header: "SOURCE", value: (d) => d.source },
    { header: "STATUS", value: (d) => d.status, show: "status" },
    { header: "IMAGE VERSION", value: (d) => d.image_version },
    { header: "ACTIVE REVISION", value: (d) => d.active_revision_id, show: "id" },
    { header: "LATEST REVISION", value: (d) => d.latest_revision_id, show: "id", wide: true },
    { header: "CREATED", value: (d) => d.created_at, show: "time", wide: true },
    { header: "AGE", wideHeader: "UPDATED", value: (d) => d.updated_at, show: "time" },
  ],
  // Not a Kubernetes object: its bare name (`deployment/<name>` would name the apps/v1 kind).
  name: (d) => d.name,
  empty: "No deployments.",
};

/** Unreadable deployments of a listing named one by one on stderr; the rest are counted. */
export const SKIPPED_NAMED = 10;

/** The listing filters the flags ask for. */
export function filtersFromFlags(flags: ListFlags): DeploymentFilters {
  const filters: DeploymentFilters = {};
  if (flags.nameContains !== undefined) filters.name_contains = flags.nameContains;
  if (flags.status !== undefined) filters.status = flags.status;
  if (flags.remoteReconciled !== undefined) filters.remote_reconciled = flags.remoteReconciled === "true";
  if (flags.tagValueIds !== undefined) filters.tag_value_ids = flags.tagValueIds;
  if (flags.imageVersion !== undefined) filters.image_version = flags.imageVersion;
  if (flags.deploymentType !== undefined) filters.deployment_type = flags.deploymentType;
  if (flags.deploymentIds !== undefined) filters.deployment_ids = flags.deploymentIds;
  return filters;
}

/** The deployment with secret values replaced, so a listing never prints them by accident. */
export function hideSecretValues(deployment: Deployment): Deployment {
  return { ...deployment, secrets: deployment.secrets.map(hideSecretValue) };
}

/**
 * A secret as a service answered it (a deployment's, a revision's: any item) with its `value`, if
 * it has one, replaced by `(hidden)`; its name and the rest kept.
 */
export function hideSecretValue<T>(secret: T): T {
  if (typeof secret !== "object" || secret === null || !("value" in secret) || secret.value === undefined)
    return secret;
  return { ...secret, value: "(hidden)" };
}

/** Registers `deployments list` on `program`. */
export const registerDeploymentsCommand: RegisterCommand = (program, ctx) => {
  const deployments = program.command("deployments").description("deployments of the service");
  const list = deployments
    .command("list")
    .description("list deployments (GET /v2/deployments), following every page")
    .option("--name-contains <text>", "only names containing this text")
    .option(
      "--status <status>",
      `only deployments in this status: ${DEPLOYMENT_STATUSES.join(", ")}, or another value the service uses`,
    )
    .addOption(
      new Option("--remote-reconciled <bool>", "only (or no) remote-reconciled deployments").choices([
        "true",
        "false",
      ]),
    )
    .option(
      "--tag-value-ids <ids>",
      "only deployments with these tag value ids (comma-separated)",
      idListArgument,
    )
    .option("--image-version <version>", "only this image version")
    .addOption(new Option("--deployment-type <type>", "only this deployment type").choices(DEPLOYMENT_TYPES))
    .option("--deployment-ids <ids>", "only these deployment ids (comma-separated uuids)", uuidListArgument)
    .option(
      "--limit <n>",
      `page size asked of the service, ${PAGE_LIMIT.min}-${PAGE_LIMIT.max} (default ${PAGE_LIMIT.max}); all pages are listed`,
      integerArgument(PAGE_LIMIT.min, PAGE_LIMIT.max),
    )
    .option("--show-secret-values", "print secret values as the service returns them (hidden by default)");
  addServiceOptions(addOutputOptions(list)).action(async (_flags: unknown, command: Command) => {
    const flags = command.optsWithGlobals<ListFlags>();
    await printServiceListing(ctx, flags, DEPLOYMENT_LISTING, async (client) => {
      // A server may answer every page full of unreadable items: the first few are named, the
      // rest counted; the name is the service's text, its controls written as escapes.
      let skipped = 0;
      try {
        const rows = await client.listAllDeployments(filtersFromFlags(flags), {
          signal: ctx.stopSignal,
          ...(flags.limit === undefined ? {} : { pageSize: flags.limit }),
          onUnreadable: (item) => {
            if (skipped++ < SKIPPED_NAMED) ctx.err(`warning: skipped: ${escapeForTerminal(item.message)}\n`);
          },
        });
        return flags.showSecretValues ? rows : rows.map(hideSecretValues);
      } finally {
        if (skipped > SKIPPED_NAMED)
          ctx.err(`warning: skipped ${skipped - SKIPPED_NAMED} more deployments that could not be read\n`);
      }
    });
  });
};
