/**
 * `dms-operator simulator`: runs the service simulator in the foreground until SIGINT/SIGTERM,
 * printing the URL it listens on.
 */
import { type Command, Option } from "commander";
import type { Timing } from "../simulator/record.ts";
import type { LogsRouteMode, RedeployRouteMode, RevisionsRouteMode } from "../simulator/routes.ts";
import { integerArgument, type RegisterCommand } from "./context.ts";

interface SimulatorFlags {
  port: number;
  host: string;
  seed?: string;
  apiKey?: string;
  apiKeyHeader?: string;
  tenantId?: string;
  readyAfterMs?: number;
  revisionActiveAfterMs?: number;
  deleteAfterMs?: number;
  revisionsRoute?: string;
  revisionListingRoute?: string;
  keepTracingProjects?: boolean;
  logsRoute?: string;
  redeployRoute?: string;
}

const ms = integerArgument(0, 3_600_000);

/** Registers `simulator` on `program`. */
export const registerSimulatorCommand: RegisterCommand = (program, ctx) => {
  program
    .command("simulator")
    .description("run an in-memory simulator of the service (for tests, demos and trying the operator)")
    .option("--port <port>", "port to listen on (0 picks a free one)", integerArgument(0, 65_535), 8090)
    .option("--host <host>", "address to listen on", "127.0.0.1")
    .option("--seed <file>", "YAML or JSON file with providers, integrations and deployments to start with")
    .option("--api-key <key>", "require this API key on every request (env DMS_SIMULATOR_API_KEY)")
    .option("--api-key-header <name>", "header that must carry the key (default X-Api-Key)")
    .option("--tenant-id <uuid>", "tenant id of the simulated deployments")
    .option("--ready-after-ms <ms>", "delay before a new deployment is READY (default 3000)", ms)
    .option(
      "--revision-active-after-ms <ms>",
      "delay before a new revision becomes active (default 2000)",
      ms,
    )
    .option("--delete-after-ms <ms>", "delay before a deleted deployment is gone (default 1500)", ms)
    .addOption(
      new Option(
        "--revisions-route <mode>",
        "the revisions route: present, or missing (404) / method-not-allowed (405) to act as a service without it",
      )
        .choices(["present", "missing", "method-not-allowed"])
        .default("present"),
    )
    .addOption(
      new Option(
        "--revision-listing-route <mode>",
        "the revision listing (GET /v2/deployments/{id}/revisions): present, or missing (404) / method-not-allowed (405)",
      )
        .choices(["present", "missing", "method-not-allowed"])
        .default("present"),
    )
    .addOption(
      new Option(
        "--logs-route <mode>",
        "the revision logs route: present, or missing (404) / method-not-allowed (405) to act as a service without it",
      )
        .choices(["present", "missing", "method-not-allowed"])
        .default("present"),
    )
    .addOption(
      new Option(
        "--redeploy-route <mode>",
        "the redeploy route: new-revision (a new revision copying the old one), switch-active (the active revision switches back), or missing (404) / method-not-allowed (405)",
      )
        .choices(["new-revision", "switch-active", "missing", "method-not-allowed"])
        .default("new-revision"),
    )
    .option(
      "--keep-tracing-projects",
      "like the real service: a delete without delete_tracing_project=true leaves the tracing project, and a later create of the name answers 409",
    )
    .action(async (_flags: unknown, command: Command) => {
      const flags = command.opts<SimulatorFlags>();
      // Loaded on demand: the listing commands need none of the simulator's code.
      const [{ startSimulator }, { loadSeed }] = await Promise.all([
        import("../simulator/server.ts"),
        import("../simulator/seed.ts"),
      ]);
      const apiKey = flags.apiKey ?? (ctx.env.DMS_SIMULATOR_API_KEY || undefined);
      const seed = flags.seed === undefined ? undefined : await loadSeed(flags.seed);
      const timing: Partial<Timing> = {};
      if (flags.readyAfterMs !== undefined) timing.readyAfterMs = flags.readyAfterMs;
      if (flags.revisionActiveAfterMs !== undefined)
        timing.revisionActiveAfterMs = flags.revisionActiveAfterMs;
      if (flags.deleteAfterMs !== undefined) timing.deleteAfterMs = flags.deleteAfterMs;
      const simulator = await startSimulator({
        port: flags.port,
        host: flags.host,
        timing,
        ...(apiKey === undefined ? {} : { apiKey }),
        ...(flags.apiKeyHeader === undefined ? {} : { apiKeyHeader: flags.apiKeyHeader }),
        ...(flags.tenantId === undefined ? {} : { tenantId: flags.tenantId }),
        ...(seed === undefined ? {} : { seed }),
        revisionsRoute: flags.revisionsRoute as RevisionsRouteMode,
        revisionListing: flags.revisionListingRoute as RevisionsRouteMode,
        ...(flags.keepTracingProjects ? { keepTracingProjects: true } : {}),
        logsRoute: flags.logsRoute as LogsRouteMode,
        redeployRoute: flags.redeployRoute as RedeployRouteMode,
      });
      ctx.out(`simulator listening on ${simulator.url}\n`);
      await new Promise<void>((resolve) => {
        if (ctx.stopSignal.aborted) resolve();
        ctx.stopSignal.addEventListener("abort", () => resolve(), { once: true });
      });
      await simulator.close();
    });
};
