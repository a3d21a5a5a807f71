/**
 * What the program knows of a subcommand before loading its code (see `registry.ts`, which lists
 * them): a module of its own, so that the harness (`program.ts`) and the commands that read the
 * list (`completion`) need not import the registry, which imports every command.
 */
import type { RegisterCommand } from "./context.ts";

/** A subcommand, known without loading its code. */
export interface CommandEntry {
  name: string;
  /**
   * How the program's help lists it, as commander would from the loaded command: its name, then
   * `[options]` when it has options, then its arguments (test/unit/cli-registry.test.ts checks it).
   */
  term: string;
  /** One line for the program's help; the command's own help has its whole description. */
  summary: string;
  /** A command of `dms-operator` only, not of the kubectl plugin (running the operator or the simulator). */
  operatorOnly?: true;
  load: () => Promise<RegisterCommand>;
}
