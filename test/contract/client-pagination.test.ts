/**
 * Pagination against real HTTP: every item exactly once, in order, whatever the page sizes, and
 * a listing that always ends, even against a service that misbehaves.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { RequestValidationError, ServiceError } from "../../src/api/errors.ts";
import { deployment, type FakeService, pagedListing, send, startFakeService } from "./client-fake-service.ts";

let service: FakeService | undefined;
afterEach(async () => {
  await service?.close();
  service = undefined;
});

const client = (url: string, extra: Partial<ConstructorParameters<typeof ServiceClient>[0]> = {}) =>
  // A generous rate limit: these tests are about pages, not pacing.
  new ServiceClient({ baseUrl: url, retries: 0, qps: 10_000, burst: 1000, ...extra });

const items = (n: number) => Array.from({ length: n }, (_, i) => deployment(i));

describe("listDeployments pagination", () => {
  it.each([
    { n: 0, pageSize: 100, requests: 1 },
    { n: 1, pageSize: 100, requests: 2 },
    { n: 100, pageSize: 100, requests: 2 },
    { n: 101, pageSize: 100, requests: 3 },
    { n: 250, pageSize: 100, requests: 4 },
    { n: 250, pageSize: 1, requests: 251 },
  ])("lists all $n items once and in order with page size $pageSize", async ({ n, pageSize, requests }) => {
    const all = items(n);
    service = await startFakeService(pagedListing(all));
    const listed = await client(service.url).listAllDeployments({}, { pageSize });
    expect(listed.map((d) => d.id)).toEqual(all.map((d) => d.id));
    expect(service.requests).toHaveLength(requests);
    expect(service.requests.every((r) => r.query.get("limit") === String(pageSize))).toBe(true);
  });

  it("keeps going when the service caps pages below the limit asked for", async () => {
    const all = items(45);
    service = await startFakeService(pagedListing(all, 7));
    const listed = await client(service.url).listAllDeployments({}, { pageSize: 100 });
    expect(listed.map((d) => d.id)).toEqual(all.map((d) => d.id));
    // 7 pages of 7, ..., then the empty page that ends it.
    expect(service.requests.map((r) => r.query.get("offset"))).toEqual([
      "0",
      "7",
      "14",
      "21",
      "28",
      "35",
      "42",
      "45",
    ]);
  });

  it("ends on a short page, without the empty page, only once a longer one was seen and the caller has enough", async () => {
    const all = items(45);
    service = await startFakeService(pagedListing(all, 7));
    const c = client(service.url);
    const offsets = () => service?.requests.map((r) => r.query.get("offset")) ?? [];
    let asked = 0;
    const enough = (answer: boolean) => () => {
      asked += 1;
      return answer;
    };
    // The caller has not enough: every page and the empty one, as without the option.
    await c.listAllDeployments({}, { pageSize: 100, enoughAfterShortPage: enough(false) });
    expect(offsets()).toEqual(["0", "7", "14", "21", "28", "35", "42", "45"]);
    // Asked once, after the page of 3 (shorter than the pages of 7 before it); never after the
    // empty page, which ends the listing anyway.
    expect(asked).toBe(1);
    service.requests.length = 0;
    // Enough: the page of 3 is the last one asked for.
    const listed = await c.listAllDeployments({}, { pageSize: 100, enoughAfterShortPage: enough(true) });
    expect(listed.map((d) => d.id)).toEqual(all.map((d) => d.id));
    expect(offsets()).toEqual(["0", "7", "14", "21", "28", "35", "42"]);
    service.requests.length = 0;
    // Another limit: what the service fills for it is not known yet, so a short page proves nothing.
    await c.listAllDeployments({}, { pageSize: 50, offset: 40, enoughAfterShortPage: enough(true) });
    expect(offsets()).toEqual(["40", "45"]);
    service.requests.length = 0;
    // A new client has seen no page: its first short page is followed by the empty one.
    await client(service.url).listAllDeployments(
      {},
      { pageSize: 100, offset: 40, enoughAfterShortPage: enough(true) },
    );
    expect(offsets()).toEqual(["40", "45"]);
  });

  it("starts at the offset asked for", async () => {
    const all = items(30);
    service = await startFakeService(pagedListing(all));
    const listed = await client(service.url).listAllDeployments({}, { pageSize: 10, offset: 25 });
    expect(listed.map((d) => d.name)).toEqual(["agent-25", "agent-26", "agent-27", "agent-28", "agent-29"]);
  });

  it("stops instead of looping when the service repeats the same offset", async () => {
    service = await startFakeService((req, res) => {
      send(res, 200, { resources: items(3), offset: Number(req.query.get("offset")) });
    });
    const listed = await client(service.url).listAllDeployments();
    expect(listed).toHaveLength(3);
    expect(service.requests).toHaveLength(1);
  });

  it("stops when the offset goes backwards", async () => {
    service = await startFakeService((req, res) => {
      const offset = Number(req.query.get("offset"));
      send(res, 200, { resources: [deployment(offset)], offset: offset === 0 ? 5 : 1 });
    });
    const listed = await client(service.url).listAllDeployments();
    expect(listed.map((d) => d.name)).toEqual(["agent-0", "agent-5"]);
  });

  it("ends on a page of items already listed (a service ignoring offset) without repeating any", async () => {
    service = await startFakeService((req, res) => {
      send(res, 200, { resources: items(2), offset: Number(req.query.get("offset")) + 2 });
    });
    const listed = await client(service.url).listAllDeployments();
    expect(listed.map((d) => d.name)).toEqual(["agent-0", "agent-1"]);
    expect(service.requests).toHaveLength(2);
  });

  it("gives up with an error after the page cap rather than list forever", async () => {
    service = await startFakeService((req, res) => {
      const offset = Number(req.query.get("offset"));
      send(res, 200, { resources: [deployment(offset)], offset: offset + 1 });
    });
    const error = await client(service.url, { maxPages: 5 })
      .listAllDeployments()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServiceError);
    expect((error as ServiceError).kind).toBe("bad_response");
    expect((error as ServiceError).message).toMatch(/did not end after 5 pages/);
    expect(service.requests).toHaveLength(5);
  });

  it("fetches lazily: breaking out of the loop stops the requests", async () => {
    service = await startFakeService(pagedListing(items(50)));
    const c = client(service.url);
    for await (const d of c.listDeployments({}, { pageSize: 10 })) {
      if (d.name === "agent-3") break;
    }
    expect(service.requests).toHaveLength(1);
  });

  it.each([
    { opts: { pageSize: 0 }, parameter: "pageSize" },
    { opts: { pageSize: 101 }, parameter: "pageSize" },
    { opts: { pageSize: 2.5 }, parameter: "pageSize" },
    { opts: { offset: -1 }, parameter: "offset" },
  ])("rejects $opts before sending anything", async ({ opts, parameter }) => {
    service = await startFakeService(pagedListing(items(1)));
    const error = await client(service.url)
      .listAllDeployments({}, opts)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RequestValidationError);
    expect((error as RequestValidationError).parameter).toBe(parameter);
    expect(service.requests).toHaveLength(0);
  });
});
