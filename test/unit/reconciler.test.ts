// The reconciler's guard clauses at unit speed: DeploymentReconciler over in-memory ports (an
// API server that refuses stale writes, the simulator's store as the service, a manual clock).
// Each case states what a user would see: the status, the events, the calls made to the service.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { printableNote } from "../../src/api/printable.ts";
import type { CreateDeploymentBody } from "../../src/api/wire-requests.ts";
import { MAX_MESSAGE_LENGTH } from "../../src/crd/conventions.ts";
import {
  ANNOTATION_PAUSED,
  ANNOTATION_REBUILD_REQUESTED_AT,
  ANNOTATION_RECONCILE_INTERVAL,
  ANNOTATION_RECONCILE_REQUESTED_AT,
  type DeploymentSpec,
  FINALIZER,
} from "../../src/crd/schema.ts";
import { apiErrorFrom, retryAfterHeader } from "../../src/kube/errors.ts";
import { truncateNote } from "../../src/kube/events.ts";
import { pollIndexer } from "../../src/reconcile/conclude.ts";
import type { StoredResource } from "../../src/reconcile/ports.ts";
import { DeploymentReconciler } from "../../src/reconcile/reconciler.ts";
import { hashSecrets, keyedSecretDigest, type SecretDigest } from "../../src/reconcile/secret-hash.ts";
import type { SessionLookup } from "../../src/reconcile/service/session.ts";
import type { RemoteSnapshot } from "../../src/reconcile/service/snapshot.ts";
import { ListingDeadlineError } from "../../src/reconcile/service/snapshot-reader.ts";
import type { ReconcileResult } from "../../src/runtime/controller.ts";
import { ReconcileTimeoutError, TerminalError } from "../../src/runtime/reconcile-errors.ts";
import type { Timing } from "../../src/simulator/record.ts";
import { BODY, REF, SPEC } from "../support/agent-fixture.ts";
import { ManualClock } from "../support/manual-clock.ts";
import {
  claimingSession,
  type InjectedFailure,
  MemoryResources,
  MemorySecrets,
  oneSession,
  RecordedEvents,
  type ServiceMethod,
  SimulatedService,
} from "../support/memory-ports.ts";

const START = Date.parse("2030-01-01T00:00:00Z");
const POLL_MS = 5_000;
const GRACE_MS = 60_000;
/** The listing deadline of the resources' connection (`--listing-deadline`). */
const LISTING_DEADLINE_MS = 30_000;
/** Long enough for the simulator's deployments to be READY with their revision active. */
const SETTLE_MS = 5_000;

/** The conditions of a resource whose new revision is rolling out. */
const ROLLING_OUT = {
  Ready: "False/RolloutInProgress",
  Synced: "True/ReconcileSuccess",
  Reconciling: "True/RolloutInProgress",
};
/** The conditions of a resource created and waiting for its deployment's database. */
const AWAITING_DATABASE = {
  Ready: "False/AwaitingDatabase",
  Synced: "True/ReconcileSuccess",
  Reconciling: "True/AwaitingDatabase",
};
/** The conditions of a resource stalled for `reason` (not retried until it changes), its deployment `ready`. */
const stalledFor = (reason: string, ready = "Unknown/Unknown") => ({
  Ready: ready,
  Synced: `False/${reason}`,
  Stalled: `True/${reason}`,
});
/** The conditions of a resource held back for `reason` and looked at again, its deployment `ready`. */
const retryingFor = (reason: string, ready = "Unknown/Unknown") => ({
  Ready: ready,
  Synced: `False/${reason}`,
  Reconciling: `True/${reason}`,
});
/** `count` entries `S_0`, `S_1`… reading Secret `secret`, at the key `keyOf` gives each. */
const entriesOf = (
  count: number,
  secret: string,
  keyOf: (i: number) => string,
): NonNullable<DeploymentSpec["secrets"]> =>
  Array.from({ length: count }, (_, i) => ({
    name: `S_${i}`,
    valueFrom: { secretKeyRef: { name: secret, key: keyOf(i) } },
  }));
/** A secret read from the Secret `agent-keys`. */
const API_KEY_FROM_SECRET = {
  name: "API_KEY",
  valueFrom: { secretKeyRef: { name: "agent-keys", key: "api" } },
};
/** The value `settledWithSecret` applies, as a name and value. */
const SETTLED_SECRET = { name: "API_KEY", value: "sk-old-0123456789" };
/** An install key (the secrets' digests keyed with it). */
const INSTALL_KEY = Buffer.alloc(32, 5);

/**
 * A resource whose secret comes from the Secret `agent-keys`, sent once (the service cannot show
 * whether the values are equal), rolled out and listed again: nothing left to do. Returns the
 * service's deployment; the Secret reads so far are forgotten.
 */
async function settledWithSecret(w: World) {
  w.secrets.set("default", "agent-keys", { api: "sk-old-0123456789" });
  const deployment = await w.settled({ secrets: [API_KEY_FROM_SECRET] });
  w.clock.advance(SETTLE_MS);
  await w.resync();
  await w.reconcile();
  await w.resync();
  w.events.all.length = 0;
  w.secrets.reads.length = 0;
  return deployment;
}

/**
 * A resource of a ServiceConnection, with a value from a Secret, whose connection's last listing
 * failed with a 503 answering `detail` (by default one that echoes that value: read for the
 * report, and scrubbed from it).
 */
async function failedListing(w: World, detail = "gateway down (sk-listed-0123456789)") {
  w.connection = undefined;
  w.secrets.set("default", "agent-keys", { api: "sk-listed-0123456789" });
  await w.applied({
    connectionRef: { kind: "ServiceConnection", name: "prod" },
    secrets: [API_KEY_FROM_SECRET],
  });
  w.service.failNext("listAll", { status: 503, detail });
  await w.snapshot.refresh(new AbortController().signal).catch(() => {});
}

/** The reconciler over fresh in-memory ports, and the handles a test acts through. */
function world(timing?: Timing) {
  const clock = new ManualClock({ start: START });
  const now = () => clock.now();
  const resources = new MemoryResources(now);
  const service = new SimulatedService({ now, ...(timing ? { timing } : {}) });
  const events = new RecordedEvents();
  const secrets = new MemorySecrets();
  const w = {
    clock,
    resources,
    service,
    events,
    secrets,
    snapshot: undefined as unknown as RemoteSnapshot,
    /** What the resource's connection is, when not the one session every resource uses. */
    connection: undefined as SessionLookup | undefined,
    reconciler: undefined as unknown as DeploymentReconciler,
    /** The secrets' digests the next {@link restart} gives the reconciler; default unkeyed. */
    secretDigest: undefined as SecretDigest | undefined,
    /** A new process: a new reconciler whose snapshot has not listed anything yet. */
    restart(logger = pino({ level: "silent" })) {
      // As the operator wires it: the snapshot holds only the names the resources claim.
      const session = claimingSession(service, resources, {
        clock,
        logger,
        listingDeadlineMs: LISTING_DEADLINE_MS,
      });
      w.snapshot = session.snapshot;
      w.reconciler = new DeploymentReconciler({
        resources,
        sessions: { lookup: (obj) => w.connection ?? oneSession(session).lookup(obj) },
        secrets,
        events,
        clock,
        logger,
        pollMs: POLL_MS,
        createGraceMs: GRACE_MS,
        ...(w.secretDigest ? { secretDigest: w.secretDigest } : {}),
      });
    },
    reconcile(name = "agent", signal = new AbortController().signal): Promise<ReconcileResult> {
      return w.reconciler.reconcile(`default/${name}`, signal);
    },
    /** A resync pass's listing; the calls it cost are not counted against the reconcile. */
    async resync() {
      await w.snapshot.refresh(new AbortController().signal);
      service.resetCalls();
    },
    /** A resync pass's listing that never answers, given up at its deadline. */
    async missListing() {
      service.hold("listAll");
      const listing = w.snapshot.refresh(new AbortController().signal).then(
        () => undefined,
        (error: unknown) => error,
      );
      clock.advance(LISTING_DEADLINE_MS);
      expect(await listing).toBeInstanceOf(ListingDeadlineError);
      service.release("listAll");
      service.resetCalls();
    },
    /** A resource as a user applies it. */
    apply(spec: Partial<DeploymentSpec> = {}, meta: Partial<StoredResource["metadata"]> = {}) {
      return resources.create({ metadata: { name: "agent", ...meta }, spec: { ...SPEC, ...spec } });
    },
    /** A deployment on the service made before the resource (READY, its revision active). */
    existing(body: CreateDeploymentBody = BODY) {
      const deployment = service.seed(body);
      clock.advance(SETTLE_MS);
      return deployment;
    },
    /** A resource applied, then a resync's listing taken. */
    async applied(spec: Partial<DeploymentSpec> = {}, meta: Partial<StoredResource["metadata"]> = {}) {
      w.apply(spec, meta);
      await w.resync();
    },
    /** A Manage resource adopted, READY and reconciled once more: nothing left to do. */
    async settled(spec: Partial<DeploymentSpec> = {}) {
      const deployment = w.existing();
      await w.applied(spec);
      await w.reconcile();
      await w.resync();
      events.all.length = 0;
      return deployment;
    },
  };
  w.restart();
  return w;
}
type World = ReturnType<typeof world>;

/**
 * A rebuild asked for beside a rotated Secret (`refusedFirst`: on a service without the rebuild
 * route, which refused it before the Secret rotated): the PATCH's revision is the one asked for,
 * acknowledged, recorded as the operator's, with no rebuild call and nothing refused.
 */
function rebuildWithRotatedSecret(reason: string, refusedFirst = false): Case {
  return {
    reason,
    arrange: async (w) => {
      await settledWithSecret(w);
      w.service.rebuildRoute = !refusedFirst;
      w.resources.edit(REF, (o) => {
        o.metadata.annotations = { [ANNOTATION_REBUILD_REQUESTED_AT]: "2030-01-02T00:00:00Z" };
      });
      if (refusedFirst) {
        await w.reconcile();
        expect(conditions(w.resources.stored(REF)).Synced).toBe("False/RebuildRouteMissing");
      }
      w.secrets.set("default", "agent-keys", { api: "sk-new-9876543210" });
    },
    outcome: { result: { kind: "requeueAfter", ms: POLL_MS } },
    calls: { patch: 1 },
    conditions: ROLLING_OUT,
    events: ["Normal/Updated"],
    also: (w) => {
      const status = w.resources.stored(REF)?.status;
      expect(status?.lastHandledRebuildAt).toBe("2030-01-02T00:00:00Z");
      // The one revision made is the PATCH's (no rebuild call above), recorded as the operator's.
      const id = status?.deploymentId ?? "";
      expect(status?.revisionHistory?.[0]?.id).toBe(w.service.store.get(id)?.latest_revision_id);
    },
  };
}

/**
 * A settled resource asks for a rebuild, whose answer is lost (the reconcile says
 * RebuildUnconfirmed), although the service made the revision. Events so far are forgotten.
 */
async function rebuildAnswerLost(w: World): Promise<void> {
  const deployment = await w.settled();
  w.resources.edit(REF, (o) => {
    o.metadata.annotations = { [ANNOTATION_REBUILD_REQUESTED_AT]: "2030-01-02T00:00:00Z" };
  });
  w.service.failNext("createRevision", { status: 504, maybeApplied: true });
  await w.reconcile();
  expect(w.events.reasons()).toEqual(["Warning/RebuildUnconfirmed"]);
  // The service built it: only the answer was lost.
  w.service.store.createRevision(deployment.id);
  w.events.all.length = 0;
}

/**
 * The reconcile that first sees the revision of a rebuild whose answer was lost
 * ({@link rebuildAnswerLost}), the spec edited to `edit` before it, if given: the revision is
 * the operator's own (newest first in the history, after the PATCH's, without a secrets digest),
 * said by a Normal Rebuilt, never an ExternalRevision, and the record is cleared.
 */
function lostRebuildSeen(reason: string, edit?: DeploymentSpec["sourceRevisionConfig"]): Case {
  return {
    reason,
    arrange: async (w) => {
      await rebuildAnswerLost(w);
      if (edit)
        w.resources.edit(REF, (o) => {
          o.spec = { ...o.spec, sourceRevisionConfig: edit };
        });
    },
    outcome: { result: { kind: "requeueAfter", ms: POLL_MS } },
    calls: edit ? { getById: 1, patch: 1 } : { getById: 1 },
    conditions: ROLLING_OUT,
    events: edit ? ["Normal/Updated", "Normal/Rebuilt"] : ["Normal/Rebuilt"],
    also: (w) => {
      const status = w.resources.stored(REF)?.status;
      const ids = (w.service.store.revisions(status?.deploymentId ?? "") ?? []).map((r) => r.id);
      const made = ids.slice(edit ? -2 : -1).reverse();
      expect(status?.revisionHistory?.slice(0, made.length).map((e) => e.id)).toEqual(made);
      const rebuilt = status?.revisionHistory?.[made.length - 1];
      expect(rebuilt).toEqual({ id: made.at(-1), configHash: expect.stringMatching(/^[0-9a-f]{64}$/) });
      expect(status?.externalRevision).toBeUndefined();
      expect(status?.unconfirmedRebuild).toBeUndefined();
    },
  };
}

/** A Delete resource whose create is pending (its answer lost: the deployment exists), deleted. */
function deletedWhileCreating(w: World): void {
  w.existing();
  w.resources.create({
    metadata: { name: "agent", finalizers: [FINALIZER] },
    spec: { ...SPEC, deletionPolicy: "Delete" },
    status: { createRequestedAt: "2030-01-01T00:00:00Z" },
  });
  w.resources.delete(REF);
}

/** Someone with write access to the status subresource points `status.deploymentId` at `id`. */
function forgeDeploymentId(w: World, id: string): void {
  w.resources.edit(REF, (o) => {
    o.status = { ...o.status, deploymentId: id };
  });
}

/** The resource's conditions as `Type: Status/Reason`, the way `kubectl get` users read them. */
function conditions(obj: StoredResource | undefined): Record<string, string> {
  return Object.fromEntries((obj?.status?.conditions ?? []).map((c) => [c.type, `${c.status}/${c.reason}`]));
}

/** The message of the resource's condition `type`. */
function messageOf(obj: StoredResource | undefined, type: string): string | undefined {
  return obj?.status?.conditions?.find((c) => c.type === type)?.message;
}

/** The service calls made, by method, leaving out the ones not made. */
function callsOf(service: SimulatedService): Partial<Record<ServiceMethod, number>> {
  return Object.fromEntries(Object.entries(service.calls).filter(([, n]) => n > 0));
}

/** A failure of the create, as the service answers it, and what the resource then shows. */
interface FailureCase {
  reason: string;
  failure: InjectedFailure;
  error: (error: unknown) => void;
  conditions: { Synced: string } & Record<string, string>;
  /** Whether the create intent stays recorded (the POST may have taken effect). */
  intentKept: boolean;
}

type Outcome = { result: ReconcileResult } | { error: unknown };

interface Case {
  reason: string;
  /** Brings the world to the moment before the reconcile under test. */
  arrange: (w: World) => void | Promise<void>;
  /** What the reconcile returned, or `{ error }` with a matcher for what it threw. */
  outcome: Outcome | { error: (error: unknown) => void };
  /** Service calls of the reconcile under test, exactly. */
  calls: Partial<Record<ServiceMethod, number>>;
  /** The conditions written (`undefined`: the object is gone). */
  conditions?: Record<string, string> | undefined;
  /** Events recorded by the reconcile under test, `Type/Reason` in order. */
  events: string[];
  /** Anything else a user would notice. */
  also?: (w: World) => void | Promise<void>;
}

/** The controller retries with backoff: an error, not a terminal one, naming the service's answer. */
const retriedWithBackoff = (status: string) => (error: unknown) => {
  expect(error).not.toBeInstanceOf(TerminalError);
  expect(String(error)).toContain(`answered ${status}`);
};

/**
 * Counted as a failed reconcile, not retried on the key's own backoff, and not logged again by the
 * controller: the connection's next listing enqueues the resource.
 */
const notRetried = (error: unknown) => {
  expect(error).toBeInstanceOf(TerminalError);
  expect(error).toMatchObject({ said: true });
};

/** The create refused or unanswered, one case per failure class. */
const CREATE_FAILURES: FailureCase[] = [
  {
    reason: "a 401: Unauthorized, retried with backoff; the refused create's intent is cleared",
    failure: { status: 401 },
    error: retriedWithBackoff("401"),
    conditions: { Synced: "False/Unauthorized", Reconciling: "True/Unauthorized" },
    intentKept: false,
  },
  {
    reason: "a 422: the spec is wrong, so Stalled and no retry until it changes",
    failure: { status: 422, detail: "source_config.custom_url: not a URL" },
    error: (e: unknown) => expect(e).toBeInstanceOf(TerminalError),
    conditions: { Synced: "False/InvalidSpec", Stalled: "True/InvalidSpec" },
    intentKept: false,
  },
  {
    reason: "a 429 with Retry-After: retried no sooner than the service asked",
    failure: { status: 429, retryAfterSeconds: 7 },
    error: (e: unknown) => expect(e).toMatchObject({ retryAfterMs: 7_000 }),
    conditions: { Synced: "False/RateLimited", Reconciling: "True/RateLimited" },
    intentKept: false,
  },
  {
    reason: "a 503: ServiceUnavailable, retried with backoff",
    failure: { status: 503 },
    error: retriedWithBackoff("503"),
    conditions: { Synced: "False/ServiceUnavailable", Reconciling: "True/ServiceUnavailable" },
    intentKept: false,
  },
  {
    reason:
      "a 500 on the POST may have been applied: the intent is kept, so the retry looks before it creates",
    failure: { status: 500, maybeApplied: true },
    error: retriedWithBackoff("500"),
    conditions: { Synced: "False/ServiceUnavailable", Reconciling: "True/ServiceUnavailable" },
    intentKept: true,
  },
];

/** What a case expects of the reconcile under test itself. */
type Expected = Pick<Case, "outcome" | "calls" | "conditions" | "events">;

/** A reconcile that is done, leaving `conditions` and recording `events`, without a service call. */
const withoutCall = (conditions: Record<string, string>, events: string[] = []): Expected => ({
  outcome: { result: { kind: "done" } },
  calls: {},
  conditions,
  events,
});

/** A reconcile that stalls the resource for `reason`, with a Warning saying so, and no service call. */
const stalledWithoutCall = (reason: string): Expected =>
  withoutCall(stalledFor(reason), [`Warning/${reason}`]);

/** A reconcile that creates the deployment: one POST, then waiting for its database. */
const CREATED: Expected = {
  outcome: { result: { kind: "requeueAfter", ms: POLL_MS } },
  calls: { create: 1 },
  conditions: AWAITING_DATABASE,
  events: ["Normal/Created"],
};

const cases: Case[] = [
  // Creating and adopting.
  {
    reason: "a new resource whose name the resync's listing lacks: exactly one POST, nothing else",
    arrange: async (w) => {
      await w.applied();
    },
    ...CREATED,
    also: (w) => {
      const status = w.resources.stored(REF)?.status;
      expect(status?.deploymentId).toBe(w.service.store.getByName("agent")?.id);
      // The create answered: its intent is cleared in the same write, its time kept as createdAt
      // (a lookup that misses the deployment within the create grace waits, as the intent did).
      expect(status?.createRequestedAt).toBeUndefined();
      expect(status?.createdAt).toBe("2030-01-01T00:00:00Z");
      expect(w.resources.writes.patchStatus).toBe(2);
    },
  },
  {
    reason: "the create intent is recorded before the POST, under the resourceVersion the reconcile read",
    arrange: async (w) => {
      await w.applied();
      const create = w.service.create.bind(w.service);
      w.service.create = (body, signal) => {
        // What the API server holds at the moment of the POST.
        const atPost = w.resources.stored(REF);
        expect(atPost?.status?.createRequestedAt).toBe("2030-01-01T00:00:00Z");
        expect(atPost?.metadata.resourceVersion).toBe("2");
        return create(body, signal);
      };
    },
    outcome: { result: { kind: "requeueAfter", ms: POLL_MS } },
    calls: { create: 1 },
    events: ["Normal/Created"],
    also: (w) => expect(w.resources.stored(REF)?.metadata.resourceVersion).toBe("3"),
  },
  // A deployment found by name adopted, a new image (one PATCH making a revision, rolling out)
  // and drift corrected by one PATCH: what is decided and concluded, rows of decide.test.ts ("the
  // reconciler's table, as rows…"). What a reconcile reads to get there stays here.
  {
    reason: "a settled resource at a resync with a fresh listing: no service call and no status write",
    arrange: async (w) => {
      await w.settled();
      w.resources.writes.patchStatus = 0;
    },
    ...withoutCall({ Ready: "True/Available", Synced: "True/ReconcileSuccess" }),
    also: (w) => expect(w.resources.writes.patchStatus).toBe(0),
  },

  // Policies and guards that make no write to the service.
  {
    reason: "paused: not even a lookup, and the status says why",
    arrange: (w) => {
      w.apply({}, { annotations: { [ANNOTATION_PAUSED]: "true" } });
    },
    ...withoutCall({ Ready: "Unknown/Paused", Synced: "False/Paused" }),
  },
  {
    reason: "a connection that is not Ready: ConnectionNotReady naming it, Stalled, and no service call",
    arrange: (w) => {
      w.apply({ connectionRef: { kind: "ServiceConnection", name: "prod" } });
      w.connection = {
        kind: "unavailable",
        message: "ServiceConnection default/prod is not Ready (Unauthorized)",
      };
    },
    ...withoutCall(stalledFor("ConnectionNotReady")),
    also: (w) => {
      const stored = w.resources.stored(REF);
      expect(messageOf(stored, "Synced")).toBe("ServiceConnection default/prod is not Ready (Unauthorized)");
      expect(stored?.status?.connection).toBe("ServiceConnection/prod");
    },
  },
  {
    reason:
      "a connection that retries on its own (Unreachable): ConnectionNotReady, Reconciling, never Stalled, no service call",
    arrange: (w) => {
      w.apply({ connectionRef: { kind: "ServiceConnection", name: "prod" } });
      w.connection = {
        kind: "unavailable",
        message: "ServiceConnection default/prod is not Ready (Unreachable): cannot reach the service",
        retrying: true,
      };
    },
    ...withoutCall(retryingFor("ConnectionNotReady")),
    also: (w) => {
      const stored = w.resources.stored(REF);
      expect(stored?.status?.conditions?.some((c) => c.type === "Stalled")).toBe(false);
    },
  },
  {
    reason:
      "deleting under Delete while the connection retries on its own: the finalizer holds, Reconciling, never Stalled",
    arrange: async (w) => {
      await w.settled({ deletionPolicy: "Delete" });
      w.resources.delete(REF);
      w.connection = {
        kind: "unavailable",
        message: "ServiceConnection default/prod is not Ready",
        retrying: true,
      };
    },
    ...withoutCall({ ...retryingFor("ConnectionNotReady", "True/Available") }),
    also: (w) => expect(w.resources.stored(REF)?.metadata.finalizers).toEqual([FINALIZER]),
  },
  {
    reason:
      "a connection not checked yet: nothing concluded, nothing written (its check enqueues the resource)",
    arrange: (w) => {
      w.apply({ connectionRef: { kind: "ClusterServiceConnection", name: "shared" } });
      w.connection = { kind: "pending" };
    },
    ...withoutCall({}),
    also: (w) => expect(w.resources.writes.patchStatus).toBe(0),
  },
  {
    reason: "paused beats an unusable connection: the status says Paused, not the connection",
    arrange: (w) => {
      w.apply(
        { connectionRef: { kind: "ServiceConnection", name: "prod" } },
        { annotations: { [ANNOTATION_PAUSED]: "true" } },
      );
      w.connection = { kind: "unavailable", message: "ServiceConnection default/prod not found" };
    },
    ...withoutCall({ Ready: "Unknown/Paused", Synced: "False/Paused" }),
  },
  {
    reason:
      "deleting under Delete while the connection is unusable: the finalizer holds, and the message says how to let go",
    arrange: async (w) => {
      await w.settled({ deletionPolicy: "Delete" });
      w.resources.delete(REF);
      w.connection = { kind: "unavailable", message: "ServiceConnection default/prod not found" };
    },
    ...withoutCall(stalledFor("ConnectionNotReady", "True/Available")),
    also: (w) => {
      const stored = w.resources.stored(REF);
      expect(stored?.metadata.finalizers).toEqual([FINALIZER]);
      expect(messageOf(stored, "Synced")).toContain(
        `set spec.deletionPolicy to Orphan: kubectl patch dmsd ${REF.name} -n ${REF.namespace} --type merge -p '{"spec":{"deletionPolicy":"Orphan"}}'`,
      );
    },
  },
  {
    reason:
      "deleting under Delete while the connection is unusable, with nothing on the service (no deployment id, no create pending): the finalizer goes",
    arrange: (w) => {
      // Its create was refused (say a 422): the finalizer was added, no deployment ever made.
      w.resources.create({
        metadata: { name: "agent", finalizers: [FINALIZER] },
        spec: { ...SPEC, deletionPolicy: "Delete" },
        status: {},
      });
      w.resources.delete(REF);
      // Its namespace being deleted took the connection's Secret with it.
      w.connection = { kind: "unavailable", message: "ServiceConnection default/prod is not Ready" };
    },
    outcome: { result: { kind: "gone" } },
    calls: {},
    conditions: undefined,
    events: [],
  },
  {
    reason:
      "a namespace its connection's selector refuses: ConnectionNotAllowed naming it, Stalled, no service call, paused or not",
    arrange: (w) => {
      w.apply(
        { connectionRef: { kind: "ClusterServiceConnection", name: "shared" } },
        { annotations: { [ANNOTATION_PAUSED]: "true" } },
      );
      w.connection = {
        kind: "refused",
        message: "ClusterServiceConnection shared may not be used from namespace default: …",
      };
    },
    ...withoutCall(stalledFor("ConnectionNotAllowed")),
    also: (w) => {
      const stored = w.resources.stored(REF);
      expect(messageOf(stored, "Synced")).toBe(
        "ClusterServiceConnection shared may not be used from namespace default: …",
      );
      expect(stored?.metadata.finalizers ?? []).toEqual([]);
    },
  },
  {
    reason:
      "deleting under Delete from a namespace now refused: the finalizer goes without a call, the deployment stays",
    arrange: async (w) => {
      await w.settled({ deletionPolicy: "Delete" });
      w.resources.delete(REF);
      w.connection = {
        kind: "refused",
        message: "the default connection may not be used from namespace default",
      };
    },
    outcome: { result: { kind: "gone" } },
    calls: {},
    events: ["Warning/ConnectionNotAllowed"],
    also: (w) => {
      expect(w.resources.stored(REF)).toBeUndefined();
      expect(w.service.store.getByName("agent")).toBeDefined();
      expect(w.events.all[0]?.note).toMatch(
        /Deleted without a call to the service: .* so the service's deployment \S+ is left in place/,
      );
    },
  },
  {
    reason:
      "deleted under Delete while spec.deletionProtection is true (its CRD deleted, no policy): the deployment is left, with a Warning, and the finalizer goes",
    arrange: async (w) => {
      await w.settled({ deletionPolicy: "Delete", deletionProtection: true });
      w.resources.delete(REF);
    },
    outcome: { result: { kind: "gone" } },
    calls: {},
    events: ["Warning/DeletionProtected"],
    also: (w) => {
      expect(w.resources.stored(REF)).toBeUndefined();
      expect(w.service.store.getByName("agent")?.status).not.toBe("AWAITING_DELETE");
      expect(w.events.all[0]?.note).toMatch(/the service's deployment \S+ is left in place/);
    },
  },
  {
    reason: "the same with its connection unusable: let go at once, nothing to wait for",
    arrange: async (w) => {
      await w.settled({ deletionPolicy: "Delete", deletionProtection: true });
      w.resources.delete(REF);
      w.connection = { kind: "unavailable", message: "ServiceConnection default/prod not found" };
    },
    outcome: { result: { kind: "gone" } },
    calls: {},
    events: ["Warning/DeletionProtected"],
    also: (w) => expect(w.service.store.getByName("agent")).toBeDefined(),
  },
  {
    reason: "the default connection is recorded in status.connection",
    arrange: (w) => {
      w.apply();
    },
    outcome: { result: { kind: "requeueAfter", ms: POLL_MS } },
    calls: { create: 1, findByName: 1 },
    conditions: AWAITING_DATABASE,
    events: ["Normal/Created"],
    also: (w) => expect(w.resources.stored(REF)?.status?.connection).toBe("default"),
  },
  {
    reason: "ObserveOnly never writes to the service, and gets no finalizer even under deletionPolicy Delete",
    arrange: async (w) => {
      w.existing({ ...BODY, source_config: { custom_url: "https://elsewhere.example" } });
      await w.applied({ managementPolicy: "ObserveOnly", deletionPolicy: "Delete" });
    },
    ...withoutCall({ Ready: "True/Available", Synced: "False/Drifted" }),
    also: (w) => {
      expect(w.service.store.getByName("agent")?.source_config.custom_url).toBe("https://elsewhere.example");
      expect(w.resources.stored(REF)?.metadata.finalizers ?? []).toEqual([]);
      expect(w.resources.writes.addFinalizer).toBe(0);
    },
  },
  // What ObserveOnly reports of the drift, ObserveOnly without a deployment, a deployment of
  // another source found by name, a spec change outside the revision config (no new revision,
  // Ready stays True) and a reconcile-interval annotation (the resource's own resync): pure
  // decisions, in test/unit/decide.test.ts ("the reconciler's table, as rows of decide…").
  {
    reason: "a name conflict: the younger claimant stalls, gets no finalizer and makes no call",
    arrange: async (w) => {
      w.resources.create({ metadata: { name: "first" }, spec: { ...SPEC, name: "agent" } });
      w.clock.advance(1_000);
      await w.applied({ deletionPolicy: "Delete" });
    },
    ...stalledWithoutCall("NameConflict"),
    also: async (w) => {
      // The loser owns nothing on the service: deleting it can never delete the holder's deployment.
      expect(w.resources.stored(REF)?.metadata.finalizers ?? []).toEqual([]);
      expect(w.resources.writes.addFinalizer).toBe(0);
      // The older claimant is reconciled as usual.
      await w.reconcile("first");
      expect(w.service.calls.create).toBe(1);
    },
  },

  // A connection whose listing missed its deadline or failed.
  {
    reason:
      "the connection's last listing missed its deadline: ListingDeadlineExceeded naming it and the deadline, and no call even for an edit",
    arrange: async (w) => {
      await w.settled();
      w.resources.edit(REF, (o) => {
        o.spec.sourceConfig = { customUrl: "https://new.example" };
      });
      await w.missListing();
    },
    ...withoutCall(retryingFor("ListingDeadlineExceeded", "True/Available")),
    also: (w) => {
      const synced = messageOf(w.resources.stored(REF), "Synced");
      for (const named of [
        "GET /v2/deployments",
        "the default connection",
        "within the listing deadline of 30s",
      ])
        expect(synced).toContain(named);
      expect(w.service.store.getByName("agent")?.source_config.custom_url).toBe("https://agent.example");
    },
  },
  {
    reason:
      "the connection's last listing failed with an answer: that failure's reason, no call, no value shown, and no retry of its own (the next listing enqueues it)",
    arrange: failedListing,
    outcome: { error: notRetried },
    calls: {},
    conditions: retryingFor("ServiceUnavailable"),
    events: ["Warning/ServiceUnavailable"],
    also: (w) => {
      const synced = messageOf(w.resources.stored(REF), "Synced");
      expect(synced).toContain("GET /v2/deployments answered 503");
      // The answer, which may differ at every listing, is the Warning event's (scrubbed there too).
      expect(synced).not.toContain("gateway down");
      expect(w.events.all.at(-1)?.note).toContain("answered 503: gateway down (***)");
      expect(JSON.stringify(w.resources.stored(REF)) + JSON.stringify(w.events.all)).not.toContain(
        "sk-listed-0123456789",
      );
      expect(w.service.store.list()).toEqual([]);
    },
  },
  {
    reason:
      "the next pass while the connection's listing still fails: nothing written, no Event, no Secret read, no retry of its own",
    arrange: async (w) => {
      await failedListing(w, "gateway down");
      await w.reconcile().catch(notRetried);
      w.events.all.length = 0;
      w.secrets.reads.length = 0;
      w.resources.writes.patchStatus = 0;
      // The resync's next listing fails the same way; its pass enqueues every resource again.
      w.service.failNext("listAll", { status: 503, detail: "gateway down" });
      await w.snapshot.refresh(new AbortController().signal).catch(() => {});
    },
    outcome: { error: notRetried },
    calls: {},
    conditions: retryingFor("ServiceUnavailable"),
    events: [],
    also: (w) => {
      expect(w.resources.writes.patchStatus).toBe(0);
      expect(w.secrets.reads).toEqual([]);
      expect(messageOf(w.resources.stored(REF), "Synced")).toContain("answered 503: the service");
    },
  },
  {
    reason: "a listing that ends in time again clears it: the change held meanwhile is applied",
    arrange: async (w) => {
      await w.settled();
      w.resources.edit(REF, (o) => {
        o.spec.sourceConfig = { customUrl: "https://new.example" };
      });
      await w.missListing();
      await w.reconcile();
      await w.resync();
    },
    outcome: { result: { kind: "done" } },
    // The listing now answers for the deployment: the PATCH is the only call.
    calls: { patch: 1 },
    conditions: { Ready: "True/Available", Synced: "True/ReconcileSuccess" },
    events: ["Normal/Updated"],
    also: (w) =>
      expect(w.service.store.getByName("agent")?.source_config.custom_url).toBe("https://new.example"),
  },
  {
    reason:
      "deleted under Delete while the connection's listing missed its deadline: no call, the finalizer holds and the message says how to let go",
    arrange: async (w) => {
      await w.settled({ deletionPolicy: "Delete" });
      w.resources.delete(REF);
      await w.missListing();
    },
    ...withoutCall(retryingFor("ListingDeadlineExceeded", "True/Available")),
    also: (w) => {
      const stored = w.resources.stored(REF);
      expect(stored?.metadata.finalizers).toEqual([FINALIZER]);
      expect(messageOf(stored, "Synced")).toContain(
        `set spec.deletionPolicy to Orphan: kubectl patch dmsd ${REF.name} -n ${REF.namespace} --type merge -p '{"spec":{"deletionPolicy":"Orphan"}}'`,
      );
      expect(w.service.store.getByName("agent")?.status).toBe("READY");
    },
  },

  // Deletion.
  {
    reason: "deleted under Orphan: the finalizer goes, the service's deployment stays",
    arrange: async (w) => {
      await w.settled();
      // A finalizer left from when the policy was Delete.
      w.resources.edit(REF, (o) => {
        o.metadata.finalizers = [FINALIZER];
      });
      w.resources.delete(REF);
    },
    outcome: { result: { kind: "gone" } },
    calls: {},
    conditions: undefined,
    events: [],
    also: (w) => {
      expect(w.resources.stored(REF)).toBeUndefined();
      expect(w.service.store.getByName("agent")?.status).toBe("READY");
    },
  },
  {
    reason: "deleted under Delete: the deployment is deleted once, and the finalizer holds until it is gone",
    arrange: async (w) => {
      await w.settled({ deletionPolicy: "Delete" });
      w.resources.delete(REF);
    },
    outcome: { result: { kind: "requeueAfter", ms: POLL_MS } },
    calls: { getById: 1, delete: 1 },
    // Ready is what the service showed before the DELETE; the next look shows it deleting.
    conditions: retryingFor("Deleting", "True/Available"),
    events: ["Normal/Deleting"],
    also: async (w) => {
      expect(w.service.store.getByName("agent")?.status).toBe("AWAITING_DELETE");
      expect(w.resources.stored(REF)?.metadata.finalizers).toEqual([FINALIZER]);
      // Looked at again while the service deletes: no second DELETE.
      w.service.resetCalls();
      expect(await w.reconcile()).toEqual({ kind: "requeueAfter", ms: POLL_MS });
      expect(callsOf(w.service)).toEqual({ getById: 1 });
      expect(conditions(w.resources.stored(REF))).toMatchObject({ Ready: "False/Deleting" });
      // Gone on the service: the finalizer goes, and with it the object.
      w.clock.advance(2_000);
      expect(await w.reconcile()).toEqual({ kind: "gone" });
      expect(w.resources.stored(REF)).toBeUndefined();
      expect(w.events.reasons()).toEqual(["Normal/Deleting", "Normal/Deleted"]);
    },
  },
  {
    reason:
      "deleted under Delete, the DELETE refused with a long error: the Warning's note, cut to its 1,024 bytes, still ends with how to let go",
    arrange: async (w) => {
      await w.settled({ deletionPolicy: "Delete" });
      w.resources.delete(REF);
      w.service.failNext("delete", { status: 409, detail: `deployment is busy: ${"é".repeat(900)}` });
    },
    outcome: { error: retriedWithBackoff("409") },
    calls: { getById: 1, delete: 1 },
    conditions: retryingFor("ReconcileError", "True/Available"),
    events: ["Warning/ReconcileError"],
    also: (w) => {
      const command = `set spec.deletionPolicy to Orphan: kubectl patch dmsd ${REF.name} -n ${REF.namespace} --type merge -p '{"spec":{"deletionPolicy":"Orphan"}}'`;
      const note = w.events.all.at(-1)?.note ?? "";
      expect(Buffer.byteLength(note)).toBeLessThanOrEqual(1024);
      expect(note).toContain("deployment is busy");
      expect(note.endsWith(command)).toBe(true);
      // The condition names the call and its status; the answer is the note's.
      const synced = messageOf(w.resources.stored(REF), "Synced") ?? "";
      expect(synced).toContain("DELETE /v2/deployments/{deployment_id} answered 409");
      expect(synced).not.toContain("deployment is busy");
      expect(synced.endsWith(command)).toBe(true);
    },
  },
  {
    reason:
      "deleted under Delete, the DELETE refused with controls in its answer: the note the recorder writes, each control shown as U+FFFD, still ends with how to let go",
    arrange: async (w) => {
      await w.settled({ deletionPolicy: "Delete" });
      w.resources.delete(REF);
      // 500 characters (the detail's bound), 500 bytes: 1,000 once each BEL is shown as U+FFFD.
      w.service.failNext("delete", { status: 409, detail: "\u0007b".repeat(250) });
    },
    outcome: { error: retriedWithBackoff("409") },
    calls: { getById: 1, delete: 1 },
    conditions: retryingFor("ReconcileError", "True/Available"),
    events: ["Warning/ReconcileError"],
    also: (w) => {
      const command = `set spec.deletionPolicy to Orphan: kubectl patch dmsd ${REF.name} -n ${REF.namespace} --type merge -p '{"spec":{"deletionPolicy":"Orphan"}}'`;
      // As the Kubernetes recorder writes it: printable, then cut to the API server's 1,024 bytes.
      const written = truncateNote(printableNote(w.events.all.at(-1)?.note ?? ""));
      expect(written).toContain("answered 409: \ufffdb\ufffdb");
      expect(written.endsWith(command)).toBe(true);
    },
  },
  {
    reason: "deleted under Delete when the deployment is already gone: no DELETE, the finalizer goes",
    arrange: async (w) => {
      const deployment = await w.settled({ deletionPolicy: "Delete" });
      w.service.store.delete(deployment.id);
      w.clock.advance(2_000);
      w.resources.delete(REF);
    },
    outcome: { result: { kind: "gone" } },
    calls: { getById: 1 },
    conditions: undefined,
    events: ["Normal/Deleted"],
    also: (w) => expect(w.resources.stored(REF)).toBeUndefined(),
  },
  {
    reason:
      "deleted under Delete with status.deploymentId forged to another resource's deployment: nothing deleted, NotOwned, let go",
    arrange: async (w) => {
      await w.settled({ deletionPolicy: "Delete" });
      const other = w.existing({ ...BODY, name: "billing" });
      forgeDeploymentId(w, other.id);
      w.resources.delete(REF);
    },
    outcome: { result: { kind: "gone" } },
    // Read through the resource's own connection: that is how its name is checked.
    calls: { getById: 1 },
    conditions: undefined,
    events: ["Warning/NotOwned"],
    also: (w) => {
      const billing = w.service.store.getByName("billing");
      expect(billing?.status).toBe("READY");
      expect(w.resources.stored(REF)).toBeUndefined();
      const note = w.events.all[0]?.note ?? "";
      for (const named of [
        "default/agent",
        billing?.id ?? "?",
        '"billing"',
        '"agent"',
        "letting default/agent go",
      ])
        expect(note).toContain(named);
    },
  },
  {
    reason:
      "deleted under Delete while an older resource holds the name its status records: nothing deleted, NotOwned, let go",
    arrange: async (w) => {
      const held = w.existing();
      w.resources.create({ metadata: { name: "holder" }, spec: { ...SPEC, name: "agent" } });
      w.clock.advance(1_000);
      // A finalizer and an id copied from the holder (by hand, or a restored backup).
      w.apply({ deletionPolicy: "Delete" }, { finalizers: [FINALIZER] });
      forgeDeploymentId(w, held.id);
      w.resources.delete(REF);
    },
    outcome: { result: { kind: "gone" } },
    calls: {},
    conditions: undefined,
    events: ["Warning/NotOwned"],
    also: (w) => {
      expect(w.service.store.getByName("agent")?.status).toBe("READY");
      expect(w.events.all[0]?.note).toContain("held by the older resource default/holder");
    },
  },
  {
    reason:
      "status.deploymentId forged to another resource's deployment: ignored with one NotOwned, the own deployment found by name and patched",
    arrange: async (w) => {
      await w.settled();
      const other = w.existing({ ...BODY, name: "billing" });
      await w.resync();
      forgeDeploymentId(w, other.id);
      w.resources.edit(REF, (o) => {
        o.spec.sourceConfig = { customUrl: "https://new.example" };
      });
    },
    outcome: { result: { kind: "done" } },
    calls: { getById: 1, patch: 1 },
    conditions: { Ready: "True/Available", Synced: "True/ReconcileSuccess" },
    events: ["Warning/NotOwned", "Normal/Adopted", "Normal/Updated"],
    also: async (w) => {
      const own = w.service.store.getByName("agent");
      expect(own?.source_config.custom_url).toBe("https://new.example");
      expect(w.service.store.getByName("billing")?.source_config.custom_url).toBe("https://agent.example");
      // Self-healing: the status records the resource's own deployment again.
      expect(w.resources.stored(REF)?.status?.deploymentId).toBe(own?.id);
      // A status that keeps showing the id (another writer owns the field) is warned about once.
      forgeDeploymentId(w, w.service.store.getByName("billing")?.id ?? "");
      w.events.all.length = 0;
      await w.reconcile();
      expect(w.events.reasons()).not.toContain("Warning/NotOwned");
      // A resource made again under the name (another uid) showing the id is warned again.
      w.resources.edit(REF, (o) => {
        o.metadata.uid = "uid-agent-again";
      });
      forgeDeploymentId(w, w.service.store.getByName("billing")?.id ?? "");
      await w.reconcile();
      expect(w.events.reasons()).toContain("Warning/NotOwned");
    },
  },
  {
    reason: "an object already gone from the cache: nothing to do",
    arrange: () => {},
    outcome: { result: { kind: "gone" } },
    calls: {},
    conditions: undefined,
    events: [],
  },

  // Failures of the create, one per class.
  ...CREATE_FAILURES.map(
    (f): Case => ({
      reason: f.reason,
      arrange: async (w) => {
        await w.applied();
        w.service.failNext("create", f.failure);
      },
      outcome: { error: f.error },
      calls: { create: 1 },
      conditions: { Ready: "Unknown/Unknown", ...f.conditions },
      events: [`Warning/${f.conditions.Synced.split("/")[1]}`],
      also: (w) => {
        const status = w.resources.stored(REF)?.status;
        expect(status?.createRequestedAt !== undefined).toBe(f.intentKept);
        expect(w.service.store.getByName("agent")).toBeUndefined();
      },
    }),
  ),
  {
    reason: "a 409 on create (the name was taken after the listing): reported, then adopted on the retry",
    arrange: async (w) => {
      await w.applied();
      w.service.seed(BODY);
    },
    outcome: { error: (e) => expect(String(e)).toContain("409") },
    calls: { create: 1, findByName: 1 },
    conditions: retryingFor("ReconcileError"),
    events: ["Warning/ReconcileError"],
    also: async (w) => {
      w.service.resetCalls();
      // The deployment is still provisioning: adopted, and looked at again after the poll period.
      expect(await w.reconcile()).toEqual({ kind: "requeueAfter", ms: POLL_MS });
      // The 409's lookup taught the snapshot the name: the retry costs no call.
      expect(callsOf(w.service)).toEqual({});
      expect(w.events.reasons()).toEqual(["Warning/ReconcileError", "Normal/Adopted"]);
      expect(w.resources.stored(REF)?.status?.deploymentId).toBe(w.service.store.getByName("agent")?.id);
      expect(conditions(w.resources.stored(REF))).toEqual(AWAITING_DATABASE);
    },
  },
  {
    reason: "a PATCH answered 404 (deleted on the service meanwhile): the snapshot forgets the deployment",
    arrange: async (w) => {
      await w.settled();
      w.resources.edit(REF, (o) => {
        o.spec.sourceConfig = { customUrl: "https://agent-2.example" };
      });
      w.service.failNext("patch", { status: 404, detail: "Deployment not found" });
    },
    outcome: { error: (e) => expect(String(e)).toContain("404") },
    calls: { getById: 1, patch: 1 },
    conditions: retryingFor("ReconcileError", "True/Available"),
    events: ["Warning/ReconcileError"],
    also: (w) => {
      const id = w.resources.stored(REF)?.status?.deploymentId ?? "";
      expect(w.snapshot.byId(id)).toBeNull();
    },
  },
  {
    reason: "a Secret the spec reads is missing: Stalled, naming it, and no service call",
    arrange: async (w) => {
      await w.applied({
        secrets: [{ name: "API_KEY", valueFrom: { secretKeyRef: { name: "agent-keys", key: "api" } } }],
      });
    },
    ...stalledWithoutCall("SecretNotFound"),
    also: (w) => {
      const synced = messageOf(w.resources.stored(REF), "Synced");
      expect(synced).toContain("agent-keys");
    },
  },

  // The secret budget (--max-secret-bytes, 1 MiB by default): counted as the Secrets are read.
  {
    reason:
      "200 entries of one 700 KB Secret: SecretsTooLarge naming size, limit and flag; the Secret read once, no service call",
    arrange: async (w) => {
      w.secrets.set("default", "big", { blob: "x".repeat(700_000) });
      await w.applied({ secrets: entriesOf(200, "big", () => "blob") });
    },
    ...stalledWithoutCall("SecretsTooLarge"),
    also: (w) => {
      expect(w.secrets.reads).toEqual(["default/big/blob"]);
      const synced = messageOf(w.resources.stored(REF), "Synced");
      expect(synced).toContain(
        "the secret values of spec.secrets come to 140,000,000 bytes, more than the limit of 1,048,576 (--max-secret-bytes)",
      );
      expect(synced).toContain('key "blob" of Secret "big" (700,000 bytes in each of 200 entries)');
      expect(w.events.all[0]?.note).toBe(synced);
    },
  },
  {
    reason:
      "values of exactly the limit are sent, the Secret read once for all the entries and keys that use it",
    arrange: async (w) => {
      // 2 entries × 262,144 + 1 entry × 524,288 = 1,048,576 bytes.
      w.secrets.set("default", "keys", { a: "a".repeat(262_144), b: "b".repeat(524_288) });
      await w.applied({ secrets: entriesOf(3, "keys", (i) => (i < 2 ? "a" : "b")) });
    },
    ...CREATED,
    also: (w) => {
      expect(w.secrets.reads).toEqual(["default/keys/a,b"]);
      expect(w.service.store.getByName("agent")?.secrets.map((s) => s.name)).toEqual(["S_0", "S_1", "S_2"]);
    },
  },
  {
    reason: "one byte over the limit: SecretsTooLarge, nothing sent",
    arrange: async (w) => {
      w.secrets.set("default", "keys", { a: "a".repeat(262_144), b: "b".repeat(524_289) });
      await w.applied({ secrets: entriesOf(3, "keys", (i) => (i < 2 ? "a" : "b")) });
    },
    ...stalledWithoutCall("SecretsTooLarge"),
    also: (w) => {
      const synced = messageOf(w.resources.stored(REF), "Synced");
      expect(synced).toContain("come to 1,048,577 bytes");
    },
  },
  {
    reason: "inline values count with the values read, each in its UTF-8 bytes",
    arrange: async (w) => {
      w.secrets.set("default", "keys", { a: "a".repeat(500_000) });
      // 2 bytes per character in UTF-8: 600,000 bytes.
      await w.applied({
        secrets: [{ name: "INLINE", value: "é".repeat(300_000) }, ...entriesOf(1, "keys", () => "a")],
      });
    },
    ...stalledWithoutCall("SecretsTooLarge"),
    also: (w) => {
      expect(w.secrets.reads).toEqual(["default/keys/a"]);
      const synced = messageOf(w.resources.stored(REF), "Synced");
      expect(synced).toContain("come to 1,100,000 bytes");
      expect(synced).toContain("the value of spec.secrets[INLINE] (600,000 bytes)");
    },
  },
  {
    reason: "inline values alone over the limit: no Secret is read at all",
    arrange: async (w) => {
      w.secrets.set("default", "keys", { a: "a" });
      await w.applied({
        secrets: [
          { name: "ONE", value: "1".repeat(600_000) },
          { name: "TWO", value: "2".repeat(600_000) },
          ...entriesOf(1, "keys", () => "a"),
        ],
      });
    },
    ...stalledWithoutCall("SecretsTooLarge"),
    also: (w) => {
      expect(w.secrets.reads).toEqual([]);
      const synced = messageOf(w.resources.stored(REF), "Synced");
      expect(synced).toContain("come to at least 1,200,000 bytes");
    },
  },
  {
    reason: "one Secret over the limit stops the reading: the Secrets after it are not read",
    arrange: async (w) => {
      w.secrets.set("default", "huge", { blob: "x".repeat(1_048_577) });
      w.secrets.set("default", "small", { a: "a" });
      await w.applied({
        secrets: [
          ...entriesOf(1, "huge", () => "blob"),
          { name: "LAST", valueFrom: { secretKeyRef: { name: "small", key: "a" } } },
        ],
      });
    },
    ...stalledWithoutCall("SecretsTooLarge"),
    also: (w) => expect(w.secrets.reads).toEqual(["default/huge/blob"]),
  },
  {
    reason: "a Secret shrunk below the limit brings a SecretsTooLarge resource back: it is created",
    arrange: async (w) => {
      w.secrets.set("default", "big", { blob: "x".repeat(700_000) });
      await w.applied({ secrets: entriesOf(200, "big", () => "blob") });
      await w.reconcile();
      w.secrets.set("default", "big", { blob: "x".repeat(5_000) });
      w.secrets.reads.length = 0;
    },
    ...CREATED,
    also: (w) => expect(w.secrets.reads).toEqual(["default/big/blob"]),
  },

  // Deletion of what this resource owns, and only that.
  {
    reason:
      "deleted under Delete while its create is pending (the answer was lost): the deployment it made is deleted",
    arrange: (w) => {
      deletedWhileCreating(w);
    },
    outcome: { result: { kind: "requeueAfter", ms: POLL_MS } },
    calls: { findByName: 1, delete: 1 },
    events: ["Normal/Deleting"],
    also: (w) => expect(w.service.store.getByName("agent")?.status).toBe("AWAITING_DELETE"),
  },
  {
    reason:
      "deleted under Delete while its create is pending: once the deployment it made is gone, one re-created under the name is not deleted",
    arrange: async (w) => {
      deletedWhileCreating(w);
      // The DELETE of the deployment its create made, found by name: its id is now recorded.
      expect(await w.reconcile()).toEqual({ kind: "requeueAfter", ms: POLL_MS });
      expect(w.service.store.getByName("agent")?.status).toBe("AWAITING_DELETE");
      // Gone on the service; someone else creates the name again before the next look.
      w.clock.advance(2_000);
      expect(w.service.store.getByName("agent")).toBeUndefined();
      w.existing();
    },
    outcome: { result: { kind: "gone" } },
    // The recorded id answers: the name is not asked again.
    calls: { getById: 1 },
    conditions: undefined,
    events: ["Normal/Deleted"],
    also: (w) => {
      expect(w.service.store.getByName("agent")?.status).toBe("READY");
      expect(w.resources.stored(REF)).toBeUndefined();
    },
  },
  {
    reason:
      "deleted under Delete when a deployment merely carries the name: it is someone else's, left alone",
    arrange: (w) => {
      w.existing();
      w.resources.create({
        metadata: { name: "agent", finalizers: [FINALIZER] },
        spec: { ...SPEC, deletionPolicy: "Delete" },
      });
      w.resources.delete(REF);
    },
    outcome: { result: { kind: "gone" } },
    calls: {},
    conditions: undefined,
    events: [],
    also: (w) => expect(w.service.store.getByName("agent")?.status).toBe("READY"),
  },

  // Annotations.
  {
    reason:
      "a requested reconcile asks the service although the listing is fresh, and is recorded as handled",
    arrange: async (w) => {
      await w.settled();
      w.resources.edit(REF, (o) => {
        o.metadata.annotations = { [ANNOTATION_RECONCILE_REQUESTED_AT]: "2030-01-01T01:00:00Z" };
      });
    },
    outcome: { result: { kind: "done" } },
    calls: { getById: 1 },
    conditions: { Ready: "True/Available", Synced: "True/ReconcileSuccess" },
    events: [],
    also: (w) => expect(w.resources.stored(REF)?.status?.lastHandledReconcileAt).toBe("2030-01-01T01:00:00Z"),
  },
  {
    reason:
      "a reconcile request 0.1.0 handled and recorded as given (a line break), which this version keeps as its digest, is not asked again after the upgrade",
    arrange: async (w) => {
      await w.settled();
      // A YAML block scalar's (`|`) value; 0.1.0 recorded the annotation's value as given.
      w.resources.edit(REF, (o) => {
        o.metadata.annotations = { [ANNOTATION_RECONCILE_REQUESTED_AT]: "2030-01-01T01:00:00Z\n" };
        o.status = { ...o.status, lastHandledReconcileAt: "2030-01-01T01:00:00Z\n" };
      });
    },
    outcome: { result: { kind: "done" } },
    calls: {},
    conditions: { Ready: "True/Available", Synced: "True/ReconcileSuccess" },
    events: [],
    also: (w) =>
      expect(w.resources.stored(REF)?.status?.lastHandledReconcileAt).toMatch(/^sha256:[0-9a-f]{64}$/),
  },
  {
    reason:
      "the reconcile a reconcile-interval brings asks the service, although the resync's listing is still fresh",
    arrange: async (w) => {
      await w.settled();
      w.resources.edit(REF, (o) => {
        o.metadata.annotations = { [ANNOTATION_RECONCILE_INTERVAL]: "20s" };
      });
      // Within the listing's 60 s, past half the interval: the listing no longer answers for it.
      w.clock.advance(15_000);
    },
    outcome: { result: { kind: "done", intervalMs: 20_000 } },
    calls: { getById: 1 },
    conditions: { Ready: "True/Available", Synced: "True/ReconcileSuccess" },
    events: [],
  },

  // Secrets.
  {
    reason:
      "a rotated Secret is read again without a lookup and sent in one PATCH (its body, hash and wording: decide.test.ts)",
    arrange: async (w) => {
      w.secrets.set("default", "agent-keys", { api: "sk-old-0123456789" });
      await w.settled({
        secrets: [{ name: "API_KEY", valueFrom: { secretKeyRef: { name: "agent-keys", key: "api" } } }],
      });
      w.secrets.set("default", "agent-keys", { api: "sk-new-9876543210" });
      w.secrets.reads.length = 0;
    },
    outcome: { result: { kind: "requeueAfter", ms: POLL_MS } },
    calls: { patch: 1 },
    conditions: ROLLING_OUT,
    events: ["Normal/Updated"],
    also: (w) => expect(w.secrets.reads).toEqual(["default/agent-keys/api"]),
  },

  rebuildWithRotatedSecret(
    "a rebuild asked for with a rotated Secret: the PATCH's revision is the one asked for, no second build",
  ),
  {
    reason:
      "a rebuild asked for with secrets sent again that the service already had (it masks them): the PATCH makes no revision, so the rebuild makes one",
    arrange: async (w) => {
      w.secrets.set("default", "agent-keys", { api: "sk-old-0123456789" });
      w.existing({ ...BODY, secrets: [{ name: "API_KEY", value: "sk-old-0123456789" }] });
      await w.applied(
        { secrets: [API_KEY_FROM_SECRET] },
        { annotations: { [ANNOTATION_REBUILD_REQUESTED_AT]: "2030-01-02T00:00:00Z" } },
      );
    },
    outcome: { result: { kind: "requeueAfter", ms: POLL_MS } },
    calls: { patch: 1, createRevision: 1, getById: 1 },
    conditions: ROLLING_OUT,
    events: ["Normal/Adopted", "Normal/Updated", "Normal/Rebuilt"],
    also: (w) => {
      const status = w.resources.stored(REF)?.status;
      expect(status?.lastHandledRebuildAt).toBe("2030-01-02T00:00:00Z");
      expect(w.service.store.revisions(status?.deploymentId ?? "")).toHaveLength(2);
    },
  },
  lostRebuildSeen(
    "a rebuild whose answer was lost, then its revision seen: the operator's own (in the history, Rebuilt), never an ExternalRevision",
  ),
  lostRebuildSeen(
    "a lost rebuild's revision seen by the reconcile that PATCHes an edit: both in the history, the PATCH's first",
    { imageUri: "repo/agent:2" },
  ),
  rebuildWithRotatedSecret(
    "a rebuild refused for want of the route, with a rotated Secret: the PATCH's revision is the one asked for, handled, nothing refused",
    true,
  ),
  {
    reason:
      "a settled resource reads none of its Secrets: their resourceVersions are those recorded with the hash",
    arrange: async (w) => {
      await settledWithSecret(w);
    },
    ...withoutCall({ Ready: "True/Available", Synced: "True/ReconcileSuccess" }),
    also: (w) => {
      expect(w.secrets.reads).toEqual([]);
      expect(w.resources.stored(REF)?.status?.appliedSecretVersions).toMatch(/^[0-9a-f]{64}$/);
    },
  },
  {
    reason:
      "a plain digest recorded before the install key: the Secrets are read once more, then not again (what is sent and recorded: decide.test.ts)",
    arrange: async (w) => {
      await settledWithSecret(w);
      expect(w.resources.stored(REF)?.status?.appliedSecretsHash).toBe(hashSecrets([SETTLED_SECRET]));
      // The upgrade: a new process with the install key.
      w.secretDigest = keyedSecretDigest(INSTALL_KEY);
      w.restart();
      await w.resync();
    },
    ...withoutCall({ Ready: "True/Available", Synced: "True/ReconcileSuccess" }),
    also: async (w) => {
      expect(w.secrets.reads).toEqual(["default/agent-keys/api"]);
      const keyed = keyedSecretDigest(INSTALL_KEY).digest([SETTLED_SECRET]);
      expect(w.resources.stored(REF)?.status?.appliedSecretsHash).toBe(keyed);
      // Keyed now: the next reconcile reads none.
      w.secrets.reads.length = 0;
      await w.reconcile();
      expect(w.secrets.reads).toEqual([]);
    },
  },
  {
    reason:
      "drift beside unread Secrets is corrected without them, and a failure report is still scrubbed of their values",
    arrange: async (w) => {
      const deployment = await settledWithSecret(w);
      w.service.store.drift(deployment.id, { source_config: { custom_url: "https://elsewhere.example" } });
      await w.resync();
      // The service's answer echoes a stored value: the report must not.
      w.service.failNext("patch", { status: 422, detail: "body.secrets.API_KEY: sk-old-0123456789 is weak" });
    },
    outcome: {
      error: (e) => {
        expect(String(e)).toContain("422");
        expect(String(e)).not.toContain("sk-old");
      },
    },
    calls: { patch: 1 },
    conditions: stalledFor("InvalidSpec", "True/Available"),
    events: ["Warning/InvalidSpec"],
    also: (w) => {
      expect(w.service.lastPatchBody).not.toHaveProperty("secrets");
      // Read for the report only, after the PATCH failed.
      expect(w.secrets.reads).toEqual(["default/agent-keys/api"]);
      const shown = JSON.stringify([w.resources.stored(REF)?.status, w.events.all]);
      expect(shown).not.toContain("sk-old");
    },
  },
  {
    reason:
      "the service lost a secret: the names differ, so the Secrets are read (what is sent and said: decide.test.ts)",
    arrange: async (w) => {
      const deployment = await settledWithSecret(w);
      w.service.store.drift(deployment.id, { secrets: [] });
      await w.resync();
    },
    outcome: { result: { kind: "requeueAfter", ms: POLL_MS } },
    calls: { patch: 1 },
    conditions: ROLLING_OUT,
    // The drift made a revision: someone else's, named once.
    events: ["Warning/ExternalRevision", "Normal/Updated"],
    also: (w) => {
      expect(w.secrets.reads).toEqual(["default/agent-keys/api"]);
      expect(w.service.store.getByName("agent")?.secrets.map((s) => s.name)).toEqual(["API_KEY"]);
    },
  },
  {
    reason:
      "an edited spec reads its Secrets again, and looks the deployment up (what it sends: decide.test.ts)",
    arrange: async (w) => {
      await settledWithSecret(w);
      w.resources.edit(REF, (o) => {
        o.spec = { ...o.spec, sourceRevisionConfig: { imageUri: "repo/agent:2" } };
      });
    },
    outcome: { result: { kind: "requeueAfter", ms: POLL_MS } },
    calls: { getById: 1, patch: 1 },
    conditions: ROLLING_OUT,
    events: ["Normal/Updated"],
    also: (w) => {
      expect(w.secrets.reads).toEqual(["default/agent-keys/api"]);
    },
  },

  // The create intent's grace period.
  {
    reason:
      "a create intent older than the grace period with nothing on the service: the earlier POST never took effect, so create",
    arrange: async (w) => {
      w.resources.create({
        metadata: { name: "agent" },
        spec: SPEC,
        status: { createRequestedAt: "2030-01-01T00:00:00Z" },
      });
      w.clock.advance(GRACE_MS + 1_000);
      await w.resync();
    },
    outcome: { result: { kind: "requeueAfter", ms: POLL_MS } },
    calls: { findByName: 1, create: 1 },
    events: ["Normal/Created"],
    also: (w) => expect(w.service.store.list()).toHaveLength(1),
  },
];

describe("DeploymentReconciler", () => {
  it.each(cases)("$reason", async (c) => {
    const w = world();
    await c.arrange(w);
    w.service.resetCalls();
    w.events.all.length = 0;

    const outcome: Outcome = await w.reconcile().then(
      (result) => ({ result }),
      (error: unknown) => ({ error }),
    );

    if ("result" in c.outcome) expect(outcome).toEqual(c.outcome);
    else {
      expect(outcome).toHaveProperty("error");
      if ("error" in outcome && typeof c.outcome.error === "function") c.outcome.error(outcome.error);
    }
    expect(callsOf(w.service)).toEqual(c.calls);
    expect(w.events.reasons()).toEqual(c.events);
    if ("conditions" in c) {
      const stored = w.resources.stored(REF);
      expect(stored && conditions(stored)).toEqual(c.conditions);
    }
    await c.also?.(w);
  });
});

describe("DeploymentReconciler's log", () => {
  it("makes no child logger for a reconcile that logs nothing, and one for a reconcile that does", async () => {
    const w = world();
    await w.settled();
    const logger = pino({ level: "info" }, { write: () => undefined });
    let children = 0;
    const child = logger.child.bind(logger);
    logger.child = ((...args: Parameters<typeof child>) => {
      children++;
      return child(...args);
    }) as typeof logger.child;
    w.restart(logger);
    await w.resync();
    const made = children;
    // Settled: nothing to write and nothing to say. A pino child serializes and redacts its
    // bindings when made; a resync pass reconciles every resource.
    await w.reconcile();
    expect(children).toBe(made);
    // A connection that refuses the namespace is warned about, through the reconcile's child.
    w.connection = {
      kind: "refused",
      message: "ServiceConnection default/prod may not be used from namespace default",
    };
    await w.reconcile().catch(() => undefined);
    expect(children).toBeGreaterThan(made);
  });
});

describe("DeploymentReconciler's log of a Stalled resource", () => {
  it("warns when it stalls, not again at each resync that finds it stalled for the same reason", async () => {
    const w = world();
    const lines: { level: number; msg: string }[] = [];
    w.restart(pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }));
    await w.applied({
      secrets: [{ name: "API_KEY", valueFrom: { secretKeyRef: { name: "agent-keys", key: "api" } } }],
    });
    // The first reconcile, then two resync passes over the unchanged resource.
    for (let i = 0; i < 3; i++) {
      await w.reconcile().catch(() => undefined);
      w.clock.advance(600_000);
      await w.resync();
    }
    expect(messageOf(w.resources.stored(REF), "Stalled")).toContain("agent-keys");
    const warnings = lines.filter((l) => l.level >= 40 && l.msg.includes("agent-keys"));
    expect(warnings).toHaveLength(1);
  });
});

/** Lets every promise chain that can progress do so (the reconcile runs up to its pending call). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("DeploymentReconciler when reads lag", () => {
  it("a create answered READY at once is written once, its intent cleared, and not polled", async () => {
    const w = world({ readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 });
    w.apply();
    await w.resync();

    expect(await w.reconcile()).toEqual({ kind: "done" });
    const created = w.resources.get(REF);
    expect(conditions(created)).toMatchObject({ Ready: "True/Available", Synced: "True/ReconcileSuccess" });
    // The intent, then the answer with the intent cleared: no third write once a read lists it.
    expect(w.resources.writes.patchStatus).toBe(2);
    expect(created?.status?.createRequestedAt).toBeUndefined();
    expect(created?.status?.createdAt).toBe("2030-01-01T00:00:00Z");
    expect(created && pollIndexer(created)).toEqual([]);
    expect(callsOf(w.service)).toEqual({ create: 1 });
  });

  it("a created deployment the listing misses within the create grace is waited for, never created again", async () => {
    const w = world({ readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 });
    w.apply();
    w.service.lagMs = 30_000;
    await w.resync();
    expect(await w.reconcile()).toEqual({ kind: "done" });
    const created = w.resources.stored(REF)?.status;
    const id = created?.deploymentId;
    expect(id).toBe(w.service.store.getByName("agent")?.id);
    expect(created?.revisionHistory).toHaveLength(1);

    // A new process (nothing of the create's answer in memory) before the listing shows it: by
    // its id, then by its name, both missing it; createdAt holds the create back.
    w.restart();
    await w.resync();
    w.clock.advance(1_000);
    w.service.resetCalls();
    expect(await w.reconcile()).toEqual({ kind: "requeueAfter", ms: POLL_MS });
    expect(callsOf(w.service).create).toBeUndefined();
    const waiting = w.resources.stored(REF);
    expect(conditions(waiting)).toMatchObject({ Ready: "False/Creating", Reconciling: "True/Creating" });
    expect(waiting?.status?.deploymentId).toBe(id);

    // Listed at last: Ready, and the service holds one deployment.
    w.clock.advance(30_000);
    expect(await w.reconcile()).toEqual({ kind: "done" });
    expect(conditions(w.resources.stored(REF))).toMatchObject({ Ready: "True/Available" });
    expect(w.service.store.list()).toHaveLength(1);
    expect(w.events.reasons()).toEqual(["Normal/Created"]);
    // What the operator recorded of its create outlived the wait: its revision (a candidate of
    // spec.revisionReuse), and when it was first seen active.
    const listed = w.resources.stored(REF)?.status;
    expect(listed?.revisionHistory).toEqual(created?.revisionHistory);
    expect(listed?.activeRevision).toEqual(created?.activeRevision);
  });

  it("acts on a stale cached copy that lacks the create intent: a conflict, never a second POST", async () => {
    const w = world();
    const before = w.apply();
    w.service.lagMs = 30_000;
    await w.resync();
    expect(await w.reconcile()).toEqual({ kind: "requeueAfter", ms: POLL_MS });
    expect(w.service.calls.create).toBe(1);

    // A new process whose watch cache still holds the object as it was before the create, and
    // whose listing does not show the deployment yet.
    w.restart();
    w.resources.lag(before);
    await w.resync();
    expect(await w.reconcile()).toEqual({ kind: "retry" });
    expect(callsOf(w.service)).toEqual({});

    // The cache catches up: the recorded create (its id, createdAt) holds a second one back while
    // the listing lags; its name is looked for in the listing the resync read.
    w.resources.catchUp();
    w.clock.advance(1_000);
    expect(await w.reconcile()).toEqual({ kind: "requeueAfter", ms: POLL_MS });
    expect(callsOf(w.service)).toEqual({ getById: 1 });
    const waiting = w.resources.stored(REF);
    expect(conditions(waiting)).toEqual({
      Ready: "False/Creating",
      Synced: "True/ReconcileSuccess",
      Reconciling: "True/Creating",
    });
    // The id the create answered with stays known while the listing catches up.
    expect(waiting?.status?.deploymentId).toBe(w.service.store.getByName("agent")?.id);

    // Listed at last: the intent is fulfilled, and the service holds one deployment.
    w.clock.advance(30_000);
    w.service.resetCalls();
    expect(await w.reconcile()).toEqual({ kind: "done" });
    expect(callsOf(w.service)).toEqual({ getById: 1 });
    expect(w.resources.stored(REF)?.status?.createRequestedAt).toBeUndefined();
    expect(conditions(w.resources.stored(REF))).toEqual({
      Ready: "True/Available",
      Synced: "True/ReconcileSuccess",
    });
    expect(w.service.store.list()).toHaveLength(1);
    expect(w.events.reasons()).toEqual(["Normal/Created"]);
  });

  it("deleted under Delete while its create is pending and not listed yet: held through the create grace, then its deployment deleted", async () => {
    const w = world();
    w.apply({ deletionPolicy: "Delete" });
    await loseCreateAnswer(w);
    expect(w.resources.stored(REF)?.metadata.finalizers).toEqual([FINALIZER]);
    w.resources.delete(REF);

    // The listing does not show the deployment yet: the finalizer stays while it may appear.
    w.clock.advance(POLL_MS);
    expect(await w.reconcile()).toEqual({ kind: "requeueAfter", ms: POLL_MS });
    expect(w.resources.stored(REF)?.metadata.finalizers).toEqual([FINALIZER]);
    expect(w.service.store.getByName("agent")?.status).not.toBe("AWAITING_DELETE");

    // Listed: the deployment the create made is deleted, and the resource let go once it is gone.
    w.clock.advance(30_000);
    await w.reconcile();
    expect(w.service.store.getByName("agent")?.status).toBe("AWAITING_DELETE");
    w.clock.advance(2_000);
    expect(await w.reconcile()).toEqual({ kind: "gone" });
    expect(w.service.store.getByName("agent")).toBeUndefined();
  });

  it("deleted under Delete just after its create, not listed yet: the id it answered with is not given up as gone", async () => {
    const w = world();
    w.apply({ deletionPolicy: "Delete" });
    w.service.lagMs = 30_000;
    await w.resync();
    await w.reconcile();
    const id = w.resources.stored(REF)?.status?.deploymentId;
    expect(id).toBe(w.service.store.getByName("agent")?.id);
    w.resources.delete(REF);

    w.clock.advance(POLL_MS);
    expect(await w.reconcile()).toEqual({ kind: "requeueAfter", ms: POLL_MS });
    expect(w.resources.stored(REF)?.metadata.finalizers).toEqual([FINALIZER]);
    expect(w.events.reasons()).not.toContain("Normal/Deleted");

    w.clock.advance(30_000);
    await w.reconcile();
    expect(w.service.store.getByName("agent")?.status).toBe("AWAITING_DELETE");
  });

  it("deleted under Delete just after its create was listed: its deployment deleted, then let go at once, not held for the grace", async () => {
    const w = world();
    w.apply({ deletionPolicy: "Delete" });
    await w.resync();
    await w.reconcile();
    expect(w.resources.stored(REF)?.status?.createdAt).toBeDefined();
    w.resources.delete(REF);
    await w.reconcile();
    expect(w.service.store.getByName("agent")?.status).toBe("AWAITING_DELETE");
    // Gone well within the create grace: its deletion is done, not a listing that lags.
    w.clock.advance(2_000);
    expect(await w.reconcile()).toEqual({ kind: "gone" });
    expect(w.events.reasons()).toContain("Normal/Deleted");
  });

  it("deleted under Delete within the create grace, its status naming someone else's deployment: let go at once", async () => {
    const w = world();
    w.apply({ deletionPolicy: "Delete" });
    await w.resync();
    await w.reconcile();
    const other = w.service.store.create({ name: "another", source: "external_docker" });
    const stored = w.resources.stored(REF);
    w.resources.create({ ...stored, status: { ...stored?.status, deploymentId: other.id } } as never);
    w.resources.delete(REF);
    expect(await w.reconcile()).toEqual({ kind: "gone" });
    expect(w.service.store.getByName("another")?.status).not.toBe("AWAITING_DELETE");
  });

  it("deleted under Delete with a create time forged into the future: let go, not held for ever", async () => {
    const w = world();
    w.resources.create({
      metadata: { name: "agent", finalizers: [FINALIZER] },
      spec: { ...SPEC, deletionPolicy: "Delete" },
      status: { createRequestedAt: "2999-01-01T00:00:00Z" },
    });
    w.resources.delete(REF);
    await w.resync();
    expect(await w.reconcile()).toEqual({ kind: "gone" });
  });

  it("a create whose answer was lost is found by name once listed, reported as created, not adopted", async () => {
    const w = world();
    w.apply();
    await loseCreateAnswer(w);
    expect(w.resources.stored(REF)?.status?.createRequestedAt).toBeDefined();

    w.service.resetCalls();
    w.clock.advance(POLL_MS);
    expect(await w.reconcile()).toEqual({ kind: "requeueAfter", ms: POLL_MS });
    expect(callsOf(w.service)).toEqual({ findByName: 1 });

    w.clock.advance(30_000);
    expect(await w.reconcile()).toEqual({ kind: "done" });
    expect(w.service.calls.create).toBe(0);
    expect(w.events.reasons()).toEqual(["Warning/ReconcileError", "Normal/Created"]);
    expect(w.resources.stored(REF)?.status?.deploymentId).toBe(w.service.store.getByName("agent")?.id);
    expect(w.resources.stored(REF)?.status?.createRequestedAt).toBeUndefined();
  });
});

/**
 * The first reconcile of the resource applied, its POST reaching the service but its answer lost,
 * while the listing lags 30 s behind creates.
 */
async function loseCreateAnswer(w: World): Promise<void> {
  w.service.lagMs = 30_000;
  await w.resync();
  const create = w.service.create.bind(w.service);
  w.service.create = async (body, signal) => {
    await create(body, signal);
    throw new Error("socket hang up");
  };
  await expect(w.reconcile()).rejects.toThrow("socket hang up");
}

/** A new resource's reconcile, waiting on a POST that never answers. */
async function stuckInCreate() {
  const w = world();
  await w.applied();
  w.service.hold("create");
  const controller = new AbortController();
  const pending = w.reconcile("agent", controller.signal);
  await settle();
  return { w, controller, pending };
}

/**
 * A rebuild asked with `value`, whose reconcile times out while its POST is out (`whileOut` runs
 * then); later calls of the route answer again.
 */
async function rebuildCutOff(w: World, value: string, whileOut: () => void = () => {}) {
  w.resources.edit(REF, (o) => {
    o.metadata.annotations = { [ANNOTATION_REBUILD_REQUESTED_AT]: value };
  });
  w.service.hold("createRevision");
  const controller = new AbortController();
  const pending = w.reconcile("agent", controller.signal);
  await settle();
  whileOut();
  controller.abort(new ReconcileTimeoutError("reconcile of default/agent exceeded 30000 ms"));
  await expect(pending).rejects.toThrow("exceeded 30000 ms");
  w.service.release("createRevision");
}

describe("an API server that throttles the operator's writes (429, Retry-After)", () => {
  it("a refused finalizer write: the failure the controller retries carries the pause asked for", async () => {
    const w = world();
    await w.applied({ deletionPolicy: "Delete" });
    // API Priority and Fairness, no seat for the write: 429 with Retry-After: 7.
    const throttled = apiErrorFrom(
      429,
      { kind: "Status", code: 429, reason: "TooManyRequests", message: "too many requests" },
      "PATCH /apis/dms.dev/v1alpha1/namespaces/default/deployments/agent",
      retryAfterHeader("7"),
    );
    w.resources.addFinalizer = () => Promise.reject(throttled);
    const failed = await w.reconcile().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failed).toBeInstanceOf(Error);
    // The controller waits at least this long before it runs the reconcile again.
    expect((failed as { retryAfterMs?: unknown }).retryAfterMs).toBe(7_000);
    expect(conditions(w.resources.stored(REF))).toMatchObject({ Synced: "False/ReconcileError" });
  });
});

describe("DeploymentReconciler when its signal aborts", () => {
  it("a timeout is reported on the resource, its status written under a window of its own", async () => {
    const { w, controller, pending } = await stuckInCreate();
    expect(w.service.calls.create).toBe(1);

    controller.abort(new ReconcileTimeoutError("reconcile of default/agent exceeded 30000 ms"));
    await expect(pending).rejects.toThrow("exceeded 30000 ms");
    const stored = w.resources.stored(REF);
    expect(conditions(stored)).toMatchObject({ Synced: "False/ReconcileError" });
    expect(messageOf(stored, "Synced")).toContain("exceeded 30000 ms");
    // The reconcile's own signal had aborted: the write ran under another, whose timer is gone.
    expect(w.resources.signals.at(-1)?.aborted).toBe(false);
    expect(w.clock.pending).toBe(0);
    // Whether the POST took effect is unknown: the intent stays, so the retry looks first.
    expect(stored?.status?.createRequestedAt).toBeDefined();
    expect(w.events.reasons()).toEqual(["Warning/ReconcileError"]);
  });

  it("a halt (leadership lost, shutdown) abandons the reconcile without reporting it", async () => {
    const { w, controller, pending } = await stuckInCreate();

    controller.abort(new Error("leadership lost"));
    await expect(pending).rejects.toThrow("leadership lost");
    // Only the intent was written: no failure condition, no event for a failure that is not the resource's.
    expect(w.resources.writes.patchStatus).toBe(1);
    expect(conditions(w.resources.stored(REF))).toEqual({});
    expect(w.events.all).toEqual([]);
  });

  it("a rebuild acted on from a stale copy (the cache not showing it handled): a conflict, no second POST", async () => {
    const w = world();
    const deployment = await w.settled();
    const asked = w.resources.edit(REF, (o) => {
      o.metadata.annotations = { [ANNOTATION_REBUILD_REQUESTED_AT]: "2030-01-02T00:00:00Z" };
    });
    await w.reconcile();
    expect(w.service.calls.createRevision).toBe(1);
    expect(w.resources.stored(REF)?.status?.lastHandledRebuildAt).toBe("2030-01-02T00:00:00Z");
    // Another replica's watch, or this one's, has not seen the status written since.
    w.resources.lag(asked);
    await w.reconcile();
    expect(w.service.calls.createRevision).toBe(1);
    expect(w.service.store.revisions(deployment.id)).toHaveLength(2);
  });

  it("a timeout while the rebuild's POST is out: its answer lost, the retry sends no second POST", async () => {
    const w = world();
    const deployment = await w.settled();
    await rebuildCutOff(w, "2030-01-02T00:00:00Z", () => {
      expect(w.service.calls.createRevision).toBe(1);
      // Recorded before the call, without the value a lost answer adds: a call still out.
      const out = w.resources.stored(REF)?.status;
      expect(out?.lastHandledRebuildAt).toBe("2030-01-02T00:00:00Z");
      expect(out?.unconfirmedRebuild).toEqual({
        afterRevisionId: deployment.latest_revision_id,
        configHash: expect.stringMatching(/^[0-9a-f]{64}$/),
      });
      // The service may build it: only the answer is lost.
      w.service.store.createRevision(deployment.id);
    });
    const status = w.resources.stored(REF)?.status;
    expect(status?.lastHandledRebuildAt).toBe("2030-01-02T00:00:00Z");
    expect(status?.unconfirmedRebuild?.afterRevisionId).toBe(deployment.latest_revision_id);
    await w.reconcile();
    expect(w.service.calls.createRevision).toBe(1);
    expect(w.service.store.revisions(deployment.id)).toHaveLength(2);
  });

  it("a lost rebuild's revision, seen by the reconcile whose own rebuild then times out: still the operator's", async () => {
    const w = world();
    await rebuildAnswerLost(w);
    await rebuildCutOff(w, "2030-01-03T00:00:00Z");
    w.events.all.length = 0;
    await w.reconcile();
    const status = w.resources.stored(REF)?.status;
    const ids = w.service.store.revisions(status?.deploymentId ?? "")?.map((r) => r.id) ?? [];
    expect(status?.revisionHistory?.[0]?.id).toBe(ids.at(-1));
    expect(status?.externalRevision).toBeUndefined();
    expect(w.events.reasons()).not.toContain("Warning/ExternalRevision");
  });

  it("a rebuild the service refused, or has no route for: pending again, as if never sent", async () => {
    const w = world();
    await w.settled();
    w.resources.edit(REF, (o) => {
      o.metadata.annotations = { [ANNOTATION_REBUILD_REQUESTED_AT]: "2030-01-02T00:00:00Z" };
    });
    w.service.failNext("createRevision", { status: 503, detail: "Service Unavailable" });
    await expect(w.reconcile()).rejects.toThrow("answered 503");
    const refused = w.resources.stored(REF)?.status;
    expect(refused?.lastHandledRebuildAt).toBeUndefined();
    expect(refused?.unconfirmedRebuild).toBeUndefined();
    w.service.rebuildRoute = false;
    await w.reconcile();
    expect(w.service.calls.createRevision).toBe(2);
    const missing = w.resources.stored(REF)?.status;
    expect(conditions(w.resources.stored(REF)).Synced).toBe("False/RebuildRouteMissing");
    expect(missing?.lastHandledRebuildAt).toBeUndefined();
    expect(missing?.unconfirmedRebuild).toBeUndefined();
  });

  it("bounds the failure's status write after a timeout: a write that hangs is given up after its window", async () => {
    const { w, controller, pending } = await stuckInCreate();
    w.resources.hung = true;

    controller.abort(new ReconcileTimeoutError("reconcile of default/agent exceeded 30000 ms"));
    await settle();
    let settled = false;
    void pending.catch(() => {
      settled = true;
    });
    await settle();
    expect(settled).toBe(false);
    w.clock.advance(5_000);
    await expect(pending).rejects.toThrow("exceeded 30000 ms");
    expect(w.resources.signals.at(-1)?.aborted).toBe(true);
  });
});

// A name used again (previews): the service keeps the tracing project of a deployment deleted
// without delete_tracing_project=true, and a create of that name answers 409.
describe("a name used again after a delete", () => {
  /** The resource deleted under Delete, the deployment gone, the resource re-applied. */
  async function deletedAndReapplied(w: World, spec: Partial<DeploymentSpec>) {
    w.service.store.tracingProjects.keep = true;
    await w.settled({ deletionPolicy: "Delete", ...spec });
    w.resources.delete(REF);
    await w.reconcile();
    w.clock.advance(2_000);
    expect(await w.reconcile()).toEqual({ kind: "gone" });
    w.apply({ deletionPolicy: "Delete", ...spec });
    await w.resync();
    w.events.all.length = 0;
  }

  it("without deleteTracingProject: the DELETE leaves the tracing project, and the new create is NameReserved, Stalled, not retried", async () => {
    const w = world();
    await deletedAndReapplied(w, {});
    expect(w.service.lastDeleteOptions).toEqual({ deleteTracingProject: false });

    // Not retried with backoff: the next resync (or a requested reconcile) tries again.
    expect(await w.reconcile()).toEqual({ kind: "done" });
    expect(callsOf(w.service)).toEqual({ create: 1, findByName: 1 });
    const stored = w.resources.stored(REF);
    expect(conditions(stored)).toMatchObject({ Synced: "False/NameReserved", Stalled: "True/NameReserved" });
    const message = messageOf(stored, "Synced") ?? "";
    expect(message).toContain('tracing project "agent"');
    expect(message).toContain("spec.deleteTracingProject: true");
    expect(message).toContain("another spec.name");
    // The refused create's intent is cleared: the next attempt creates rather than waits.
    expect(stored?.status?.createRequestedAt).toBeUndefined();
    expect(w.events.reasons()).toEqual(["Warning/NameReserved"]);

    // Deleted in the service's UI: the next attempt creates the deployment.
    w.service.store.tracingProjects.remove("agent");
    await w.resync();
    await w.reconcile();
    expect(conditions(w.resources.stored(REF))).toMatchObject({ Synced: "True/ReconcileSuccess" });
    expect(w.service.store.getByName("agent")).toBeDefined();
  });

  it("with deleteTracingProject: the DELETE asks for the tracing project too, and the name is created again", async () => {
    const w = world();
    await deletedAndReapplied(w, { deleteTracingProject: true });
    expect(w.service.lastDeleteOptions).toEqual({ deleteTracingProject: true });

    await w.reconcile();
    expect(conditions(w.resources.stored(REF))).toMatchObject({ Synced: "True/ReconcileSuccess" });
    expect(w.events.reasons()).toEqual(["Normal/Created"]);
  });

  it("a 409 of a name a deployment holds stays a retried conflict, not NameReserved", async () => {
    const w = world();
    w.apply();
    await w.resync();
    // Created by someone else after the listing the reconcile read.
    w.service.seed(BODY);
    await expect(w.reconcile()).rejects.toThrow("answered 409");
    expect(conditions(w.resources.stored(REF))).toMatchObject({ Synced: "False/ReconcileError" });
  });
});

describe("DeploymentReconciler: failure evidence", () => {
  const SECRET = "sk-old-0123456789";

  /**
   * A settled resource sending a Secret's value, whose next revision fails at `phase`: its image
   * changed (one PATCH), the revision's phases run out, and reconciled again (the revision read).
   */
  async function failedRevision(w: World, phase: "build" | "deploy") {
    const deployment = await settledWithSecret(w);
    w.service.store.drift(deployment.id, { fail_revisions: phase });
    w.resources.edit(REF, (o) => {
      o.spec.sourceRevisionConfig = { imageUri: "repo/agent:2" };
    });
    await w.reconcile();
    w.clock.advance(SETTLE_MS);
    await w.resync();
    w.events.all.length = 0;
    const result = await w.reconcile();
    return { deployment, result };
  }

  it("a failed build: one RevisionFailed Warning with the log tail redacted, its excerpt in Stalled, read once", async () => {
    const w = world();
    const { result } = await failedRevision(w, "build");
    expect(result).toEqual({ kind: "done" });
    const stored = w.resources.stored(REF);
    expect(conditions(stored)).toMatchObject({
      Ready: "False/RevisionFailed",
      Stalled: "True/RevisionFailed",
    });
    expect(w.events.reasons()).toEqual(["Warning/RevisionFailed"]);
    const note = w.events.all[0]?.note ?? "";
    expect(note).toContain("BUILD_FAILED: it will not go live; last build log lines:");
    expect(note).toContain("error: build failed");
    // The simulated build printed the secret value: it shows redacted, never as it is.
    expect(note).toContain("env: API_KEY=***");
    expect(note).not.toContain(SECRET);
    expect(Buffer.byteLength(note)).toBeLessThanOrEqual(1024);
    const stalled = messageOf(stored, "Stalled") ?? "";
    expect(stalled).toContain("Last build log lines: ");
    expect(stalled).toContain("error: build failed");
    expect(stalled).not.toContain(SECRET);
    expect(stored?.status?.failedRevisionLog).toMatchObject({
      revisionId: stored?.status?.latestRevisionId,
      reason: "RevisionFailed",
      type: "build",
    });
    expect(stored?.status?.failedRevisionLog?.excerpt?.length).toBeLessThanOrEqual(300);
    expect(w.service.calls.getRevisionLogs).toBe(1);

    // A requested reconcile, and a restart, read and report nothing again.
    w.resources.edit(REF, (o) => {
      o.metadata.annotations = { [ANNOTATION_RECONCILE_REQUESTED_AT]: "2030-01-02T00:00:00Z" };
    });
    await w.reconcile();
    w.restart();
    await w.resync();
    await w.reconcile();
    expect(w.service.calls.getRevisionLogs).toBe(0);
    expect(w.events.reasons()).toEqual(["Warning/RevisionFailed"]);
    expect(w.resources.stored(REF)?.status?.failedRevisionLog).toEqual(stored?.status?.failedRevisionLog);
  });

  it("a failed deploy shows the deploy log", async () => {
    const w = world();
    await failedRevision(w, "deploy");
    const note = w.events.all[0]?.note ?? "";
    expect(note).toContain("DEPLOY_FAILED: it will not go live; last deploy log lines:");
    expect(note).toContain("container agent exited with code 1");
    expect(w.resources.stored(REF)?.status?.failedRevisionLog?.type).toBe("deploy");
  });

  it("a service without the logs route: the status and event without a tail, and one probe per connection", async () => {
    const w = world();
    w.service.logsRoute = false;
    await failedRevision(w, "build");
    expect(w.events.all[0]?.note).toMatch(
      /BUILD_FAILED: it will not go live; the service has no logs route$/,
    );
    const stalled = messageOf(w.resources.stored(REF), "Stalled");
    expect(stalled).not.toContain("log lines");
    expect(w.service.calls.getRevisionLogs).toBe(1);
    // The next failed revision of the same connection is reported without asking again.
    w.resources.edit(REF, (o) => {
      o.spec.sourceRevisionConfig = { imageUri: "repo/agent:3" };
    });
    await w.reconcile();
    w.clock.advance(SETTLE_MS);
    await w.resync();
    await w.reconcile();
    expect(w.service.calls.getRevisionLogs).toBe(0);
    expect(w.events.reasons()).toContain("Warning/RevisionFailed");
  });

  it("a log read that fails for a passing reason (503) is read again a minute later, and its tail shown then", async () => {
    const w = world();
    w.service.failNext("getRevisionLogs", { status: 503 });
    const { result } = await failedRevision(w, "build");
    expect(w.service.calls.getRevisionLogs).toBe(1);
    expect(result).toEqual({ kind: "requeueAfter", ms: 60_000 });
    expect(w.events.reasons()).toEqual(["Warning/RevisionFailed"]);
    expect(w.events.all[0]?.note).toMatch(
      /BUILD_FAILED: it will not go live; its build log is not shown: it could not be read \(503 unavailable\); it is read again in a minute$/,
    );
    expect(w.resources.stored(REF)?.status?.failedRevisionLog).toMatchObject({
      reason: "RevisionFailed",
      failedReads: 1,
      failedReadAt: new Date(w.clock.now()).toISOString().replace(".000Z", "Z"),
    });

    // Looked at again within the minute (a requested reconcile): not read, nothing told.
    w.clock.advance(30_000);
    w.resources.edit(REF, (o) => {
      o.metadata.annotations = { [ANNOTATION_RECONCILE_REQUESTED_AT]: "2030-01-02T00:00:00Z" };
    });
    await w.resync();
    w.events.all.length = 0;
    expect(await w.reconcile()).toEqual({ kind: "requeueAfter", ms: 60_000 });
    expect(w.service.calls.getRevisionLogs).toBe(0);
    expect(w.events.reasons()).toEqual([]);

    // A minute after the failed read: read again, the tail shown, the record done.
    w.clock.advance(30_000);
    await w.resync();
    expect(await w.reconcile()).toEqual({ kind: "done" });
    expect(w.service.calls.getRevisionLogs).toBe(1);
    expect(w.events.reasons()).toEqual(["Warning/RevisionFailed"]);
    expect(w.events.all[0]?.note).toContain("; last build log lines:");
    expect(w.events.all[0]?.note).toContain("error: build failed");
    const log = w.resources.stored(REF)?.status?.failedRevisionLog;
    expect(log?.excerpt).toContain("error: build failed");
    expect(log?.failedReads).toBeUndefined();
    expect(log?.failedReadAt).toBeUndefined();

    w.clock.advance(600_000);
    await w.resync();
    await w.reconcile();
    expect(w.service.calls.getRevisionLogs).toBe(0);
  });

  it("a log read failing for a passing reason is given up after three reads, a minute apart, saying why", async () => {
    const w = world();
    w.service.failNext("getRevisionLogs", { status: 429 });
    await failedRevision(w, "build");
    expect(w.events.all[0]?.note).toContain(
      "it could not be read (429 rate_limited); it is read again in a minute",
    );

    // The second read fails too: counted, nothing told.
    w.clock.advance(60_000);
    await w.resync();
    w.events.all.length = 0;
    w.service.failNext("getRevisionLogs", { status: 502 });
    expect(await w.reconcile()).toEqual({ kind: "requeueAfter", ms: 60_000 });
    expect(w.service.calls.getRevisionLogs).toBe(1);
    expect(w.events.reasons()).toEqual([]);
    expect(w.resources.stored(REF)?.status?.failedRevisionLog?.failedReads).toBe(2);

    // The third as well: given up, and said so.
    w.clock.advance(60_000);
    await w.resync();
    w.service.failNext("getRevisionLogs", { status: 503 });
    expect(await w.reconcile()).toEqual({ kind: "done" });
    expect(w.service.calls.getRevisionLogs).toBe(1);
    expect(w.events.reasons()).toEqual(["Warning/RevisionFailed"]);
    expect(w.events.all[0]?.note).toMatch(
      /its build log is not shown: it could not be read \(503 unavailable\); 3 reads failed$/,
    );
    expect(w.resources.stored(REF)?.status?.failedRevisionLog?.failedReads).toBe(3);

    // Never again, however long it stays failed.
    w.events.all.length = 0;
    for (let i = 0; i < 3; i++) {
      w.clock.advance(600_000);
      await w.resync();
      expect(await w.reconcile()).toEqual({ kind: "done" });
    }
    expect(w.service.calls.getRevisionLogs).toBe(0);
    expect(w.events.reasons()).toEqual([]);
  });

  it("a log read the service refuses for good (403) is not read again", async () => {
    const w = world();
    w.service.failNext("getRevisionLogs", { status: 403 });
    const { result } = await failedRevision(w, "build");
    expect(result).toEqual({ kind: "done" });
    expect(w.events.all[0]?.note).toMatch(
      /its build log is not shown: it could not be read \(403 unauthorized\)$/,
    );
    expect(w.resources.stored(REF)?.status?.failedRevisionLog?.failedReads).toBeUndefined();
    w.clock.advance(600_000);
    await w.resync();
    await w.reconcile();
    expect(w.service.calls.getRevisionLogs).toBe(0);
  });

  it("a rollout past spec.rolloutTimeout: Stalled RolloutTimeout with the build log, no PATCH, looked at again; live ends it", async () => {
    const w = world({ readyAfterMs: 0, revisionActiveAfterMs: 600_000, deleteAfterMs: 0 });
    w.service.seed(BODY);
    await w.applied({ rolloutTimeout: "2m" });
    await w.reconcile();
    expect(conditions(w.resources.stored(REF))).toMatchObject({ Ready: "False/RolloutInProgress" });
    // 2 min into a 10 min rollout: the revision is being built (phase 0 of 6 is CREATING).
    w.clock.advance(120_000);
    await w.resync();
    w.events.all.length = 0;
    const result = await w.reconcile();
    const stored = w.resources.stored(REF);
    expect(conditions(stored)).toEqual({
      Ready: "False/RolloutTimeout",
      Synced: "True/ReconcileSuccess",
      Stalled: "True/RolloutTimeout",
    });
    const stalled = messageOf(stored, "Stalled") ?? "";
    expect(stalled).toContain("has not gone live within spec.rolloutTimeout 2m");
    expect(stalled).toContain("Last build log lines: ");
    expect(result).toEqual({ kind: "requeueAfter", ms: 60_000 });
    expect(w.events.reasons()).toEqual(["Warning/RolloutTimeout"]);
    expect(callsOf(w.service)).toMatchObject({ getRevisionLogs: 1 });
    expect(w.service.calls.patch).toBe(0);

    // Looked at again: no second read or event while it still times out.
    w.clock.advance(60_000);
    await w.resync();
    await w.reconcile();
    expect(w.service.calls.getRevisionLogs).toBe(0);
    expect(w.events.reasons()).toEqual(["Warning/RolloutTimeout"]);

    // The revision goes live: Ready, the evidence cleared.
    w.clock.advance(600_000);
    await w.resync();
    await w.reconcile();
    await w.reconcile();
    const live = w.resources.stored(REF);
    expect(conditions(live)).toMatchObject({ Ready: "True/Available" });
    expect(live?.status?.rolloutStartedAt).toBeUndefined();
    expect(live?.status?.failedRevisionLog).toBeUndefined();
  });

  it("a first rollout past spec.rolloutTimeout while the service reports AWAITING_DATABASE: Stalled, naming both", async () => {
    // A build that never leaves BUILDING, a database never provisioned, rolloutTimeout 10s.
    const w = world({ readyAfterMs: 86_400_000, revisionActiveAfterMs: 86_400_000, deleteAfterMs: 0 });
    await w.applied({ rolloutTimeout: "10s" });
    await w.reconcile();
    await w.reconcile();
    expect(conditions(w.resources.stored(REF))).toMatchObject({ Ready: "False/AwaitingDatabase" });
    w.clock.advance(10_000);
    await w.resync();
    await w.reconcile();
    const stored = w.resources.stored(REF);
    expect(conditions(stored)).toMatchObject({
      Ready: "False/RolloutTimeout",
      Synced: "True/ReconcileSuccess",
      Stalled: "True/RolloutTimeout",
    });
    expect(messageOf(stored, "Stalled")).toMatch(
      /has not gone live within spec\.rolloutTimeout 10s and the service still reports the deployment AWAITING_DATABASE; no revision is active/,
    );
    const warning = w.events.all.find((e) => e.reason === "RolloutTimeout");
    expect(warning?.note).toMatch(
      /has not gone live within spec\.rolloutTimeout 10s \(\w+\) and the service still reports the deployment AWAITING_DATABASE/,
    );
  });

  it("spec.rolloutTimeout 0 never times a rollout out", async () => {
    const w = world({ readyAfterMs: 0, revisionActiveAfterMs: 600_000, deleteAfterMs: 0 });
    w.service.seed(BODY);
    await w.applied({ rolloutTimeout: "0" });
    await w.reconcile();
    w.clock.advance(500_000);
    await w.resync();
    await w.reconcile();
    expect(conditions(w.resources.stored(REF))).toMatchObject({ Reconciling: "True/RolloutInProgress" });
    expect(w.service.calls.getRevisionLogs).toBe(0);
  });
});

/**
 * The status writes of a resource of a connection whose listing is answered `status` at each of
 * four passes, with `answer(attempt)` each time, after the first pass's.
 */
async function writesAtEveryListing(w: World, status: number, answer: (attempt: number) => string) {
  await failedListing(w);
  for (const attempt of [1, 2, 3, 4]) {
    if (attempt === 2) w.resources.writes.patchStatus = 0;
    w.service.failNext("listAll", { status, detail: answer(attempt) });
    await w.snapshot.refresh(new AbortController().signal).catch(() => {});
    await w.reconcile().catch(notRetried);
  }
  return w.resources.writes.patchStatus;
}

describe("a 5xx whose answer differs at every attempt (a gateway's request id or time)", () => {
  const gateway = (attempt: number) =>
    `<html><body>502 Bad Gateway: upstream reset (request id 9f${attempt}c41, 2030-01-01T00:00:0${attempt}Z)</body></html>`;

  it("a retry that fails the same way writes no status: the condition names the call and the status, not the answer", async () => {
    const w = world();
    await w.settled();
    w.resources.edit(REF, (o) => {
      o.spec.sourceConfig = { customUrl: "https://new.example" };
    });
    w.service.failNext("patch", { status: 502, detail: gateway(1) });
    await expect(w.reconcile()).rejects.toThrow("answered 502");
    const writes = w.resources.writes.patchStatus;
    const said = messageOf(w.resources.stored(REF), "Synced");
    expect(said).toContain("answered 502");
    for (const attempt of [2, 3, 4]) {
      w.service.failNext("patch", { status: 502, detail: gateway(attempt) });
      await expect(w.reconcile()).rejects.toThrow("answered 502");
    }
    expect(w.service.calls.patch).toBe(4);
    expect(w.resources.writes.patchStatus).toBe(writes);
    expect(messageOf(w.resources.stored(REF), "Synced")).toBe(said);
    // Each attempt's Warning quotes its answer: a tenant who cannot read the operator's log sees it.
    expect(w.events.all.filter((e) => e.reason === "ServiceUnavailable").map((e) => e.note)).toEqual(
      [1, 2, 3, 4].map((attempt) => expect.stringContaining(`request id 9f${attempt}c41`)),
    );
  });

  it("a 429 whose answer counts down: a retry writes no status, each Warning quotes its answer", async () => {
    const w = world();
    await w.settled();
    w.resources.edit(REF, (o) => {
      o.spec.sourceConfig = { customUrl: "https://new.example" };
    });
    const limited = (seconds: number) => ({
      status: 429,
      retryAfterSeconds: 1,
      detail: `try again in ${seconds} seconds`,
    });
    w.service.failNext("patch", limited(40));
    await expect(w.reconcile()).rejects.toMatchObject({ retryAfterMs: 1_000 });
    const writes = w.resources.writes.patchStatus;
    const said = messageOf(w.resources.stored(REF), "Synced");
    expect(said).toContain("answered 429");
    for (const seconds of [39, 38]) {
      w.service.failNext("patch", limited(seconds));
      await expect(w.reconcile()).rejects.toMatchObject({ retryAfterMs: 1_000 });
    }
    expect(w.resources.writes.patchStatus).toBe(writes);
    expect(messageOf(w.resources.stored(REF), "Synced")).toBe(said);
    expect(w.events.all.filter((e) => e.reason === "RateLimited").map((e) => e.note)).toEqual(
      [40, 39, 38].map((seconds) => expect.stringContaining(`try again in ${seconds} seconds`)),
    );
  });

  it("a connection's listing failing so at every pass: its resources write nothing after the first", async () => {
    const w = world();
    expect(await writesAtEveryListing(w, 503, gateway)).toBe(0);
    expect(conditions(w.resources.stored(REF))).toMatchObject(retryingFor("ServiceUnavailable"));
  });
});

describe("a 401/403, 409 or 404 whose answer differs at every attempt (a gateway's or WAF's request id)", () => {
  const waf = (attempt: number, secret = "") =>
    `<html><body>Request blocked ${secret}(request id 7c${attempt}e02, 2030-01-01T00:00:0${attempt}Z)</body></html>`;

  /** A settled resource whose next PATCH is answered `status` at each of `attempts`, each answer its own. */
  async function refusedPatches(status: number, attempts: number[], detail = (a: number) => waf(a)) {
    const w = world();
    await settledWithSecret(w);
    w.resources.edit(REF, (o) => {
      o.spec.sourceConfig = { customUrl: "https://new.example" };
    });
    const writes: number[] = [];
    for (const attempt of attempts) {
      w.service.failNext("patch", { status, detail: detail(attempt) });
      await expect(w.reconcile()).rejects.toThrow(`${status}`);
      writes.push(w.resources.writes.patchStatus);
    }
    return { w, writes };
  }

  it("a 403 naming a request id: a retry writes no status; the condition says what to check, each Warning quotes its answer", async () => {
    const { w, writes } = await refusedPatches(403, [1, 2, 3]);
    expect(writes[2]).toBe(writes[0]);
    const said = messageOf(w.resources.stored(REF), "Synced") ?? "";
    expect(said).toContain("check the API key and tenant");
    expect(said).toContain("PATCH /v2/deployments/{deployment_id} answered 403");
    expect(said).not.toContain("request id");
    expect(w.events.all.filter((e) => e.reason === "Unauthorized").map((e) => e.note)).toEqual(
      [1, 2, 3].map((attempt) => expect.stringContaining(`request id 7c${attempt}e02`)),
    );
  });

  it("a 401's answer in the Warning event is redacted and cut as the condition's was", async () => {
    const long = (a: number) => `${waf(a, `${SETTLED_SECRET.value} `)}${"é".repeat(MAX_MESSAGE_LENGTH)}`;
    const { w } = await refusedPatches(401, [1], long);
    const note = w.events.all.find((e) => e.reason === "Unauthorized")?.note ?? "";
    expect(note).toContain("Request blocked *** (request id 7c1e02");
    // Cut to a condition's length (give or take the words around the answer); the recorder cuts
    // it to an Event's 1,024 bytes.
    expect(note.endsWith("é…")).toBe(true);
    expect(note.length).toBeLessThan(MAX_MESSAGE_LENGTH + 100);
    expect(JSON.stringify(w.resources.stored(REF)) + JSON.stringify(w.events.all)).not.toContain(
      SETTLED_SECRET.value,
    );
  });

  it.each([409, 404])(
    "a %i naming a request id: a retry writes no status, each Warning quotes its answer",
    async (status) => {
      const { w, writes } = await refusedPatches(status, [1, 2, 3]);
      expect(writes[2]).toBe(writes[0]);
      const said = messageOf(w.resources.stored(REF), "Synced") ?? "";
      expect(said).toContain(`PATCH /v2/deployments/{deployment_id} answered ${status}`);
      expect(said).toContain("looking again");
      expect(said).not.toContain("request id");
      expect(w.events.all.filter((e) => e.reason === "ReconcileError").map((e) => e.note)).toEqual(
        [1, 2, 3].map((attempt) => expect.stringContaining(`request id 7c${attempt}e02`)),
      );
    },
  );

  it("a connection's listing refused (401) so at every pass: its resources write nothing after the first", async () => {
    const w = world();
    expect(await writesAtEveryListing(w, 401, waf)).toBe(0);
    expect(conditions(w.resources.stored(REF))).toMatchObject(retryingFor("Unauthorized"));
  });
});

describe("a resource deleted while its connection's listing fails", () => {
  /** A resource under Delete with a value from a Secret, deleted; its connection's listing then fails. */
  async function deletedInOutage(w: World) {
    await settledWithSecret(w);
    w.resources.edit(REF, (o) => {
      o.spec.deletionPolicy = "Delete";
    });
    await w.reconcile();
    w.resources.delete(REF);
    w.service.failNext("listAll", { status: 503, detail: "gateway down" });
    await w.snapshot.refresh(new AbortController().signal).catch(() => {});
    w.service.resetCalls();
    w.events.all.length = 0;
  }

  it("waits for the connection's next listing like the others: said once, not retried on its own backoff", async () => {
    const w = world();
    await deletedInOutage(w);
    await w.reconcile().then(() => expect.unreachable("the reconcile ended"), notRetried);
    expect(w.service.total).toBe(0);
    expect(w.events.reasons()).toEqual(["Warning/ServiceUnavailable"]);
    const synced = messageOf(w.resources.stored(REF), "Synced") ?? "";
    expect(synced).toContain("GET /v2/deployments answered 503");
    expect(synced).toContain("set spec.deletionPolicy to Orphan");
  });

  it("the next pass while the listing still fails: no Event, no Secret read, no status write, no call", async () => {
    const w = world();
    await deletedInOutage(w);
    await w.reconcile().catch(() => {});
    w.events.all.length = 0;
    w.secrets.reads.length = 0;
    w.resources.writes.patchStatus = 0;
    w.service.failNext("listAll", { status: 503, detail: "gateway down" });
    await w.snapshot.refresh(new AbortController().signal).catch(() => {});
    w.service.resetCalls();
    await w.reconcile().then(() => expect.unreachable("the reconcile ended"), notRetried);
    expect(w.events.all).toEqual([]);
    expect(w.secrets.reads).toEqual([]);
    expect(w.resources.writes.patchStatus).toBe(0);
    expect(w.service.total).toBe(0);
  });
});

describe("a status a newer release wrote (the operator rolled back, its CRD kept)", () => {
  /** A newer release's record of an annotation it handled: valid under its CRD, unknown here. */
  const handled = { annotation: "dms.dev/promote-requested-at", value: "2026-12-01T00:00:00Z" };
  const newerField = (obj: StoredResource | undefined) => (obj?.status as Record<string, unknown>)?.handled;

  it("keeps its field with no status write of its own, and drops its condition in one write", async () => {
    const w = world();
    await w.settled();
    w.resources.edit(REF, (o) => Object.assign(o.status ?? {}, { handled }));
    w.resources.writes.patchStatus = 0;
    await w.reconcile();
    expect(w.resources.writes.patchStatus).toBe(0);
    // A condition of a type of its own: this version cannot keep it current.
    w.resources.edit(REF, (o) =>
      o.status?.conditions?.push({
        type: "Degraded",
        status: "True",
        reason: "Lagging",
        message: "m",
        lastTransitionTime: "2026-12-01T00:00:00Z",
      }),
    );
    await w.reconcile();
    await w.reconcile();
    expect(w.resources.writes.patchStatus).toBe(1);
    expect(Object.keys(conditions(w.resources.stored(REF)))).toEqual(["Ready", "Synced"]);
    expect(newerField(w.resources.stored(REF))).toEqual(handled);
    // An edit's status write keeps it too.
    w.resources.edit(REF, (o) => {
      o.spec.sourceConfig = { customUrl: "https://new.example" };
    });
    await w.reconcile();
    expect(w.resources.stored(REF)?.status).toMatchObject({ observedGeneration: 2, handled });
  });
});
