/**
 * The revert case the unit tests of redeploys share, on the simulated service (memory-ports.ts)
 * and a manual clock: a deployment that deployed the image digest GOOD, then BAD, both revisions
 * created by the operator and recorded in its history as deployed, and a redeployer of its
 * connection. Calls are counted from the end of the set-up.
 */
import { pino } from "pino";
import { recordCreated, revisionConfigHash } from "../../src/reconcile/revision-history.ts";
import { hashSecrets } from "../../src/reconcile/secret-hash.ts";
import { RevisionRedeployer } from "../../src/reconcile/service/redeployer.ts";
import { ManualClock } from "./manual-clock.ts";
import { SimulatedService } from "./memory-ports.ts";

export const GOOD = `registry.example/agent@sha256:${"a".repeat(64)}`;
export const BAD = `registry.example/agent@sha256:${"b".repeat(64)}`;

/** The digest the operator records of an `external_docker` revision of `image`. */
export const configHashOf = (image: string) => revisionConfigHash({ image_uri: image }, "external_docker");

/** Options of {@link revertedWorld}. */
export interface RevertedWorldOptions {
  /** How the service's redeploy route behaves, or that it has none (default `new-revision`). */
  route?: SimulatedService["redeployRoute"];
  /** The deployment's secrets, their digest recorded in the history (default none). */
  secrets?: Array<{ name: string; value: string }>;
  /** Whether the history records each revision's config digest, as the operator now does. */
  configHashes?: boolean;
}

/** See the module comment; `deployment()` reads the deployment as the service has it now. */
export function revertedWorld(options: RevertedWorldOptions = {}) {
  const secrets = options.secrets ?? [];
  const clock = new ManualClock({ start: Date.parse("2030-01-01T00:00:00Z") });
  const service = new SimulatedService({
    now: clock.now,
    timing: { readyAfterMs: 0, revisionActiveAfterMs: 6000, deleteAfterMs: 0 },
  });
  service.redeployRoute = options.route ?? "new-revision";
  const created = service.seed({
    name: "agent",
    source: "external_docker",
    source_config: {},
    source_revision_config: { image_uri: GOOD },
    secrets,
  });
  clock.advance(6000);
  const patched = service.store.patch(created.id, { source_revision_config: { image_uri: BAD } });
  clock.advance(6000);
  const good = created.latest_revision_id ?? "";
  const secretsHash = hashSecrets(secrets);
  const configHash = (image: string) => (options.configHashes ? configHashOf(image) : undefined);
  const history = recordCreated(
    recordCreated(undefined, good, secretsHash, configHash(GOOD)),
    patched.latest_revision_id ?? "",
    secretsHash,
    configHash(BAD),
  ).map((e) => ({ ...e, deployed: true }));
  const redeployer = new RevisionRedeployer(service, pino({ level: "silent" }));
  service.resetCalls();
  const deployment = () => service.store.get(created.id) ?? created;
  return { clock, service, redeployer, id: created.id, good, history, deployment };
}
