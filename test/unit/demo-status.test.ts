// What the demo shows and when it calls the samples done: the table a user watches and the
// rule that an old Ready=True says nothing about the latest edit.
import { describe, expect, it } from "vitest";
import { type Screen, screenRows, watchTable } from "../../scripts/demo/live.ts";
import { describeNotDone, isDone, renderTable, rowsFromList } from "../../scripts/demo/status.ts";

const condition = (
  type: string,
  status: string,
  observedGeneration: number,
  reason = "R",
  message = "m",
) => ({
  type,
  status,
  observedGeneration,
  reason,
  message,
  lastTransitionTime: "2025-06-01T00:00:00Z",
});

const resource = (name: string, generation: number, status?: Record<string, unknown>) => ({
  apiVersion: "dms.dev/v1alpha1",
  kind: "Deployment",
  metadata: { name, generation },
  spec: { source: "internal_docker" },
  ...(status ? { status } : {}),
});

const READY_AT = (generation: number) => ({
  observedGeneration: generation,
  remoteStatus: "READY",
  latestRevisionId: "b9596672-ff82-475d-87b7-80c9b5eba225",
  activeRevisionId: "b9596672-ff82-475d-87b7-80c9b5eba225",
  conditions: [
    condition("Ready", "True", generation, "Available"),
    condition("Synced", "True", generation, "ReconcileSuccess"),
  ],
});

describe("demo status", () => {
  it("calls a resource done only when Ready and Synced are True for its current generation", () => {
    const rows = rowsFromList({
      kind: "List",
      items: [
        resource("current", 2, READY_AT(2)),
        resource("edited-since", 3, READY_AT(2)),
        resource("unseen", 1),
        resource("rolling", 1, {
          conditions: [
            condition("Ready", "False", 1, "RolloutInProgress", "revision b is rolling out"),
            condition("Synced", "True", 1),
          ],
        }),
        resource("drifted", 1, {
          conditions: [
            condition("Ready", "True", 1),
            condition("Synced", "False", 1, "Drifted", "image differs"),
          ],
        }),
      ],
    });
    expect(rows.map((r) => [r.name, isDone(r)])).toEqual([
      ["current", true],
      ["drifted", false],
      ["edited-since", false],
      ["rolling", false],
      ["unseen", false],
    ]);
    expect(describeNotDone(rows)).toEqual([
      "drifted: Synced=False Drifted: image differs",
      "edited-since: generation 3 not reconciled yet (conditions are from 2)",
      "rolling: Ready=False RolloutInProgress: revision b is rolling out",
      "unseen: no Ready condition yet (has the operator seen it?)",
    ]);
  });

  it("renders a kubectl-style table with short revision ids and dashes for what is unknown", () => {
    const table = renderTable(
      rowsFromList({ items: [resource("summarizer", 1, READY_AT(1)), resource("new", 1)] }),
    );
    expect(table.split("\n")).toEqual([
      "NAME        SOURCE           POLICY  REMOTE  READY  SYNCED  REASON            LATEST    ACTIVE",
      "new         internal_docker  Manage  -       -      -       -                 -         -",
      "summarizer  internal_docker  Manage  READY   True   True    ReconcileSuccess  b9596672  b9596672",
      "",
    ]);
  });

  it("refuses output that is not a List, rather than showing an empty table", () => {
    expect(() => rowsFromList({ kind: "Status" })).toThrow(/other than a List/);
  });
});

describe("demo live table", () => {
  const recorder = (isTTY: boolean, columns?: number) => {
    const writes: string[] = [];
    const screen: Screen = { isTTY, ...(columns ? { columns } : {}), write: (t: string) => writes.push(t) };
    return { screen, writes };
  };
  const reads = (...states: number[]) => {
    let i = 0;
    return async () => {
      const generation = states[Math.min(i++, states.length - 1)] ?? 1;
      return rowsFromList({ items: [resource("a", 2, generation === 2 ? READY_AT(2) : undefined)] });
    };
  };
  const noWait = async () => {};

  it("appends a table only when it changed when stdout is not a terminal, and stops once done", async () => {
    const { screen, writes } = recorder(false);
    const result = await watchTable({
      screen,
      read: reads(0, 0, 0, 2),
      until: (rows) => rows.every(isDone),
      timeoutMs: 60_000,
      signal: new AbortController().signal,
      wait: noWait,
    });
    expect(result.done).toBe(true);
    expect(writes).toHaveLength(2);
    expect(writes.every((w) => !w.includes("\x1b["))).toBe(true);
  });

  it("redraws in place on a terminal, erasing as many rows as the last frame took", async () => {
    const { screen, writes } = recorder(true, 40);
    await watchTable({
      screen,
      read: reads(0, 2),
      until: (rows) => rows.every(isDone),
      timeoutMs: 60_000,
      signal: new AbortController().signal,
      wait: noWait,
    });
    const [first, second] = writes;
    expect(first).not.toContain("\x1b[");
    expect(second?.startsWith(`\x1b[${screenRows(first ?? "", 40)}A\r\x1b[J`)).toBe(true);
  });

  it("gives up after the timeout with the last rows, and stops at once when the check throws", async () => {
    let clock = 0;
    const timedOut = await watchTable({
      screen: recorder(false).screen,
      read: reads(0),
      until: () => false,
      timeoutMs: 5_000,
      signal: new AbortController().signal,
      now: () => clock,
      wait: async (ms) => {
        clock += ms;
      },
    });
    expect(timedOut).toMatchObject({ done: false, rows: [{ name: "a" }] });
    await expect(
      watchTable({
        screen: recorder(false).screen,
        read: reads(0),
        until: () => false,
        check: () => {
          throw new Error("the operator exited with code 1");
        },
        timeoutMs: 5_000,
        signal: new AbortController().signal,
        wait: noWait,
      }),
    ).rejects.toThrow("the operator exited");
  });

  it("counts wrapped lines as the terminal rows they take", () => {
    expect(screenRows("abc\n", 80)).toBe(1);
    expect(screenRows(`${"x".repeat(100)}\nshort\n`, 40)).toBe(4);
    expect(screenRows(`${"x".repeat(100)}\n`, undefined)).toBe(1);
  });
});
