// A watch whose answer's headers never come (an API server or a proxy that accepted the request
// and holds the answer back) fails after the watch's idle bound, as one silent after its headers:
// the cache it feeds lists or watches again instead of waiting out the watch's whole lifetime.
import { describe, expect, it, vi } from "vitest";
import type { KubeObject } from "../../src/kube/object.ts";
import type { Reflector } from "../../src/kube/reflector.ts";
import { initialEvents, kubeStub, thingsReflector } from "../support/kube-stub.ts";
import { ManualClock } from "../support/manual-clock.ts";

const item = (name: string) => ({ metadata: { namespace: "ns", name, resourceVersion: "5" } });
const items = [item("a"), item("b"), item("c")];
const added = (object: unknown) => `${JSON.stringify({ type: "ADDED", object })}\n`;

/** What the stub is asked, in order: `L` a watch list, `P` a list's first page, `W` a watch from a resourceVersion. */
type Asked = "L" | "P" | "W";

/**
 * A reflector (idle bound 200 ms, its whole watch ≥ 31 s) of a server whose answer to the n-th
 * request of each kind `answer` gives: `held` never sends its headers; otherwise lists by pages of
 * one, and `answer` writes a stream's lines (the stream then stays open).
 */
async function cacheOf(answer: (asked: Asked, nth: number) => "held" | string) {
  const asked: Asked[] = [];
  const { client } = await kubeStub((req, res) => {
    const url = new URL(req.url ?? "/", "http://api");
    const kind: Asked =
      url.searchParams.get("watch") !== "true"
        ? "P"
        : url.searchParams.get("sendInitialEvents") === "true"
          ? "L"
          : "W";
    const at = Number(url.searchParams.get("continue") ?? "0");
    if (kind !== "P" || at === 0) asked.push(kind);
    const lines = answer(kind, asked.filter((k) => k === kind).length);
    if (lines === "held") return;
    res.writeHead(200, { "content-type": "application/json" });
    if (kind !== "P") return void res.write(lines);
    const next = at + 1 < items.length ? { continue: String(at + 1) } : {};
    res.end(JSON.stringify({ metadata: { resourceVersion: "9", ...next }, items: [items[at]] }));
  });
  const { cache, messages } = thingsReflector(client, {
    watchIdleMs: 200,
    clock: new ManualClock({ sleepsInstantly: true }),
  });
  const stop = new AbortController();
  const running = cache.run(stop.signal);
  const stopped = () => {
    stop.abort();
    return running;
  };
  return { cache, messages, asked: () => asked.join(" "), stop: stopped };
}

const names = (cache: Reflector<KubeObject>) => cache.list().map((o) => o.metadata.name);

describe("a watch whose answer's headers never come", () => {
  it("is watched again from its resourceVersion after the idle bound, and the cache follows the server once it answers", async () => {
    const { cache, messages, asked, stop } = await cacheOf((kind, nth) => {
      if (kind === "L") return initialEvents(items, "12");
      if (kind === "W" && nth === 1) return "held";
      return added({ metadata: { namespace: "ns", name: "d", resourceVersion: "13" } });
    });
    try {
      await cache.synced;
      // The watch list's stream stays open: nothing resumes until it is silent for 200 ms.
      await vi.waitFor(() => expect(names(cache)).toEqual(["a", "b", "c", "d"]), { timeout: 4_000 });
      // Resumed, not listed again (the one after it may have gone idle too by now).
      expect(asked()).toMatch(/^L W W( W)*$/);
      expect(cache.resourceVersion).toBe("13");
      expect(messages()).toContain("list/watch failed; retrying with backoff");
    } finally {
      await stop();
    }
  });

  it("is a watch list gone silent: the list goes by pages this time", async () => {
    const { cache, messages, asked, stop } = await cacheOf((kind, nth) =>
      kind === "L" && nth === 1 ? "held" : "",
    );
    try {
      await cache.synced;
      expect(names(cache)).toEqual(["a", "b", "c"]);
      await vi.waitFor(() => expect(asked()).toMatch(/^L P W/));
      expect(messages()).toContain(
        "the watch list went silent before its initial events ended; listing by pages this time",
      );
    } finally {
      await stop();
    }
  });
});
