/**
 * TurnGate against a model: random groups ask for writes whose tasks end, fail, throw at once or
 * hang until told, in random order. After every step at most `atOnce` run, at most `maxWaiting`
 * wait, none waits while a place is free, no group starts twice while another waits, a run is
 * refused only when full with no line longer by two, and once every task ends nothing is held
 * and every run has settled once.
 */
import { describe, expect, it } from "vitest";
import { TurnGate } from "../../src/kube/events.ts";
import { seeded } from "../support/seeded.ts";

function assert(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(message);
}

interface Run {
  group: string;
  started: boolean;
  settled: number;
  result: unknown;
  end: ((fail: boolean) => void) | undefined;
}

async function settle(): Promise<void> {
  for (let i = 0; i < 6; i++) await Promise.resolve();
}

async function run(seed: number): Promise<void> {
  const random = seeded(seed);
  const atOnce = 1 + random.int(4);
  const maxWaiting = random.int(12);
  const gate = new TurnGate(atOnce, maxWaiting);
  const groups = ["a", "b", "c", "d"];
  const runs: Run[] = [];
  const starts: string[] = [];
  const waiting = () => runs.filter((r) => !r.started && r.settled === 0);
  const running = () => runs.filter((r) => r.started && r.end !== undefined);

  const ask = (group: string) => {
    const entry: Run = { group, started: false, settled: 0, result: undefined, end: undefined };
    runs.push(entry);
    const kind = random.int(4);
    const lines = new Map<string, number>();
    for (const w of waiting()) lines.set(w.group, (lines.get(w.group) ?? 0) + 1);
    const full = gate.load.waiting >= maxWaiting && (gate.load.running >= atOnce || gate.load.waiting > 0);
    const longest = Math.max(0, ...lines.values());
    const task = () => {
      entry.started = true;
      starts.push(group);
      if (kind === 0) throw new Error("thrown at once");
      return new Promise<string>((resolve, reject) => {
        entry.end = (fail) => {
          entry.end = undefined;
          if (fail) reject(new Error("failed"));
          else resolve(group);
        };
      });
    };
    gate.run(group, task).then(
      (result) => {
        entry.settled += 1;
        entry.result = result;
      },
      (error: unknown) => {
        entry.settled += 1;
        entry.result = error;
      },
    );
    return { full, room: longest >= (lines.get(group) ?? 0) + 2 };
  };

  const check = () => {
    const { running: r, waiting: w } = gate.load;
    assert(r === running().length, `running ${r}, the model ${running().length}`);
    assert(w === waiting().length, `waiting ${w}, the model ${waiting().length}`);
    assert(r <= atOnce, "over atOnce");
    assert(w <= maxWaiting, "over maxWaiting");
    assert(w === 0 || r === atOnce, "a write waits with a place free");
    for (const entry of runs) assert(entry.settled <= 1, "a run settled twice");
  };

  for (let i = 0; i < 200; i++) {
    const live = running();
    if (live.length > 0 && random.chance(0.45)) {
      // No group starts twice while another waits: watch the starts this end brings.
      const waitingGroups = new Set(waiting().map((w) => w.group));
      const before = starts.length;
      random.pick(live).end?.(random.chance(0.3));
      await settle();
      const started = starts.slice(before);
      for (const group of waitingGroups) {
        const first = started.indexOf(group);
        const others = started.slice(0, first === -1 ? started.length : first);
        assert(new Set(others).size === others.length, `a group started twice while ${group} waited`);
      }
    } else {
      const group = random.pick(groups);
      const before = runs.length;
      const { full, room } = ask(group);
      await settle();
      const entry = runs[before] as Run;
      // Refused at once only when full and no line is longer than its own by two.
      if (!entry.started && entry.settled === 1) assert(full && !room, "refused with room");
    }
    check();
  }
  while (running().length > 0) {
    for (const entry of running()) entry.end?.(false);
    await settle();
    check();
  }
  expect(gate.load).toEqual({ running: 0, waiting: 0 });
  expect(runs.every((entry) => entry.settled === 1)).toBe(true);
  // A run not made resolves undefined and never started; every one started resolved its result.
  for (const entry of runs) if (!entry.started) expect(entry.result).toBeUndefined();
}

describe("TurnGate, against a model", () => {
  it("bounds, turns and room hold, and every run settles once (200 seeds)", async () => {
    for (let seed = 1; seed <= 200; seed++) await run(seed * 65537);
  });
});
