import { Readable } from "node:stream";
import { createGunzip, gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { CONTAINER_WEIGHT, JsonWeigher, ResponseMemory, SEPARATOR_WEIGHT } from "../../src/api/budgets.ts";
import { OverflowError } from "../../src/api/errors.ts";
import { readBody } from "../../src/api/exchange.ts";

const MiB = 1024 * 1024;

describe("JsonWeigher", () => {
  it("weighs the bytes, each object or array, and each separator", () => {
    const weigher = new JsonWeigher();
    expect(weigher.weigh(Buffer.from('{"a":[1,2]}'))).toBe(11 + 2 * CONTAINER_WEIGHT + 2 * SEPARATOR_WEIGHT);
    expect(weigher.weigh(Buffer.from('"padding"'))).toBe(9);
  });

  it("weighs brackets and separators inside strings as text, across chunks and escapes", () => {
    const weigher = new JsonWeigher();
    // A value full of brackets parses to one string: its bytes, however many brackets.
    expect(weigher.weigh(Buffer.from('{"a":"[[[,,:'))).toBe(12 + CONTAINER_WEIGHT + SEPARATOR_WEIGHT);
    // Still inside the string: an escaped quote does not end it.
    expect(weigher.weigh(Buffer.from('{{\\"[[,'))).toBe(7);
    // The string ends here; what follows is structure again.
    expect(weigher.weigh(Buffer.from('",["x"]}'))).toBe(8 + CONTAINER_WEIGHT + SEPARATOR_WEIGHT);
  });

  it("weighs what parses into many objects far above its size", () => {
    const text = Buffer.from(`[${Array(1000).fill("{}").join(",")}]`);
    expect(new JsonWeigher().weigh(text)).toBeGreaterThan(60 * text.length);
  });
});

describe("ResponseMemory", () => {
  it("refuses an answer whose own weight exceeds the capacity", async () => {
    const memory = new ResponseMemory(100);
    const account = memory.open();
    await account.take(60);
    await expect(account.take(41)).rejects.toEqual(
      new OverflowError({ bound: "memory", limit: 100, shared: false }),
    );
    account.close();
    expect(memory.held).toBe(0);
  });

  it("makes an answer wait while others hold the room, in arrival order, until they close", async () => {
    const memory = new ResponseMemory(100);
    const first = memory.open();
    await first.take(90);
    const order: string[] = [];
    const second = memory.open();
    const third = memory.open();
    const secondTakes = second.take(50).then(() => order.push("second"));
    const thirdTakes = third.take(5).then(() => order.push("third"));
    await Promise.resolve();
    // The third would fit, but waits its turn behind the second.
    expect(order).toEqual([]);
    first.close();
    await Promise.all([secondTakes, thirdTakes]);
    expect(order).toEqual(["second", "third"]);
    expect(memory.held).toBe(55);
    second.close();
    third.close();
    third.close();
    expect(memory.held).toBe(0);
  });

  it("never makes an answer that holds a part wait: it is refused, so that none waits forever", async () => {
    const memory = new ResponseMemory(100);
    const first = memory.open();
    const second = memory.open();
    await first.take(50);
    await second.take(40);
    await expect(first.take(20)).rejects.toEqual(
      new OverflowError({ bound: "memory", limit: 100, shared: true }),
    );
    first.close();
    await second.take(20);
    expect(memory.held).toBe(60);
  });

  it("a wait given up gives its turn to the next one", async () => {
    const memory = new ResponseMemory(100);
    const first = memory.open();
    await first.take(90);
    const stop = new AbortController();
    const abandoned = memory.open().take(50, stop.signal);
    const next = memory.open().take(10);
    stop.abort(new Error("caller gave up"));
    await expect(abandoned).rejects.toThrow("caller gave up");
    await next;
    expect(memory.held).toBe(100);
  });

  it("gives back the weight of a take that waited while its account was closed (no signal aborted)", async () => {
    const memory = new ResponseMemory(100, 0.5);
    const first = memory.open("namespace/a");
    await first.take(45);
    const other = memory.open("namespace/b");
    await other.take(50);
    const late = memory.open("namespace/a");
    const taking = late.take(10);
    // Abandoned: its answer is dropped while its take waits for room.
    late.close();
    first.close();
    await expect(taking).rejects.toThrow("the account is closed");
    other.close();
    expect(memory.held).toBe(0);
    // Owner a holds nothing: its whole share is taken at once.
    const again = memory.open("namespace/a");
    await again.take(50);
    expect(memory.held).toBe(50);
  });

  it("holds one owner's answers to its share, and lets another owner's answer past the waiting ones at their share", async () => {
    // A tenant's answers that trickle hold a quarter at most (here): another's is read at once.
    const memory = new ResponseMemory(100, 0.25);
    expect(memory.ownerCapacity).toBe(25);
    const hostile = [memory.open("namespace/team-a"), memory.open("namespace/team-a")];
    await hostile[0]?.take(15);
    await hostile[1]?.take(8);
    // Its share near full: its next answer waits (holding nothing), a growing one is refused.
    let waited = false;
    const third = memory.open("namespace/team-a");
    const thirdTakes = third.take(10).then(() => (waited = true));
    await expect(hostile[0]?.take(5)).rejects.toEqual(
      new OverflowError({ bound: "memory", limit: 25, shared: true, tenant: true }),
    );
    // Team b's answer passes the waiting one of team a: there is room in all, and in its share.
    const other = memory.open("namespace/team-b");
    await other.take(25);
    expect(memory.held).toBe(48);
    // One answer heavier than its owner's share is refused whole.
    await expect(memory.open("namespace/team-c").take(26)).rejects.toEqual(
      new OverflowError({ bound: "memory", limit: 25, shared: false, tenant: true }),
    );
    expect(waited).toBe(false);
    hostile[0]?.close();
    await thirdTakes;
    expect(waited).toBe(true);
    third.close();
    other.close();
    hostile[1]?.close();
    expect(memory.held).toBe(0);
  });

  it("says which bound a growing answer met: the room in all, or its owner's share", async () => {
    const memory = new ResponseMemory(100, 0.5);
    const [a, a2, b] = [memory.open("a"), memory.open("a"), memory.open("b")];
    await a.take(30);
    await a2.take(15);
    await b.take(45);
    await expect(a.take(6)).rejects.toEqual(
      new OverflowError({ bound: "memory", limit: 50, shared: true, tenant: true }),
    );
    const c = memory.open("c");
    await c.take(10);
    await expect(b.take(1)).rejects.toEqual(new OverflowError({ bound: "memory", limit: 100, shared: true }));
  });

  it("keeps the arrival order for the room in all: a later small answer does not pass an earlier large one", async () => {
    const memory = new ResponseMemory(100, 0.5);
    const [a, b] = [memory.open("a"), memory.open("b")];
    await a.take(50);
    await b.take(40);
    const order: string[] = [];
    const large = memory
      .open("c")
      .take(30)
      .then(() => order.push("large"));
    const small = memory
      .open("d")
      .take(5)
      .then(() => order.push("small"));
    await Promise.resolve();
    expect(order).toEqual([]);
    a.close();
    await Promise.all([large, small]);
    expect(order).toEqual(["large", "small"]);
  });
});

describe("readBody", () => {
  it("cuts a gzip bomb while it inflates: the inflater never gets far into its input", {
    timeout: 30_000,
  }, async () => {
    const bomb = gzipSync(Buffer.alloc(64 * MiB, "x"));
    const gunzip = createGunzip();
    Readable.from([bomb]).pipe(gunzip);
    const account = new ResponseMemory(1024 * MiB).open();
    await expect(readBody(gunzip, undefined, { maxBytes: 4 * MiB, account })).rejects.toEqual(
      new OverflowError({ bound: "bytes", limit: 4 * MiB }),
    );
    await new Promise((resolve) => setImmediate(resolve));
    // 4 MiB is a sixteenth of what the bomb inflates to: the input read is about that share.
    expect(gunzip.bytesWritten).toBeLessThan(bomb.length / 4);
  });

  it("refuses a declared length past the bound before reading", async () => {
    let read = false;
    const chunks = (async function* () {
      read = true;
      yield Buffer.from("{}");
    })();
    const account = new ResponseMemory(MiB).open();
    await expect(readBody(chunks, 10 * MiB, { maxBytes: MiB, account })).rejects.toBeInstanceOf(
      OverflowError,
    );
    expect(read).toBe(false);
  });

  it("reads a body within its bounds whole, holding its weight until the account closes", async () => {
    const memory = new ResponseMemory(MiB);
    const account = memory.open();
    const body = await readBody(Readable.from([Buffer.from('{"a":'), Buffer.from("1}")]), undefined, {
      maxBytes: 7,
      account,
    });
    expect(body.toString()).toBe('{"a":1}');
    expect(memory.held).toBe(7 + CONTAINER_WEIGHT + SEPARATOR_WEIGHT);
    account.close();
    expect(memory.held).toBe(0);
  });
});
