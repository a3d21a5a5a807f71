/**
 * `dms-operator providers list`: the OAuth provider configurations of the organization.
 */
import type { Command } from "commander";
import type { ResolvedOAuthProvider } from "../api/client.ts";
import type { ServiceFlags } from "../config.ts";
import { addServiceOptions, type RegisterCommand } from "./context.ts";
import type { Listing, OutputFlags } from "./output.ts";
import { addOutputOptions } from "./output-options.ts";
import { printServiceListing } from "./service-listing.ts";

const LISTING: Listing<ResolvedOAuthProvider> = {
  columns: [
    { header: "NAME", value: (p) => p.name },
    { header: "PROVIDER ID", value: (p) => p.provider_id },
    { header: "TYPE", value: (p) => p.provider_type },
    { header: "CLIENT ID", value: (p) => p.client_id },
    { header: "PKCE", value: (p) => (p.uses_pkce ? (p.code_challenge_method ?? "yes") : "no") },
    { header: "ID", value: (p) => p.id, show: "id" },
  ],
  name: (p) => `provider/${p.provider_id}`,
  empty: "No OAuth providers.",
};

/** Registers `providers list` on `program`. */
export const registerProvidersCommand: RegisterCommand = (program, ctx) => {
  const providers = program
    .command("providers")
    .description("OAuth provider configurations of the organization");
  const list = providers
    .command("list")
    .description("list OAuth providers (GET /v2/auth/providers), with documented defaults filled in");
  addServiceOptions(addOutputOptions(list)).action(async (_flags: unknown, command: Command) => {
    const flags = command.optsWithGlobals<ServiceFlags & OutputFlags>();
    await printServiceListing(ctx, flags, LISTING, (client) =>
      client.listProviders({ signal: ctx.stopSignal }),
    );
  });
};
