/**
 * The apply arm's one boundary with the service, through the resource's connection, in two
 * calls (crossplane-runtime's `ExternalClient`): `observe` reads what a decision needs (the
 * referenced Secrets when their values may have changed, the `github` shorthand's repository, the
 * deployment as the snapshot or a lookup sees it) and returns it as an `Observation`; `execute`
 * performs what `decide` decided (a create with its intent recorded first, a PATCH, a redeploy
 * then a PATCH, the history's bookkeeping) and returns what it wrote, a failure after a write
 * included. Between them, `decide.ts` is pure.
 */
import { formatTime } from "../conditions/kstatus.ts";
import { type DesiredDeployment, desiredFromSpec, withSecrets } from "../crd/mapping.ts";
import { flagDuration } from "../duration.ts";
import { connectionOf, describeConnection } from "../naming/connection.ts";
import { objectKey } from "../runtime/keys.ts";
import { applyPatch, createdHistory } from "./apply-reuse.ts";
import { claimedName } from "./claims.ts";
import type { Decision, Executed, Observation } from "./decide.ts";
import { sameSecretNames } from "./decide.ts";
import {
  inlineSecrets,
  NONE_READ,
  type ReadSecrets,
  readSecretsOf,
  reconcileInterval,
  reconcileRequestedAt,
  rolloutNow,
  secretVersions,
} from "./inputs.ts";
import { notOwnedMessage, recordEvent } from "./notes.ts";
import type { StoredResource } from "./ports.ts";
import type { Connected, ReconcileDeps } from "./run.ts";
import { isKeyedDigest } from "./secret-hash.ts";
import { lookupTarget } from "./service/freshness.ts";
import { type LookupTarget, observe } from "./service/observe.ts";
import type { ListingFailure } from "./service/snapshot.ts";
import type { Deployment } from "./service-types.ts";
import { REASON, type StatusRecord, type SyncOutcome } from "./status.ts";

/**
 * What `execute` came to: what it wrote, or the failure that stopped it once something was
 * written (`written`: the resource's version a create's intent answered with; `history`: what a
 * redeploy made before the PATCH of the rest failed). A failure before any write rejects.
 */
export type Execution =
  | Executed
  | { kind: "failed"; error: unknown; written?: StoredResource; history?: Decision["history"] };

/** The boundary (see the module comment); one per reconciler, for the warnings it gave. */
export class External {
  readonly #deps: ReconcileDeps;
  /**
   * The recorded deployment id each resource was last warned about as not its own (by resource
   * key): the warning is given once, not at every reconcile while the status still shows the id.
   */
  readonly #disownedWarned = new Map<string, string>();

  constructor(deps: ReconcileDeps) {
    this.#deps = deps;
  }

  /** Forgets what was said of the resource `key`, which is gone. */
  forget(key: string): void {
    this.#disownedWarned.delete(key);
  }

  /**
   * What a decision for `run`'s resource needs (see the module comment), or, when its
   * connection's last listing missed its deadline, the outcome to report without a call.
   */
  async observe(run: Connected, signal: AbortSignal): Promise<Observation | { missed: SyncOutcome }> {
    // A connection whose listing hung or failed would hold this worker as long with a lookup of
    // its own: reported, with no call, until the connection's next listing ends in time.
    const missed = listingGuard(run);
    if (missed) return { missed };
    const status = run.obj.status ?? {};
    const versions = secretVersions(run.obj.spec, run.obj.metadata.namespace ?? "", this.#deps.secrets);
    // The referenced Secrets are read only when their values may differ from those last applied:
    // a Secret changed (its resourceVersion), the spec changed, or the service's secret names
    // differ from the spec's (checked once the deployment is found). A steady resource costs no
    // Kubernetes request.
    const unread =
      versions !== undefined &&
      versions === status.appliedSecretVersions &&
      status.appliedSecretsHash !== undefined &&
      // A plain digest (recorded before the install key) is read once more, to be keyed.
      (isKeyedDigest(status.appliedSecretsHash) || !this.#deps.secretDigest.keyed) &&
      status.observedGeneration === run.obj.metadata.generation &&
      run.obj.spec.managementPolicy !== "ObserveOnly";
    run.seen.unread = unread;
    if (unread) run.seen.secrets = inlineSecrets(run.obj.spec);
    // Read before the mapping, which may fail: the values read are scrubbed from any report.
    const secrets = unread ? "unread" : await readSecretsOf(this.#deps, run, signal);
    const mapped = await this.#desired(run, secrets, signal);
    const { service, snapshot } = run.session;
    const found = await observe(service, snapshot, this.#lookup(run, mapped.desired, mapped.record), signal);
    this.#warnDisowned(run, found.disowned);
    // Values left unread are needed after all when the service's secret names differ from the
    // spec's: then they are read, and the spec's secrets join what was mapped.
    const late =
      unread && !sameSecretNames(run.obj.spec, found.deployment)
        ? await readSecretsOf(this.#deps, run, signal)
        : undefined;
    const desired = late
      ? withSecrets(mapped.desired, run.obj.spec, { secretData: late.data })
      : mapped.desired;
    return {
      desired,
      record: mapped.record,
      found,
      versions,
      secretsUnread: run.seen.unread,
      inheritedWindows: run.inheritedWindows,
      at: this.#deps.now(),
      rebuildMissing: run.session.rebuilds.missing,
      ownLatest: found.deployment ? run.session.snapshot.ownLatest(found.deployment.id) : undefined,
    };
  }

  /**
   * Performs `decision`'s write, if any, then its rebuild, if any (see {@link Execution}). A
   * revision the rebuild created is followed by a read of the deployment (its new latest
   * revision, for the status and the rollout's tracking); that read failing costs only the
   * tracking until the next lookup, never a second build.
   */
  async execute(run: Connected, decision: Decision, signal: AbortSignal): Promise<Execution | undefined> {
    const executed = await this.#write(run, decision, signal);
    const rebuild = decision.rebuild;
    if (!rebuild || executed?.kind === "failed") return executed;
    const done = executed ?? { kind: "none" };
    const { service, snapshot, rebuilds } = run.session;
    let outcome: Awaited<ReturnType<typeof rebuilds.rebuild>>;
    try {
      outcome = await rebuilds.rebuild(rebuild.deploymentId, signal);
    } catch (error) {
      const history = done.kind === "sent" ? done.sent.history : undefined;
      return { kind: "failed", error, ...(history ? { history } : {}) };
    }
    if (outcome.kind !== "rebuilt") {
      // Gone, or perhaps rebuilt: the next reconcile looks the deployment up.
      if (outcome.kind !== "missing") snapshot.forget(rebuild.deploymentId);
      return { ...done, rebuilt: { outcome } };
    }
    const deployment = await service.getById(rebuild.deploymentId, signal).catch((error: unknown) => {
      if (signal.aborted) throw error;
      run.log.warn({ err: String(error) }, "could not read the deployment after its rebuild");
      return undefined;
    });
    if (deployment) snapshot.remember(deployment);
    else snapshot.forget(rebuild.deploymentId);
    return { ...done, rebuilt: { outcome, deployment } };
  }

  /** Performs `decision`'s write, if any. */
  async #write(run: Connected, decision: Decision, signal: AbortSignal): Promise<Execution | undefined> {
    const write = decision.write;
    if (!write) return undefined;
    if (write.kind === "create") {
      // Written under the resourceVersion this reconcile read: a reconcile acting on a stale copy
      // (one that does not show an earlier intent) gets a conflict here, never a second POST.
      const intent = { ...run.obj.status, createRequestedAt: formatTime(run.now) };
      const written = await this.#deps.resources.patchStatus(run.obj, intent, signal);
      let created: Deployment;
      try {
        created = await run.session.service.create(write.plan.body, signal);
      } catch (error) {
        return { kind: "failed", error, written };
      }
      // The first revision is the operator's: recorded with the digests of its config and secrets.
      const first = created.latest_revision_id;
      const history = first ? createdHistory(first, write.plan, run.obj.spec, created) : undefined;
      // A create does not take the display name: a PATCH sends it at once (its failure is
      // retried as a PATCH of the deployment the intent leads the next reconcile to).
      const displayName = write.plan.displayName;
      if (displayName !== undefined && created.display_name !== displayName) {
        try {
          created = await run.session.service.patch(created.id, { display_name: displayName }, signal);
        } catch (error) {
          return { kind: "failed", error, written, ...(history ? { history } : {}) };
        }
      }
      return { kind: "created", deployment: created, history, written };
    }
    // The revision part is redeployed instead of built when spec.revisionReuse allows (apply-reuse.ts).
    const sent = await applyPatch({
      service: run.session.service,
      redeployer: run.session.redeploys,
      deployment: write.deployment,
      decision: write.plan,
      spec: run.obj.spec,
      status: run.obj.status ?? {},
      now: formatTime(run.now),
      signal,
    });
    if (sent.failed) return { kind: "failed", error: sent.failed.error, history: sent.history };
    return { kind: "sent", sent };
  }

  /** What the lookup may take from the snapshot: freshness.ts's {@link lookupTarget} decides. */
  #lookup(run: Connected, desired: DesiredDeployment, record: StatusRecord): LookupTarget {
    const status = run.obj.status ?? {};
    const rule = lookupTarget({
      status,
      generation: run.obj.metadata.generation,
      requestedAt: record.lastHandledReconcileAt,
      intervalMs: reconcileInterval(run.obj),
      pollMs: this.#deps.pollMs,
    });
    return { deploymentId: status.deploymentId, name: desired.name, ...rule };
  }

  /**
   * The spec in wire terms, with the `secrets` read and its GitHub shorthand resolved. When the
   * Secrets were not read (`"unread"`), the secrets are left out: not managed by this mapping
   * (see {@link withSecrets} for when they turn out to be).
   */
  async #desired(
    run: Connected,
    secrets: ReadSecrets | "unread",
    signal: AbortSignal,
  ): Promise<{ desired: DesiredDeployment; record: StatusRecord }> {
    const { secrets: _unread, ...withoutSecrets } = run.obj.spec;
    const spec = secrets === "unread" ? withoutSecrets : run.obj.spec;
    const github = await run.session.repos.resolve(spec, signal);
    const desired = desiredFromSpec(spec, run.obj.metadata.name, {
      secretData: secrets === "unread" ? NONE_READ.data : secrets.data,
      ...(github ? { github } : {}),
    });
    const record: StatusRecord = {
      lastHandledReconcileAt: reconcileRequestedAt(run.obj) ?? null,
      lastHandledRolloutNow: rolloutNow(run.obj) ?? null,
      resolvedRepoUrl: github?.repoUrl ?? null,
      resolvedRepoRef: github && !spec.sourceRevisionConfig?.repoRef ? github.defaultBranch : null,
    };
    return { desired, record };
  }

  /**
   * Warns that the deployment the status records is not this resource's (the lookup ignored it),
   * once per recorded id: the status may keep showing it until a write replaces it.
   */
  #warnDisowned(run: Connected, disowned: Deployment | undefined): void {
    const key = objectKey({ namespace: run.obj.metadata.namespace ?? "", name: run.obj.metadata.name });
    if (!disowned) {
      this.#disownedWarned.delete(key);
      return;
    }
    if (this.#disownedWarned.get(key) === disowned.id) return;
    this.#disownedWarned.set(key, disowned.id);
    const consequence = `ignoring it, and looking the deployment up by the name "${claimedName(run.obj)}"`;
    recordEvent(this.#deps, run, "Warning", REASON.NotOwned, notOwnedMessage(run.obj, disowned, consequence));
  }
}

/**
 * The guard every call through a connection passes first: when the connection's last listing
 * failed with an answer (a 401, a 503), that answer is thrown, reported as a lookup's failure
 * would be (scrubbed of this resource's values, which `seen.unread` asks to be read for that),
 * retried with backoff; when it missed its deadline, the outcome to report. Either way no call
 * is made: the connection's own pass lists it again soon, and its keys are enqueued once a
 * listing is in.
 */
export function listingGuard(
  run: Pick<Connected, "obj" | "session" | "seen">,
): (SyncOutcome & { kind: "failed" }) | undefined {
  const missed = run.session.listingFailure();
  if (missed?.kind === "failed") {
    run.seen.unread = true;
    throw missed.error;
  }
  return missed ? listingMissed(run.obj, missed) : undefined;
}

/**
 * The outcome of a resource whose connection's last listing missed its deadline: no call is made
 * for it until a listing ends in time (the connection's pass tries again within a minute).
 */
function listingMissed(obj: StoredResource, failure: ListingFailure): SyncOutcome & { kind: "failed" } {
  const id = connectionOf(obj.metadata.namespace ?? "", obj.spec.connectionRef);
  const connection = id ? describeConnection(id) : "the default connection (the operator's own settings)";
  return {
    kind: "failed",
    reason: REASON.ListingDeadlineExceeded,
    message: `the periodic listing of the service's deployments (GET /v2/deployments) through ${connection} did not end within the listing deadline of ${flagDuration(failure.deadlineMs)} (--listing-deadline); no call is made for this resource until a listing through that connection ends in time (it is tried again within a minute): fix the service, or raise --listing-deadline if it is only slow`,
    stalled: false,
  };
}
