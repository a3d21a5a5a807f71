/**
 * The reconcile of one Deployment resource, read top to bottom: the guards (the resource is gone,
 * its connection refused or not usable, paused, the loser of a name conflict), then the finalizer
 * rule and one of two arms, `cleanup` (being deleted: `cleanup.ts`) or apply (everything else):
 * `observe` the service (`observe.ts`), `decide` (pure, `decide.ts`), `execute` what was decided (`execute.ts`)
 * and settle it with what was written; then the conclusion: the evidence a status needs (told
 * without a call by `evidenceAt`, else read by `evidence.ts`), the status and the requeue drawn
 * from it (pure, `conclude.ts`), the ConfigMap of `spec.export` when there is one (`export.ts`),
 * the status written when it changed. A failure at any step is carried as a value to the error
 * policy (`error-policy.ts`), reported on the version of the resource last written.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { FINALIZER } from "../crd/schema.ts";
import type { Clock } from "../runtime/clock.ts";
import { Action, LazyReconcileLog, type ReconcileResult } from "../runtime/controller.ts";
import { reconcileFields } from "../runtime/log.ts";
import { parseObjectKey } from "../runtime/queue-records.ts";
import { cleanup } from "./cleanup.ts";
import { conclude, evidenceAt, settle } from "./conclude.ts";
import { cleansUpOnDelete, decide } from "./decide.ts";
import { type ErrorPolicyDeps, errorPolicy, type Failed } from "./error-policy.ts";
import { readEvidence } from "./evidence.ts";
import { execute } from "./execute.ts";
import { exportStep } from "./export.ts";
import { connectionKeyOf, holderOf, isPaused, NONE_READ } from "./inputs.ts";
import { nameConflictMessage } from "./notes.ts";
import { Observer } from "./observe.ts";
import type { ConfigMapsPort, EventsPort, ResourcePort, SecretsPort, StoredResource } from "./ports.ts";
import { CONDITION, EXPORT_CONDITION, REASON } from "./reasons.ts";
import type { Connected, Decided, DecidedEvent, ExternalChangeKind, ReconcileDeps, Run } from "./run.ts";
import { DEFAULT_MAX_SECRET_BYTES } from "./secret-budget.ts";
import { type SecretDigest, UNKEYED_SECRET_DIGEST } from "./secret-hash.ts";
import type { Sessions } from "./service/session.ts";
import { changedStatusFields } from "./status-changes.ts";

/** Options of {@link DeploymentReconciler}. */
export interface ReconcilerOptions {
  resources: ResourcePort;
  /** The connections to the service: each resource reaches it through its own. */
  sessions: Sessions;
  secrets: SecretsPort;
  events: EventsPort;
  clock: Clock;
  logger: Logger;
  /** While rolling out, creating or deleting, look again after this long. Default 5 s. */
  pollMs?: number;
  /**
   * After a create was requested, how long a listing that does not show the deployment is blamed
   * on the listing lagging behind (no second create). Default 60 s.
   */
  createGraceMs?: number;
  /**
   * The most bytes of secret values one resource may send (`--max-secret-bytes`), counted as its
   * Secrets are read. Default 1 MiB.
   */
  maxSecretBytes?: number;
  /** The secrets' digests, keyed with the install key. Default unkeyed (plain sha256): tests only. */
  secretDigest?: SecretDigest;
  /** The ConfigMaps of `spec.export`; absent, an export is refused with a condition saying so. */
  configMaps?: ConfigMapsPort;
  /**
   * The counter the rollout windows' search is timed on. Default the thread's CPU time (`workMs`),
   * not `clock`: a machine busy elsewhere does not cut the search short. Tests pass one that
   * stands still.
   */
  searchCounter?: () => number;
  /**
   * Counts a change made outside a resource, once its status recorded it: a revision the
   * operator did not create, or fields that differed from a spec already applied
   * (`dms_external_changes_total`); `connection` is its key, namespace included (`default`,
   * `ServiceConnection/<namespace>/<name>`, `ClusterServiceConnection/<name>`), as the other
   * metrics name a connection: two namespaces' connections of one name count apart.
   */
  externalChange?: (connection: string, kind: ExternalChangeKind) => void;
}

/** Reconciles Deployment resources against the service. */
export class DeploymentReconciler {
  readonly #sessions: Sessions;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #deps: ReconcileDeps;
  readonly #observer: Observer;
  readonly #externalChange: NonNullable<ReconcilerOptions["externalChange"]>;
  readonly #policy: ErrorPolicyDeps;

  constructor(options: ReconcilerOptions) {
    const { sessions, clock, logger, resources, secrets, events } = options;
    this.#sessions = sessions;
    this.#clock = clock;
    this.#logger = logger;
    this.#deps = {
      resources,
      secrets,
      events,
      now: () => clock.now(),
      pollMs: options.pollMs ?? 5_000,
      createGraceMs: options.createGraceMs ?? 60_000,
      maxSecretBytes: options.maxSecretBytes ?? DEFAULT_MAX_SECRET_BYTES,
      secretDigest: options.secretDigest ?? UNKEYED_SECRET_DIGEST,
      configMaps: options.configMaps,
      searchCounter: options.searchCounter,
    };
    this.#observer = new Observer(this.#deps);
    this.#externalChange = options.externalChange ?? (() => {});
    this.#policy = {
      deps: this.#deps,
      clock,
      record: (run, e) => this.#record(run, e),
      conclude: (run, decided, signal) => this.#conclude(run, decided, signal),
    };
  }

  /**
   * The controller's entry point: `key` is `namespace/name`; the object is read from the watch
   * cache each time (writes carry its resourceVersion, so a stale read never acts twice).
   */
  readonly reconcile = async (key: string, signal: AbortSignal): Promise<ReconcileResult> => {
    const { namespace, name } = parseObjectKey(key);
    const obj = this.#deps.resources.get({ namespace, name });
    if (!obj) {
      this.#observer.forget(key);
      return Action.gone();
    }
    const run: Run = {
      obj,
      now: new Date(this.#clock.now()),
      seen: { secrets: NONE_READ, unread: false },
      log: new LazyReconcileLog(this.#logger, () => ({
        namespace,
        name,
        generation: obj.metadata.generation,
        // The controller's id of this reconcile: one id on all of its lines.
        reconcileID: reconcileFields()?.reconcileID ?? randomUUID(),
      })),
    };
    let ended: ReconcileResult | Failed;
    try {
      ended = await this.#reconcile(run, signal);
    } catch (error) {
      ended = { kind: "failed", error, on: run };
    }
    return ended.kind === "failed" ? errorPolicy(this.#policy, ended, signal) : ended;
  };

  async #reconcile(read: Run, signal: AbortSignal): Promise<ReconcileResult | Failed> {
    const connection = this.#sessions.lookup(read.obj);
    if (read.obj.metadata.deletionTimestamp) {
      try {
        const step = await cleanup(this.#deps, read, connection, signal);
        return "result" in step ? step.result : await this.#conclude(read, step.decided, signal);
      } catch (error) {
        // Failed on its connection's session: a failure of that connection's listing is known as
        // such (said once, retried with the listing), as for a resource not being deleted.
        const on = connection.kind === "ready" ? { ...read, session: connection.session } : read;
        return { kind: "failed", error, on };
      }
    }
    // Refused before anything else, paused or not: the trust boundary is reported as such.
    if (connection.kind === "refused") return this.#refused(read, connection.message, signal);
    // A paused resource needs no connection (it makes no call).
    if (connection.kind !== "ready" && !isPaused(read.obj)) {
      // Pending: not checked since the start yet; its check enqueues this resource again.
      if (connection.kind === "pending") return Action.done();
      // Missing, not Ready, another namespace's: its check enqueues this resource on a change.
      // Stalled only while the connection waits for a change too; one it retries is waited for.
      const { message } = connection;
      const stalled = connection.retrying !== true;
      const outcome = { kind: "failed", reason: REASON.ConnectionNotReady, message, stalled } as const;
      return this.#conclude(read, { outcome }, signal);
    }
    const run: Run =
      connection.kind === "ready"
        ? { ...read, session: connection.session, inheritedWindows: connection.rolloutWindows }
        : read;
    const holder = holderOf(this.#deps.resources, run.obj);
    // The loser of a name conflict owns nothing on the service: no finalizer, so that deleting it
    // can never delete the holder's deployment.
    const obj = holder ? run.obj : await this.#syncFinalizer(run.obj, signal);
    // Once the finalizer was written, a failure is reported on the version it answered with.
    const current: Run = obj === run.obj ? run : { ...run, obj };
    try {
      if (isPaused(obj)) return await this.#conclude(current, { outcome: { kind: "paused" } }, signal);
      if (holder) {
        const message = nameConflictMessage(obj, holder);
        this.#record(current, { type: "Warning", reason: REASON.NameConflict, note: message });
        const conflict = { kind: "failed", reason: REASON.NameConflict, message, stalled: true } as const;
        return await this.#conclude(current, { outcome: conflict }, signal);
      }
      if (current.session === undefined)
        throw new Error("a reconcile went past the pause check without a connection");
      return await this.#apply(current as Connected, signal);
    } catch (error) {
      return { kind: "failed", error, on: current };
    }
  }

  /**
   * Records an event on `run`'s object: the steps return theirs as data (the decision's, the
   * write's, the evidence's), and the reconciler records them, as `Reconcile` actions.
   */
  #record(run: Run, e: Pick<DecidedEvent, "type" | "reason" | "note">): void {
    this.#deps.events.record(run.obj, { type: e.type, reason: e.reason, action: "Reconcile", note: e.note });
  }

  /** The finalizer is present exactly while a delete must clean up the service. */
  async #syncFinalizer(obj: StoredResource, signal: AbortSignal): Promise<StoredResource> {
    const wanted = cleansUpOnDelete(obj);
    const has = (obj.metadata.finalizers ?? []).includes(FINALIZER);
    if (wanted && !has) return this.#deps.resources.addFinalizer(obj, FINALIZER, signal);
    if (!wanted && has) return this.#deps.resources.removeFinalizer(obj, FINALIZER, signal);
    return obj;
  }

  /**
   * The apply arm: observe, decide, execute, settle, conclude. A failure after a write (a
   * create's intent, a redeploy) is reported here, on what was written.
   */
  async #apply(run: Connected, signal: AbortSignal): Promise<ReconcileResult | Failed> {
    const observation = await this.#observer.observe(run, signal);
    if ("missed" in observation) return this.#conclude(run, { outcome: observation.missed }, signal);
    const status = run.obj.status ?? {};
    const decision = decide(run.obj, observation, status, run.now.getTime(), {
      createGraceMs: this.#deps.createGraceMs,
      counter: this.#deps.searchCounter,
      secretDigest: this.#deps.secretDigest,
    });
    for (const e of decision.events) this.#record(run, e);
    if (decision.failed) return { kind: "failed", error: decision.failed.error, on: run };
    const line = decision.log;
    if (line?.fields) run.log.info(line.fields, line.message);
    else if (line) run.log.info(line.message);
    const executed = await execute(this.#deps, run, decision, signal);
    // A create wrote its intent: the status goes on that version, and so does a failure's.
    const written: Run =
      executed && "written" in executed && executed.written ? { ...run, obj: executed.written } : run;
    if (executed?.kind === "failed") {
      const { error, history, record } = executed;
      return {
        kind: "failed",
        error,
        on: written,
        ...(history ? { history } : {}),
        ...(record ? { record } : {}),
      };
    }
    const { decided, events } = settle(run.obj, status, decision, executed);
    for (const e of events) this.#record(written, e);
    return this.#conclude(written, decided, signal).catch(
      (error: unknown): Failed => ({ kind: "failed", error, on: written }),
    );
  }

  /**
   * The resource's namespace may not use its connection (a namespace selector refuses it):
   * reported, with no service call; the namespace's labels or the selector changing enqueue it
   * again. Logged when it starts, not on every resync that finds it still refused.
   */
  #refused(run: Run, message: string, signal: AbortSignal): Promise<ReconcileResult> {
    const synced = run.obj.status?.conditions?.find((c) => c.type === CONDITION.Synced);
    if (synced?.reason !== REASON.ConnectionNotAllowed)
      run.log.warn({ reason: REASON.ConnectionNotAllowed }, message);
    const outcome = { kind: "failed", reason: REASON.ConnectionNotAllowed, message, stalled: true } as const;
    return this.#conclude(run, { outcome }, signal);
  }

  /**
   * Asks the service what a status needs besides what was decided (the latest revision, the
   * rollout's evidence), when it cannot be told without a call (`evidenceAt`), draws the conclusion (pure: `conclude.ts`), records the revision's
   * event, writes the status if it changed, and says when to look again.
   */
  async #conclude(run: Run, decided: Decided, signal: AbortSignal): Promise<ReconcileResult> {
    const at = evidenceAt(run, decided);
    const evidence = "known" in at ? at.known : await readEvidence(this.#deps, at.read, signal);
    const { event } = evidence;
    if (event) this.#record(run, event);
    const secretValues = run.seen.secrets.values;
    const { obj, now } = run;
    let concluded = conclude({ obj, decided, evidence, now, secretValues, pollMs: this.#deps.pollMs });
    // The export reads the status concluded; a resource that neither has nor had one skips it.
    if (obj.spec.export || obj.status?.exportedConfigMap || hasCondition(obj, EXPORT_CONDITION))
      concluded = await exportStep(this.#deps, run, decided, concluded, signal);
    if (concluded.changed) {
      await this.#deps.resources.patchStatus(run.obj, concluded.status, signal);
      if (run.log.isLevelEnabled("debug"))
        run.log.debug(
          { sync: decided.outcome.kind, changed: changedStatusFields(run.obj.status, concluded.status) },
          "status written",
        );
    }
    for (const kind of decided.externalChanges ?? []) this.#externalChange(connectionKeyOf(run.obj), kind);
    return concluded.next;
  }
}

/** Whether the resource's status carries a condition of `type`. */
function hasCondition(obj: StoredResource, type: string): boolean {
  return obj.status?.conditions?.some((c) => c.type === type) ?? false;
}
