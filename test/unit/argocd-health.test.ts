// The Argo CD health check published in docs/gitops-health.md, run as Argo CD would run it (a Lua
// script with the resource as `obj`) on the conditions the operator's own status code writes in
// each situation the doc's table lists. The table is the fixture: its Conditions column must match
// what statusFrom() produces, and its Argo CD column what the Lua returns.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import fengari from "fengari";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import type { Deployment } from "../../src/api/wire.ts";
import type { DeploymentResourceStatus } from "../../src/crd/schema.ts";
import { type StatusInput, statusFrom } from "../../src/reconcile/status.ts";

const DOC = readFileSync(join(import.meta.dirname, "..", "..", "docs", "gitops-health.md"), "utf8");
const HEALTH_KEY = "resource.customizations.health.dms.dev_Deployment";

/** The Lua script of the doc's argocd-cm snippet, exactly as a user would paste it. */
function argoScript(): string {
  const blocks = [...DOC.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1] ?? "");
  const configMap = blocks
    .map((b) => parse(b) as { data?: Record<string, string> })
    .find((c) => c.data?.[HEALTH_KEY]);
  const script = configMap?.data?.[HEALTH_KEY];
  if (!script) throw new Error(`docs/gitops-health.md has no argocd-cm snippet with ${HEALTH_KEY}`);
  return script;
}

/** Rows of the doc's decision table, by situation. */
function docTable(): Map<string, { conditions: string; argo: string }> {
  const section = DOC.split("## What each tool concludes")[1]?.split("\n## ")[0] ?? "";
  const rows = section
    .split("\n")
    .filter((line) => line.startsWith("| ") && !line.startsWith("| Situation") && !line.startsWith("| ---"))
    .map((line) => line.split("|").map((cell) => cell.trim()));
  return new Map(
    rows.map(([, situation = "", conditions = "", argo = ""]) => [situation, { conditions, argo }]),
  );
}

/** A Lua table constructor for a JSON-like value (`null` becomes `nil`, as in Argo CD). */
function luaLiteral(value: unknown): string {
  if (value === null || value === undefined) return "nil";
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (Array.isArray(value)) return `{${value.map(luaLiteral).join(", ")}}`;
  const entries = Object.entries(value as Record<string, unknown>);
  return `{${entries.map(([k, v]) => `[${JSON.stringify(k)}] = ${luaLiteral(v)}`).join(", ")}}`;
}

/** Runs the health script with `obj` bound, as Argo CD does; returns its `status` and `message`. */
function argoHealth(script: string, obj: unknown): { status: string; message: string } {
  const { lua, lauxlib, lualib, to_luastring } = fengari;
  const L = lauxlib.luaL_newstate();
  lualib.luaL_openlibs(L);
  const program = `obj = ${luaLiteral(obj)}\nlocal function health()\n${script}\nend\nlocal hs = health()\nreturn hs.status, tostring(hs.message)`;
  if (
    lauxlib.luaL_loadstring(L, to_luastring(program)) !== lua.LUA_OK ||
    lua.lua_pcall(L, 0, 2, 0) !== lua.LUA_OK
  )
    throw new Error(`the health script failed: ${lua.lua_tojsstring(L, -1)}`);
  return { status: lua.lua_tojsstring(L, -2), message: lua.lua_tojsstring(L, -1) };
}

const NOW = new Date("2025-06-01T12:00:00Z");
const LATEST = "2f0b6c1e-0000-4000-8000-000000000002";
const PREVIOUS = "2f0b6c1e-0000-4000-8000-000000000001";

function deployment(status: Deployment["status"], active: string | null = LATEST): Deployment {
  return {
    id: "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a",
    tenant_id: "7b0c4f8e-3a1d-4c2b-9e5f-1d2c3b4a5f60",
    name: "summarizer",
    source: "internal_docker",
    source_config: {},
    source_revision_config: { image_uri: "summarizer:2025-06-01" },
    secrets: [],
    created_at: "2025-06-01T11:00:00Z",
    updated_at: "2025-06-01T11:00:00Z",
    status,
    latest_revision_id: LATEST,
    active_revision_id: active,
  };
}

const status = (input: Omit<StatusInput, "now" | "generation"> & { generation?: number }) =>
  statusFrom({ generation: 1, ...input, now: NOW });
const READY = status({ observed: deployment("READY"), sync: { kind: "synced" } });

/** Each situation of the doc's table: the resource's generation and the status the operator wrote. */
const SITUATIONS: Record<string, { generation: number; status?: DeploymentResourceStatus }> = {
  "Not reconciled yet": { generation: 1 },
  "Edited, new generation not seen": { generation: 2, status: READY },
  Creating: { generation: 1, status: status({ observed: null, sync: { kind: "synced" } }) },
  "Database being provisioned": {
    generation: 1,
    status: status({ observed: deployment("AWAITING_DATABASE", null), sync: { kind: "synced" } }),
  },
  "Rolling out a new revision": {
    generation: 1,
    status: status({ previous: READY, observed: deployment("READY", PREVIOUS), sync: { kind: "synced" } }),
  },
  Ready: { generation: 1, status: READY },
  "Retrying after a service error": {
    generation: 1,
    status: status({
      previous: READY,
      observed: undefined,
      sync: { kind: "failed", reason: "ServiceUnavailable", message: "the service answered 503" },
    }),
  },
  Stalled: {
    generation: 1,
    status: status({
      previous: READY,
      observed: undefined,
      sync: { kind: "failed", reason: "Immutable", message: "spec.source cannot change", stalled: true },
    }),
  },
  "A revision failed to build": {
    generation: 1,
    status: status({
      previous: READY,
      observed: deployment("READY", PREVIOUS),
      sync: { kind: "synced" },
      revision: { id: LATEST, status: "BUILD_FAILED" },
    }),
  },
  "Paused by annotation": {
    generation: 1,
    status: status({ previous: READY, observed: undefined, sync: { kind: "paused" } }),
  },
  "ObserveOnly, in line": {
    generation: 1,
    status: status({ observed: deployment("READY"), sync: { kind: "observed", drift: [] } }),
  },
  "ObserveOnly, drifted": {
    generation: 1,
    status: status({ observed: deployment("READY"), sync: { kind: "observed", drift: ["image differs"] } }),
  },
  "ObserveOnly, no such deployment": {
    generation: 1,
    status: status({ observed: null, sync: { kind: "observed", drift: [] } }),
  },
  "Unused on the service": {
    generation: 1,
    status: status({ observed: deployment("UNUSED"), sync: { kind: "synced" } }),
  },
  Deleting: {
    generation: 1,
    status: status({ previous: READY, observed: deployment("AWAITING_DELETE"), sync: { kind: "deleting" } }),
  },
  "Service reports an unknown state": {
    generation: 1,
    status: status({ observed: deployment("UNKNOWN"), sync: { kind: "synced" } }),
  },
  "Service reports an unlisted status": {
    generation: 1,
    status: status({ observed: deployment("AWAITING_FINAL_DELETE"), sync: { kind: "synced" } }),
  },
};

/** The doc's notation for a status: `Type=Status (Reason)` in a fixed order, and a stale generation. */
function conditionsText(generation: number, s: DeploymentResourceStatus | undefined): string {
  if (!s?.conditions) return "none";
  const text = ["Ready", "Synced", "Reconciling", "Stalled"]
    .flatMap((type) => s.conditions?.filter((c) => c.type === type) ?? [])
    .map((c) => `${c.type}=${c.status} (${c.reason})`)
    .join(", ");
  return s.observedGeneration === generation
    ? text
    : `${text}, from generation ${s.observedGeneration} of ${generation}`;
}

const resource = (generation: number, s: DeploymentResourceStatus | undefined) => ({
  apiVersion: "dms.dev/v1alpha1",
  kind: "Deployment",
  metadata: { name: "summarizer", namespace: "team-a", generation },
  spec: { source: "internal_docker" },
  ...(s ? { status: s } : {}),
});

describe("the Argo CD health check in docs/gitops-health.md", () => {
  const table = docTable();
  const script = argoScript();

  it("covers exactly the situations the test computes", () => {
    expect([...table.keys()].sort()).toEqual(Object.keys(SITUATIONS).sort());
  });

  it.each(Object.entries(SITUATIONS))("%s: the doc shows the conditions the operator writes", (name, s) => {
    expect(table.get(name)?.conditions).toBe(conditionsText(s.generation, s.status));
  });

  it.each(Object.entries(SITUATIONS))("%s: Argo CD gets the health the doc promises", (name, s) => {
    expect(argoHealth(script, resource(s.generation, s.status)).status).toBe(table.get(name)?.argo);
  });

  it("tells the user why in the message, from the condition that decided", () => {
    const stalled = SITUATIONS.Stalled;
    const drifted = SITUATIONS["ObserveOnly, drifted"];
    expect(argoHealth(script, resource(1, stalled?.status)).message).toBe(
      "Immutable: spec.source cannot change",
    );
    expect(argoHealth(script, resource(1, drifted?.status)).message).toContain("Drifted: ObserveOnly");
    expect(argoHealth(script, resource(2, READY)).message).toBe(
      "Waiting for dms-operator to observe generation 2",
    );
  });
});
