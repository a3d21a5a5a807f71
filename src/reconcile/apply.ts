/**
 * The apply arm of a reconcile: keeps the service's deployment in line with the spec, through
 * the resource's connection. Observe (the snapshot or a lookup), plan (pure, `plan.ts`), then
 * write: a create (its intent recorded first), or what the rollout gate lets go now, which is one
 * PATCH, or a redeploy of an earlier revision followed by a PATCH of what needs no revision
 * (apply-reuse.ts). It decides; the reconciler concludes (status, requeue).
 */
import { formatTime } from "../conditions/kstatus.ts";
import { type DesiredDeployment, desiredFromSpec, withSecrets } from "../crd/mapping.ts";
import type { DeploymentSpec } from "../crd/schema.ts";
import { objectKey } from "../runtime/keys.ts";
import { reconcileInterval, reconcileRequestedAt, rolloutNow } from "./annotations.ts";
import {
  applyPatch,
  createdHistory,
  pendingSwitchBack,
  redeployedNote,
  switchBackPlan,
} from "./apply-reuse.ts";
import { claimedName } from "./claims.ts";
import { inlineSecrets, type ReadSecrets, secretVersions } from "./inputs.ts";
import { lastAppliedFor } from "./plan/last-applied.ts";
import { type CreatePlan, plan } from "./plan/plan.ts";
import { splitForRedeploy } from "./plan/revision-reuse.ts";
import { isKeyedDigest } from "./plan/secret-hash.ts";
import { gatePatch, windowsInEffect } from "./rollout/rollout-gate.ts";
import {
  type Connected,
  type Decided,
  failedOn,
  listingGuard,
  NONE_READ,
  notOwnedMessage,
  observedAs,
  type ReconcileDeps,
  readSecretsOf,
  recordEvent,
} from "./run.ts";
import { lookupTarget } from "./service/freshness.ts";
import { type LookupTarget, observe } from "./service/observe.ts";
import type { Deployment } from "./service-types.ts";
import { adoptedNote, createdNote, observedDrift, updateNote, updateReason } from "./status/notes.ts";
import { CONDITION, outcomeFromProblems, REASON, type StatusRecord } from "./status/status.ts";

/** The apply arm (see the module comment); one per reconciler, for the warnings it gave. */
export class Apply {
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

  /** Keeps the service's deployment in line with the spec, through the resource's connection. */
  async apply(run: Connected, signal: AbortSignal): Promise<Decided> {
    // A connection whose listing hung or failed would hold this worker as long with a lookup of
    // its own: reported, with no call, until the connection's next listing ends in time.
    const missed = listingGuard(run);
    if (missed) return { outcome: missed };
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
    // A recorded create intent holds until a lookup shows the deployment: the listing may lag.
    const fulfilled = found.listed && Boolean(status.createRequestedAt);
    const record: StatusRecord = fulfilled ? { ...mapped.record, createRequestedAt: null } : mapped.record;
    const lastApplied = lastAppliedFor(
      run.obj.spec,
      desired,
      status.appliedSecretsHash,
      this.#deps.secretDigest,
    );
    const decision = plan(desired, found.deployment ?? undefined, lastApplied);

    if (run.obj.spec.managementPolicy === "ObserveOnly") {
      const drift = observedDrift(desired.name, found.deployment, decision);
      return { outcome: { kind: "observed", drift }, observed: observedAs(found.deployment), record };
    }
    if (decision.action === "blocked") {
      // A deployment found by name that cannot become the spec's (another source) is someone
      // else's: recording its id would make it ours, and deletionPolicy Delete would delete it.
      const owned = found.adopted ? undefined : found.deployment;
      const blocked = outcomeFromProblems(decision.problems) ?? { kind: "synced" as const };
      return { outcome: blocked, observed: observedAs(owned), record };
    }
    if (found.adopted && found.deployment) {
      // Found by name while a create of ours was pending: it is that create (a restart or a lost
      // answer hid it), not someone else's deployment.
      const note = status.createRequestedAt ? createdNote(found.deployment) : adoptedNote(found.deployment);
      recordEvent(this.#deps, run, "Normal", status.createRequestedAt ? "Created" : "Adopted", note);
    }
    // Read before any write: windows that cannot be read stall the resource (InvalidSpec).
    const windows = windowsInEffect(run.obj.spec.rolloutWindows, run.inheritedWindows, run.now.getTime());
    if (decision.action === "create") return this.#create(run, decision, record, versions, signal);

    // A revision part that a switch of the active revision already made live (the service's
    // config still names its newest revision) is nothing to roll out: no window holds it, and
    // applyPatch sends only the rest, if any.
    const switchedBack =
      decision.action === "patch" && found.deployment
        ? pendingSwitchBack({ deployment: found.deployment, decision, spec: run.obj.spec, status })
        : undefined;
    // A PATCH whose revision part waits for a rollout window sends the rest now, and holds the
    // revision part: `Synced=False` (OutsideRolloutWindow), Reconciling, and a look again when
    // the window opens, where the held part goes out in one PATCH.
    const gated =
      decision.action === "patch" && switchedBack
        ? splitForRedeploy(decision.body)?.rest
          ? { send: decision }
          : {}
        : decision.action === "patch"
          ? gatePatch(decision, {
              windows,
              now: run.now.getTime(),
              rolloutNow: rolloutNow(run.obj),
              handledRolloutNow: status.lastHandledRolloutNow,
              counter: this.#deps.now,
            })
          : {};
    if (gated.viaRolloutNow) run.log.info("rolling out outside the rollout windows: dms.dev/rollout-now");
    // The secrets held are not applied yet: their hash stays the last applied one, and the
    // Secrets are read again when the window opens.
    const secretsHeld =
      gated.held !== undefined && decision.action === "patch" && decision.body.secrets !== undefined;
    const applied: StatusRecord = {
      ...record,
      appliedSecretsHash:
        (secretsHeld ? undefined : decision.secretsHash) ?? status.appliedSecretsHash ?? null,
      ...(run.seen.unread
        ? {}
        : { appliedSecretVersions: secretsHeld ? null : appliedVersions(decision.secretsHash, versions) }),
    };
    let deployment = found.deployment;
    if (decision.action === "patch" && !deployment)
      throw new Error("a patch was planned without a deployment to patch");
    // Nothing to send, unless a revision redeployed earlier (by a switch of the active revision)
    // is live where the spec now asks for the service's latest one again.
    const back =
      decision.action === "noop" && deployment
        ? switchBackPlan(status.revisionHistory, deployment)
        : undefined;
    const sending = gated.send ?? back;
    let reuse: Pick<Decided, "history" | "known"> = {};
    let redeployed: string | undefined;
    if (sending && deployment) {
      // The revision part is redeployed instead of built when spec.revisionReuse allows (apply-reuse.ts).
      const sent = await applyPatch({
        service,
        redeployer: run.session.redeploys,
        deployment,
        decision: sending,
        spec: run.obj.spec,
        status,
        now: formatTime(run.now),
        signal,
      });
      // Remembered by the session's writes themselves (the PATCH's and the redeploy's answers).
      deployment = sent.deployment;
      reuse = {
        ...(sent.history ? { history: sent.history } : {}),
        ...(sent.known ? { known: sent.known } : {}),
      };
      const { revision } = sent;
      if (revision.kind === "redeployed") {
        recordEvent(this.#deps, run, "Normal", "Redeployed", redeployedNote(revision, sending));
        redeployed = `redeployed revision ${revision.revisionId} (no build): ${revision.reason}`;
      } else if (
        !back &&
        (revision.kind !== "pending" || sending.changes.some((c) => c.group !== "source_revision_config"))
      ) {
        // A redeploy sent before and not live yet sends nothing for it again: no event for it.
        const reason = updateReason(run.obj, sending, found.adopted);
        recordEvent(this.#deps, run, "Normal", reason, updateNote(sending));
      }
    }
    const observed = observedAs(deployment);
    const problems = outcomeFromProblems(decision.problems);
    if (!gated.held) {
      const synced = redeployed
        ? { kind: "synced" as const, message: redeployed }
        : { kind: "synced" as const };
      return { outcome: problems ?? synced, observed, record: applied, ...reuse };
    }
    const { message, wakeAt } = gated.held;
    const synced = status.conditions?.find((c) => c.type === CONDITION.Synced);
    if (synced?.reason !== REASON.OutsideRolloutWindow || synced.message !== message)
      recordEvent(this.#deps, run, "Normal", REASON.OutsideRolloutWindow, message);
    return { outcome: problems ?? { kind: "held", message }, observed, record: applied, wakeAt, ...reuse };
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
   * Creates the deployment, recording the intent first so that a crash never creates two.
   * `versions`: of the Secrets this reconcile read (see {@link secretVersions}).
   */
  async #create(
    run: Connected,
    decision: CreatePlan,
    record: StatusRecord,
    versions: string | undefined,
    signal: AbortSignal,
  ): Promise<Decided> {
    const requestedAt = run.obj.status?.createRequestedAt;
    if (requestedAt && this.#deps.now() - Date.parse(requestedAt) < this.#deps.createGraceMs) {
      // A create was requested and the listing does not show it yet: it may lag behind.
      run.log.info({ requestedAt }, "create requested earlier; waiting for the service to list it");
      const waiting = { kind: "synced", message: "waiting for the created deployment to be listed" } as const;
      // The id the create answered with stays known while the listing catches up.
      return { outcome: waiting, observed: { kind: "createdUnlisted" }, record };
    }
    // Written under the resourceVersion this reconcile read: a reconcile acting on a stale copy
    // (one that does not show an earlier intent) gets a conflict here, never a second POST.
    const intent = { ...run.obj.status, createRequestedAt: formatTime(run.now) };
    const written = await this.#deps.resources.patchStatus(run.obj, intent, signal);
    const created = await run.session.service.create(decision.body, signal).catch((error: unknown) => {
      throw failedOn(written, error);
    });
    recordEvent(this.#deps, { ...run, obj: written }, "Normal", "Created", createdNote(created));
    // The intent stays recorded until a lookup lists the deployment (see `apply`).
    const applied: StatusRecord = {
      ...record,
      appliedSecretsHash: decision.secretsHash ?? null,
      appliedSecretVersions: appliedVersions(decision.secretsHash, versions),
    };
    const observed = { kind: "found", deployment: created } as const;
    // The first revision is the operator's: recorded with the digests of its config and secrets.
    const first = created.latest_revision_id;
    const history = first ? createdHistory(first, decision, run.obj.spec, created) : undefined;
    return {
      outcome: { kind: "synced" },
      observed,
      record: applied,
      written,
      ...(history ? { history } : {}),
    };
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
 * Whether the service's deployment has exactly the secret names of `spec` (false when it was not
 * found): then values known to be those last applied are all the plan needs.
 */
function sameSecretNames(spec: DeploymentSpec, deployment: Deployment | null | undefined): boolean {
  if (!deployment) return false;
  const wanted = [...new Set((spec.secrets ?? []).map((s) => s.name))].sort();
  const shown = [...new Set(deployment.secrets.map((s) => s.name))].sort();
  return wanted.length === shown.length && wanted.every((name, i) => name === shown[i]);
}

/**
 * `status.appliedSecretVersions` after a plan that read the Secrets: their versions when the
 * secrets are (or, once the write succeeds, will be) what the service has, else none.
 */
function appliedVersions(secretsHash: string | undefined, versions: string | undefined): string | null {
  return secretsHash !== undefined && versions !== undefined ? versions : null;
}
