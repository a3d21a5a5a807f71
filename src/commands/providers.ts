/**
 * `dms-operator providers list`: the OAuth provider configurations of the organization.
 */
import type { Command } from "commander";
import type { ResolvedOAuthProvider } from "../api/client.ts";
import type { ServiceFlags } from "../config.ts";
import {
  addOutputOption,
  addServiceOptions,
  type OutputFormat,
  outputFormat,
  type RegisterCommand,
  serviceClientFrom,
} from "./context.ts";
import { type Column, renderRows } from "./output.ts";

const COLUMNS: readonly Column<ResolvedOAuthProvider>[] = [
  { header: "NAME", value: (p) => p.name },
  { header: "PROVIDER ID", value: (p) => p.provider_id },
  { header: "TYPE", value: (p) => p.provider_type },
  { header: "CLIENT ID", value: (p) => p.client_id },
  { header: "PKCE", value: (p) => (p.uses_pkce ? (p.code_challenge_method ?? "yes") : "no") },
  { header: "ID", value: (p) => p.id },
];

/** Registers `providers list` on `program`. */
export const registerProvidersCommand: RegisterCommand = (program, ctx) => {
  const providers = program
    .command("providers")
    .description("OAuth provider configurations of the organization");
  const list = providers
    .command("list")
    .description("list OAuth providers (GET /v2/auth/providers), with documented defaults filled in");
  addServiceOptions(addOutputOption(list)).action(async (_flags: unknown, command: Command) => {
    const flags = command.optsWithGlobals<ServiceFlags & { output?: OutputFormat }>();
    const client = serviceClientFrom(flags, ctx);
    const rows = await client.listProviders({ signal: ctx.stopSignal });
    ctx.out(renderRows(outputFormat(flags, ctx), rows, COLUMNS, "No OAuth providers."));
  });
};
