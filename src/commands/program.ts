/**
 * The command-line harness: builds the commander program from a list of command registrations,
 * runs it, and turns every failure into one line on stderr and an exit status.
 *
 * It loads no command's code: {@link runCommands} imports only the command named on the command
 * line (of the entries `registry.ts` lists, which `cli.ts` gives it), so this module and what it
 * imports must stay light.
 */
import { Command, CommanderError, Help, type HelpContext, type Option } from "commander";
import { ServiceError } from "../api/errors.ts";
import { escapeForTerminal } from "../api/terminal-text.ts";
import { VERSION } from "../version.ts";
import type { CommandEntry } from "./command-entry.ts";
import type { CliContext, RegisterCommand } from "./context.ts";
import { clusterFlagsAfterCommand } from "./leading-flags.ts";
import { KUBECTL_PLUGIN_NAME, PROGRAM_NAME } from "./program-name.ts";
import { UsageError } from "./usage-error.ts";

/**
 * Exit statuses, as kubectl's: 0 success, 1 any error, the operation's or the call's (an unknown
 * or bad flag, a missing argument, a missing or invalid setting), 130 interrupted. No command
 * exits 2 on an error, so that `plan` can keep 2 for "changes planned" (as `terraform plan
 * -detailed-exitcode` does) and a script tells the two apart.
 */
export const EXIT = { ok: 0, failed: 1, interrupted: 130 } as const;

/**
 * Thrown by a command that has already reported its outcome and must end with `status`, e.g.
 * `plan`, whose 2 means "changes planned". Prints nothing.
 */
export class CommandExit extends Error {
  override readonly name = "CommandExit";
  readonly status: number;
  constructor(status: number) {
    super(`exit status ${status}`);
    this.status = status;
  }
}

/**
 * The `dms-operator` program with `commands` registered, writing through `ctx`, never exiting the
 * process. `name` is what help and usage texts call it (`kubectl dms` as a kubectl plugin).
 * `listed` are commands known by their registry entry only: the program's help lists them, and a
 * typo is matched against them, but their code is not loaded (they must not be run). `all` are
 * the entries of every command of the program (see {@link commandEntriesOf}).
 */
export function createProgram(
  ctx: CliContext,
  commands: readonly RegisterCommand[],
  name: string = PROGRAM_NAME,
  listed: readonly CommandEntry[] = [],
  all: readonly CommandEntry[] = [],
): Command {
  const program = new Command(name)
    .description(
      "Kubernetes operator keeping Deployment Management Service deployments in line with Deployment resources",
    )
    .version(VERSION, "--version", "print the version of dms-operator")
    .option("--verbose", "log each service request to stderr and print stack traces of errors")
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({ writeOut: (s) => ctx.out(s), writeErr: (s) => ctx.err(s) });
  for (const register of commands) register(program, ctx);
  const terms = new Map<Command, string>();
  for (const entry of listed) {
    const stub = program
      .command(entry.name)
      .description(entry.summary)
      .helpOption(false)
      .allowUnknownOption()
      .allowExcessArguments()
      .action(() => {
        throw new Error(`the code of command ${entry.name} was not loaded`);
      });
    terms.set(stub, entry.term);
  }
  for (const group of groupsOf(program)) helpWhenAlone(group);
  if (terms.size > 0)
    program.configureHelp({
      subcommandTerm: (cmd) => terms.get(cmd) ?? Help.prototype.subcommandTerm.call(new Help(), cmd),
    });
  ENTRIES.set(program, all);
  return program;
}

/** `command` and every command under it that has subcommands of its own. */
function groupsOf(command: Command): Command[] {
  return command.commands.length === 0 ? [] : [command, ...command.commands.flatMap(groupsOf)];
}

/**
 * Makes `group` (the program, `deployments`) named alone print its help on stdout and succeed, as
 * `kubectl config` and `kubectl rollout` do. commander answers a group with no subcommand (and no
 * word it does not know) with its help as an error, on stderr and status 1; its other help errors
 * (`help <unknown>`) and an unknown subcommand or flag stay errors.
 */
function helpWhenAlone(group: Command): void {
  const help = group.help.bind(group);
  group.help = ((context?: HelpContext) =>
    help(group.args.length === 0 ? undefined : context)) as Command["help"];
}

const ENTRIES = new WeakMap<Command, readonly CommandEntry[]>();

/**
 * Every command entry of the program `program` was made for (by {@link runCommands}), as a
 * command that lists the others reads them (`completion`); empty for a program made otherwise.
 */
export function commandEntriesOf(program: Command): readonly CommandEntry[] {
  return ENTRIES.get(program) ?? [];
}

/**
 * Runs the program on `given` as {@link runProgram} does, loading the code of the one command
 * it names (the first argument that is not an option; after `help`, the one it asks about),
 * and knowing the others by their registry entries only. kubectl's flags of the cluster before
 * that name go after it (leading-flags.ts). Under the kubectl plugin's name, a command of
 * `dms-operator` only is refused with a line saying where it is.
 */
export async function runCommands(
  given: readonly string[],
  ctx: CliContext,
  name: string,
  all: readonly CommandEntry[],
): Promise<number> {
  const argv = clusterFlagsAfterCommand(given);
  const entries = name === KUBECTL_PLUGIN_NAME ? all.filter((c) => !c.operatorOnly) : all;
  const words = argv.filter((arg) => !arg.startsWith("-"));
  const named = words[0] === "help" ? words[1] : words[0];
  if (name === KUBECTL_PLUGIN_NAME && all.some((c) => c.operatorOnly && c.name === named)) {
    ctx.err(
      `error: unknown command '${named}': it is a command of ${PROGRAM_NAME}, not of ${KUBECTL_PLUGIN_NAME}; run ${PROGRAM_NAME} ${named}\n`,
    );
    return EXIT.failed;
  }
  const chosen = entries.find((c) => c.name === named);
  // `help <word>...` is read as `<word>... --help`, as kubectl reads it: commander's help takes one
  // word (`help deployments list` printed the group's help). A word naming no command goes alone,
  // for its "unknown command" and "did you mean" (commander prints the program's help as an error).
  const help = words[0] === "help" && named !== undefined ? argv.indexOf("help") : -1;
  const asked = chosen ? ["--help"] : [];
  const args = help === -1 ? argv : [...argv.slice(0, help), ...argv.slice(help + 1), ...asked];
  const loaded = chosen ? await chosen.load() : undefined;
  // Before the command runs (not for its help, which loads no HTTP client): see below.
  const commands: RegisterCommand[] = loaded
    ? [(program, ctx) => loaded(program.hook("preAction", linkHttpWithoutWebSocket), ctx)]
    : [];
  return runProgram(
    args,
    ctx,
    commands,
    name,
    entries.filter((c) => c !== chosen),
    entries,
  );
}

/** Loads the code of the commands `entries`, at once. */
export function loadCommands(entries: readonly CommandEntry[]): Promise<RegisterCommand[]> {
  return Promise.all(entries.map((entry) => entry.load()));
}

/** The exports of `node:http` that load Node's bundled undici (fetch, WebSocket) when read. */
const HTTP_WEBSOCKET_EXPORTS = ["WebSocket", "CloseEvent", "MessageEvent"] as const;

/**
 * Makes the ES module namespace of `node:http` (which our own modules and Kubernetes' client
 * import) without reading its lazy `WebSocket`, `CloseEvent` and `MessageEvent` getters:
 * Node builds a builtin's namespace by reading every export once, and those three load its whole
 * undici bundle and web streams, ~1 MiB of heap and ~2 MiB resident that no command uses
 * (nodejs/node#59686). The getters are taken off for that one read and put back, so
 * `http.WebSocket` still works; only a named import of them from `node:http` is undefined.
 * Called before a command runs, before its action loads the code that imports `node:http` (a
 * command's registration, all its help needs, imports none); once the namespace exists, it
 * changes nothing.
 */
async function linkHttpWithoutWebSocket(): Promise<void> {
  const http = process.getBuiltinModule("node:http") as unknown as Record<string, unknown>;
  const taken = HTTP_WEBSOCKET_EXPORTS.flatMap((name) => {
    const descriptor = Object.getOwnPropertyDescriptor(http, name);
    return descriptor?.get && descriptor.configurable ? [{ name, descriptor }] : [];
  });
  for (const { name } of taken) delete http[name];
  try {
    await import("node:http");
  } finally {
    for (const { name, descriptor } of taken) Object.defineProperty(http, name, descriptor);
  }
}

/**
 * Runs the program on `argv` (user arguments only) and returns the exit status; `name`, `listed`
 * and `all` as in {@link createProgram}.
 *
 * Contract: never throws; a failure is reported on stderr as `error: <one line>` (usage problems
 * may take one line each), with the stack and causes only under `--verbose`.
 */
export async function runProgram(
  argv: readonly string[],
  ctx: CliContext,
  commands: readonly RegisterCommand[],
  name: string = PROGRAM_NAME,
  listed: readonly CommandEntry[] = [],
  all: readonly CommandEntry[] = [],
): Promise<number> {
  const program = createProgram(ctx, commands, name, listed, all);
  try {
    const { args, values } = kubectlArgv(program, argv);
    program.hook("preAction", (_program, action) => {
      for (let cmd: Command | null = action; cmd; cmd = cmd.parent)
        for (const option of cmd.options) {
          const value = values.get(option);
          if (value !== undefined) cmd.setOptionValueWithSource(option.attributeName(), value, "cli");
        }
    });
    await program.parseAsync(args, { from: "user" });
    return EXIT.ok;
  } catch (error) {
    if (error instanceof CommandExit) return error.status;
    // commander has already printed its own one-line message (or the help).
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.failed;
    return await reportError(error, program.opts().verbose === true, ctx);
  }
}

/** pflag's (strconv.ParseBool's) spellings of a boolean flag's value. */
const BOOLEAN_VALUES: Readonly<Record<string, boolean>> = {
  ...Object.fromEntries(["1", "t", "T", "TRUE", "true", "True"].map((v) => [v, true])),
  ...Object.fromEntries(["0", "f", "F", "FALSE", "false", "False"].map((v) => [v, false])),
};

/**
 * `argv` read as kubectl (pflag) reads it, written as commander takes it, in one pass up to `--`
 * that knows the command being run: the program's options, then those of each subcommand named
 * (the first word that is not an option or a value, at each level, as commander finds it), and no
 * other command's. Of those options:
 * - a boolean's value after `=` (`--all-namespaces=false`, `-A=true`) is written as the bare flag,
 *   and the value the flag ends with is returned, to set before the action (the last occurrence
 *   wins, as in kubectl; `--no-headers=false` sets `headers`). A value other than pflag's true and
 *   false spellings is a {@link UsageError} naming the flag, in kubectl's words;
 * - a short flag's value after `=` (`-o=json`, `-n=team-a`) is written as `-o json`: commander
 *   would read the value `=json`;
 * - the word after one that takes a value (`-o`, `--namespace`) is that value whatever it looks
 *   like (`-n -o=json` is the namespace `-o=json`), as pflag reads it. A value that looks like an
 *   option is written in the flag's word (`-n-o=json`, `--namespace=--verbose`): commander's parse
 *   of the program and of each parent command would read `--verbose`, `--version` or a parent's
 *   flag as theirs. A word after an optional value is one only when it is no option;
 * - combined short flags are read one letter at a time while the letter is a boolean's
 *   (`-An -o=json`, `-Ao=json`, `-Aw=false`), as pflag reads them;
 * - an unknown flag's value after `=` (`-z=1`, `--outptu=json`) is cut off, for commander to name
 *   the flag alone, as kubectl does, and suggest the one meant.
 */
export function kubectlArgv(
  program: Command,
  argv: readonly string[],
): { args: string[]; values: Map<Option, boolean> } {
  const known: Option[] = [...program.options];
  const values = new Map<Option, boolean>();
  const args: string[] = [];
  const words = [...argv];
  let command = program;
  let operands = 0;
  for (let i = 0; i < words.length; i++) {
    const arg = words[i] ?? "";
    if (arg === "--") {
      args.push(...words.slice(i));
      break;
    }
    const spelled = /^(--[^=]+|-[A-Za-z])(?:=(.*))?$/s.exec(arg);
    const flag = spelled?.[1] ?? arg;
    const text = spelled?.[2];
    const options = spelled ? known.filter((o) => o.long === flag || o.short === flag) : [];
    const [option] = options;
    if (!option) {
      const bundled = /^-([A-Za-z])([A-Za-z].*)$/s.exec(arg);
      const first = bundled ? known.find((o) => o.short === `-${bundled[1]}`) : undefined;
      if (bundled && first && !first.required && !first.optional) {
        words.splice(i, 1, `-${bundled[1]}`, `-${bundled[2]}`);
        i -= 1;
        continue;
      }
      if (spelled && text !== undefined) {
        args.push(flag, text);
        continue;
      }
      args.push(arg);
      const sub = isOptionLike(arg) || operands > 0 ? undefined : subcommandNamed(command, arg);
      if (sub) {
        command = sub;
        known.push(...sub.options);
      } else if (!isOptionLike(arg)) operands += 1;
      continue;
    }
    if (option.required || option.optional) {
      const next = text === undefined ? words[i + 1] : undefined;
      const taken = next !== undefined && (option.required || !isOptionLike(next));
      if (taken) i += 1;
      const value = taken ? next : text;
      if (value === undefined) args.push(flag);
      else if (!isOptionLike(value)) args.push(flag, value);
      else args.push(flag.startsWith("--") ? `${flag}=${value}` : `${flag}${value}`);
      continue;
    }
    const value = text === undefined ? true : BOOLEAN_VALUES[text];
    if (value === undefined) {
      const named = option.short && option.long ? `${option.short}, ${option.long}` : flag;
      throw new UsageError([
        `invalid argument ${JSON.stringify(text)} for "${named}" flag: strconv.ParseBool: parsing ${JSON.stringify(text)}: invalid syntax`,
      ]);
    }
    for (const o of options)
      if (text !== undefined || values.has(o)) values.set(o, o.negate ? !value : value);
    args.push(flag);
  }
  return { args, values };
}

/** Whether commander reads `arg` as an option (`-` alone is a word). */
function isOptionLike(arg: string): boolean {
  return arg.length > 1 && arg.startsWith("-");
}

/** The subcommand of `command` that `word` names (or an alias of it), as commander finds it. */
function subcommandNamed(command: Command, word: string): Command | undefined {
  return command.commands.find((c) => c.name() === word || c.aliases().includes(word));
}

async function reportError(error: unknown, verbose: boolean, ctx: CliContext): Promise<number> {
  // Only a failure that IS the interruption is reported as such: an error after a signal (a
  // shutdown deadline passed, a runnable failed while stopping) keeps its own line.
  if (ctx.stopSignal.aborted && isInterruption(error, ctx.stopSignal.reason)) {
    ctx.err("error: interrupted\n");
    return EXIT.interrupted;
  }
  const lines =
    error instanceof UsageError ? error.lines : [error instanceof Error ? error.message : String(error)];
  // A message may quote the service's or the cluster's text (a 4xx's detail, a name): its controls
  // are written as escapes, so it can neither drive the terminal nor break the one line.
  for (const line of lines) ctx.err(`error: ${escapeForTerminal(line.replace(/\s*\n\s*/g, " "))}\n`);
  if (verbose) ctx.err(`${describeChain(error).split("\n").map(escapeForTerminal).join("\n")}\n`);
  else if (error instanceof ServiceError && error.maybeApplied) {
    ctx.err("hint: the change may have been applied; list before repeating it\n");
  }
  // Loaded on a service failure only: the setting names it quotes come with the config module.
  const hint = error instanceof ServiceError && (await import("./service-hints.ts")).serviceErrorHint(error);
  if (hint) ctx.err(`hint: ${hint}\n`);
  return EXIT.failed;
}

/** Whether `error` is, or was caused by, the stop signal's abort (its reason, or an AbortError). */
function isInterruption(error: unknown, reason: unknown): boolean {
  for (let e: unknown = error, depth = 0; e !== undefined && depth < 5; depth++) {
    if (e === reason || (e instanceof Error && e.name === "AbortError")) return true;
    e = e instanceof Error ? e.cause : undefined;
  }
  return false;
}

function describeChain(error: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = error, depth = 0; e !== undefined && depth < 5; depth++) {
    parts.push(e instanceof Error ? (e.stack ?? e.message) : String(e));
    e = e instanceof Error ? e.cause : undefined;
    if (e !== undefined) parts.push("caused by:");
  }
  return parts.join("\n");
}
