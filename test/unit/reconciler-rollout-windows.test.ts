// Rollout windows in the reconciler at unit speed: DeploymentReconciler over in-memory ports and
// a manual clock. What a user sees: the change that makes a revision held with
// OutsideRolloutWindow while a scale change goes at once, the look again at the window's opening
// (no polling), the held part sent in one PATCH then, dms.dev/rollout-now acknowledged once, and
// a connection's windows as the default a resource's own list replaces.
import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { RolloutWindowSpec } from "../../src/crd/rollout-windows-schema.ts";
import { ANNOTATION_ROLLOUT_NOW, type DeploymentSpec } from "../../src/crd/schema.ts";
import type { StoredResource } from "../../src/reconcile/ports.ts";
import { DeploymentReconciler } from "../../src/reconcile/reconciler.ts";
import type { SessionLookup } from "../../src/reconcile/service/session.ts";
import type { RemoteSnapshot } from "../../src/reconcile/service/snapshot.ts";
import { BODY, REF, SPEC } from "../support/agent-fixture.ts";
import { ManualClock } from "../support/manual-clock.ts";
import {
  claimingSession,
  MemoryResources,
  MemorySecrets,
  RecordedEvents,
  SimulatedService,
} from "../support/memory-ports.ts";

/** Tuesday 13:00 in Berlin: outside the weekday-night window, which opens at 22:00 (21:00Z). */
const START = Date.parse("2026-11-24T12:00:00Z");
const OPENS = Date.parse("2026-11-24T21:00:00Z");
const POLL_MS = 5_000;
const SETTLE_MS = 5_000;

const NIGHTS: RolloutWindowSpec = {
  kind: "allow",
  schedule: "0 22 * * 1-5",
  duration: "8h",
  timeZone: "Europe/Berlin",
};
const ALWAYS_DENY: RolloutWindowSpec = { kind: "deny", schedule: "0 0 * * *", duration: "24h" };

interface WorldOptions {
  /** The reconciler's `searchCounter`; absent, its default (the thread's CPU time). */
  searchCounter?: () => number;
  /** Each reading of the reconciler's clock is this much past the last: an event loop that stalls. */
  stallMs?: number;
}

/**
 * The reconciler over in-memory ports. Its windows' search is timed on a counter that stands
 * still unless `options` say otherwise: what these tests decide must not depend on the machine.
 */
function world(options: WorldOptions = { searchCounter: () => 0 }) {
  const clock = new ManualClock({ start: START });
  let stalled = 0;
  const stalling = options.stallMs ?? 0;
  const now = () => clock.now();
  const resources = new MemoryResources(now);
  const service = new SimulatedService({ now });
  const events = new RecordedEvents();
  const logger = pino({ level: "silent" });
  const session = claimingSession(service, resources, { clock, logger });
  const w = {
    clock,
    resources,
    service,
    events,
    snapshot: session.snapshot as RemoteSnapshot,
    /** The resource's connection: ready, with the rollout windows a test gives it. */
    connection: { kind: "ready", session } as SessionLookup,
    reconciler: undefined as unknown as DeploymentReconciler,
    reconcile: () => w.reconciler.reconcile("default/agent", new AbortController().signal),
    async resync() {
      await w.snapshot.refresh(new AbortController().signal);
      service.resetCalls();
    },
    /** Adopted, READY and reconciled again under `spec`: nothing left to do. */
    async settled(spec: Partial<DeploymentSpec> = {}) {
      service.seed(BODY);
      clock.advance(SETTLE_MS);
      resources.create({ metadata: { name: "agent" }, spec: { ...SPEC, ...spec } });
      await w.resync();
      await w.reconcile();
      await w.resync();
      events.all.length = 0;
    },
    edit(change: (o: StoredResource) => void) {
      resources.edit(REF, change);
    },
    stored: () => resources.stored(REF),
    deployment: () => service.store.getByName("agent"),
    images: () =>
      (service.store.revisions(w.deployment()?.id ?? "") ?? []).map(
        (r) => r.source_revision_config.image_uri,
      ),
  };
  w.reconciler = new DeploymentReconciler({
    resources,
    sessions: { lookup: () => w.connection },
    secrets: new MemorySecrets(),
    events,
    clock: stalling
      ? {
          now: () => {
            stalled += stalling;
            return clock.now() + stalled;
          },
          setTimer: (ms, fn) => clock.setTimer(ms, fn),
          sleep: (ms, signal) => clock.sleep(ms, signal),
        }
      : clock,
    logger,
    pollMs: POLL_MS,
    ...(options.searchCounter ? { searchCounter: options.searchCounter } : {}),
  });
  return w;
}
type World = ReturnType<typeof world>;

function conditions(obj: StoredResource | undefined): Record<string, string> {
  return Object.fromEntries((obj?.status?.conditions ?? []).map((c) => [c.type, `${c.status}/${c.reason}`]));
}

/** A new image and a scale change in one edit, under `windows` (undefined: the connection's). */
function imageAndScale(w: World, windows: RolloutWindowSpec[] | undefined, image = "repo/agent:2") {
  w.edit((o) => {
    o.spec.sourceRevisionConfig = { imageUri: image };
    o.spec.sourceConfig = { customUrl: "https://agent.example", resourceSpec: { minScale: 3 } };
    if (windows) o.spec.rolloutWindows = windows;
  });
}

const HELD = {
  Ready: "True/Available",
  Synced: "False/OutsideRolloutWindow",
  Reconciling: "True/OutsideRolloutWindow",
};

describe("DeploymentReconciler: rollout windows", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("holds the new image outside the window, sends the scale change at once, and looks again when the window opens", async () => {
    const w = world();
    await w.settled();
    imageAndScale(w, [NIGHTS]);

    const result = await w.reconcile();

    expect(result).toEqual({ kind: "requeueAfter", ms: OPENS - START - SETTLE_MS });
    expect(w.service.calls.patch).toBe(1);
    expect(w.service.lastPatchBody).toEqual({
      source_config: { resource_spec: expect.objectContaining({ min_scale: 3 }) },
    });
    expect(w.images()).toEqual(["repo/agent:1"]);
    expect(conditions(w.stored())).toEqual(HELD);
    const synced = w.stored()?.status?.conditions?.find((c) => c.type === "Synced");
    expect(synced?.message).toContain("(sourceRevisionConfig.imageUri) is held");
    expect(synced?.message).toContain(
      "it goes out at 2026-11-24T21:00:00Z (2026-11-24 22:00 Europe/Berlin (GMT+01:00))",
    );
    expect(w.events.reasons()).toEqual(["Normal/Updated", "Normal/OutsideRolloutWindow"]);

    // Looked at again before the opening (a resync): nothing sent, written or told again.
    w.events.all.length = 0;
    await w.resync();
    w.clock.advance(3_600_000);
    const writes = w.resources.writes.patchStatus;
    expect(await w.reconcile()).toEqual({ kind: "requeueAfter", ms: OPENS - START - SETTLE_MS - 3_600_000 });
    expect(w.service.calls.patch).toBe(0);
    expect(w.resources.writes.patchStatus).toBe(writes);
    expect(w.events.reasons()).toEqual([]);

    // The window opens: the held part goes out in one PATCH, and the rollout is polled.
    w.clock.advance(OPENS - w.clock.now());
    await w.resync();
    expect(await w.reconcile()).toEqual({ kind: "requeueAfter", ms: POLL_MS });
    expect(w.service.calls.patch).toBe(1);
    expect(w.service.lastPatchBody).toEqual({ source_revision_config: { image_uri: "repo/agent:2" } });
    expect(w.images()).toEqual(["repo/agent:1", "repo/agent:2"]);
    expect(conditions(w.stored())).toMatchObject({
      Synced: "True/ReconcileSuccess",
      Reconciling: "True/RolloutInProgress",
    });
  });

  it("dms.dev/rollout-now lets the held change through once; the same value holds a later change", async () => {
    const w = world();
    await w.settled();
    imageAndScale(w, [NIGHTS]);
    await w.reconcile();
    await w.resync();

    w.edit((o) => {
      o.metadata.annotations = { [ANNOTATION_ROLLOUT_NOW]: "release-1" };
    });
    expect(await w.reconcile()).toEqual({ kind: "requeueAfter", ms: POLL_MS });
    expect(w.service.calls.patch).toBe(1);
    expect(w.service.lastPatchBody).toEqual({ source_revision_config: { image_uri: "repo/agent:2" } });
    expect(w.stored()?.status?.lastHandledRolloutNow).toBe("release-1");

    w.clock.advance(SETTLE_MS);
    await w.resync();
    await w.reconcile();
    await w.resync();
    w.edit((o) => {
      o.spec.sourceRevisionConfig = { imageUri: "repo/agent:3" };
    });
    await w.reconcile();
    expect(w.service.calls.patch).toBe(0);
    expect(conditions(w.stored())).toEqual(HELD);
    expect(w.images()).toEqual(["repo/agent:1", "repo/agent:2"]);
  });

  it("a dms.dev/rollout-now value 0.1.0 acted on and recorded as given, which this version keeps as its digest, lets no held change through after the upgrade", async () => {
    // 0.1.0 recorded the annotation's value as given: here a YAML block scalar's (`|`), whose
    // line break this version keeps as a digest. The request was acted on (an earlier release);
    // the change 0.1.0 held since waits for the window, also at this version's first reconcile.
    const asGiven = "release-1\n";
    const w = world();
    await w.settled({ rolloutWindows: [NIGHTS] });
    w.edit((o) => {
      o.metadata.annotations = { [ANNOTATION_ROLLOUT_NOW]: asGiven };
      o.status = { ...o.status, lastHandledRolloutNow: asGiven };
    });
    imageAndScale(w, [NIGHTS]);
    await w.reconcile();
    // The scale goes at once, the new image waits for the window.
    expect(w.service.lastPatchBody).toEqual({ source_config: { resource_spec: { min_scale: 3 } } });
    expect(conditions(w.stored())).toEqual(HELD);
    expect(w.images()).toEqual(["repo/agent:1"]);
    expect(w.stored()?.status?.lastHandledRolloutNow).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it("a connection's windows hold the resources that set none; a resource's own empty list rolls out any time", async () => {
    const w = world();
    await w.settled();
    const { session } = w.connection as SessionLookup & { kind: "ready" };
    w.connection = {
      kind: "ready",
      session,
      rolloutWindows: { windows: [ALWAYS_DENY], from: "ServiceConnection default/prod" },
    };
    imageAndScale(w, undefined);
    await w.reconcile();
    expect(conditions(w.stored())).toEqual(HELD);
    const synced = w.stored()?.status?.conditions?.find((c) => c.type === "Synced");
    expect(synced?.message).toContain(
      "outside the rollout windows (spec.rolloutWindows of ServiceConnection default/prod)",
    );

    await w.resync();
    w.edit((o) => {
      o.spec.rolloutWindows = [];
    });
    await w.reconcile();
    expect(w.service.lastPatchBody).toEqual({ source_revision_config: { image_uri: "repo/agent:2" } });
    expect(conditions(w.stored())).toMatchObject({ Synced: "True/ReconcileSuccess" });
  });

  it("a held secret change is not recorded as applied, and goes out when the window opens", async () => {
    const w = world();
    // Adopted and sent the secret (a revision of its own), rolled out and listed again.
    await w.settled({ secrets: [{ name: "TOKEN", value: "old" }] });
    w.clock.advance(SETTLE_MS);
    await w.reconcile();
    await w.resync();
    const applied = w.stored()?.status?.appliedSecretsHash;
    expect(applied).toMatch(/^[0-9a-f]{64}$/);
    w.edit((o) => {
      o.spec.secrets = [{ name: "TOKEN", value: "new" }];
      o.spec.rolloutWindows = [NIGHTS];
    });
    await w.reconcile();
    expect(w.service.calls.patch).toBe(0);
    expect(conditions(w.stored())).toEqual(HELD);
    expect(w.stored()?.status?.appliedSecretsHash).toBe(applied);

    w.clock.advance(OPENS - w.clock.now());
    await w.resync();
    await w.reconcile();
    expect(w.service.lastPatchBody).toEqual({ secrets: [{ name: "TOKEN", value: "new" }] });
    expect(w.stored()?.status?.appliedSecretsHash).not.toBe(applied);
  });

  it("an opening sooner than the poll interval is looked at after the poll interval, never at once", async () => {
    const w = world();
    await w.settled();
    w.clock.advance(OPENS - 500 - w.clock.now());
    imageAndScale(w, [NIGHTS]);
    expect(await w.reconcile()).toEqual({ kind: "requeueAfter", ms: POLL_MS });
    expect(conditions(w.stored())).toEqual(HELD);
  });

  it("windows that leave no opening in sight (a deny window of a minute every minute) requeue no sooner than the poll interval", async () => {
    const w = world();
    await w.settled();
    imageAndScale(w, [{ kind: "deny", schedule: "* * * * *", duration: "1m" }]);
    const result = await w.reconcile();
    expect(result.kind).toBe("requeueAfter");
    expect(result.kind === "requeueAfter" && result.ms).toBeGreaterThanOrEqual(POLL_MS);
    expect(w.service.lastPatchBody).toEqual({
      source_config: { resource_spec: expect.objectContaining({ min_scale: 3 }) },
    });
    const synced = w.stored()?.status?.conditions?.find((c) => c.type === "Synced");
    expect(synced?.message).toContain("no opening was found within 400 steps");

    // Looked at again (a resync, the clock where it was): still no zero-delay requeue.
    await w.resync();
    const again = await w.reconcile();
    expect(again.kind === "requeueAfter" && again.ms).toBeGreaterThanOrEqual(POLL_MS);
  });

  it("a create is not held: nothing runs yet that a new revision could cancel", async () => {
    const w = world();
    w.resources.create({ metadata: { name: "agent" }, spec: { ...SPEC, rolloutWindows: [ALWAYS_DENY] } });
    await w.resync();
    await w.reconcile();
    expect(w.service.calls.create).toBe(1);
    expect(w.deployment()?.source_revision_config.image_uri).toBe("repo/agent:1");
  });

  it("the change that replaces a failed revision, held outside the window, is on its way: Reconciling, not Stalled", async () => {
    const w = world();
    await w.settled();
    const id = w.deployment()?.id ?? "";
    w.service.store.drift(id, { fail_revisions: "build" });
    w.edit((o) => {
      o.spec.sourceRevisionConfig = { imageUri: "repo/agent:2" };
    });
    await w.reconcile();
    w.clock.advance(SETTLE_MS);
    await w.resync();
    await w.reconcile();
    expect(conditions(w.stored())).toMatchObject({ Stalled: "True/RevisionFailed" });

    // The fix, held until the window opens: it will replace the failed revision by itself.
    await w.resync();
    w.edit((o) => {
      o.spec.sourceRevisionConfig = { imageUri: "repo/agent:3" };
      o.spec.rolloutWindows = [NIGHTS];
    });
    await w.reconcile();
    expect(w.service.calls.patch).toBe(0);
    expect(conditions(w.stored())).toEqual({
      Ready: "False/RevisionFailed",
      Synced: "False/OutsideRolloutWindow",
      Reconciling: "True/OutsideRolloutWindow",
    });
  });

  it("times the search on the thread's CPU time, not the reconciler's clock: a stalled event loop does not cut it short", async () => {
    // The CPU time stands still, the reconciler's clock jumps a second at each reading.
    vi.spyOn(process, "threadCpuUsage").mockReturnValue({ user: 1_000, system: 0 });
    const w = world({ stallMs: 1_000 });
    await w.settled();
    // Deny windows a minute each, every minute of 13:00-13:59Z: ~180 evaluations to find 14:00,
    // well past the UNTIMED_STEPS before the time budget applies.
    const hour: RolloutWindowSpec[] = [
      { kind: "deny", schedule: "*/2 13 * * *", duration: "1m" },
      { kind: "deny", schedule: "1-59/2 13 * * *", duration: "1m" },
    ];
    w.clock.advance(Date.parse("2026-11-24T13:00:00Z") - w.clock.now());
    await w.resync();
    imageAndScale(w, hour);

    await w.reconcile();

    expect(conditions(w.stored())).toEqual(HELD);
    const synced = w.stored()?.status?.conditions?.find((c) => c.type === "Synced");
    // On the reconciler's clock the search was cut for time ("took more than 40 ms").
    expect(synced?.message).not.toContain("took more than");
    expect(synced?.message).toContain("it goes out at 2026-11-24T14:00:00Z");
  });

  it("a window the operator cannot read stalls the resource (InvalidSpec) and sends nothing", async () => {
    const w = world();
    await w.settled();
    imageAndScale(w, [{ ...NIGHTS, timeZone: "Europe/Berln" }]);
    await w.reconcile();
    expect(w.service.calls.patch).toBe(0);
    expect(conditions(w.stored())).toMatchObject({
      Synced: "False/InvalidSpec",
      Stalled: "True/InvalidSpec",
    });
    const synced = w.stored()?.status?.conditions?.find((c) => c.type === "Synced");
    expect(synced?.message).toContain(
      'spec.rolloutWindows[0].timeZone: "Europe/Berln" is not an IANA time zone',
    );
  });
});
