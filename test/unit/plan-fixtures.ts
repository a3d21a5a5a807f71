/**
 * Test fixtures for the planner: a service deployment builder and a faithful model of how the
 * service applies a PATCH or a POST (spec: resource_spec replaced whole, other source_config and
 * source_revision_config fields merged, secrets and secret references replaced).
 */

import type { Deployment } from "../../src/api/wire.ts";
import type { CreateDeploymentBody, PatchDeploymentBody } from "../../src/api/wire-requests.ts";

/** How the service shows secret values in responses: as sent, masked, or not at all. */
export type SecretDisplay = "plain" | "masked" | "none";

/** A service deployment with plausible read-only fields; `overrides` win. */
export function remote(overrides: Partial<Deployment> = {}): Deployment {
  return {
    name: "agent",
    source: "github",
    source_config: {},
    source_revision_config: {},
    secrets: [],
    id: "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a",
    tenant_id: "7b0c4f8e-3a1d-4c2b-9e5f-1d2c3b4a5f60",
    created_at: "2025-01-01T00:00:00Z",
    updated_at: "2025-01-01T00:00:00Z",
    status: "READY",
    latest_revision_id: "11111111-1111-4111-8111-111111111111",
    active_revision_id: "11111111-1111-4111-8111-111111111111",
    ...overrides,
  };
}

const withoutNulls = (value: object | null | undefined): Record<string, unknown> =>
  Object.fromEntries(Object.entries(value ?? {}).filter(([, v]) => v !== null && v !== undefined));

function showSecrets(secrets: readonly { name: string; value: string }[], display: SecretDisplay) {
  return secrets.map((s) =>
    display === "plain"
      ? { name: s.name, value: s.value }
      : display === "masked"
        ? { name: s.name, value: "********" }
        : { name: s.name },
  );
}

/** The deployment after the service applied `body` to `before`. */
export function applyPatch(
  before: Deployment,
  body: PatchDeploymentBody,
  display: SecretDisplay,
): Deployment {
  const after = structuredClone(before);
  if (body.source_config) {
    after.source_config = { ...after.source_config, ...withoutNulls(body.source_config) };
  }
  if (body.source_revision_config) {
    after.source_revision_config = {
      ...after.source_revision_config,
      ...withoutNulls(body.source_revision_config),
    };
    after.latest_revision_id = "22222222-2222-4222-8222-222222222222";
  }
  if (body.secrets) after.secrets = showSecrets(body.secrets, display);
  if (body.secret_references !== undefined) after.secret_references = structuredClone(body.secret_references);
  return after;
}

/** The deployment the service creates from `body`. */
export function applyCreate(body: CreateDeploymentBody, display: SecretDisplay): Deployment {
  return remote({
    name: body.name,
    source: body.source,
    source_config: withoutNulls(body.source_config),
    source_revision_config: withoutNulls(body.source_revision_config),
    secrets: showSecrets(body.secrets ?? [], display),
    secret_references: body.secret_references ? structuredClone(body.secret_references) : null,
  });
}
