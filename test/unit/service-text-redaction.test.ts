// The service's own text (an error's detail) may quote a secret value: a build worker's crash
// printing its environment, a renderer's error naming a variable's value. Where the operator has
// the resource's values at hand it redacts them (failures.ts); where it does not — a rebuild's
// Warning, the log lines of reads that fail beside a reconcile — it shows the call, its status
// and kind, never that text. Whoever reads the namespace's Events (the `view` role), or the
// operator's log, never reads a Secret's value from them.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { ANNOTATION_REBUILD_REQUESTED_AT } from "../../src/crd/schema.ts";
import { DeploymentReconciler } from "../../src/reconcile/reconciler.ts";
import { Rebuilder } from "../../src/reconcile/service/rebuilder.ts";
import { RevisionRedeployer } from "../../src/reconcile/service/redeployer.ts";
import { REF, SPEC } from "../support/agent-fixture.ts";
import { ManualClock } from "../support/manual-clock.ts";
import {
  claimingSession,
  MemoryResources,
  MemorySecrets,
  oneSession,
  RecordedEvents,
  type ServiceMethod,
  SimulatedService,
} from "../support/memory-ports.ts";

const START = Date.parse("2030-01-01T00:00:00Z");
const SECRET = "sk-live-9f8e7d6c5b4a39281706";
const signal = new AbortController().signal;

/** A resource reading SECRET from a Secret, reconciled over in-memory ports; `lines` gets the log. */
function world(lines: string[] = []) {
  const clock = new ManualClock({ start: START });
  const now = () => clock.now();
  const resources = new MemoryResources(now);
  const service = new SimulatedService({ now });
  const events = new RecordedEvents();
  const secrets = new MemorySecrets();
  const logger = pino({ level: "debug" }, { write: (line: string) => void lines.push(line) });
  const session = claimingSession(service, resources, { clock, logger, listingDeadlineMs: 30_000 });
  const reconciler = new DeploymentReconciler({
    resources,
    sessions: oneSession(session),
    secrets,
    events,
    clock,
    logger,
    pollMs: 5_000,
    createGraceMs: 60_000,
  });
  secrets.set("default", "agent-keys", { api: SECRET });
  resources.create({
    metadata: { name: "agent" },
    spec: {
      ...SPEC,
      secrets: [{ name: "API_KEY", valueFrom: { secretKeyRef: { name: "agent-keys", key: "api" } } }],
    },
  });
  const reconcile = () => reconciler.reconcile("default/agent", new AbortController().signal);
  return {
    service,
    events,
    clock,
    resources,
    session,
    /** Every log line, Event and the status, as one text. */
    shown: () =>
      [
        ...lines,
        ...events.all.map((e) => JSON.stringify(e)),
        JSON.stringify(resources.stored(REF)?.status),
      ].join("\n"),
    /** Created, rolled out and settled; then a rebuild asked for. */
    async settledThenRebuildAsked() {
      for (let i = 0; i < 6; i++) {
        await reconcile();
        clock.advance(5_000);
        await session.snapshot.refresh(new AbortController().signal);
        service.resetCalls();
      }
      const ready = resources.stored(REF)?.status?.conditions?.find((c) => c.type === "Ready");
      expect(ready?.status).toBe("True");
      events.all.length = 0;
      lines.length = 0;
      resources.edit(REF, (o) => {
        o.metadata.annotations = {
          ...o.metadata.annotations,
          [ANNOTATION_REBUILD_REQUESTED_AT]: "2030-01-01T00:01:00Z",
        };
      });
    },
    reconcile,
  };
}

describe("the service's own text, where the operator cannot redact it", () => {
  it("a rebuild whose answer was lost: the RebuildUnconfirmed Warning names the call, never what the service said", async () => {
    const w = world();
    await w.settledThenRebuildAsked();
    w.service.failNext("createRevision", {
      status: 500,
      detail: `build worker crashed; environment: API_KEY=${SECRET}`,
      maybeApplied: true,
    });
    await w.reconcile();
    expect(w.service.calls.createRevision).toBe(1);
    const warning = w.events.all.find((e) => e.reason === "RebuildUnconfirmed");
    expect(warning?.note).toContain(
      "got no answer (POST /v2/deployments/{deployment_id}/revisions: 500 unavailable)",
    );
    for (const e of w.events.all) expect(e.note).not.toContain(SECRET);
  });

  it("the read after a rebuild fails: its log line names the call, never what the service said", async () => {
    const lines: string[] = [];
    const w = world(lines);
    await w.settledThenRebuildAsked();
    w.service.failNext("getById", { status: 500, detail: `internal error rendering env API_KEY=${SECRET}` });
    await w.reconcile();
    expect(w.service.calls.createRevision).toBe(1);
    const logged = lines.filter((l) => l.includes("could not read the deployment after its rebuild"));
    expect(logged).toHaveLength(1);
    expect(logged[0]).toContain("500 unavailable");
    expect(lines.join("")).not.toContain(SECRET);
  });

  it("a rebuilder's unconfirmed outcome and a redeployer's failed read carry the call, its status and kind", async () => {
    const lines: string[] = [];
    const logger = pino({ level: "debug" }, { write: (line: string) => void lines.push(line) });
    const service = new SimulatedService({ now: () => START });
    const { id } = service.seed({
      name: "agent",
      source: "external_docker",
      source_revision_config: { image_uri: "repo/agent:1" },
    });
    service.failNext("createRevision", { status: 504, detail: `API_KEY=${SECRET}`, maybeApplied: true });
    expect(await new Rebuilder(service, logger).rebuild(id, signal)).toEqual({
      kind: "unconfirmed",
      error: "POST /v2/deployments/{deployment_id}/revisions: 504 unavailable",
    });
    service.failNext("recentRevisions", { status: 503, detail: `API_KEY=${SECRET}` });
    const read = await new RevisionRedeployer(service, logger).revisions(id, signal);
    expect(read.kind).toBe("unavailable");
    expect(lines.some((l) => l.includes("could not read the revisions to redeploy one"))).toBe(true);
    expect(lines.join("")).not.toContain(SECRET);
  });
});

const FORMS: Record<string, string> = {
  raw: `API_KEY=${SECRET}`,
  json: JSON.stringify({ input: { secrets: [{ name: "API_KEY", value: SECRET }] } }),
  json2: JSON.stringify(JSON.stringify({ value: SECRET })),
  b64: Buffer.from(`{"value":"${SECRET}"}`).toString("base64"),
  url: encodeURIComponent(`value=${SECRET}&x=1`),
  // Cut in pieces shorter than the 12 characters a piece needs to be found alone.
  lines: `API_KEY=${SECRET.slice(0, 9)}\n${SECRET.slice(9, 18)}\n${SECRET.slice(18)}`,
  words: `API_KEY= ${SECRET.slice(0, 9)} ${SECRET.slice(9, 18)} ${SECRET.slice(18)}`,
};
const METHODS: ServiceMethod[] = [
  "getById",
  "getByIds",
  "findByName",
  "listAll",
  "create",
  "patch",
  "getRevision",
  "getRevisionLogs",
  "recentRevisions",
  "redeploy",
  "createRevision",
];

// Every service call a reconcile makes (a create, an edit's PATCH, a rebuild, the reads between)
// fails in turn with an answer quoting the resource's value, in the forms a service quotes a
// request in: no Event, log line, status field or error thrown to the controller shows any piece.
// A 401, 409, 429 and 503 each have the Warning event quote the answer the condition does not.
describe("every call of a reconcile failing with the value quoted", () => {
  for (const method of METHODS)
    for (const [form, detail] of Object.entries(FORMS))
      for (const status of [401, 409, 422, 429, 503])
        it(`${method} ${status} ${form}`, async () => {
          const lines: string[] = [];
          const w = world(lines);
          const errors: unknown[] = [];
          for (let round = 0; round < 8; round++) {
            if (round === 5) {
              w.resources.edit(REF, (o) => {
                o.metadata.annotations = {
                  ...o.metadata.annotations,
                  [ANNOTATION_REBUILD_REQUESTED_AT]: "2030-01-01T00:01:00Z",
                };
              });
            }
            if (round === 3)
              w.resources.edit(REF, (o) => {
                o.spec.sourceRevisionConfig = { imageUri: "repo/agent:2" };
              });
            w.service.failNext(method, { status, detail, maybeApplied: status >= 500 });
            errors.push(await w.reconcile().catch((e: unknown) => e));
            w.clock.advance(5_000);
            await w.session.snapshot.refresh(new AbortController().signal).catch(() => undefined);
          }
          const text =
            w.shown() + errors.map((e) => (e instanceof Error ? `${e.message}${e.stack}` : "")).join("");
          for (let at = 0; at + 7 <= SECRET.length; at++)
            expect(text).not.toContain(SECRET.slice(at, at + 7));
        });
});
