// How the CLI harness reports a failure after SIGINT/SIGTERM: "interrupted" only when the failure
// is the interruption itself; any other error keeps its own one-line cause.
import type { Command } from "commander";
import { describe, expect, it } from "vitest";
import { ServiceError } from "../../src/api/errors.ts";
import { unprintableIn } from "../../src/api/printable.ts";
import type { CliContext } from "../../src/commands/context.ts";
import { EXIT, runCommands, runProgram } from "../../src/commands/program.ts";
import { KUBECTL_PLUGIN_NAME } from "../../src/commands/program-name.ts";
import { COMMANDS } from "../../src/commands/registry.ts";
import { Manager, ShutdownTimeoutError } from "../../src/runtime/manager.ts";
import { capturingContext, runCli, silentContext } from "../support/cli.ts";

/** Runs `work` (and `args`) in a one-command program whose action is `action`: its status and stderr. */
async function runWork(action: () => Promise<void>, stopSignal: AbortSignal, args: string[] = []) {
  let stderr = "";
  const ctx: CliContext = {
    out: () => {},
    err: (text) => {
      stderr += text;
    },
    stdoutIsTTY: false,
    env: {},
    stopSignal,
  };
  const register = (program: Command) => {
    program.command("work").action(action);
  };
  return { code: await runProgram(["work", ...args], ctx, [register]), stderr };
}

/** Runs a one-command program whose action fires the stop signal and then does `act`. */
async function runAfterSignal(act: (reason: unknown) => Promise<void>) {
  const stop = new AbortController();
  return runWork(async () => {
    stop.abort(new Error("shutdown requested by signal"));
    await act(stop.signal.reason);
  }, stop.signal);
}

describe("runProgram after a stop signal", () => {
  it("reports the interruption itself as 'interrupted' with status 130", async () => {
    expect(
      await runAfterSignal(async (reason) => {
        throw reason;
      }),
    ).toEqual({ code: EXIT.interrupted, stderr: "error: interrupted\n" });
    expect(
      await runAfterSignal(async (reason) => {
        throw new Error("listing aborted", { cause: reason });
      }),
    ).toEqual({ code: EXIT.interrupted, stderr: "error: interrupted\n" });
  });

  it("keeps the real cause of a failure that happened while stopping", async () => {
    expect(
      await runAfterSignal(async () => {
        throw new ShutdownTimeoutError("shutdown exceeded 30000 ms");
      }),
    ).toEqual({ code: EXIT.failed, stderr: "error: shutdown exceeded 30000 ms\n" });
  });

  it("names the failed runnable and its cause in the one line", async () => {
    const { code, stderr } = await runAfterSignal(async (reason) => {
      const manager = new Manager();
      manager.add({
        name: "health-server",
        needLeaderElection: false,
        start: async () => {
          throw new Error("listen EADDRINUSE: address already in use :8081");
        },
      });
      await manager.start(AbortSignal.abort(reason));
    });
    expect(code).toBe(EXIT.failed);
    expect(stderr).toBe("error: health-server failed: listen EADDRINUSE: address already in use :8081\n");
  });
});

describe("runProgram's error line", () => {
  /** Runs a one-command program whose action throws `error`. */
  const runFailing = (error: unknown, args: string[] = []) =>
    runWork(
      async () => {
        throw error;
      },
      new AbortController().signal,
      args,
    );

  it("writes the service's controls in a failure's detail as escapes, on its one line", async () => {
    // A 4xx's detail is the service's own text: it must not retitle, clear or recolour the terminal.
    const error = new ServiceError({
      kind: "not_found",
      method: "GET",
      route: "/v2/deployments",
      status: 404,
      detail: "nope\u001b]0;PWNED\u0007\u001b[2J\u009b31m\u202eevil",
      retryable: false,
    });
    const { code, stderr } = await runFailing(error);
    expect(code).toBe(EXIT.failed);
    expect(stderr.split("\n")[0]).toBe(
      "error: GET /v2/deployments: 404 not_found: nope\\x1b]0;PWNED\\x07\\x1b[2J\\x9b31m\\u202eevil",
    );
    const verbose = await runFailing(error, ["--verbose"]);
    expect(verbose.stderr).toContain("\\x1b]0;PWNED");
    expect(unprintableIn(verbose.stderr.replaceAll("\n", ""))).toBeUndefined();
  });
});

describe("kubectl's -o=json and -n=team-a", () => {
  /** Runs `args` in a program whose one command takes -o and -n: the values it read, or its error. */
  async function readValues(args: string[]) {
    let read: unknown;
    const register = (program: Command) => {
      program
        .command("get")
        .option("-o, --output <format>")
        .option("-n, --namespace <ns>")
        .argument("[name...]")
        .action((names, flags) => {
          read = { names, ...flags };
        });
    };
    const { code, stderr } = await runCli(args, { commands: [register] });
    return { code, read, stderr };
  }

  it("read the value after =, as kubectl does", async () => {
    expect(await readValues(["get", "-o=json", "-n=team-a", "web"])).toEqual({
      code: EXIT.ok,
      read: { names: ["web"], output: "json", namespace: "team-a" },
      stderr: "",
    });
    expect((await readValues(["get", "-ojson", "--namespace=team-a"])).read).toEqual({
      names: [],
      output: "json",
      namespace: "team-a",
    });
  });

  it("leave the arguments after -- as they are", async () => {
    expect((await readValues(["get", "--", "-o=json"])).read).toEqual({ names: ["-o=json"] });
    expect((await readValues(["get", "-o", "json", "--", "-n=x"])).read).toEqual({
      names: ["-n=x"],
      output: "json",
    });
  });

  it("take the word after a flag that takes a value as its value, whatever it looks like", async () => {
    expect((await readValues(["get", "-n", "-o=json", "web"])).read).toEqual({
      names: ["web"],
      namespace: "-o=json",
    });
    expect((await readValues(["get", "--output", "-n=x"])).read).toEqual({ names: [], output: "-n=x" });
  });
});

/**
 * Runs `args` in a program `define` makes, each action of which is `take`: the status, stderr and
 * the options of the command run.
 */
async function readOptions(
  args: string[],
  define: (program: Command, take: (...a: unknown[]) => void) => void,
) {
  let read: unknown;
  const take = (...a: unknown[]) => {
    read = { ...(a.at(-1) as Command).opts() };
  };
  const { code, stderr } = await runCli(args, { commands: [(program) => define(program, take)] });
  return { code, read, stderr };
}

describe("kubectl's --flag=true|false of a boolean flag", () => {
  /** Runs `args` in a program with a command `get` and a nested `deployments list`: what it read. */
  const readFlags = (args: string[]) =>
    readOptions(args, (program, take) => {
      program
        .command("get")
        .option("-A, --all-namespaces")
        .option("--all")
        .option("--no-headers")
        .option("-o, --output <format>")
        .argument("[name...]")
        .action(take);
      program.command("deployments").command("list").option("--wide").action(take);
    });

  it("takes pflag's true and false spellings, the last occurrence winning", async () => {
    for (const [args, read] of [
      [["-A=false"], { allNamespaces: false, headers: true }],
      [["-A=true"], { allNamespaces: true, headers: true }],
      [["--all-namespaces=false"], { allNamespaces: false, headers: true }],
      [["--all-namespaces=TRUE", "-o=json"], { allNamespaces: true, headers: true, output: "json" }],
      [["-A", "--all-namespaces=f"], { allNamespaces: false, headers: true }],
      [["--all-namespaces=0", "-A"], { allNamespaces: true, headers: true }],
      [["--all=1"], { all: true, headers: true }],
      [["--no-headers=true"], { headers: false }],
      [["--no-headers=false"], { headers: true }],
      [["--no-headers", "--no-headers=false"], { headers: true }],
    ] as const)
      expect(await readFlags(["get", ...args]), args.join(" ")).toEqual({ code: EXIT.ok, read, stderr: "" });
    expect((await readFlags(["deployments", "list", "--wide=false"])).read).toEqual({ wide: false });
  });

  it("refuses any other value, naming the flag as kubectl does", async () => {
    for (const [arg, flag, value] of [
      ["-A=yes", "-A, --all-namespaces", "yes"],
      ["--all-namespaces=", "-A, --all-namespaces", ""],
      ["--all=on", "--all", "on"],
      ["--no-headers=no", "--no-headers", "no"],
    ] as const)
      expect(await readFlags(["get", arg]), arg).toEqual({
        code: EXIT.failed,
        read: undefined,
        stderr: `error: invalid argument "${value}" for "${flag}" flag: strconv.ParseBool: parsing "${value}": invalid syntax\n`,
      });
  });

  it("leaves the arguments after -- and a flag that takes a value as they are", async () => {
    expect((await readFlags(["get", "--", "-A=false"])).read).toEqual({ headers: true });
    expect((await readFlags(["get", "--output=-A=x"])).read).toEqual({ headers: true, output: "-A=x" });
    expect((await readFlags(["get", "-o", "-A=false"])).read).toEqual({ headers: true, output: "-A=false" });
    expect((await readFlags(["get", "--output", "--no-headers=false", "-A=true"])).read).toEqual({
      headers: true,
      output: "--no-headers=false",
      allNamespaces: true,
    });
  });

  it("reads a global flag's value after the command's name", async () => {
    expect((await readFlags(["get", "--verbose=false"])).read).toEqual({ headers: true });
    const failing = (program: Command) => {
      program.command("work").action(() => {
        throw new Error("it broke");
      });
    };
    const run = await runCli(["work", "--verbose=true"], { commands: [failing] });
    expect(run.code).toBe(EXIT.failed);
    expect(run.stderr).toMatch(/^error: it broke\nError: it broke\n {4}at /);
    expect((await runCli(["work", "--verbose=false"], { commands: [failing] })).stderr).toBe(
      "error: it broke\n",
    );
  });
});

describe("kubectl's reading of the argv, for the command being run only", () => {
  /** A program where `-f` is `logs`' boolean --follow and `plan`'s --filename <file>, as in dms-operator. */
  const readOf = (args: string[]) =>
    readOptions(args, (program, take) => {
      program.command("logs").option("-f, --follow").argument("<name>").action(take);
      program.command("plan").option("-f, --filename <file>").action(take);
      const group = program.command("deployments");
      group.command("list").option("--wide").action(take);
      group.command("get").option("--wide <columns>").action(take);
    });

  it("does not read a flag of another command as this one's", async () => {
    for (const [args, read] of [
      [["plan", "-f=deploy.yaml"], { filename: "deploy.yaml" }],
      [["plan", "-f=true"], { filename: "true" }],
      [["plan", "--filename=false"], { filename: "false" }],
      [["logs", "web", "-f=false"], { follow: false }],
      [["logs", "web", "-f=true"], { follow: true }],
      [["deployments", "get", "--wide=no"], { wide: "no" }],
      [["deployments", "list", "--wide=0"], { wide: false }],
    ] as const)
      expect(await readOf([...args]), args.join(" ")).toEqual({ code: EXIT.ok, read, stderr: "" });
  });
});

describe("help <command> <subcommand>", () => {
  it("prints the subcommand's help, as kubectl's help does", async () => {
    let stdout = "";
    const ctx: CliContext = {
      ...silentContext(),
      out: (text) => {
        stdout += text;
      },
    };
    const code = await runCommands(["help", "deployments", "list"], ctx, KUBECTL_PLUGIN_NAME, COMMANDS);
    expect(code).toBe(EXIT.ok);
    expect(stdout).toMatch(/^Usage: kubectl dms deployments list \[options\]\n/);
  });
});

describe("help <word> naming no command", () => {
  it("says the word is unknown and what it is near, as the word alone does", async () => {
    const { ctx, written } = capturingContext();
    const code = await runCommands(["help", "statsu"], ctx, KUBECTL_PLUGIN_NAME, COMMANDS);
    expect(code).toBe(EXIT.failed);
    expect(written).toEqual({
      stdout: "",
      stderr: "error: unknown command 'statsu'\n(Did you mean status?)\n",
    });
  });
});

describe("kubectl's combined short flags and values that look like flags", () => {
  /** `deployments` (with its own --context) and its `get`, with kubectl's flags. */
  async function readGet(args: string[]) {
    let read: unknown;
    const register = (program: Command) => {
      program
        .command("deployments")
        .option("--context <name>")
        .command("get")
        .option("-n, --namespace <ns>")
        .option("-o, --output <format>")
        .option("-l, --selector <selector>")
        .option("-A, --all-namespaces")
        .option("-w, --watch")
        .argument("[name...]")
        .action((names, _flags, cmd: Command) => {
          read = { names, ...cmd.optsWithGlobals() };
        });
    };
    const { code, stdout, stderr } = await runCli(args, { commands: [register] });
    return { code, read, stdout, stderr };
  }

  /** Each `deployments get <args>` succeeds quietly having read `read`. */
  async function expectReads(cases: readonly (readonly [readonly string[], object])[]) {
    for (const [args, read] of cases)
      expect(await readGet(["deployments", "get", ...args]), args.join(" ")).toEqual({
        code: EXIT.ok,
        read,
        stdout: "",
        stderr: "",
      });
  }

  it("read a boolean letter before others as pflag does, the last one taking the value", async () => {
    await expectReads([
      [["-An", "-o=json"], { names: [], allNamespaces: true, namespace: "-o=json" }],
      [["-Ao=json", "web"], { names: ["web"], allNamespaces: true, output: "json" }],
      [["-Aw=false"], { names: [], allNamespaces: true, watch: false }],
      [["-wAn", "team-a"], { names: [], allNamespaces: true, watch: true, namespace: "team-a" }],
    ]);
  });

  it("take a value that spells a flag of the program or of a parent command as the value", async () => {
    await expectReads([
      [["-l", "--version"], { names: [], selector: "--version" }],
      [["-l=--version"], { names: [], selector: "--version" }],
      [["-n", "--verbose", "web"], { names: ["web"], namespace: "--verbose" }],
      [["--selector", "--context=c"], { names: [], selector: "--context=c" }],
      [["-An", "--context"], { names: [], allNamespaces: true, namespace: "--context" }],
    ]);
  });

  it("name an unknown short flag given a value after =", async () => {
    const run = await readGet(["deployments", "get", "-z=1"]);
    expect(run.code).toBe(EXIT.failed);
    expect(run.stderr).toBe("error: unknown option '-z'\n");
  });

  it("name an unknown long flag given a value after = without the value, and suggest the flag meant", async () => {
    const run = await readGet(["deployments", "get", "--outptu=json"]);
    expect(run.code).toBe(EXIT.failed);
    expect(run.stderr).toBe("error: unknown option '--outptu'\n(Did you mean --output?)\n");
  });
});
