// Lookups by id of one connection waiting at the same moment share `deployment_ids` calls, a
// hundred ids per call; each caller still gets its own id's answer, error and abort.
import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import type { Deployment, UnreadableDeployment } from "../../src/api/wire.ts";
import { IdBatches, type IdListing, POLL_BATCH } from "../../src/reconcile/service/deployments-port.ts";
import { UnreadableDeploymentError } from "../../src/reconcile/service/lookup-errors.ts";
import { remote } from "./plan-fixtures.ts";

const id = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;
const named = (n: number) => remote({ id: id(n), name: `agent-${n}` });
/** An id with letters, so that its upper case differs. */
const lettered = "abcdef00-0000-4000-8000-000000000003";

/** One listing a batch made: the ids it asked, and the signal it ran under. */
interface Call {
  ids: string[];
  signal: AbortSignal;
}

/** A page of a listing the fake answers: deployments, and unreadable items. */
interface Page {
  items: Deployment[];
  unreadable?: UnreadableDeployment[];
}

/**
 * A fake listing by ids over the deployments `held`, counting its calls. `pages(ids)` may answer
 * otherwise (foreign items, unreadable ones, a service ignoring the filter); `gate` holds every
 * call until it resolves; `fail` fails them.
 */
function fakeService(
  held: Deployment[],
  options: {
    pages?: (ids: readonly string[]) => Page[];
    gate?: Promise<void>;
    fail?: Error;
  } = {},
) {
  const calls: Call[] = [];
  let pagesRead = 0;
  const byId = new Map(held.map((d) => [d.id, d]));
  const list: IdListing = (ids, signal, skipped) => {
    calls.push({ ids: [...ids], signal });
    return {
      async *[Symbol.asyncIterator]() {
        const pages = options.pages?.(ids) ?? [{ items: ids.flatMap((i) => byId.get(i) ?? []) }];
        for (const page of pages) {
          if (options.gate)
            await Promise.race([
              options.gate,
              new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason))),
            ]);
          if (options.fail) throw options.fail;
          signal.throwIfAborted();
          pagesRead += 1;
          for (const item of page.unreadable ?? []) skipped(item);
          yield* page.items;
        }
      },
    };
  };
  const singles: string[] = [];
  const single = async (i: string) => {
    singles.push(i);
    throw new Error(`id: "${i}" is not a uuid`);
  };
  const defers: (() => void)[] = [];
  return {
    calls,
    singles,
    get pagesRead() {
      return pagesRead;
    },
    /** Deferrals asked: a lookup waits one `setImmediate` turn, no more. */
    defers,
    batches: new IdBatches({
      list,
      single,
      defer: (flush) => {
        defers.push(flush);
        setImmediate(flush);
      },
    }),
  };
}

const signal = () => new AbortController().signal;
const turn = () => new Promise((resolve) => setImmediate(resolve));

describe("IdBatches: lookups by id coalesced", () => {
  it("a lone lookup costs one call of one id and one setImmediate turn, as the single lookup did", async () => {
    const fake = fakeService([named(1)]);
    await expect(fake.batches.get(id(1), signal())).resolves.toEqual(named(1));
    expect(fake.calls.map((c) => c.ids)).toEqual([[id(1)]]);
    expect(fake.defers).toHaveLength(1);
    await expect(fake.batches.get(id(2), signal())).resolves.toBeUndefined();
    expect(fake.calls).toHaveLength(2);
    expect(fake.defers).toHaveLength(2);
  });

  it("16 concurrent lookups cost one call; each caller gets its own id's answer", async () => {
    const held = Array.from({ length: 12 }, (_, i) => named(i));
    const fake = fakeService(held);
    const answers = await Promise.all(
      Array.from({ length: 16 }, (_, i) => fake.batches.get(id(i), signal())),
    );
    expect(fake.calls).toHaveLength(1);
    expect(fake.calls[0]?.ids).toHaveLength(16);
    answers.forEach((answer, i) => {
      expect(answer).toEqual(i < 12 ? named(i) : undefined);
    });
  });

  it(`250 concurrent lookups cost 3 calls of at most ${POLL_BATCH} ids; an id asked twice is sent once`, async () => {
    const held = Array.from({ length: 250 }, (_, i) => named(i));
    const fake = fakeService(held);
    const answers = await Promise.all([
      ...Array.from({ length: 250 }, (_, i) => fake.batches.get(id(i), signal())),
      fake.batches.get(id(7), signal()),
    ]);
    expect(fake.calls.map((c) => c.ids.length)).toEqual([100, 100, 50]);
    expect(answers).toEqual([...held, named(7)]);
  });

  it("lookups made while a batch is in flight go out together once it ended", async () => {
    let open = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const fake = fakeService(
      Array.from({ length: 10 }, (_, i) => named(i)),
      { gate },
    );
    const first = fake.batches.get(id(0), signal());
    await turn();
    expect(fake.calls).toHaveLength(1);
    const later = Array.from({ length: 9 }, (_, i) => fake.batches.get(id(i + 1), signal()));
    await turn();
    await turn();
    // Still waiting for the first call (its rate-limit token, say).
    expect(fake.calls).toHaveLength(1);
    open();
    expect(await first).toEqual(named(0));
    expect(await Promise.all(later)).toEqual(Array.from({ length: 9 }, (_, i) => named(i + 1)));
    expect(fake.calls.map((c) => c.ids.length)).toEqual([1, 9]);
  });

  it("a caller that gives up rejects with its reason alone; the others get their answers", async () => {
    let open = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const fake = fakeService([named(1), named(2)], { gate });
    const quitter = new AbortController();
    const kept = signal();
    const one = fake.batches.get(id(1), quitter.signal);
    const two = fake.batches.get(id(2), kept);
    await turn();
    quitter.abort(new Error("resource deleted"));
    await expect(one).rejects.toThrow("resource deleted");
    expect(fake.calls[0]?.signal.aborted).toBe(false);
    open();
    await expect(two).resolves.toEqual(named(2));
    // No listener stays on the callers' signals.
    expect(getEventListeners(quitter.signal, "abort")).toHaveLength(0);
    expect(getEventListeners(kept, "abort")).toHaveLength(0);
  });

  it("a batch every caller gave up is aborted, and the next lookups do not wait for it", async () => {
    const fake = fakeService([named(1), named(2)], { gate: new Promise(() => {}) });
    const quitters = [new AbortController(), new AbortController()];
    const lookups = quitters.map((q, i) => fake.batches.get(id(i + 1), q.signal));
    await turn();
    quitters[0]?.abort(new Error("first"));
    expect(fake.calls[0]?.signal.aborted).toBe(false);
    quitters[1]?.abort(new Error("second"));
    expect(fake.calls[0]?.signal.aborted).toBe(true);
    await expect(lookups[0]).rejects.toThrow("first");
    await expect(lookups[1]).rejects.toThrow("second");
    // A lookup after it goes out at once.
    void fake.batches.get(id(1), signal()).catch(() => {});
    await turn();
    expect(fake.calls).toHaveLength(2);
  });

  it("a caller that gives up before its batch went out is not sent", async () => {
    const fake = fakeService([named(1), named(2)]);
    const quitter = new AbortController();
    const one = fake.batches.get(id(1), quitter.signal);
    const two = fake.batches.get(id(2), signal());
    quitter.abort(new Error("gone"));
    await expect(one).rejects.toThrow("gone");
    await expect(two).resolves.toEqual(named(2));
    expect(fake.calls.map((c) => c.ids)).toEqual([[id(2)]]);
  });

  it("a failed call fails every caller of its batch with its error, and leaves no listener", async () => {
    const failure = new Error("503 unavailable");
    const fake = fakeService([named(1)], { fail: failure });
    const signals = [signal(), signal(), signal()];
    const results = await Promise.allSettled(signals.map((s, i) => fake.batches.get(id(i), s)));
    expect(results).toEqual(results.map(() => ({ status: "rejected", reason: failure })));
    expect(fake.calls).toHaveLength(1);
    for (const s of signals) expect(getEventListeners(s, "abort")).toHaveLength(0);
  });

  it("ignores items not asked for, and reads an id exactly", async () => {
    const upper = remote({ id: lettered.toUpperCase(), name: "upper" });
    const fake = fakeService([], {
      pages: () => [{ items: [named(99), upper, named(1), named(98)] }],
    });
    const [one, three] = await Promise.all([
      fake.batches.get(id(1), signal()),
      fake.batches.get(lettered, signal()),
    ]);
    expect(one).toEqual(named(1));
    expect(three).toBeUndefined();
  });

  it("an unreadable item fails only the id it may be, and only when that id did not come", async () => {
    const fake = fakeService([], {
      pages: () => [
        {
          items: [named(2)],
          unreadable: [
            { id: lettered.toUpperCase(), field: "status", message: "status: not a string" },
            { id: id(2), field: "name", message: "name: missing" },
            { id: id(50), field: "name", message: "not asked" },
          ],
        },
      ],
    });
    const [one, two, three] = await Promise.allSettled([
      fake.batches.get(lettered, signal()),
      fake.batches.get(id(2), signal()),
      fake.batches.get(id(3), signal()),
    ]);
    expect(one).toMatchObject({ status: "rejected", reason: expect.any(UnreadableDeploymentError) });
    expect(one.status === "rejected" && (one.reason as Error).message).toBe("status: not a string");
    expect(two).toEqual({ status: "fulfilled", value: named(2) });
    expect(three).toEqual({ status: "fulfilled", value: undefined });
  });

  it("an unreadable item without an id may be any missing id's: those fail, the found ones do not", async () => {
    const fake = fakeService([], {
      pages: () => [{ items: [named(2)], unreadable: [{ field: "id", message: "id: missing" }] }],
    });
    const [one, two] = await Promise.allSettled([
      fake.batches.get(id(1), signal()),
      fake.batches.get(id(2), signal()),
    ]);
    expect(one).toMatchObject({ status: "rejected", reason: { message: "id: missing" } });
    expect(two).toEqual({ status: "fulfilled", value: named(2) });
  });

  it("a service ignoring the filter is read to the end: an id on a later page is found, none is told gone early", async () => {
    const others = (from: number) => Array.from({ length: 100 }, (_, i) => named(1000 + from + i));
    const fake = fakeService([], {
      pages: () => [
        { items: others(0) },
        { items: [...others(100).slice(0, 99), named(5)] },
        { items: [named(6), ...others(300).slice(0, 10)] },
      ],
    });
    const answers = await Promise.all([5, 6, 7].map((n) => fake.batches.get(id(n), signal())));
    expect(answers).toEqual([named(5), named(6), undefined]);
    expect(fake.calls).toHaveLength(1);
    expect(fake.pagesRead).toBe(3);
  });

  it("stops reading once every id came", async () => {
    const fake = fakeService([], {
      pages: () => [{ items: [named(1)] }, { items: [named(2)] }, { items: [named(3)] }],
    });
    await Promise.all([1, 2].map((n) => fake.batches.get(id(n), signal())));
    expect(fake.pagesRead).toBe(2);
  });

  it("an id that is not a uuid never joins a batch: the single lookup reports it", async () => {
    const fake = fakeService([named(1)]);
    const [bad, good] = await Promise.allSettled([
      fake.batches.get("../etc", signal()),
      fake.batches.get(id(1), signal()),
    ]);
    expect(bad).toMatchObject({ status: "rejected", reason: { message: 'id: "../etc" is not a uuid' } });
    expect(good).toEqual({ status: "fulfilled", value: named(1) });
    expect(fake.singles).toEqual(["../etc"]);
    expect(fake.calls.map((c) => c.ids)).toEqual([[id(1)]]);
  });

  it("an aborted signal rejects at once, with no call", async () => {
    const fake = fakeService([named(1)]);
    const gone = new AbortController();
    gone.abort(new Error("already"));
    await expect(fake.batches.get(id(1), gone.signal)).rejects.toThrow("already");
    await turn();
    expect(fake.calls).toHaveLength(0);
  });
});

/** A read-ahead over the ids `share`, recording what it was asked and what it found. */
function aheadOf(share: string[]) {
  const asked: { room: number; asked: string[] }[] = [];
  const found: Deployment[] = [];
  let next = 0;
  return {
    asked,
    found,
    readAhead: {
      ids: (room: number, skip: ReadonlySet<string>) => {
        asked.push({ room, asked: [...skip] });
        const ids: string[] = [];
        while (ids.length < room && next < share.length) {
          const i = share[next++] as string;
          if (!skip.has(i)) ids.push(i);
        }
        return ids;
      },
      found: (d: Deployment) => found.push(d),
    },
  };
}

describe("IdBatches: read-ahead fills a call's room", () => {
  it("a lone lookup's call asks 99 ids ahead: their answers go to the read-ahead, the caller gets its own", async () => {
    const held = Array.from({ length: 300 }, (_, i) => named(i));
    const fake = fakeService(held);
    const ahead = aheadOf(Array.from({ length: 300 }, (_, i) => id(i)));
    fake.batches.readAheadFrom(ahead.readAhead);
    await expect(fake.batches.get(id(0), signal())).resolves.toEqual(named(0));
    // The caller is answered as its item comes; the call reads on for the ids ahead.
    await turn();
    expect(fake.calls.map((c) => c.ids.length)).toEqual([POLL_BATCH]);
    expect(fake.calls[0]?.ids[0]).toBe(id(0));
    expect(ahead.asked).toEqual([{ room: POLL_BATCH - 1, asked: [id(0)] }]);
    // The caller's id is not read ahead twice: ids 1..99.
    expect(ahead.found).toEqual(held.slice(1, 100));
  });

  it("only the last of several batches is filled, and never a call of its own", async () => {
    const held = Array.from({ length: 400 }, (_, i) => named(i));
    const fake = fakeService(held);
    const ahead = aheadOf(Array.from({ length: 400 }, (_, i) => id(399 - i)));
    fake.batches.readAheadFrom(ahead.readAhead);
    await Promise.all(Array.from({ length: 150 }, (_, i) => fake.batches.get(id(i), signal())));
    expect(fake.calls.map((c) => c.ids.length)).toEqual([100, 100]);
    expect(ahead.found.map((d) => d.id)).toEqual(Array.from({ length: 50 }, (_, i) => id(399 - i)));
    // Nothing waits: no call.
    await turn();
    await turn();
    expect(fake.calls).toHaveLength(2);
  });

  it("a lookup of an id a call in flight reads ahead makes its own call after it: a live read is never older than its ask", async () => {
    let open = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const held = Array.from({ length: 10 }, (_, i) => named(i));
    const fake = fakeService(held, { gate });
    const ahead = aheadOf(held.map((d) => d.id));
    fake.batches.readAheadFrom(ahead.readAhead);
    const first = fake.batches.get(id(0), signal());
    await turn();
    expect(fake.calls.map((c) => c.ids.length)).toEqual([10]);
    const later = fake.batches.get(id(5), signal());
    await turn();
    await turn();
    expect(fake.calls).toHaveLength(1);
    open();
    expect(await first).toEqual(named(0));
    expect(await later).toEqual(named(5));
    // Read ahead by the first call, and asked again by its own, sent once the first ended.
    expect(ahead.found.map((d) => d.id)).toContain(id(5));
    expect(fake.calls.map((c) => c.ids[0])).toEqual([id(0), id(5)]);
  });

  it("a lookup of an id read ahead by a call that ended is asked again", async () => {
    const held = Array.from({ length: 5 }, (_, i) => named(i));
    const fake = fakeService(held);
    const ahead = aheadOf(held.map((d) => d.id));
    fake.batches.readAheadFrom(ahead.readAhead);
    await fake.batches.get(id(0), signal());
    await turn();
    expect(ahead.found).toEqual(held.slice(1));
    await expect(fake.batches.get(id(3), signal())).resolves.toEqual(named(3));
    expect(fake.calls.map((c) => c.ids)).toEqual([held.map((d) => d.id), [id(3)]]);
  });

  it("ids read ahead keep no page going: a service ignoring the filter is read no further than the page that answered the callers", async () => {
    const others = (from: number) => Array.from({ length: 100 }, (_, i) => named(1000 + from + i));
    const fake = fakeService([], {
      pages: () => [
        { items: [named(1), ...others(0).slice(0, 99)] },
        { items: others(100) },
        { items: others(200) },
      ],
    });
    const ahead = aheadOf([id(2), id(3)]);
    fake.batches.readAheadFrom(ahead.readAhead);
    await expect(fake.batches.get(id(1), signal())).resolves.toEqual(named(1));
    expect(fake.pagesRead).toBe(1);
    expect(ahead.found).toEqual([]);
  });

  it("a batch whose callers all gave up is aborted, whatever it reads ahead", async () => {
    const fake = fakeService([named(1), named(2)], { gate: new Promise(() => {}) });
    const ahead = aheadOf([id(2)]);
    fake.batches.readAheadFrom(ahead.readAhead);
    const gone = new AbortController();
    const lookup = fake.batches.get(id(1), gone.signal);
    await turn();
    gone.abort(new Error("gave up"));
    await expect(lookup).rejects.toThrow("gave up");
    expect(fake.calls[0]?.signal.aborted).toBe(true);
    await turn();
    // Its read-ahead id is free again: a lookup of it makes a call of its own.
    const later = new AbortController();
    const again = fake.batches.get(id(2), later.signal);
    await turn();
    expect(fake.calls.map((c) => c.ids[0])).toEqual([id(1), id(2)]);
    later.abort(new Error("done"));
    await expect(again).rejects.toThrow("done");
  });

  it("ids that are not uuids, or asked already, are not read ahead", async () => {
    const fake = fakeService([named(1), named(2)]);
    fake.batches.readAheadFrom({ ids: () => ["../etc", id(1), id(2), id(2)], found: () => {} });
    await fake.batches.get(id(1), signal());
    expect(fake.calls.map((c) => c.ids)).toEqual([[id(1), id(2)]]);
  });
});
