// The operator's log lines carry the fields controller-runtime's zap writes: an error as `error`,
// its message as a string; `stacktrace` only at level error and above (a warning such as a
// list/watch retry is one line); no `pid` and no `hostname`.
import { describe, expect, it } from "vitest";
import { createLogger, type LogFormat } from "../../src/runtime/log.ts";

/** A logger of `format` and the lines it wrote. */
function capture(format: LogFormat = "json") {
  const lines: string[] = [];
  const logger = createLogger({
    level: "debug",
    format,
    destination: { write: (line: string) => void lines.push(line) },
  });
  const records = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  return { logger, lines, records };
}

const failure = () => new Error("GET /api/v1/namespaces: connect ECONNREFUSED 127.0.0.1:9");

describe("the fields of a log line", () => {
  it("writes a warning's error as its message, without a stack", () => {
    const { logger, records } = capture();
    logger.warn({ err: failure(), attempt: 2 }, "list/watch failed; retrying with backoff");
    const [record] = records();
    expect(record).toMatchObject({
      level: "warn",
      msg: "list/watch failed; retrying with backoff",
      attempt: 2,
      error: "GET /api/v1/namespaces: connect ECONNREFUSED 127.0.0.1:9",
    });
    expect(record).not.toHaveProperty("err");
    expect(record).not.toHaveProperty("stacktrace");
  });

  it("adds the stack at level error", () => {
    const { logger, records } = capture();
    logger.error({ err: failure() }, "reconcile failed terminally");
    const [record] = records();
    expect(record?.error).toBe("GET /api/v1/namespaces: connect ECONNREFUSED 127.0.0.1:9");
    expect(String(record?.stacktrace)).toMatch(/^Error: GET \/api\/v1\/namespaces[^\n]*\n\s+at /);
  });

  it("takes an error given as the first argument, its message the line's when there is no other", () => {
    const { logger, records } = capture();
    logger.error(failure());
    logger.warn(failure(), "lease call failed");
    const [alone, withMessage] = records();
    expect(alone).toMatchObject({ msg: "GET /api/v1/namespaces: connect ECONNREFUSED 127.0.0.1:9" });
    expect(alone?.error).toBe(alone?.msg);
    expect(alone).toHaveProperty("stacktrace");
    expect(withMessage).toMatchObject({ msg: "lease call failed", error: alone?.msg });
    expect(withMessage).not.toHaveProperty("stacktrace");
  });

  it("keeps an error already reduced to text as it is", () => {
    const { logger, records } = capture();
    logger.error({ err: "503 unavailable" }, "could not read the latest revision");
    expect(records()[0]).toMatchObject({ error: "503 unavailable" });
    expect(records()[0]).not.toHaveProperty("stacktrace");
    logger.warn({ err: { status: 503 } }, "an object");
    logger.warn({ err: 7n }, "a value JSON cannot write");
    expect(
      records()
        .slice(1)
        .map((r) => r.error),
    ).toEqual(['{"status":503}', "7"]);
  });

  it("writes neither pid nor hostname", () => {
    const { logger, records } = capture();
    logger.info("starting dms-operator");
    logger.child({ component: "manager" }).info("starting");
    for (const record of records()) {
      expect(record).not.toHaveProperty("pid");
      expect(record).not.toHaveProperty("hostname");
    }
  });

  it("puts the stack on lines of its own in the console format, and none for a warning", () => {
    const { logger, lines } = capture("console");
    logger.warn({ err: failure() }, "list/watch failed");
    logger.error({ err: failure() }, "reconcile failed");
    const [warning = "", error = ""] = lines;
    expect(warning).toMatch(
      / WARN {2}list\/watch failed error="GET \/api\/v1\/namespaces: connect ECONNREFUSED 127\.0\.0\.1:9"\n$/,
    );
    expect(error.split("\n")[1]).toMatch(/^ {4}Error: GET \/api\/v1\/namespaces/);
    expect(error.split("\n")[2]).toMatch(/^ {8}at /);
  });
});
