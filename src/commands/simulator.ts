/**
 * `dms-operator simulator`: runs the service simulator in the foreground until SIGINT/SIGTERM,
 * printing the URL it listens on.
 */
import type { Command } from "commander";
import { integerArgument, type RegisterCommand } from "./context.ts";

interface SimulatorFlags {
  port: number;
  host: string;
  seed?: string;
  apiKey?: string;
}

/** The parts of `src/simulator/` this command relies on. */
interface SimulatorModule {
  startSimulator(options: {
    port: number;
    host: string;
    apiKey?: string;
    seed?: unknown;
  }): Promise<{ url: string; close(): Promise<void> }>;
}
interface SeedModule {
  loadSeed(path: string): Promise<unknown>;
}

/** Registers `simulator` on `program`. */
export const registerSimulatorCommand: RegisterCommand = (program, ctx) => {
  program
    .command("simulator")
    .description("run an in-memory simulator of the service (for tests, demos and trying the operator)")
    .option("--port <port>", "port to listen on (0 picks a free one)", integerArgument(0, 65_535), 8090)
    .option("--host <host>", "address to listen on", "127.0.0.1")
    .option("--seed <file>", "YAML or JSON file with providers, integrations and deployments to start with")
    .option("--api-key <key>", "require this API key on every request (env DMS_SIMULATOR_API_KEY)")
    .action(async (_flags: unknown, command: Command) => {
      const flags = command.opts<SimulatorFlags>();
      // Loaded on demand: the listing commands must not pay for the simulator's code.
      const { startSimulator } = (await import("../simulator/server.ts" as string)) as SimulatorModule;
      const { loadSeed } = (await import("../simulator/seed.ts")) as SeedModule;
      const apiKey = flags.apiKey ?? (ctx.env.DMS_SIMULATOR_API_KEY || undefined);
      const seed = flags.seed === undefined ? undefined : await loadSeed(flags.seed);
      const simulator = await startSimulator({
        port: flags.port,
        host: flags.host,
        ...(apiKey === undefined ? {} : { apiKey }),
        ...(seed === undefined ? {} : { seed }),
      });
      ctx.out(`simulator listening on ${simulator.url}\n`);
      await new Promise<void>((resolve) => {
        if (ctx.stopSignal.aborted) resolve();
        ctx.stopSignal.addEventListener("abort", () => resolve(), { once: true });
      });
      await simulator.close();
    });
};
