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
});
