/**
 * Seed pieces the contract tests share: one GitHub OAuth provider and one forge integration
 * listing `acme/support-agent`, whose id the samples and the example seed use too.
 */
import type { SimulatorSeed } from "../../src/simulator/seed.ts";

export const INTEGRATION = "6f1c1d2e-0000-4000-8000-000000000001";

/** The providers and integrations of a seed; tests add their own deployments. */
export const BASE_SEED = {
  providers: [
    {
      id: "0f6e1c2a-8b7d-4e3f-a1b2-c3d4e5f60718",
      provider_id: "github",
      name: "GitHub",
      client_id: "Iv1.abc",
      auth_url: "https://github.com/login/oauth/authorize",
      token_url: "https://github.com/login/oauth/access_token",
      uses_pkce: false,
      code_challenge_method: null,
    },
  ],
  integrations: [
    { id: INTEGRATION, repos: [{ id: 7, owner: "acme", name: "support-agent", default_branch: "main" }] },
  ],
} satisfies SimulatorSeed;
