import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  DEPLOYMENT_SOURCES,
  type Deployment,
  RESOURCE_SPEC_NUMBER_FIELDS,
  REVISION_SOURCES,
} from "../../src/api/wire.ts";
import type { DesiredDeployment } from "../../src/crd/mapping.ts";
import { type LastApplied, plan } from "../../src/reconcile/plan.ts";
import { hashSecrets } from "../../src/reconcile/secret-hash.ts";
import { jsonEqual } from "../../src/runtime/json.ts";
import { applyCreate, applyPatch, remote, type SecretDisplay } from "./plan-fixtures.ts";

const text = fc.string({ minLength: 1, maxLength: 8 });
const uuid = fc.uuid();
const number = fc.oneof(
  fc.integer({ min: 0, max: 8 }),
  fc.double({ min: 0, max: 8, noNaN: true, noDefaultInfinity: true }),
);
const container = fc.record(
  {
    name: text,
    image: text,
    env: fc.array(fc.record({ name: text, value: text }, { requiredKeys: ["name"] }), { maxLength: 3 }),
    resources: fc.record({ limits: fc.dictionary(text, fc.oneof(text, number), { maxKeys: 2 }) }),
  },
  { requiredKeys: [] },
);
const resourceSpec = fc.record(
  {
    ...Object.fromEntries(RESOURCE_SPEC_NUMBER_FIELDS.map((f) => [f, number])),
    labels: fc.dictionary(text, text, { maxKeys: 3 }),
    service_account_name: text,
    sidecars: fc.array(container, { maxLength: 2 }),
    volumes: fc.array(fc.record({ name: text, emptyDir: fc.constant({}) }), { maxLength: 2 }),
  },
  { requiredKeys: [] },
);
const sourceConfig = fc.record(
  {
    integration_id: uuid,
    repo_url: text,
    build_on_push: fc.boolean(),
    custom_url: text,
    listener_id: uuid,
    listener_config: fc.record({ k8s_namespace: text }),
    install_command: text,
    build_command: text,
    resource_spec: resourceSpec,
  },
  { requiredKeys: [] },
);
const revisionConfig = fc.record(
  { repo_ref: text, graph_config_path: text, image_uri: text, source_tarball_path: text },
  { requiredKeys: [] },
);
const SECRET_NAMES = ["API_KEY", "DB_PASSWORD", "TOKEN", "webhook_secret"];
// Values look nothing like names or summary text, so finding one in a summary is a real leak.
const secretValue = fc.stringMatching(/^[a-z0-9]{10,16}$/).map((s) => `sv-${s}`);
const secretList = fc.uniqueArray(fc.record({ name: fc.constantFrom(...SECRET_NAMES), value: secretValue }), {
  selector: (s) => s.name,
  maxLength: 4,
});
const references = fc.uniqueArray(
  fc.record({ name: fc.constantFrom("A", "B", "C"), secret_name: text, secret_key: text }),
  { selector: (r) => r.name, maxLength: 3 },
);

const desiredArb: fc.Arbitrary<DesiredDeployment> = fc.record(
  {
    name: fc.constant("agent"),
    source: fc.constantFrom(...DEPLOYMENT_SOURCES),
    revision_source: fc.constantFrom(...REVISION_SOURCES),
    source_config: sourceConfig,
    source_revision_config: revisionConfig,
    secrets: secretList,
    secret_references: references,
  },
  { requiredKeys: ["name", "source"] },
);

const display = fc.constantFrom<SecretDisplay>("plain", "masked", "none");
const remoteArb = fc
  .record({
    source_config: fc.oneof(
      sourceConfig,
      sourceConfig.map((c) => ({ ...c, custom_url: null, resource_spec: null })),
    ),
    source_revision_config: revisionConfig.map((r) => ({ ...r, repo_commit_sha: "0123abc" })),
    secrets: secretList,
    display,
    secret_references: fc.option(references, { nil: null }),
    extra: fc.option(fc.record({ gpu_count: number }), { nil: undefined }),
  })
  .map(({ secrets, display: shown, extra, source_config, ...rest }) => {
    const rs = source_config.resource_spec;
    return {
      ...rest,
      source_config: rs && extra ? { ...source_config, resource_spec: { ...rs, ...extra } } : source_config,
      secrets: secrets.map((s) =>
        shown === "plain" ? s : shown === "masked" ? { name: s.name, value: "****" } : { name: s.name },
      ),
    };
  });

type LastMode = "none" | "desired" | "other";
const lastFor = (mode: LastMode, desired: DesiredDeployment): LastApplied =>
  mode === "none"
    ? {}
    : mode === "desired"
      ? { secretsHash: hashSecrets(desired.secrets ?? []) }
      : { secretsHash: "0".repeat(64) };

const scenario = fc.record({
  desired: desiredArb,
  remote: fc.option(remoteArb, { nil: undefined }),
  lastMode: fc.constantFrom<LastMode>("none", "desired", "other"),
  display,
});

function observedOf(
  desired: DesiredDeployment,
  parts: Partial<Deployment> | undefined,
): Deployment | undefined {
  return parts === undefined ? undefined : remote({ ...parts, name: desired.name, source: desired.source });
}

/**
 * Every field `desired` manages, as the service shows it in `after`, checked independently of
 * the planner: the mismatching spec paths (empty: the service is in line).
 */
function mismatches(desired: DesiredDeployment, after: Deployment, shown: SecretDisplay): string[] {
  const out: string[] = [];
  const have: Record<string, unknown> = { ...after.source_config };
  for (const [key, value] of Object.entries(desired.source_config ?? {})) {
    if (key === "resource_spec") {
      const rs: Record<string, unknown> = { ...(have.resource_spec as object | null) };
      for (const [k, v] of Object.entries(value ?? {}))
        if (!jsonEqual(v, rs[k])) out.push(`resource_spec.${k}`);
    } else if (!jsonEqual(value, have[key])) out.push(key);
  }
  const revision: Record<string, unknown> = { ...after.source_revision_config };
  for (const [key, value] of Object.entries(desired.source_revision_config ?? {})) {
    if (!jsonEqual(value, revision[key])) out.push(key);
  }
  if (desired.secrets && desired.secrets.length > 0) {
    const sort = (list: { name: string; value?: string }[]) =>
      [...list].map((x) => (shown === "plain" ? [x.name, x.value] : [x.name])).sort();
    if (!jsonEqual(sort(desired.secrets), sort(after.secrets))) out.push("secrets");
  }
  if (desired.secret_references) {
    const key = (r: { name: string; secret_name: string; secret_key: string }) =>
      `${r.name}/${r.secret_name}/${r.secret_key}`;
    const want = desired.secret_references.map(key).sort();
    if (!jsonEqual(want, (after.secret_references ?? []).map(key).sort())) out.push("secret_references");
  }
  return out;
}

// Each test plans generated scenarios, a hundred (four hundred to converge): 0.1 to 0.4 s of CPU,
// which took 7 s at a machine load of 20 on two cores, past the default 5 s.
describe("plan (properties)", { timeout: 30_000 }, () => {
  it("converges in one step: after the service applies the plan, the next plan is a no-op", () => {
    fc.assert(
      fc.property(scenario, ({ desired, remote: parts, lastMode, display: shown }) => {
        const observed = observedOf(desired, parts);
        const last = lastFor(lastMode, desired);
        const first = plan(desired, observed, last);
        let after: Deployment | undefined = observed;
        if (first.action === "create") after = applyCreate(first.body, shown);
        if (first.action === "patch" && observed) after = applyPatch(observed, first.body, shown);
        expect(first.action).not.toBe("blocked");
        // The law that makes convergence meaningful: what the service then has is what the spec says.
        // Values can be checked only when this plan sent them: otherwise the recorded hash is
        // trusted over what the service shows, which may be masked (by design, see planSecrets).
        const sentSecrets =
          first.action !== "noop" && first.action !== "blocked" && first.body.secrets !== undefined;
        if (after) expect(mismatches(desired, after, sentSecrets ? shown : "masked")).toEqual([]);
        const recorded = "secretsHash" in first && first.secretsHash ? first.secretsHash : last.secretsHash;
        const second = plan(desired, after, recorded === undefined ? {} : { secretsHash: recorded });
        expect(second.action, JSON.stringify(second)).toBe("noop");
      }),
      { numRuns: 400 },
    );
  });

  it("is deterministic and leaves its inputs untouched", () => {
    fc.assert(
      fc.property(scenario, ({ desired, remote: parts, lastMode }) => {
        const observed = observedOf(desired, parts);
        const last = lastFor(lastMode, desired);
        const desiredCopy = structuredClone(desired);
        const observedCopy = structuredClone(observed);
        const a = plan(desired, observed, last);
        const b = plan(desiredCopy, observedCopy, { ...last });
        expect(a).toEqual(b);
        expect(desired).toEqual(desiredCopy);
        expect(observed).toEqual(observedCopy);
      }),
    );
  });

  it("never puts a secret value in a summary, a change or a problem", () => {
    fc.assert(
      fc.property(scenario, fc.boolean(), ({ desired, remote: parts, lastMode }, renamed) => {
        const base = observedOf(desired, parts);
        const observed = base && renamed ? { ...base, name: "other", source: "github" as const } : base;
        const result = plan(desired, observed, lastFor(lastMode, desired));
        const { body: _body, ...shown } = result as typeof result & { body?: unknown };
        const visible = JSON.stringify(shown);
        const values = [...(desired.secrets ?? []), ...(observed?.secrets ?? [])].map((s) => s.value ?? "");
        for (const value of values.filter((v) => v.startsWith("sv-"))) expect(visible).not.toContain(value);
      }),
    );
  });

  it("blocks every write to a deployment whose name or source differs, naming each such field", () => {
    fc.assert(
      fc.property(
        scenario,
        fc.boolean(),
        fc.constantFrom(...DEPLOYMENT_SOURCES),
        ({ desired, remote: parts, lastMode }, renamed, source) => {
          const base = observedOf(desired, parts) ?? remote({ source: desired.source });
          const observed = { ...base, name: renamed ? "other" : desired.name, source };
          const result = plan(desired, observed, lastFor(lastMode, desired));
          const differing = [
            ...(renamed ? ["spec.name"] : []),
            ...(source !== desired.source ? ["spec.source"] : []),
          ];
          if (differing.length === 0) {
            expect(result.action).not.toBe("blocked");
            return;
          }
          // A user sees a Stalled condition naming the field to restore, and the service is untouched.
          expect(result).toMatchObject({
            action: "blocked",
            problems: differing.map((field) => ({ reason: "Immutable", field })),
          });
        },
      ),
    );
  });

  it("sends only fields that differ from the service", () => {
    fc.assert(
      fc.property(scenario, ({ desired, remote: parts }) => {
        const observed = observedOf(desired, parts);
        const result = plan(desired, observed, {});
        if (result.action !== "patch" || !observed) return;
        const sent: Record<string, unknown> = { ...result.body.source_config };
        const had: Record<string, unknown> = { ...observed.source_config };
        for (const [key, value] of Object.entries(sent)) {
          if (key !== "listener_config") expect(jsonEqual(value, had[key]), key).toBe(false);
        }
        const revision: Record<string, unknown> = { ...result.body.source_revision_config };
        const hadRevision: Record<string, unknown> = { ...observed.source_revision_config };
        for (const [key, value] of Object.entries(revision)) expect(value).not.toEqual(hadRevision[key]);
        expect(result.newRevision).toBe(result.body.source_revision_config !== undefined);
      }),
    );
  });
});
