import { describe, expect, it } from "vitest";
import { toMicroTime } from "../../src/kube/client.ts";
import { NotFoundError, UnnamableObjectError } from "../../src/kube/errors.ts";
import { NOTE_LIMIT_BYTES, truncateNote } from "../../src/kube/events.ts";
import { leaseSnapshotFrom, leaseSpecOf, parseKubeTime } from "../../src/kube/lease.ts";
import { itemPath } from "../../src/kube/object.ts";
import { SECRETS } from "../../src/kube/secrets.ts";

describe("toMicroTime", () => {
  it("writes the six fractional digits the API server's MicroTime parser requires", () => {
    expect(toMicroTime(new Date("2030-01-02T03:04:05.678Z"))).toBe("2030-01-02T03:04:05.678000Z");
    expect(toMicroTime(new Date("2030-01-02T03:04:05Z"))).toBe("2030-01-02T03:04:05.000000Z");
  });

  it("round-trips through parseKubeTime to the millisecond", () => {
    const date = new Date("2030-01-02T03:04:05.678Z");
    expect(parseKubeTime(toMicroTime(date))).toEqual(date);
    expect(parseKubeTime("2030-01-02T03:04:05Z")).toEqual(new Date("2030-01-02T03:04:05Z"));
  });

  it.each([[undefined], [""], ["yesterday"], [42]])("reads %j as no time", (value) => {
    expect(parseKubeTime(value)).toBeUndefined();
  });
});

describe("itemPath", () => {
  const CONNECTIONS = { group: "dms.dev", version: "v1alpha1", plural: "clusterserviceconnections" };

  it("is the collection's path and the name, escaped", () => {
    expect(itemPath(SECRETS, { namespace: "team-a", name: "creds" })).toBe(
      "/api/v1/namespaces/team-a/secrets/creds",
    );
    expect(itemPath(SECRETS, { namespace: "team-a", name: "a:b" })).toBe(
      "/api/v1/namespaces/team-a/secrets/a%3Ab",
    );
    expect(itemPath(CONNECTIONS, { namespace: "", name: "prod" })).toBe(
      "/apis/dms.dev/v1alpha1/clusterserviceconnections/prod",
    );
  });

  // "." would read the collection (every Secret's values), ".." the namespace or the API group.
  it.each([[""], ["."], [".."], ["a/b"], ["../../other/secrets/creds"], ["creds%2F.."]])(
    "refuses %j, a name no object can have, as a missing object",
    (name) => {
      const refuse = () => itemPath(SECRETS, { namespace: "team-a", name });
      expect(refuse).toThrow(UnnamableObjectError);
      expect(refuse).toThrow(NotFoundError);
      expect(refuse).toThrow(`no secrets can be named ${JSON.stringify(name)}`);
    },
  );
});

describe("truncateNote", () => {
  it("keeps a note within the limit unchanged", () => {
    const note = "a".repeat(NOTE_LIMIT_BYTES);
    expect(truncateNote(note)).toBe(note);
  });

  it.each([
    ["ASCII", "a"],
    ["two-byte characters", "é"],
    ["four-byte characters", "🚀"],
  ])("cuts %s to at most the limit in bytes, on a character boundary, marked with an ellipsis", (_r, ch) => {
    const cut = truncateNote(ch.repeat(2000));
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(NOTE_LIMIT_BYTES);
    expect(Buffer.byteLength(cut)).toBeGreaterThan(NOTE_LIMIT_BYTES - 8);
    expect(cut.endsWith("…")).toBe(true);
    expect(cut).not.toContain("\uFFFD");
    expect(cut.slice(0, -1).replaceAll(ch, "")).toBe("");
  });
});

describe("Lease mapping", () => {
  it("maps a record to a spec and back", () => {
    const record = {
      holderIdentity: "pod-a",
      leaseDurationSeconds: 15,
      acquireTime: new Date("2030-01-01T00:00:00.001Z"),
      renewTime: new Date("2030-01-01T00:00:10.002Z"),
      leaseTransitions: 3,
    };
    const spec = leaseSpecOf(record);
    expect(spec.renewTime).toBe("2030-01-01T00:00:10.002000Z");
    expect(leaseSnapshotFrom({ metadata: { name: "l", resourceVersion: "7" }, spec })).toEqual({
      resourceVersion: "7",
      record,
    });
  });

  it("reads a released or never-held lease as having no holder and no times", () => {
    expect(leaseSnapshotFrom({ metadata: { name: "l", resourceVersion: "1" }, spec: {} }).record).toEqual({
      holderIdentity: "",
      leaseDurationSeconds: 0,
      acquireTime: undefined,
      renewTime: undefined,
      leaseTransitions: 0,
    });
  });

  it("rejects an answer without metadata", () => {
    expect(() => leaseSnapshotFrom({ spec: {} })).toThrow(/without metadata/);
  });
});
