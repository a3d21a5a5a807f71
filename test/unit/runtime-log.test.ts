// The operator's log format: level names and ISO-8601 times, controller-runtime's fields on every
// line of a reconcile (one reconcileID shared by its lines, another for the next reconcile),
// redaction in both formats, and a console line a terminal cannot be driven by.
import { describe, expect, it } from "vitest";
import { RUN_REDACT } from "../../src/commands/run.ts";
import { Controller, type ReconcileResult } from "../../src/runtime/controller.ts";
import { createLogger, defaultLogFormat, formatConsoleLine, type LogFormat } from "../../src/runtime/log.ts";

/** A logger of `format` and the lines it wrote. */
function capture(format: LogFormat) {
  const lines: string[] = [];
  const logger = createLogger({
    level: "debug",
    format,
    redact: ["apiKey", "*.apiKey", "headers['x-api-key']", "*.headers['x-api-key']", "value", "*.value"],
    destination: { write: (line: string) => void lines.push(line) },
  });
  const records = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  return { logger, lines, records };
}

/** Runs a controller over `keys` once each (a pass per list), its reconciler logging through `logger`. */
async function reconcileOnce(
  logger: ReturnType<typeof createLogger>,
  keys: string[],
  reconcile: (key: string) => Promise<ReconcileResult>,
  ...more: string[][]
): Promise<void> {
  const controller = new Controller({ name: "deployment", logger, reconcile: (key) => reconcile(key) });
  const stop = new AbortController();
  const running = controller.start(stop.signal);
  for (const pass of [keys, ...more]) await controller.pass(pass, 0);
  stop.abort();
  await running;
}

describe("the JSON log", () => {
  it("names the level and writes the time in ISO-8601", () => {
    const { logger, records } = capture("json");
    logger.info("hello");
    logger.warn({ n: 1 }, "careful");
    const [info, warn] = records();
    expect(info).toMatchObject({ level: "info", msg: "hello" });
    expect(warn).toMatchObject({ level: "warn", n: 1 });
    expect(info?.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Number.isNaN(Date.parse(String(info?.time)))).toBe(false);
  });

  it("gives every line of one reconcile controller, namespace, name and one reconcileID; the next reconcile another", async () => {
    const { logger, records, lines } = capture("json");
    // A component of its own, as the reconciler and the service client log.
    const component = logger.child({ component: "reconciler" });
    let failedOnce = false;
    await reconcileOnce(
      logger,
      ["team-a/web", "team-a/web2", "cluster-wide"],
      async (key) => {
        component.info("reading");
        await Promise.resolve();
        component.debug({ step: 2 }, "writing");
        if (key === "team-a/web2" && !failedOnce) {
          failedOnce = true;
          throw new Error("boom");
        }
        return { kind: "done" };
      },
      ["team-a/web2"],
    );
    const ofReconciles = records().filter((r) => r.reconcileID !== undefined);
    const byKey = (namespace: string, name: string) =>
      ofReconciles.filter((r) => r.namespace === namespace && r.name === name);
    const web = byKey("team-a", "web");
    expect(web.map((r) => r.msg)).toEqual(["reading", "writing"]);
    expect(web.every((r) => r.controller === "deployment" && r.component === "reconciler")).toBe(true);
    expect(new Set(web.map((r) => r.reconcileID)).size).toBe(1);
    // The failed reconcile's own lines and the controller's line about it share its id.
    const web2 = byKey("team-a", "web2");
    const failed = web2.find((r) => r.msg === "reconcile failed");
    expect(failed).toBeDefined();
    const firstOfWeb2 = web2.filter((r) => r.reconcileID === failed?.reconcileID);
    expect(firstOfWeb2.map((r) => r.msg)).toEqual(["reading", "writing", "reconcile failed"]);
    expect(failed).not.toHaveProperty("key");
    // Each reconcile its own id: web, web2 twice (failed, then again), the cluster-scoped one.
    const reconciles = ofReconciles.filter((r) => r.msg === "reading").length;
    expect(reconciles).toBeGreaterThanOrEqual(4);
    expect(new Set(ofReconciles.map((r) => r.reconcileID)).size).toBe(reconciles);
    expect(byKey("", "cluster-wide").map((r) => r.msg)).toEqual(["reading", "writing"]);
    expect(String(web[0]?.reconcileID)).toMatch(/^[0-9a-f-]{36}$/);
    // No field twice on one line (the controller's own logger binds `controller` already).
    for (const line of lines) expect(line.match(/"controller":/g)?.length ?? 0).toBeLessThanOrEqual(1);
    // Outside a reconcile, none of them.
    logger.info("idle");
    expect(records().at(-1)).not.toHaveProperty("reconcileID");
  });

  it("keeps redacting secret values", () => {
    const { logger, lines } = capture("json");
    logger.info({ apiKey: "s3cret-value", config: { apiKey: "s3cret-value" } }, "settings");
    expect(lines.join("")).not.toContain("s3cret-value");
    expect(lines.join("")).toContain("[REDACTED]");
  });

  it("redacts an err that is not an Error, written as JSON text, at any depth", () => {
    for (const format of ["json", "console"] as const) {
      const { logger, lines } = capture(format);
      const err = {
        apiKey: "s3cret-key",
        request: { headers: { "x-api-key": "s3cret-header" }, secret: { value: "s3cret-value" } },
        status: 401,
      };
      logger.warn({ err }, "call refused");
      logger.error({ err, key: "team-a/web" }, "call refused");
      const text = lines.join("");
      for (const value of ["s3cret-key", "s3cret-header", "s3cret-value"]) expect(text).not.toContain(value);
      // What is not a secret is still said.
      expect(text).toContain("401");
      expect(text).toContain("[REDACTED]");
    }
  });
});

describe("the console log", () => {
  it("writes one line for a person: time, level, message, then key=value", async () => {
    const { logger, lines } = capture("console");
    await reconcileOnce(logger, ["team-a/web"], async () => {
      logger.child({ component: "reconciler" }).info({ revision: "r-1", note: "two words" }, "deployed");
      return { kind: "done" };
    });
    const line = lines.find((l) => l.includes("deployed")) ?? "";
    expect(line).toMatch(
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO {2}deployed .*component=reconciler .*revision=r-1 note="two words"/,
    );
    expect(line).toMatch(/controller=deployment namespace=team-a name=web reconcileID=[0-9a-f-]{36}/);
    expect(line.endsWith("\n")).toBe(true);
  });

  it("redacts, and escapes control characters so that a line cannot drive the terminal", () => {
    const { logger, lines } = capture("console");
    logger.warn({ apiKey: "s3cret-value", text: "a\u001b]52;c;AAAA\u0007b\u009b" }, "clear\u001b[2J here");
    const [line = ""] = lines;
    expect(line).not.toContain("s3cret-value");
    expect(line).not.toMatch(/\p{Cc}(?!$)/u);
    expect(line).toContain("clear\\u001b[2J here");
    expect(line).toContain("\\u009b");
  });

  it("puts an error's stack on lines of its own", () => {
    const text = formatConsoleLine({
      level: "error",
      time: "2026-01-01T00:00:00.000Z",
      msg: "reconcile failed",
      error: "boom",
      stacktrace: "Error: boom\n    at x (y.ts:1:1)",
    });
    expect(text).toBe(
      "2026-01-01T00:00:00.000Z ERROR reconcile failed error=boom\n    Error: boom\n        at x (y.ts:1:1)\n",
    );
  });
});

describe("the default format", () => {
  it("is console on a terminal and json anywhere else (a pod's stdout, a pipe)", () => {
    expect(defaultLogFormat(true)).toBe("console");
    expect(defaultLogFormat(false)).toBe("json");
    expect(defaultLogFormat(undefined)).toBe("json");
  });
});

describe("run's redaction", () => {
  it("censors the transports' headers, tokens and passwords, in whatever case a key is written", () => {
    for (const format of ["json", "console"] as const) {
      const lines: string[] = [];
      const logger = createLogger({
        level: "debug",
        format,
        redact: RUN_REDACT,
        destination: { write: (line: string) => void lines.push(line) },
      });
      // An err that is not an Error: JSON text, censored by key in any case.
      const err = {
        request: { headers: { "X-Api-Key": "s3cret-header", Authorization: "Bearer s3cret-bearer" } },
        Password: "s3cret-password",
        status: 401,
      };
      logger.warn({ err }, "call refused");
      // Fields pino censors by path: the header as Node writes it and as the transports set it.
      logger.info(
        {
          request: { headers: { "X-Api-Key": "s3cret-header", authorization: "Bearer s3cret-bearer" } },
          headers: { Authorization: "Bearer s3cret-bearer" },
          token: "s3cret-token",
          login: { password: "s3cret-password" },
        },
        "request",
      );
      const text = lines.join("");
      for (const value of ["s3cret-header", "s3cret-bearer", "s3cret-password", "s3cret-token"])
        expect(text).not.toContain(value);
      expect(text).toContain("401");
    }
  });
});
