/**
 * The revert case the contract tests of redeploys share: a simulator on loopback whose deployment
 * `agent` deployed the image digest GOOD, then BAD, both revisions live at once.
 */
import { hashSecrets } from "../../src/reconcile/secret-hash.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";

export const GOOD = `registry.example.com/agent@sha256:${"a".repeat(64)}`;
export const BAD = `registry.example.com/agent@sha256:${"b".repeat(64)}`;
/** The digest the operator records for a deployment whose spec sets no secrets and that has none. */
export const NO_SECRETS = hashSecrets([]);

/** A simulator requiring `apiKey`, with `agent` deployed GOOD then BAD; the revision ids. */
export async function revertedSimulator(
  apiKey: string,
): Promise<{ sim: RunningSimulator; id: string; good: string; bad: string }> {
  const sim = await startSimulator({
    apiKey,
    timing: { readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 },
  });
  const created = sim.store.create({
    name: "agent",
    source: "external_docker",
    source_config: {},
    source_revision_config: { image_uri: GOOD },
    secrets: [],
  });
  const patched = sim.store.patch(created.id, { source_revision_config: { image_uri: BAD } });
  return {
    sim,
    id: created.id,
    good: created.latest_revision_id ?? "",
    bad: patched.latest_revision_id ?? "",
  };
}
