// The compiled checks of the answers and the writes' bodies (src/api/wire-checks.ts), which a
// command reading the service, and a reconcile writing to it, use instead of loading TypeBox:
// TypeBox's own code for wire.ts's schemas as they are today, and deciding as TypeBox's
// Value.Check does, on answers and bodies good and bad.
import { readFileSync } from "node:fs";
import { Value } from "@sinclair/typebox/value";
import { describe, expect, it } from "vitest";
import { CHECKED, WIRE_CHECKS_FILE, wireChecksModule } from "../../scripts/wire-checks.ts";
import { checkResponse, matchesWire, readDeployment } from "../../src/api/validate.ts";
import { WIRE_CHECKS, type WireCheckName } from "../../src/api/wire-checks.ts";
import { WIRE_SCHEMAS } from "../../src/api/wire-schemas.ts";
import { remote } from "./plan-fixtures.ts";

describe("the compiled checks of the answers and the writes' bodies", () => {
  it("are TypeBox's code for wire.ts's schemas today (else run: node scripts/wire-checks.ts)", () => {
    expect(Object.keys(WIRE_CHECKS)).toEqual(CHECKED);
    expect(readFileSync(WIRE_CHECKS_FILE, "utf8")).toBe(wireChecksModule());
  });

  const deployment = remote({ source_config: { resource_spec: { min_scale: 1, cpu: 0.5 } } });
  const revision = { id: "r1", status: "DEPLOYED", created_at: "2030-01-01T00:00:00Z" };
  const provider = {
    id: "p",
    organization_id: "o",
    provider_id: "github",
    name: "GitHub",
    client_id: "c",
    auth_url: "https://github.com/login/oauth/authorize",
    token_url: "https://github.com/login/oauth/access_token",
    uses_pkce: true,
    code_challenge_method: null,
    created_at: "2030-01-01T00:00:00Z",
    updated_at: "2030-01-01T00:00:00Z",
    is_dynamic_client: null,
  };
  const repo = {
    host_integration_id: "6f1c1d2e-0000-4000-8000-000000000001",
    id: 1,
    name: "agent",
    owner: "acme",
    url: "u",
    default_branch: "main",
  };
  const uuid = "0c3d9a1e-6f2b-4c8d-9e7a-1b2c3d4e5f60";
  const patch = { source_revision_config: { image_uri: "registry.test/agent:2" }, secrets: [] };
  const samples: [WireCheckName, unknown][] = [
    ["Any", { anything: [1, "two"] }],
    ["DeploymentPage", { resources: [deployment, 3], offset: 20 }],
    ["DeploymentPage", { resources: [], offset: 1.5 }],
    ["DeploymentPage", { resources: {}, offset: 0 }],
    ["Deployment", deployment],
    ["Deployment", { ...deployment, id: 7 }],
    ["Deployment", { ...deployment, secrets: [{ name: "K", value: 1 }] }],
    ["Deployment", { ...deployment, source_config: { resource_spec: { cpu: "lots" } } }],
    ["Deployment", { ...deployment, status: "SOMETHING_NEW", extra: true }],
    ["Deployment", null],
    ["RevisionPage", { resources: [revision] }],
    ["RevisionPage", { resources: [revision], offset: -1 }],
    ["Revision", revision],
    ["Revision", { ...revision, id: "" }],
    ["Revision", { ...revision, source_revision_config: { repo_ref: 3 } }],
    ["ItemList", [provider, null, 3]],
    ["ItemList", {}],
    ["OAuthProvider", provider],
    ["OAuthProvider", { ...provider, client_id: null }],
    ["ForgeRepo", repo],
    ["ForgeRepo", { ...repo, id: "1" }],
    ["ForgeRepo", { ...repo, host_integration_id: "i" }],
    ["PatchDeploymentBody", patch],
    ["PatchDeploymentBody", { ...patch, source_config: { integration_id: uuid } }],
    ["PatchDeploymentBody", { ...patch, source_config: { integration_id: "not-a-uuid" } }],
    ["PatchDeploymentBody", { ...patch, display_name: "" }],
    ["PatchDeploymentBody", { ...patch, name: "renamed" }],
    ["CreateDeploymentBody", { name: "agent", source: "github", ...patch }],
    ["CreateDeploymentBody", { name: "agent", source: "github", source_config: { listener_id: uuid } }],
    ["CreateDeploymentBody", { name: "agent", source: "github", source_config: { listener_id: "l1" } }],
    ["CreateDeploymentBody", { source: "github" }],
  ];

  it.each(samples)("%s #%#: decides as Value.Check does", (name, value) => {
    expect(matchesWire(name, value)).toBe(Value.Check(WIRE_SCHEMAS[name], value));
  });

  it("samples both verdicts of every check but Any's", () => {
    for (const name of CHECKED.filter((n) => n !== "Any")) {
      const verdicts = samples.filter(([n]) => n === name).map(([n, v]) => matchesWire(n, v));
      expect(new Set(verdicts), name).toEqual(new Set([true, false]));
    }
  });

  it("still names the failing field of an answer, and of a listed deployment", async () => {
    await expect(
      checkResponse(
        "DeploymentPage",
        { resources: [], offset: "x" },
        { method: "GET", route: "/v2/deployments", status: 200 },
      ),
    ).rejects.toMatchObject({
      kind: "bad_response",
      detail: 'response.offset: expected a value of type integer or null, got "x"',
    });
    const read = await readDeployment({ ...deployment, name: 5 });
    expect(read).toMatchObject({ ok: false, unreadable: { field: "name" } });
  });
});
