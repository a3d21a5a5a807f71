/**
 * ResponseMemory against a model: accounts of random owners take random weights, some with a
 * signal that aborts, and close at random, in the middle of a wait too. After every step what is
 * held is what the granted takes hold, within the room and each owner's share, the first waiter
 * its owner's share lets through waits only for room, and once every account closes nothing is
 * held and no take is left pending.
 */
import { describe, expect, it } from "vitest";
import { type MemoryAccount, ResponseMemory } from "../../src/api/budgets.ts";
import { OverflowError } from "../../src/api/errors.ts";
import { seeded } from "../support/seeded.ts";

function assert(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(message);
}

interface Account {
  owner: string | undefined;
  account: MemoryAccount;
  /** What its granted takes hold (0 once closed). */
  holds: number;
  closed: boolean;
}

interface Take {
  of: Account;
  weight: number;
  settled: boolean;
  stop: AbortController | undefined;
}

/** Lets the promise jobs run: a grant reaches its take's caller within a few. */
async function settle(): Promise<void> {
  for (let i = 0; i < 8; i++) await Promise.resolve();
}

async function run(seed: number): Promise<void> {
  const random = seeded(seed);
  const capacity = 50 + random.int(200);
  const memory = new ResponseMemory(capacity, random.pick([0.25, 0.5, 1]));
  const owners = ["namespace/a", "namespace/b", "namespace/c", undefined];
  const accounts: Account[] = [];
  const takes: Take[] = [];
  const pending = () => takes.filter((t) => !t.settled);

  const take = (of: Account) => {
    const weight = 1 + random.int(Math.ceil(capacity / 3));
    const stop = random.chance(0.3) ? new AbortController() : undefined;
    const entry: Take = { of, weight, settled: false, stop };
    takes.push(entry);
    of.account.take(weight, stop?.signal).then(
      () => {
        entry.settled = true;
        // A take granted to an account closed meanwhile holds nothing.
        if (!of.closed) of.holds += weight;
      },
      (error: unknown) => {
        entry.settled = true;
        assert(
          error instanceof OverflowError || error === stop?.signal.reason || String(error).includes("closed"),
          `unexpected ${String(error)}`,
        );
      },
    );
  };

  const check = () => {
    const live = accounts.filter((a) => !a.closed);
    const held = live.reduce((sum, a) => sum + a.holds, 0);
    assert(memory.held === held, `held ${memory.held}, the accounts hold ${held}`);
    assert(held <= memory.capacity, "over the capacity");
    const byOwner = new Map<string, number>();
    for (const a of live)
      if (a.owner !== undefined) byOwner.set(a.owner, (byOwner.get(a.owner) ?? 0) + a.holds);
    for (const [owner, weight] of byOwner) assert(weight <= memory.ownerCapacity, `${owner} over its share`);
    // The first waiter its owner's share lets through waits only for room in all.
    for (const t of pending()) {
      const ownerHeld = t.of.owner === undefined ? 0 : (byOwner.get(t.of.owner) ?? 0);
      if (t.of.owner !== undefined && ownerHeld + t.weight > memory.ownerCapacity) continue;
      assert(
        held + t.weight > memory.capacity,
        `a take of ${t.weight} waits with ${held} of ${capacity} held`,
      );
      break;
    }
  };

  for (let i = 0; i < 150; i++) {
    const dice = random.next();
    const open = accounts.filter((a) => !a.closed);
    if (dice < 0.25 || open.length === 0) {
      const account: Account = {
        owner: random.pick(owners),
        account: undefined as never,
        holds: 0,
        closed: false,
      };
      account.account = memory.open(account.owner);
      accounts.push(account);
      take(account);
    } else if (dice < 0.5) take(random.pick(open));
    else if (dice < 0.65) {
      const waiting = pending().filter((t) => t.stop !== undefined);
      if (waiting.length > 0) random.pick(waiting).stop?.abort(new Error("caller gave up"));
    } else {
      // Closed, now and then while a take of it waits.
      const account = random.pick(open);
      account.closed = true;
      account.holds = 0;
      account.account.close();
    }
    await settle();
    check();
  }
  for (const a of accounts) {
    a.closed = true;
    a.holds = 0;
    a.account.close();
  }
  await settle();
  for (const t of pending()) t.stop?.abort(new Error("caller gave up"));
  await settle();
  expect(memory.held).toBe(0);
  expect(pending().filter((t) => t.stop !== undefined)).toEqual([]);
  // Nothing is held for an owner either: each takes its whole share at once.
  for (const owner of owners) {
    const fresh = memory.open(owner);
    await fresh.take(memory.ownerCapacity);
    fresh.close();
  }
  expect(memory.held).toBe(0);
}

describe("ResponseMemory, against a model", () => {
  it("holds what its accounts hold, within every bound, and nothing once they close (150 seeds)", async () => {
    for (let seed = 1; seed <= 150; seed++) await run(seed * 31337);
  });
});
