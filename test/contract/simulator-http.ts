/**
 * Test helpers for the simulator's contract tests: one HTTP call over loopback, answered as JSON,
 * and a simulator per test on a manual clock.
 */
import { afterEach } from "vitest";
import { type RunningSimulator, type SimulatorOptions, startSimulator } from "../../src/simulator/server.ts";
import { ManualClock } from "../support/manual-clock.ts";

/** The instant the contract tests' manual clocks start at. */
export const SIMULATED_EPOCH = Date.parse("2030-01-01T00:00:00.000Z");

/** The answer to one call: status, headers, and the body parsed as JSON (undefined when empty). */
export interface Answer {
  status: number;
  headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON answers.
  body: any;
}

/** Sends `method path` to the simulator with an optional JSON body (a string is sent verbatim). */
export async function call(
  sim: RunningSimulator | string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const base = typeof sim === "string" ? sim : sim.url;
  const init: RequestInit = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = typeof body === "string" ? body : JSON.stringify(body);
    init.headers = { "content-type": "application/json", ...headers };
  }
  const res = await fetch(`${base}${path}`, init);
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text === "" ? undefined : JSON.parse(text) };
}

/**
 * For a test file: `start(options)` starts a simulator with `defaults` on a manual clock from
 * {@link SIMULATED_EPOCH} (options win), and the one started last is closed after each test.
 */
export function simulatorPerTest(
  defaults: SimulatorOptions,
): (options?: SimulatorOptions) => Promise<{ sim: RunningSimulator; clock: ManualClock }> {
  let running: RunningSimulator | undefined;
  afterEach(async () => {
    await running?.close();
    running = undefined;
  });
  return async (options = {}) => {
    const clock = new ManualClock({ start: SIMULATED_EPOCH });
    const sim = await startSimulator({ now: clock.now, ...defaults, ...options });
    running = sim;
    return { sim, clock };
  };
}
