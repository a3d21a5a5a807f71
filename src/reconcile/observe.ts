/**
 * The observe half of the apply arm's one boundary with the service (crossplane-runtime's
 * `ExternalClient.Observe`): what a decision for a resource needs, read through its connection
 * and returned as an `Observation`: the referenced Secrets when their values may have changed,
 * the `github` shorthand's repository, and the deployment as the snapshot or a lookup sees it.
 * Here too, what the lookup asks the service live and how recent a snapshot entry it takes
 * ({@link lookupTarget}, a rule of freshness: `service/freshness.ts` holds the listing's), the
 * lookup itself ({@link lookUp}, by recorded id, else by exact name, which is also how a
 * deployment created before a crash, or by someone else, is found and adopted), and the guard
 * every call through a connection passes first ({@link listingGuard}).
 */

import { type DesiredDeployment, desiredFromSpec } from "../crd/mapping.ts";
import type { DeploymentResourceStatus, DeploymentSpec } from "../crd/schema.ts";
import { STATUS_VALUE_MAX_LENGTH } from "../crd/status-schema.ts";
import { objectKey } from "../runtime/queue-records.ts";
import { listingMissed } from "./failures.ts";
import {
  claimedName,
  handledValue,
  inlineSecrets,
  NONE_READ,
  pendingRebuild,
  type ReadSecrets,
  readSecretsOf,
  reconcileInterval,
  reconcileRequestedAt,
  rolloutNow,
  secretVersions,
} from "./inputs.ts";
import { keptWithin } from "./live-revision.ts";
import { notOwnedMessage, recordEvent } from "./notes.ts";
import { sameSecretNames, withSecrets } from "./plan-secrets.ts";
import type { DeploymentLookups } from "./ports.ts";
import { CONDITION, REASON, type StatusRecord, type SyncOutcome } from "./reasons.ts";
import type { Connected, Found, Observation, ReconcileDeps } from "./run.ts";
import { isKeyedDigest } from "./secret-hash.ts";
import { AmbiguousNameError } from "./service/lookup-errors.ts";
import { byListedId, lookUpName, type RemoteSnapshot } from "./service/snapshot.ts";
import type { Deployment } from "./service-types.ts";

/** The most resources {@link Observer} remembers a NotOwned warning of (the oldest go first). */
const DISOWNED_WARNINGS_KEPT = 4_096;

/** The observe half of the boundary; one per reconciler, for the warnings it gave. */
export class Observer {
  readonly #deps: ReconcileDeps;
  /**
   * The recorded deployment id each resource was last warned about as not its own (by resource
   * key, with the object's uid: one made again under the name is warned again): the warning is
   * given once, not at every reconcile while the status still shows the id. A deleted resource's
   * entry is not told to go (its delete cancels its key): the oldest go past
   * {@link DISOWNED_WARNINGS_KEPT}, so a churn of such resources holds no more.
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
    const found = await lookUp(service, snapshot, this.#lookup(run, mapped.desired, mapped.record), signal);
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
      // Read only while a rebuild is asked for: the one case a decision weighs it.
      rebuildMissing: pendingRebuild(run.obj, status) ? run.session.rebuilds.missing : undefined,
      ownLatest: found.deployment ? ownLatest(run, found.deployment) : undefined,
    };
  }

  /** What the lookup may take from the snapshot: {@link lookupTarget} decides. */
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
    // Only a spec that uses the `github` shorthand reads the forge listing.
    const github = spec.github ? await run.session.repos.resolve(spec, signal) : undefined;
    const desired = desiredFromSpec(spec, run.obj.metadata.name, {
      secretData: secrets === "unread" ? NONE_READ.data : secrets.data,
      ...(github ? { github } : {}),
    });
    const record: StatusRecord = {
      lastHandledReconcileAt: reconcileRequestedAt(run.obj) ?? null,
      lastHandledRolloutNow: rolloutNow(run.obj) ?? null,
      ...resolvedRepo(spec, github),
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
    const said = `${run.obj.metadata.uid ?? ""}/${disowned.id}`;
    if (this.#disownedWarned.get(key) === said) return;
    this.#disownedWarned.delete(key);
    if (this.#disownedWarned.size >= DISOWNED_WARNINGS_KEPT)
      this.#disownedWarned.delete(this.#disownedWarned.keys().next().value ?? "");
    this.#disownedWarned.set(key, said);
    const consequence = `ignoring it, and looking the deployment up by the name "${claimedName(run.obj)}"`;
    recordEvent(this.#deps, run, "Warning", REASON.NotOwned, notOwnedMessage(run.obj, disowned, consequence));
  }
}

/**
 * The guard every call through a connection passes first: when the connection's last listing
 * failed with an answer (a 401, a 503), that answer is thrown, reported as a lookup's failure
 * would be (scrubbed of this resource's values, which `seen.unread` asks to be read for that),
 * but not retried on the key's own backoff (`error-policy.ts` knows it by identity); when it
 * missed its deadline, the outcome to report. Either way no call is made: the connection's own
 * pass lists it again soon, and its keys are enqueued once that listing has ended, failed or not.
 */
export function listingGuard(
  run: Pick<Connected, "obj" | "session" | "seen">,
): (SyncOutcome & { kind: "failed" }) | undefined {
  const missed = run.session.snapshot.listingFailure();
  if (missed?.kind === "failed") {
    run.seen.unread = true;
    throw missed.error;
  }
  return missed ? listingMissed(run.obj, missed) : undefined;
}

/** What a reconcile's lookup asks the service about, and how much the snapshot may answer for. */
export interface LookupRule {
  /** Ask the service about the recorded id (a changed spec, a requested reconcile). */
  live: boolean;
  /** Ask the service about the name (a create of ours may be pending, or a reconcile was requested). */
  liveName: boolean;
  /** Only a snapshot entry the service answered within this long will do. */
  withinMs?: number;
}

/** What {@link lookupTarget} reads of the resource. */
export interface LookupFacts {
  status: DeploymentResourceStatus;
  /** `metadata.generation`. */
  generation: number | undefined;
  /** The `dms.dev/reconcile-requested-at` value this reconcile handles (null: none). */
  requestedAt: string | null | undefined;
  /** The resource's own check interval (`dms.dev/reconcile-interval`), ms. */
  intervalMs: number | undefined;
  /** The rollout poller's period. */
  pollMs: number;
}

/**
 * What the lookup may take from the snapshot. A changed spec or a requested reconcile asks the
 * service about the recorded deployment; a pending create of ours or a requested reconcile asks
 * it about the name (the listing may lag behind the create). A rollout in progress reads the
 * entry the poller refreshed, if it is recent (two poll periods). A settled resource reads the
 * resync's listing, and so does a new one: adoption and the check before a create cost no call of
 * their own. A resource with its own check interval takes no entry older than half of it: the
 * reconcile its interval brings asks the service.
 */
export function lookupTarget(facts: LookupFacts): LookupRule {
  const { status } = facts;
  const requested = facts.requestedAt !== (handledValue(status.lastHandledReconcileAt) ?? null);
  const reconciling = (status.conditions ?? []).some(
    (c) => c.type === CONDITION.Reconciling && c.status === "True",
  );
  const within = [
    ...(reconciling || status.createRequestedAt ? [2 * facts.pollMs] : []),
    ...(facts.intervalMs ? [facts.intervalMs / 2] : []),
  ];
  // A revision read DEPLOYED that the deployment did not show active yet: the next look decides
  // whether the rollout ends on the revision's word, so it must be a new read of the deployment,
  // not the entry the last look used (the poller may not have polled in between).
  const confirming =
    status.latestRevisionStatus === "DEPLOYED" &&
    status.latestRevisionId !== undefined &&
    status.activeRevisionId !== status.latestRevisionId;
  return {
    live: requested || confirming || status.observedGeneration !== facts.generation,
    liveName: requested || status.createRequestedAt !== undefined,
    ...(within.length > 0 ? { withinMs: Math.min(...within) } : {}),
  };
}

/** What to look up, and how much the snapshot may answer for. */
export interface LookupTarget extends LookupRule {
  /** The deployment the resource's status records, if any. */
  deploymentId: string | undefined;
  /** The service name the resource claims. */
  name: string;
}

/**
 * Looks the deployment up: by recorded id, else by exact name. The snapshot answers where it may
 * (see {@link LookupTarget}); what the service is asked is remembered in the snapshot. A recorded
 * id the snapshot does not list is asked about before it is given up: a listing may lag. A name
 * a sharded whole listing showed but did not hold is read by the id it showed, when that id
 * still carries the name ({@link byListedId}), else asked by name.
 */
export async function lookUp(
  service: DeploymentLookups,
  snapshot: RemoteSnapshot,
  target: LookupTarget,
  signal: AbortSignal,
): Promise<Found> {
  const { deploymentId: id, name } = target;
  let disowned: Deployment | undefined;
  if (id) {
    let found = target.live ? undefined : snapshot.byId(id, target.withinMs);
    // The snapshot answered: a poll's read of the entry is spent on this reconcile.
    if (found !== undefined) snapshot.takePollAnswer(id);
    if (!found) {
      found = (await service.getById(id, signal)) ?? null;
      if (found) snapshot.observed(found);
      else snapshot.forget(id);
    }
    if (found && found.name === name)
      return { deployment: found, adopted: false, listed: snapshot.isListed(found.id) };
    // The recorded deployment is gone (deleted on the service), or carries another name: then it
    // is not this resource's (status is a record, not an authority: anyone who may write the
    // status subresource can put another resource's id there), and nothing is written to it.
    // Fall back to the name, as for a resource never reconciled.
    if (found) disowned = found;
  }
  // A name the listing showed but did not hold: the id it showed is read, with other lookups by id.
  const listed = target.liveName
    ? undefined
    : ((await snapshot.byNameOrWholeListing(name, signal)) ??
      (await byListedId(service, snapshot, name, signal)));
  const matches = listed ?? (await lookUpName(service, snapshot, name, signal));
  if (matches.length > 1) {
    throw new AmbiguousNameError(
      `the service has ${matches.length} deployments named "${name}" (ids ${matches.map((d) => d.id).join(", ")}): delete the extra ones on the service or give this resource another spec.name`,
    );
  }
  const [match] = matches;
  const also = disowned ? { disowned } : {};
  if (!match) return { deployment: null, adopted: false, listed: false, ...also };
  return { deployment: match, adopted: match.id !== id, listed: snapshot.isListed(match.id), ...also };
}

/**
 * The latest revision of `d` when a write of this process made it: the one its last write
 * answered, or a write whose answer was lost (`UnansweredWrites`). Undefined otherwise.
 */
function ownLatest(run: Connected, d: Deployment): string | undefined {
  const answered = run.session.snapshot.ownLatest(d.id);
  const { unanswered } = run.session;
  if (answered === d.latest_revision_id || !unanswered.has(d.id)) return answered;
  return unanswered.madeBy(d) ?? answered;
}

/**
 * What `spec.github` resolved to, for the status: the repository's URL, and its default branch
 * when the spec names no ref; each as the forge listing answered it, within its field's bound
 * (else left out: the listing is the service's answer, a tenant's input).
 */
export function resolvedRepo(
  spec: DeploymentSpec,
  github: { repoUrl: string; defaultBranch: string } | undefined,
): Pick<StatusRecord, "resolvedRepoUrl" | "resolvedRepoRef"> {
  const ref = spec.sourceRevisionConfig?.repoRef ? undefined : github?.defaultBranch;
  return {
    resolvedRepoUrl: keptWithin(github?.repoUrl, STATUS_VALUE_MAX_LENGTH) ?? null,
    resolvedRepoRef: keptWithin(ref, STATUS_VALUE_MAX_LENGTH) ?? null,
  };
}
