// One call shared by concurrent callers: each caller's signal ends only its own wait, and the
// call is aborted only once every caller has given up.
import { describe, expect, it } from "vitest";
import { SharedCall } from "../../src/runtime/shared-call.ts";

function held() {
  const calls: Array<{ signal: AbortSignal; answer: (v: number) => void; fail: (e: Error) => void }> = [];
  const shared = new SharedCall<number>(
    (signal) =>
      new Promise<number>((resolve, reject) => {
        signal.addEventListener("abort", () => reject(signal.reason), { once: true });
        calls.push({ signal, answer: resolve, fail: reject });
      }),
  );
  return { shared, calls };
}

describe("SharedCall", () => {
  it("starts one call for concurrent callers and starts a new one after it settled", async () => {
    const { shared, calls } = held();
    const a = shared.run(new AbortController().signal);
    const b = shared.run(new AbortController().signal);
    expect(calls).toHaveLength(1);
    expect(shared.running).toBe(true);
    calls[0]?.answer(7);
    expect(await Promise.all([a, b])).toEqual([7, 7]);
    expect(shared.running).toBe(false);
    const c = shared.run(new AbortController().signal);
    expect(calls).toHaveLength(2);
    calls[1]?.answer(8);
    expect(await c).toBe(8);
  });

  it("lets one caller give up without failing the others or aborting the call", async () => {
    const { shared, calls } = held();
    const quitter = new AbortController();
    const a = shared.run(quitter.signal);
    const b = shared.run(new AbortController().signal);
    quitter.abort(new Error("caller a timed out"));
    await expect(a).rejects.toThrow("caller a timed out");
    expect(calls[0]?.signal.aborted).toBe(false);
    calls[0]?.answer(3);
    expect(await b).toBe(3);
  });

  it("aborts the call once every caller has given up, and the next caller starts afresh", async () => {
    const { shared, calls } = held();
    const one = new AbortController();
    const two = new AbortController();
    const a = shared.run(one.signal);
    const b = shared.run(two.signal);
    one.abort(new Error("one"));
    two.abort(new Error("two"));
    await expect(a).rejects.toThrow("one");
    await expect(b).rejects.toThrow("two");
    expect(calls[0]?.signal.aborted).toBe(true);
    const c = shared.run(new AbortController().signal);
    expect(calls).toHaveLength(2);
    calls[1]?.answer(5);
    expect(await c).toBe(5);
  });

  it("hands every caller the call's failure, including one thrown before it returned a promise", async () => {
    const { shared, calls } = held();
    const a = shared.run(new AbortController().signal);
    calls[0]?.fail(new Error("listing failed"));
    await expect(a).rejects.toThrow("listing failed");
    const throwing = new SharedCall<number>(() => {
      throw new Error("bad input");
    });
    await expect(throwing.run(new AbortController().signal)).rejects.toThrow("bad input");
    expect(throwing.running).toBe(false);
  });

  it("rejects at once for a caller whose signal already aborted, starting nothing", async () => {
    const { shared, calls } = held();
    await expect(shared.run(AbortSignal.abort(new Error("late")))).rejects.toThrow("late");
    expect(calls).toHaveLength(0);
  });
});
