/**
 * A listing of the service (`deployments list`, `providers list`, `repos list`), run: light to
 * import, as the commands' registration imports it; the client and the writers load when it runs.
 */
import type { ServiceClient } from "../api/client.ts";
import type { ServiceFlags } from "../config.ts";
import type { CliContext } from "./context.ts";
import type { Listing, OutputFlags } from "./output.ts";

/**
 * A listing of the service, printed as `flags` ask: the client of the flags and environment, and
 * the rows `read` gets with it. The client and the table writers are loaded now, to run, not
 * when the command's help is shown.
 */
export async function printServiceListing<T>(
  ctx: CliContext,
  flags: ServiceFlags & OutputFlags & { verbose?: boolean },
  listing: Listing<T>,
  read: (client: ServiceClient) => Promise<readonly T[]>,
): Promise<void> {
  const [{ serviceClientFrom }, { renderFor }] = await Promise.all([
    import("./service-client.ts"),
    import("./output.ts"),
  ]);
  const rows = await read(serviceClientFrom(flags, ctx));
  ctx.out(renderFor(ctx, flags, rows, listing));
}
