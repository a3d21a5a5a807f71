/**
 * The read-only catalog of the simulated service: OAuth providers and the repositories of forge
 * integrations, built once from the seed with plausible defaults for what it leaves out.
 */
import { randomUUID } from "node:crypto";
import { type ForgeRepo, type OAuthProvider, PROVIDER_DEFAULTS } from "../api/wire.ts";
import type { SimulatorSeed } from "./seed.ts";

/**
 * The providers of `seed`, every field present as a FastAPI response model would render it
 * (optional fields as null or their documented default). Timestamps default to `start`.
 */
export function seededProviders(
  seed: SimulatorSeed | undefined,
  tenantId: string,
  start: number,
): OAuthProvider[] {
  const startIso = new Date(start).toISOString();
  return (seed?.providers ?? []).map((p) => ({
    id: p.id ?? randomUUID(),
    organization_id: p.organization_id ?? tenantId,
    provider_id: p.provider_id,
    name: p.name,
    client_id: p.client_id ?? `${p.provider_id}-client`,
    auth_url: p.auth_url ?? `https://auth.example.com/${p.provider_id}/authorize`,
    token_url: p.token_url ?? `https://auth.example.com/${p.provider_id}/token`,
    uses_pkce: p.uses_pkce ?? true,
    code_challenge_method: p.code_challenge_method !== undefined ? p.code_challenge_method : "S256",
    created_at: p.created_at ?? startIso,
    updated_at: p.updated_at ?? startIso,
    provider_type: p.provider_type ?? null,
    mcp_server_url: p.mcp_server_url ?? null,
    token_endpoint_auth_method: p.token_endpoint_auth_method ?? PROVIDER_DEFAULTS.token_endpoint_auth_method,
    is_dynamic_client: p.is_dynamic_client ?? PROVIDER_DEFAULTS.is_dynamic_client,
  }));
}

/** Repositories by lower-cased integration id; `url` and `default_branch` default from owner/name and `main`. */
export function seededRepos(seed: SimulatorSeed | undefined): Map<string, ForgeRepo[]> {
  const repos = new Map<string, ForgeRepo[]>();
  for (const integration of seed?.integrations ?? []) {
    repos.set(
      integration.id.toLowerCase(),
      integration.repos.map((r) => ({
        host_integration_id: integration.id,
        id: r.id,
        name: r.name,
        owner: r.owner,
        url: r.url ?? `https://github.com/${r.owner}/${r.name}`,
        default_branch: r.default_branch ?? "main",
      })),
    );
  }
  return repos;
}
