/**
 * `logs`' reader of a revision's log page by page (LogFollower), against a client answering
 * pages from a table: each entry handed out once, however the service's cursors run.
 */
import { describe, expect, it } from "vitest";
import type { ServiceClient } from "../../src/api/client.ts";
import type { LogPage, LogQuery } from "../../src/api/revision-logs.ts";
import { LogFollower } from "../../src/commands/logs.ts";

const DEPLOYMENT = "d0000000-0000-4000-8000-000000000001";
const REVISION = "e0000000-0000-4000-8000-000000000001";

/** A client whose log route answers `pages[offset ?? ""]`, counting the requests. */
function pagedClient(pages: Record<string, LogPage>) {
  const asked: (string | undefined)[] = [];
  const client = {
    getRevisionLogs: async (_d: string, _r: string, query: LogQuery) => {
      asked.push(query.offset);
      return pages[query.offset ?? ""];
    },
  } as unknown as ServiceClient;
  return { client, asked };
}

const page = (messages: string[], nextOffset: string | null): LogPage => ({
  entries: messages.map((message) => ({ message })),
  nextOffset,
  skipped: 0,
});

describe("LogFollower", () => {
  it("a service whose next_offset leads back to a page already read: each entry once, and it ends", async () => {
    const { client, asked } = pagedClient({
      "": page(["one"], "A"),
      A: page(["two"], "B"),
      B: page(["three"], "A"),
    });
    const follower = new LogFollower(client, DEPLOYMENT, REVISION, "build", new AbortController().signal);
    const printed: string[] = [];
    await follower.readAll((entry) => printed.push(entry.message));
    // A look for new entries, as --follow makes, prints nothing again.
    await follower.readAll((entry) => printed.push(entry.message));
    expect(printed).toEqual(["one", "two", "three"]);
    expect(asked.length).toBeLessThan(10);
  });

  it("a log longer than its page bound: stops there, says it did not reach the end, and reads on after", async () => {
    const asked: (string | undefined)[] = [];
    // Every page has one entry and leads to a new one: the log never ends.
    const client = {
      getRevisionLogs: async (_d: string, _r: string, query: LogQuery): Promise<LogPage> => {
        asked.push(query.offset);
        const n = query.offset === undefined ? 0 : Number(query.offset);
        return page([`entry ${n}`], String(n + 1));
      },
    } as unknown as ServiceClient;
    const follower = new LogFollower(client, DEPLOYMENT, REVISION, "build", new AbortController().signal);
    const printed: string[] = [];
    expect(await follower.readAll((entry) => printed.push(entry.message))).toBe(false);
    expect(asked.length).toBe(1000);
    expect(printed.at(-1)).toBe("entry 999");
    // The next call (as --follow makes) goes on from the page it stopped at, printing nothing twice.
    expect(await follower.readAll((entry) => printed.push(entry.message))).toBe(false);
    expect(printed.slice(999, 1001)).toEqual(["entry 999", "entry 1000"]);
    expect(new Set(printed).size).toBe(printed.length);
  });

  it("a log that ends: says it reached the end", async () => {
    const { client } = pagedClient({ "": page(["one"], "A"), A: page(["two"], null) });
    const follower = new LogFollower(client, DEPLOYMENT, REVISION, "build", new AbortController().signal);
    expect(await follower.readAll(() => {})).toBe(true);
  });
});
