/** Test helpers for the simulator's contract tests: one HTTP call over loopback, answered as JSON. */
import type { RunningSimulator } from "../../src/simulator/server.ts";

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
