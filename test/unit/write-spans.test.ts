// The ring chaos test's check of handovers (test/support/write-spans.ts): a new writer of a
// deployment must arrive after every earlier write by another replica was answered.
import { describe, expect, it } from "vitest";
import type { SimRequest } from "../../src/simulator/requests.ts";
import { alternations, handovers } from "../support/write-spans.ts";

const write = (replica: string, at: number, answeredAt: number | undefined, id = "d1"): SimRequest => ({
  at,
  method: "PATCH",
  route: "PATCH /v2/deployments/{deployment_id}",
  url: `/v2/deployments/${id}`,
  userAgent: `dms-operator/0.1.0 (${replica})`,
  ...(answeredAt === undefined ? {} : { status: "200", answeredAt }),
});

describe("handovers of a deployment's writes", () => {
  it("counts each change of writer and the smallest gap, reads and other deployments aside", () => {
    const found = handovers([
      write("a", 0, 250),
      { ...write("b", 100, 100), method: "GET" },
      write("a", 300, 550, "d2"),
      write("b", 1_000, 1_250),
      write("a", 2_000, 2_250),
    ]);
    expect(found).toEqual({
      count: 2,
      smallestGapMs: 750,
      smallestAt: "d1: dms-operator/0.1.0 (a) → dms-operator/0.1.0 (b)",
      overlaps: [],
    });
  });

  it("reports a new writer that arrived while the previous one's write was still running, or never answered", () => {
    const running = handovers([write("a", 0, 250), write("b", 200, 450)]);
    expect(running.overlaps).toEqual([
      "d1: dms-operator/0.1.0 (b)'s PATCH /v2/deployments/{deployment_id} arrived at 200, before dms-operator/0.1.0 (a)'s write to it was answered (250)",
    ]);
    expect(running.smallestGapMs).toBe(-50);
    // An earlier write of the old writer that outlasts its later ones counts too.
    expect(
      handovers([write("a", 0, 5_000), write("a", 10, 20), write("b", 1_000, 1_100)]).overlaps,
    ).toHaveLength(1);
    expect(handovers([write("a", 0, undefined), write("b", 60_000, 60_100)]).overlaps).toHaveLength(1);
  });
});

describe("alternations of a deployment's writers", () => {
  it("finds a writer back within the window after another, and nothing else", () => {
    const ua = (r: string) => `dms-operator/0.1.0 (${r})`;
    expect(
      alternations([write("a", 0, 10), write("b", 1_000, 1_010), write("a", 2_000, 2_010)], 6_000),
    ).toEqual([`d1: ${ua("a")} ${ua("b")} ${ua("a")}`]);
    // Beyond the window, a hand-over and back is allowed; a third writer or the same twice is none.
    expect(
      alternations([write("a", 0, 10), write("b", 1_000, 1_010), write("a", 6_000, 6_010)], 6_000),
    ).toEqual([]);
    expect(
      alternations(
        [write("a", 0, 10), write("b", 1_000, 1_010), write("c", 2_000, 2_010), write("c", 3_000, 3_010)],
        6_000,
      ),
    ).toEqual([]);
    // Other deployments' writes between them do not count.
    expect(
      alternations([write("a", 0, 10), write("b", 500, 510, "d2"), write("a", 1_000, 1_010)], 6_000),
    ).toEqual([]);
  });
});
