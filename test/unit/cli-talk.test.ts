// A command that waits says why on a terminal (one line per retry), and a 401 or a 404 on a
// route without an id names the flag or variable to check. Real HTTP on loopback only.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ServiceError } from "../../src/api/errors.ts";
import { registerDeploymentsCommand } from "../../src/commands/deployments.ts";
import { EXIT } from "../../src/commands/program.ts";
import { retryLine, serviceErrorHint } from "../../src/commands/service-hints.ts";
import { runCli } from "../support/cli.ts";

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

/** A loopback server answering every request with `status` and `body`; resolves its URL. */
async function answering(status: number, body: unknown): Promise<string> {
  const server = createServer((_req, res) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const list = (env: Record<string, string>, stderrIsTTY: boolean) =>
  runCli(["deployments", "list"], {
    commands: [registerDeploymentsCommand],
    env: { DMS_API_KEY: "cli-talk-key-4f2a", ...env },
    stderrIsTTY,
  });

describe("a line per retry on a terminal", () => {
  it("says what failed and how long it waits, then the error", async () => {
    const url = await answering(503, { detail: "busy" });
    const run = await list({ DMS_BASE_URL: url, DMS_RETRIES: "2" }, true);
    expect(run.code).toBe(EXIT.failed);
    const lines = run.stderr.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^retrying in \d+(\.\d)? s: 503 \S+ \(GET \/v2\/deployments; 1 retry left\)$/);
    expect(lines[1]).toMatch(/^retrying in \d+(\.\d)? s: 503 \S+ \(GET \/v2\/deployments; 0 retries left\)$/);
    expect(lines[2]).toMatch(/^error: GET \/v2\/deployments: /);
  });

  it("stays quiet when stderr is not a terminal", async () => {
    const url = await answering(503, { detail: "busy" });
    const run = await list({ DMS_BASE_URL: url, DMS_RETRIES: "1" }, false);
    expect(run.stderr).not.toContain("retrying");
    expect(run.stderr).toMatch(/^error: /);
  });

  it("a refused connection: said once, with the URL and what to check, with no retry", async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const run = await list({ DMS_BASE_URL: url, DMS_RETRIES: "4" }, true);
    expect(run.code).toBe(EXIT.failed);
    expect(run.stderr).toBe(
      `error: GET /v2/deployments: connection refused by ${url}: nothing listens there; check --base-url / DMS_BASE_URL (its host and port), and that the service (or the simulator) is running\n`,
    );
  });

  it("a refused connection with --retries 0: the same check named, under the error", async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const run = await list({ DMS_BASE_URL: url, DMS_RETRIES: "0" }, true);
    expect(run.code).toBe(EXIT.failed);
    expect(run.stderr.split("\n").slice(1)).toEqual([
      "hint: nothing listens there; check --base-url / DMS_BASE_URL (its host and port; with --connection: the connection's spec.baseUrl), and that the service (or the simulator) is running",
      "",
    ]);
  });

  it("names a service's pause", () => {
    const error = new ServiceError({
      kind: "rate_limited",
      method: "GET",
      route: "/v2/deployments",
      status: 429,
      detail: "slow down",
      retryable: true,
      retryAfterSeconds: 3,
    });
    expect(
      retryLine({ method: "GET", route: "/v2/deployments", attempt: 1, retriesLeft: 3, waitMs: 3000, error }),
    ).toBe(
      "retrying in 3 s: 429 rate limited (the service asked for 3 s) (GET /v2/deployments; 3 retries left)",
    );
  });
});

describe("hints name the flag or variable to check", () => {
  it("a 401 names --api-key-file and DMS_API_KEY", async () => {
    const url = await answering(401, { detail: "Invalid API key" });
    const run = await list({ DMS_BASE_URL: url }, false);
    expect(run.code).toBe(EXIT.failed);
    expect(run.stderr).toContain("error: GET /v2/deployments: 401 unauthorized: Invalid API key\n");
    expect(run.stderr).toContain(
      "hint: the service did not accept the API key: check --api-key-file / DMS_API_KEY_FILE or --api-key / DMS_API_KEY",
    );
  });

  it("a 404 on the listing names --base-url's path", async () => {
    const url = await answering(404, { detail: "Not Found" });
    const run = await list({ DMS_BASE_URL: `${url}/api` }, false);
    expect(run.stderr).toContain(
      "hint: the service has no /v2/deployments: check the path of --base-url / DMS_BASE_URL",
    );
    expect(run.stderr).toContain("without /v2");
  });

  it("a 404 for one deployment (it does not exist) gets no hint", () => {
    const error = new ServiceError({
      kind: "not_found",
      method: "GET",
      route: "/v2/deployments/{deployment_id}",
      status: 404,
      detail: "Deployment not found",
      retryable: false,
    });
    expect(serviceErrorHint(error)).toBeUndefined();
  });
});
