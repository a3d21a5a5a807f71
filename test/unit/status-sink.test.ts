// The status sink: every string field of the Deployment resource's status, found by walking the
// status schema, has a declared treatment; text for people comes out printable, a value tools
// compare is kept exactly as given or left unset with Synced saying which and why. A status
// computed from a service whose every string is hostile holds no character of the rule. A
// connection's status passes the same sink with its own table.
import { describe, expect, it } from "vitest";
import { printableLine, REPLACEMENT, unprintableIn } from "../../src/api/printable.ts";
import {
  CONNECTION_STATUS_STRINGS,
  type ConnectionVerdict,
  connectionStatusFrom,
} from "../../src/connection/status.ts";
import { type ConnectionStatus, ConnectionStatusSchema } from "../../src/crd/connection-schema.ts";
import type { DeploymentResourceStatus } from "../../src/crd/schema.ts";
import { DeploymentResourceStatusSchema } from "../../src/crd/status-schema.ts";
import type { RevisionHistoryEntry } from "../../src/reconcile/revision-history.ts";
import type { Deployment } from "../../src/reconcile/service-types.ts";
import { keepPrintable, statusFrom } from "../../src/reconcile/status.ts";
import { isStringSchema, STATUS_STRINGS, UNSET_NAMED, unsetNote } from "../../src/reconcile/status-fields.ts";
import { INVISIBLE, UNPRINTABLE } from "../../src/runtime/unprintable.ts";

type Schema = {
  type?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  const?: unknown;
};
const ROOT = DeploymentResourceStatusSchema as unknown as Schema;

/** Every string leaf of the schema, as `a.b` / `list[].field`. */
function stringPaths(schema: Schema, path = ""): string[] {
  if (isStringSchema(schema as never)) return [path];
  if (schema.items) return stringPaths(schema.items, `${path}[]`);
  return Object.entries(schema.properties ?? {}).flatMap(([key, inner]) =>
    stringPaths(inner, path ? `${path}.${key}` : key),
  );
}
const PATHS = stringPaths(ROOT);

/**
 * A status with every field of the schema set (a list holds one element): each string its
 * path (an enum its first value), or `hostile` at `at`.
 */
function sample(schema: Schema, at?: string, hostile = "", path = ""): unknown {
  if (isStringSchema(schema as never)) {
    if (path === at) return hostile;
    return schema.anyOf ? String(schema.anyOf[0]?.const) : `v-${path}`;
  }
  if (schema.items) return [sample(schema.items, at, hostile, `${path}[]`)];
  if (schema.properties) {
    const out: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(schema.properties))
      out[key] = sample(inner, at, hostile, path ? `${path}.${key}` : key);
    return out;
  }
  return schema.type === "boolean" ? true : 1;
}

/** The value at `path` (`[]` reads the first element), or undefined. */
function at(value: unknown, path: string): unknown {
  let here: unknown = value;
  for (const part of path.split(".")) {
    const list = part.endsWith("[]");
    here = (here as Record<string, unknown> | undefined)?.[list ? part.slice(0, -2) : part];
    if (list) here = (here as unknown[] | undefined)?.[0];
  }
  return here;
}

/** Every string in `value`, with where it is. */
function strings(value: unknown, path = "status"): [string, string][] {
  if (typeof value === "string") return [[path, value]];
  if (Array.isArray(value)) return value.flatMap((v, i) => strings(v, `${path}[${i}]`));
  if (value !== null && typeof value === "object")
    return Object.entries(value).flatMap(([k, v]) => strings(v, `${path}.${k}`));
  return [];
}

const RULE = new RegExp(`[\\t${UNPRINTABLE}]`, "u");
/** One character of each kind of the rule, and an escape sequence. */
const HOSTILE = "a\u202eb\u200bc\x9bd\u3164e\u2028f\x1b[2Jg\u{e0100}h\ti";

describe("every string field of the status schema", () => {
  it("has a declared treatment, and every declaration names a field of the schema", () => {
    expect(PATHS.length).toBeGreaterThan(30);
    expect(PATHS.filter((p) => STATUS_STRINGS[p] === undefined)).toEqual([]);
    expect(Object.keys(STATUS_STRINGS).filter((p) => !PATHS.includes(p))).toEqual([]);
  });

  it("as given when printable: nothing is rewritten, nothing left unset", () => {
    const clean = sample(ROOT) as DeploymentResourceStatus;
    const sunk = keepPrintable(clean);
    expect(sunk.unset).toEqual([]);
    // Not even copied: a status of printable strings costs one quick check per string.
    expect(sunk.status).toBe(clean);
    expect(sunk.status).toEqual(sample(ROOT));
  });

  it.each(PATHS)("%s: hostile, it is escaped (text) or left unset and named (value)", (path) => {
    const clean = sample(ROOT) as DeploymentResourceStatus;
    const given = sample(ROOT, path, HOSTILE) as DeploymentResourceStatus;
    const { status, unset } = keepPrintable(given);
    for (const [where, text] of strings(status)) expect(RULE.test(text), where).toBe(false);
    const declared = STATUS_STRINGS[path];
    if (declared?.treatment === "text") {
      expect(unset).toEqual([]);
      expect(at(status, path)).toBe(printableLine(HOSTILE));
      expect(at(status, path)).toContain(REPLACEMENT);
      return;
    }
    // Never rewritten: the field is gone (with its object when that needs it), the rest as given.
    expect(at(status, path)).toBeUndefined();
    expect(unset).toHaveLength(1);
    const shown = `status.${path.replaceAll("[]", "[0]")}`;
    const [only] = unset;
    const field = only?.because === undefined ? only?.field : `${only.field}.${only.because}`;
    expect(field).toBe(shown);
    expect(only?.character).toBe("U+202E");
    expect(only?.from).toBe(declared?.from);
    expect(unsetNote(unset)).toContain(only?.field);
    const dropped = only?.because === undefined ? path : path.slice(0, path.lastIndexOf("."));
    const expected = structuredClone(clean) as Record<string, unknown>;
    removeAt(expected, dropped);
    expect(status).toEqual(expected);
  });
});

/** `value` without what is at `path` (a list's first element when the path ends in `[]`). */
function removeAt(value: Record<string, unknown>, path: string): void {
  const parts = path.split(".");
  const last = parts.pop() ?? "";
  const parent = (parts.length === 0 ? value : at(value, parts.join("."))) as Record<string, unknown>;
  if (last.endsWith("[]")) (parent[last.slice(0, -2)] as unknown[]).splice(0, 1);
  else delete parent[last];
}

describe("the values tools compare", () => {
  it("unprintableIn names the first character a value cannot keep, the rule's and a lone surrogate", () => {
    expect(unprintableIn(`registry.example/app@sha256:${"a".repeat(64)}`)).toBeUndefined();
    expect(unprintableIn("ghcr.io/é/app:1.0-😀")).toBeUndefined();
    expect(unprintableIn("app\u202e:1")).toBe("U+202E");
    expect(unprintableIn("a\tb")).toBe("U+0009");
    expect(unprintableIn("a\u3164b")).toBe("U+3164");
    expect(unprintableIn("a\u{e0100}b")).toBe("U+E0100");
    expect(unprintableIn("a\ud800b")).toBe("U+D800");
    expect(unprintableIn(`x${REPLACEMENT}`)).toBeUndefined();
  });

  it("the note names at most a few fields and counts the rest", () => {
    const unset = Array.from({ length: UNSET_NAMED + 3 }, (_, i) => ({
      field: `status.revisionHistory[${i}]`,
      because: "id",
      from: "the service",
      character: "U+202E",
    }));
    const note = unsetNote(unset) ?? "";
    expect(note).toContain("status.revisionHistory[0] (its id) as the service gave it holds U+202E");
    expect(note).not.toContain(`[${UNSET_NAMED}]`);
    expect(note).toContain(", and 3 more; outside the printable rule");
    expect(unsetNote([])).toBeUndefined();
  });
});

describe("statusFrom: a service whose every string is hostile", () => {
  const bad = (s: string) => `${s}\u202e${s}`;
  const deployment: Deployment = {
    id: bad("dep"),
    name: "agent",
    source: "external_docker",
    tenant_id: bad("tenant"),
    status: bad("READY"),
    latest_revision_id: bad("rev1"),
    active_revision_id: bad("rev1"),
    image_version: bad("1.0"),
    source_config: {},
    source_revision_config: {
      image_uri: bad("registry.example/app:1"),
      repo_ref: bad("main"),
      repo_commit_sha: bad("abc"),
    },
  } as unknown as Deployment;
  const history: RevisionHistoryEntry[] = [
    { id: "rev0", imageUri: bad("registry.example/app:0"), redeployReason: `why ${HOSTILE}` },
    { id: bad("rev9") },
  ];
  const input = {
    generation: 3,
    observed: deployment,
    sync: { kind: "synced" } as const,
    now: new Date("2030-01-01T00:00:00Z"),
    record: {
      lastHandledRolloutNow: bad("now"),
      lastHandledReconcileAt: "2030-01-01T00:00:00Z",
      resolvedRepoUrl: bad("https://github.com/o/r"),
    },
    revision: { id: bad("rev1"), status: bad("DEPLOYING") },
    revisionHistory: history,
    rollout: { log: { revisionId: "rev0", reason: "RevisionFailed", excerpt: `boom ${HOSTILE}` } },
  };

  it("writes no character of the rule anywhere, and Synced names each value left unset", () => {
    const status = statusFrom(input);
    for (const [where, text] of strings(status)) expect(RULE.test(text), where).toBe(false);
    expect(status.deploymentId).toBeUndefined();
    expect(status.activeRevision).toBeUndefined();
    expect(status.lastHandledRolloutNow).toBeUndefined();
    expect(status.lastHandledReconcileAt).toBe("2030-01-01T00:00:00Z");
    // The entry with a hostile id goes; the other keeps its id, its reason escaped, its image unset.
    expect(status.revisionHistory).toEqual([{ id: "rev0", redeployReason: printableLine(`why ${HOSTILE}`) }]);
    expect(status.failedRevisionLog?.excerpt).toBe(printableLine(`boom ${HOSTILE}`));
    const synced = status.conditions?.find((c) => c.type === "Synced");
    expect(synced).toMatchObject({ status: "True", reason: "ReconcileSuccess" });
    expect(synced?.message).toContain("left unset: status.deploymentId as the service gave it holds U+202E");
    expect(synced?.message).toContain(
      "outside the printable rule, and a value tools compare is never rewritten",
    );
  });

  it("settles: the next reconcile's status, from the one written, is written the same (no write loop)", () => {
    const again = (previous: DeploymentResourceStatus) =>
      statusFrom({ ...input, previous, revisionHistory: previous.revisionHistory });
    const first = statusFrom(input);
    const second = again(first);
    // The history entry dropped for its id (and the image of the other) are no longer there to
    // name: said once, in the status written with them gone.
    expect(again(second)).toEqual(second);
  });

  it("a previous status kept as it was (the deployment not looked at) passes the sink too", () => {
    const previous = { deploymentId: bad("old"), imageVersion: "1.0" } as DeploymentResourceStatus;
    const status = statusFrom({ ...input, previous, observed: undefined, revisionHistory: undefined });
    expect(status.deploymentId).toBeUndefined();
    expect(status.imageVersion).toBe("1.0");
  });

  it("the test's hostile text holds every kind the rule names", () => {
    expect(new RegExp(`[${INVISIBLE}]`, "u").test(HOSTILE)).toBe(true);
    expect([...HOSTILE].filter((c) => RULE.test(c)).length).toBeGreaterThanOrEqual(8);
  });
});

describe("a connection's status: the same sink, its own table", () => {
  const CONNECTION_ROOT = ConnectionStatusSchema as unknown as Schema;
  const CONNECTION_PATHS = stringPaths(CONNECTION_ROOT);
  /** A sample status whose condition is of a type the operator sets (Ready: kept with no verdict). */
  const connectionSample = (path?: string, hostile = "") => {
    const status = sample(CONNECTION_ROOT, path, hostile) as ConnectionStatus;
    for (const c of status.conditions ?? []) if (c.type === "v-conditions[].type") c.type = "Ready";
    return status;
  };
  const now = new Date("2030-01-01T00:00:00Z");
  const from = (previous: ConnectionStatus, verdict?: ConnectionVerdict) =>
    connectionStatusFrom({
      previous,
      generation: 2,
      verdict,
      holding: undefined,
      counts: { users: 1, refused: 0 },
      probedAt: undefined,
      now,
    });

  it("has a declared treatment for every string field, and every declaration names a field of the schema", () => {
    expect(CONNECTION_PATHS).toContain("conditions[].message");
    expect(CONNECTION_PATHS.filter((p) => CONNECTION_STATUS_STRINGS[p] === undefined)).toEqual([]);
    expect(Object.keys(CONNECTION_STATUS_STRINGS).filter((p) => !CONNECTION_PATHS.includes(p))).toEqual([]);
  });

  it("a status of printable strings is written as given", () => {
    const clean = connectionSample();
    const written = from(clean);
    expect(written.conditions).toEqual(clean.conditions);
    expect(written.lastProbeTime).toBe(clean.lastProbeTime);
  });

  it.each(CONNECTION_PATHS)("%s: hostile, it is escaped (text) or dropped (the operator's own)", (path) => {
    const written = from(connectionSample(path, HOSTILE));
    for (const [where, text] of strings(written)) expect(RULE.test(text), where).toBe(false);
    if (CONNECTION_STATUS_STRINGS[path]?.treatment === "text") {
      expect(at(written, path)).toBe(printableLine(HOSTILE));
      return;
    }
    expect(CONNECTION_STATUS_STRINGS[path]?.treatment).toBe("operator");
    expect(at(written, path)).toBeUndefined();
  });

  it("a verdict quoting a hostile service and spec writes no character of the rule", () => {
    const verdict: ConnectionVerdict = {
      ok: false,
      reason: "Unreachable",
      message: `cannot reach the service at https://svc${HOSTILE}.example: ${HOSTILE}`,
      transient: true,
    };
    const written = from({}, verdict);
    for (const [where, text] of strings(written)) expect(RULE.test(text), where).toBe(false);
    expect(written.conditions?.map((c) => c.type)).toEqual(["Ready", "Reconciling"]);
    expect(written.conditions?.[0]?.message).toContain(REPLACEMENT);
  });
});
