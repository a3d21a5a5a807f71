/**
 * A service that answers a create with an error quoting what it was sent: the request body
 * JSON-escaped, twice, base64- and URL-encoded, wrapped over lines, cut into words, in a header.
 * What the operator shows of the answer — the condition's and the Warning's message
 * (`failureOf`) and the log line of the retry — holds no secret value it sent, nor the API key.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { failureOf } from "../../src/reconcile/failures.ts";
import { createLogger } from "../../src/runtime/log.ts";
import { type FakeService, startFakeService } from "./client-fake-service.ts";

const SECRET = "sk-live-9f8e7d6c5b4a39281706";
const API_KEY = "dms-key-0a1b2c3d4e5f60718293";

/** `text` cut into lines of `width` characters, each behind nothing. */
const wrapped = (text: string, width: number) =>
  (text.match(new RegExp(`.{1,${width}}`, "gs")) ?? []).join("\n");

/** How the service quotes the request body (and the key header) back, by the deployment's name. */
const ECHOES: Record<
  string,
  (body: string, key: string) => { detail: unknown; headers?: Record<string, string> }
> = {
  json: (body) => ({
    detail: [{ loc: ["body", "secrets"], msg: "invalid", input: JSON.parse(body).secrets }],
  }),
  "json-twice": (body) => ({ detail: JSON.stringify({ request: body }) }),
  base64: (body) => ({ detail: `request: ${Buffer.from(body).toString("base64")}` }),
  url: (body) => ({ detail: `request=${encodeURIComponent(body)}` }),
  "wrapped-9": (body) => ({ detail: wrapped(body, 9) }),
  "wrapped-base64": (body) => ({ detail: wrapped(Buffer.from(body).toString("base64"), 10) }),
  words: (body) => ({ detail: wrapped(body, 7).replace(/\n/g, " ") }),
  "key-in-header": (body, key) => ({ detail: `bad request ${body}`, headers: { "x-echo-key": key } }),
  key: (_body, key) => ({ detail: `unknown key ${wrapped(key, 8)}` }),
};

/** The pieces of `value` of 7 characters or more that `text` holds. */
function piecesShown(text: string, value: string): string[] {
  const shown: string[] = [];
  for (let at = 0; at + 7 <= value.length; at++)
    if (text.includes(value.slice(at, at + 7))) shown.push(value.slice(at, at + 7));
  return shown;
}

describe("an error answer quoting the request", () => {
  let service: FakeService;
  beforeAll(async () => {
    service = await startFakeService((req, res) => {
      const echo = ECHOES[(JSON.parse(req.body) as { name: string }).name];
      const { detail, headers } = echo?.(req.body, String(req.headers["x-api-key"])) ?? { detail: "" };
      res.writeHead(422, { "content-type": "application/json", ...headers });
      res.end(JSON.stringify({ detail }));
    });
  });
  afterAll(() => service.close());

  it.each(Object.keys(ECHOES))(
    "quoted %s: no secret value, no key in the message or the log",
    async (how) => {
      const client = new ServiceClient({
        baseUrl: service.url,
        apiKey: API_KEY,
        retries: 0,
      });
      const error = await client
        .createDeployment({
          name: how,
          source: "external_docker",
          source_config: {},
          source_revision_config: { image_uri: "repo/agent:1" },
          secrets: [{ name: "API_KEY", value: SECRET }],
        })
        .catch((e: unknown) => e);
      const failure = failureOf(error, [SECRET]);
      const lines: string[] = [];
      const logger = createLogger({
        level: "debug",
        format: "json",
        destination: { write: (l) => void lines.push(l) },
      });
      logger.error({ err: failure.rethrow }, "reconcile failed");
      logger.warn({ reason: failure.outcome.reason }, failure.outcome.message);
      expect(failure.outcome.message).toContain("answered 422");
      for (const text of [failure.outcome.message, lines.join("")]) {
        for (const shown of [SECRET, API_KEY]) expect(piecesShown(text, shown)).toEqual([]);
        expect(text).not.toContain(Buffer.from(SECRET).toString("base64").slice(0, 12));
      }
    },
  );
});
