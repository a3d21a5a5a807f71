// The shortened revision ids `kubectl get dmsd -o wide` shows: written with the service's ids,
// kept when a reconcile did not observe the service, cleared with the other remote fields.
import { describe, expect, it } from "vitest";
import { shortRevisions } from "../../src/reconcile/live-revision.ts";
import type { SyncOutcome } from "../../src/reconcile/reasons.ts";
import { statusFrom } from "../../src/reconcile/status.ts";
import { remote } from "./plan-fixtures.ts";

const T0 = new Date("2025-06-01T10:00:00.000Z");
const synced: SyncOutcome = { kind: "synced" };
const LATEST = "c41d05bf-f80c-41a8-9c2a-0805a17b0e4b";
const ACTIVE = "67cbb919-091e-4273-bebb-ecc2a9d3ed3b";

describe("status.shortRevisions", () => {
  it("is <latest>/<active>, 8 characters each, '-' for an id the service does not report", () => {
    expect(shortRevisions({ latest_revision_id: LATEST, active_revision_id: ACTIVE })).toBe(
      "c41d05bf/67cbb919",
    );
    expect(shortRevisions({ latest_revision_id: LATEST, active_revision_id: null })).toBe("c41d05bf/-");
  });

  it("is written from the observed deployment, kept when not observed, cleared when it is gone", () => {
    const observed = remote({ latest_revision_id: LATEST, active_revision_id: ACTIVE });
    const first = statusFrom({ generation: 1, observed, sync: synced, now: T0 });
    expect(first.shortRevisions).toBe("c41d05bf/67cbb919");
    const kept = statusFrom({ generation: 1, previous: first, observed: undefined, sync: synced, now: T0 });
    expect(kept.shortRevisions).toBe("c41d05bf/67cbb919");
    const gone = statusFrom({ generation: 1, previous: first, observed: null, sync: synced, now: T0 });
    expect(gone.shortRevisions).toBeUndefined();
  });
});
