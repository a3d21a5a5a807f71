/**
 * The service's deployment of the failure evidence's tests: READY, its latest revision
 * {@link LATEST} not (yet) the active {@link ACTIVE} one.
 */
import type { Deployment } from "../../src/api/wire.ts";

export const LATEST = "22222222-2222-4222-8222-222222222222";
export const ACTIVE = "11111111-1111-4111-8111-111111111111";

export const rolloutDeployment = (over: Partial<Deployment> = {}): Deployment => ({
  id: "33333333-3333-4333-8333-333333333333",
  name: "agent",
  source: "internal_docker",
  source_config: {},
  source_revision_config: {},
  secrets: [],
  status: "READY",
  latest_revision_id: LATEST,
  active_revision_id: ACTIVE,
  ...over,
});
