/**
 * `dms-operator plan`, the pure part: for one resource and what was found for it (the service's
 * deployment, the referenced Secrets when they could be read, the live resource's status), what
 * the operator would do. It runs the controller's own mapping and planner, so the answer is the
 * controller's; this file only names the outcome and explains it.
 */
import type { Deployment, Revision } from "../api/wire.ts";
import { connectionLabel } from "../crd/conventions.ts";
import { InvalidSpecError, SecretNotFoundError } from "../crd/errors.ts";
import type { ResolvedGithub } from "../crd/github.ts";
import { desiredFromSpec, effectiveName } from "../crd/mapping.ts";
import { ANNOTATION_PAUSED, type DeploymentResource, type DeploymentSpec } from "../crd/schema.ts";
import { handledValue, rolloutNow } from "../reconcile/inputs.ts";
import { observedDrift } from "../reconcile/notes.ts";
import {
  type FieldChange,
  lastAppliedFor,
  type NoopPlan,
  type PatchPlan,
  type PlanProblem,
  plan,
} from "../reconcile/plan.ts";
import {
  configAfterPatch,
  type DesiredRevision,
  type RevisionHistoryEntry,
  revisionReusePolicy,
  splitForRedeploy,
  vouchedSecretsHash,
} from "../reconcile/revision-history.ts";
import { chooseRevision, switchBackSuperseded, switchedBackTo } from "../reconcile/revision-reuse.ts";
import {
  gateRollout,
  type InheritedWindows,
  splitPatch,
  type WindowsInEffect,
  windowsInEffect,
} from "../reconcile/rollout-gate.ts";
import { isKeyedDigest, type SecretDigest, UNKEYED_SECRET_DIGEST } from "../reconcile/secret-hash.ts";
import { maskedNote, uncheckedSecrets, withoutSecrets } from "./review-secrets.ts";

/** What the operator would do with a resource. */
export type ReviewAction = "create" | "adopt" | "patch" | "noop" | "blocked" | "error" | "skipped";

/** Whether the secret values of a resource were compared with the service's. */
export type SecretsCheck = "unmanaged" | "checked" | "not-checked";

/** The answer for one resource. Never holds a secret value. */
export interface ReviewEntry {
  file: string;
  line: number;
  namespace: string;
  /** `metadata.name`. */
  name: string;
  /** The service's deployment name (`spec.name`, else `metadata.name`). */
  deploymentName: string;
  /** The connection it is reviewed through: `ServiceConnection/<name>`, `ClusterServiceConnection/<name>` or `default`. */
  connection: string;
  /**
   * `create`: no deployment of that name; `adopt`: the service's deployment would be taken over
   * as it is (no write); `patch`: fields would be sent (`adopt` says whether it is also taken
   * over); `noop`: nothing to send; `blocked`: the operator would refuse (see `problems`);
   * `error`: the resource cannot be planned (see `error`); `skipped`: not reviewed (see
   * `skipReason`: `plan --connection` selects another connection).
   */
  action: ReviewAction;
  adopt: boolean;
  deploymentId?: string;
  /** True when the PATCH would make the service build a new revision. */
  newRevision: boolean;
  /** What would change, field by field: a patch's changes, or every field a create sends. */
  changes: FieldChange[];
  /** One line per change (patch) or per field to create (create). Never a secret value. */
  summary: string[];
  /** What the operator cannot do although the spec asks for it. */
  problems: ReviewProblem[];
  warnings: string[];
  secrets: SecretsCheck;
  /** `managementPolicy: ObserveOnly`: nothing is ever sent; `drift` lists the differences. */
  observeOnly: boolean;
  drift: string[];
  /** Annotated `dms.dev/paused: "true"`: the plan applies once the annotation is removed. */
  paused: boolean;
  /** The part of a patch that makes a new revision, held outside the rollout windows now. */
  held?: HeldReview;
  /**
   * The earlier revision the operator would redeploy instead of building the new one
   * (`spec.revisionReuse`), and why; only when the revisions were read (`ReviewInputs.revisions`).
   */
  redeploy?: { revisionId: string; reason: string };
  error?: string;
  skipReason?: string;
}

/** A change the rollout windows would hold (see `src/reconcile/rollout-gate.ts`). */
export interface HeldReview {
  /** When it would go out (RFC 3339), if a window opens within the search. */
  until?: string;
  /** The same instant in the window's time zone. */
  local?: string;
  /** Where the windows come from: `spec.rolloutWindows`, or a connection's. */
  windows: string;
  /** Spec paths of the changes held. */
  fields: string[];
  /** When it would go out, or that no window opens within the search. */
  when: string;
}

/** Something the operator would refuse or cannot do; `reason` is the condition reason it would set. */
export interface ReviewProblem {
  reason: PlanProblem["reason"] | "NameConflict" | "ImmutableOnApply";
  field: string;
  message: string;
}

/** The live resource's status fields that steer the operator (with `--kubeconfig`). */
export interface LiveStatus {
  deploymentId?: string;
  appliedSecretsHash?: string;
  lastHandledRolloutNow?: string;
  /** The revisions the operator created (the candidates of `spec.revisionReuse`). */
  revisionHistory?: RevisionHistoryEntry[];
  /** The service's latest revision when the status was written (a switch back stands while it is). */
  latestRevisionId?: string;
}

/** What was found for a resource before planning it. */
export interface ReviewInputs {
  file: string;
  line: number;
  resource: DeploymentResource & { metadata: { name: string } };
  /** The resource's namespace (its own, else the one it would be applied to). */
  namespace: string;
  /** The service's deployment the operator would find, or null when there is none. */
  observed: Deployment | null;
  /** True when found by name while no live resource points at it. */
  adopted: boolean;
  /** The live resource's status; undefined when there is none or the cluster was not read. */
  live?: LiveStatus;
  /** Data of the referenced Secrets; undefined when the cluster was not read. */
  secretData?: Record<string, Record<string, string>>;
  github?: ResolvedGithub;
  warnings: readonly string[];
  /** Set when another resource holds the same service name: the operator would stall this one. */
  nameConflict?: string;
  /** The connection's rollout windows, the default when the resource sets none. */
  inheritedWindows?: InheritedWindows;
  /** The instant the rollout windows are read at (ms since the epoch); absent: not checked. */
  now?: number;
  /** The first page of the deployment's revisions, when read (a new revision, a history to match). */
  revisions?: readonly Revision[];
  /** The secrets' digests keyed with the install key, when it could be read; absent: unkeyed. */
  secretDigest?: SecretDigest;
}

/** The operator's decision for `inputs`, explained. Throws only on a bug (an unexpected error). */
export function reviewResource(inputs: ReviewInputs): ReviewEntry {
  const { resource } = inputs;
  const spec = resource.spec;
  const entry = baseEntry(inputs);
  if (inputs.nameConflict) {
    entry.action = "blocked";
    entry.problems.push({ reason: "NameConflict", field: "spec.name", message: inputs.nameConflict });
    return entry;
  }
  const digest = inputs.secretDigest ?? UNKEYED_SECRET_DIGEST;
  // A digest keyed with the install key says nothing to a reader without the key: unknown.
  const keyUnread = !digest.keyed && isKeyedDigest(inputs.live?.appliedSecretsHash);
  const readable = !keyUnread && (inputs.secretData !== undefined || !spec.secrets?.some((s) => s.valueFrom));
  entry.secrets = spec.secrets === undefined ? "unmanaged" : readable ? "checked" : "not-checked";
  const planned: DeploymentSpec = readable ? spec : withoutSecrets(spec);
  let desired: ReturnType<typeof desiredFromSpec>;
  try {
    desired = desiredFromSpec(planned, resource.metadata.name, {
      ...(inputs.secretData ? { secretData: inputs.secretData } : {}),
      ...(inputs.github ? { github: inputs.github } : {}),
    });
  } catch (error) {
    if (!(error instanceof SecretNotFoundError || error instanceof InvalidSpecError)) throw error;
    return { ...entry, action: "error", error: error.message };
  }
  let windows: WindowsInEffect | undefined;
  try {
    windows =
      spec.managementPolicy === "ObserveOnly"
        ? undefined
        : windowsInEffect(spec.rolloutWindows, inputs.inheritedWindows, inputs.now);
  } catch (error) {
    if (!(error instanceof InvalidSpecError)) throw error;
    return { ...entry, action: "error", error: error.message };
  }
  const lastApplied = lastAppliedFor(spec, desired, inputs.live?.appliedSecretsHash, digest);
  const raw = plan(desired, inputs.observed ?? undefined, lastApplied);
  // A revision part a pending switch-back already made live is nothing to send (as the controller).
  const decision = raw.action === "patch" && switchedBackIn(inputs, raw) ? withoutRevisionPart(raw) : raw;
  const unchecked =
    entry.secrets === "not-checked" ? uncheckedSecrets(spec, inputs.observed, keyUnread) : undefined;

  if (spec.managementPolicy === "ObserveOnly") {
    entry.observeOnly = true;
    entry.action = "noop";
    // The controller's own drift lines, plus what the names alone prove when values were not read.
    const provenByNames =
      inputs.observed && decision.action !== "noop" && unchecked?.change ? [unchecked.change.line] : [];
    entry.drift = [...observedDrift(entry.deploymentName, inputs.observed, decision), ...provenByNames];
    return entry;
  }
  switch (decision.action) {
    case "create":
      entry.action = "create";
      entry.summary = [...decision.summary, ...(unchecked?.change ? [unchecked.change.line] : [])];
      // Every field the create sends, as a patch lists its changes (the first line names the
      // deployment and its source, which the entry holds already).
      entry.changes = [
        ...decision.summary.slice(1).map(createdField),
        ...(unchecked?.change ? [unchecked.change] : []),
      ];
      break;
    case "blocked":
      entry.action = "blocked";
      entry.problems = [...decision.problems];
      break;
    case "noop":
    case "patch": {
      const changes = decision.action === "patch" ? [...decision.changes] : [];
      if (unchecked?.change) changes.push(unchecked.change);
      entry.problems = [...decision.problems];
      entry.changes = changes;
      entry.summary = changes.map((c) => c.line);
      entry.newRevision = decision.action === "patch" && decision.newRevision;
      entry.action = changes.length > 0 ? "patch" : inputs.adopted ? "adopt" : "noop";
      if (unchecked?.note) entry.warnings.push(unchecked.note);
      if (decision.action === "patch" && decision.body.secrets) {
        const note = maskedNote(inputs.observed, lastApplied);
        if (note) entry.warnings.push(note);
      }
      let held: HeldReview | undefined;
      try {
        held = decision.action === "patch" && windows ? heldReview(inputs, decision, windows) : undefined;
      } catch (error) {
        // Windows too costly to search fail the resource, as in the controller.
        if (!(error instanceof InvalidSpecError)) throw error;
        return { ...entry, action: "error", error: error.message };
      }
      if (held) entry.held = held;
      const redeploy = decision.action === "patch" ? redeployReview(inputs, decision) : undefined;
      if (redeploy) {
        entry.redeploy = redeploy;
        entry.newRevision = false;
      }
    }
  }
  return entry;
}

/**
 * The earlier revision the operator would redeploy instead of building `decision`'s new revision,
 * with the controller's rule (revision-reuse.ts), when the revisions were read.
 */
function redeployReview(
  inputs: ReviewInputs,
  decision: PatchPlan,
): { revisionId: string; reason: string } | undefined {
  const { observed, revisions, live } = inputs;
  if (!decision.newRevision || !observed || !revisions || !live?.revisionHistory) return undefined;
  if (splitForRedeploy(decision.body) === undefined) return undefined;
  const chosen = chooseRevision({
    policy: revisionReusePolicy(inputs.resource.spec),
    desired: desiredRevision(inputs, observed, decision),
    revisions,
    history: live.revisionHistory,
  });
  return chosen.kind === "redeploy" ? { revisionId: chosen.revisionId, reason: chosen.reason } : undefined;
}

/** The revision `decision` would make, with the secrets digest the operator would vouch for. */
function desiredRevision(inputs: ReviewInputs, observed: Deployment, decision: PatchPlan): DesiredRevision {
  return {
    config: configAfterPatch(observed.source_revision_config, decision.body.source_revision_config),
    source: decision.body.revision_source ?? observed.source,
    secretsHash: vouchedSecretsHash({
      managed: inputs.resource.spec.secrets !== undefined,
      appliedHash: inputs.live?.appliedSecretsHash,
      serviceSecretCount: observed.secrets.length,
    }),
  };
}

/** Whether `decision`'s revision part is the switch-back pending in the live status (switchedBackTo). */
function switchedBackIn(inputs: ReviewInputs, decision: PatchPlan): boolean {
  const { observed, live } = inputs;
  if (!decision.newRevision || !observed || splitForRedeploy(decision.body) === undefined) return false;
  const history = (live && (switchBackSuperseded(live, observed) ?? live))?.revisionHistory;
  return switchedBackTo(history, desiredRevision(inputs, observed, decision)) !== undefined;
}

/** `decision` without its revision part: the rest, or nothing to send. */
function withoutRevisionPart(decision: PatchPlan): PatchPlan | NoopPlan {
  const { now } = splitPatch(decision);
  if (now) return now;
  const hash = decision.secretsHash === undefined ? {} : { secretsHash: decision.secretsHash };
  return { action: "noop", problems: decision.problems, ...hash };
}

/** The entry of a resource that cannot be planned, for `message` (found before planning). */
export function errorEntry(inputs: ReviewInputs, message: string): ReviewEntry {
  return { ...baseEntry(inputs), action: "error", error: message };
}

/** The entry of a resource left out of the review, for `reason`. */
export function skippedEntry(inputs: ReviewInputs, reason: string): ReviewEntry {
  return { ...baseEntry(inputs), action: "skipped", skipReason: reason };
}

function baseEntry(inputs: ReviewInputs): ReviewEntry {
  const { resource, observed } = inputs;
  return {
    file: inputs.file,
    line: inputs.line,
    namespace: inputs.namespace,
    name: resource.metadata.name,
    deploymentName: effectiveName(resource.spec, resource.metadata.name),
    connection: connectionLabel(resource.spec.connectionRef),
    action: "noop",
    adopt: inputs.adopted && observed !== null,
    ...(observed ? { deploymentId: observed.id } : {}),
    newRevision: false,
    changes: [],
    summary: [],
    problems: [],
    warnings: [...inputs.warnings],
    secrets: resource.spec.secrets === undefined ? "unmanaged" : "checked",
    observeOnly: false,
    drift: [],
    paused: resource.metadata.annotations?.[ANNOTATION_PAUSED] === "true",
  };
}

/** The revision part of `decision` the rollout windows would hold at `inputs.now`, if any. */
function heldReview(
  inputs: ReviewInputs,
  decision: PatchPlan,
  windows: WindowsInEffect,
): HeldReview | undefined {
  if (inputs.now === undefined) return undefined;
  const { held } = splitPatch(decision);
  if (!held) return undefined;
  const gate = gateRollout({
    windows,
    now: inputs.now,
    rolloutNow: rolloutNow(inputs.resource),
    handledRolloutNow: handledValue(inputs.live?.lastHandledRolloutNow),
    held: held.changes,
  });
  if (gate.kind === "open") return undefined;
  return {
    ...(gate.until ? { until: gate.until } : {}),
    ...(gate.local ? { local: gate.local } : {}),
    windows: windows.source,
    fields: [...new Set(held.changes.map((c) => c.field))],
    when: gate.when,
  };
}

/**
 * A field a create sends, from its summary line (`sourceConfig.repoUrl: (none) → https://…`,
 * `secrets: set A, B`): its spec path and the part of the request it goes in.
 */
function createdField(line: string): FieldChange {
  const field = line.split(": ")[0] ?? line;
  const group: FieldChange["group"] = field.startsWith("sourceConfig")
    ? "source_config"
    : field === "secrets"
      ? "secrets"
      : field === "secretReferences"
        ? "secret_references"
        : field === "displayName"
          ? "display_name"
          : "source_revision_config";
  return { group, field, line };
}
