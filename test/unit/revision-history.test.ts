// Revision history as people read it: the listing's items read one by one and put newest first,
// what each revision deployed, and the LIVE column of `kubectl get dmsd -o wide`.
import { describe, expect, it } from "vitest";
import { newestFirst, type RevisionRow, readRevisionItem } from "../../src/api/revision-listing.ts";
import type { Deployment } from "../../src/api/wire.ts";
import { deployedOf, revisionLines } from "../../src/commands/revisions.ts";
import { imageTag, liveRevision } from "../../src/reconcile/live-revision.ts";
import { remote } from "./plan-fixtures.ts";

const A = "aaaaaaaa-0000-4000-8000-000000000001";
const B = "bbbbbbbb-0000-4000-8000-000000000002";

const deployment = (overrides: Partial<Deployment>): Deployment =>
  remote({ source: "github", latest_revision_id: A, active_revision_id: A, ...overrides });

describe("readRevisionItem", () => {
  it.each([
    {
      reason: "the single route's shape",
      item: { id: A, status: "DEPLOYED", created_at: "2030-01-01T00:00:00Z" },
      ok: true,
    },
    { reason: "a status the spec does not list, kept raw", item: { id: A, status: "PAUSED" }, ok: true },
    {
      reason: "nulls for optional fields",
      item: { id: A, status: "QUEUED", source: null, source_revision_config: null },
      ok: true,
    },
    { reason: "unknown fields kept", item: { id: A, status: "QUEUED", region: "eu" }, ok: true },
    { reason: "no id", item: { status: "QUEUED" }, ok: false },
    { reason: "a numeric status", item: { id: A, status: 3 }, ok: false },
    { reason: "not an object", item: "revision", ok: false },
  ])("$reason: readable $ok", async ({ item, ok }) => {
    const row = await readRevisionItem(item);
    expect(row.ok).toBe(ok);
    if (!row.ok) expect(row.unreadable.message).toMatch(/^the service's revision .* cannot be read: /);
  });

  it("names the unreadable item by its id and field", async () => {
    const row = await readRevisionItem({ id: B, status: 3, created_at: "2030-01-02T00:00:00Z" });
    expect(row).toEqual({
      ok: false,
      unreadable: {
        id: B,
        created_at: "2030-01-02T00:00:00Z",
        message: expect.stringContaining(`revision ${B} cannot be read: status:`),
      },
    });
  });
});

describe("newestFirst", () => {
  // A readable row, as readRevisionItem gives it.
  const row = (id: string, created_at?: string): RevisionRow => ({
    ok: true,
    revision: { id, status: "DEPLOYED", ...(created_at ? { created_at } : {}) },
  });
  const ids = (rows: RevisionRow[]) => rows.map((r) => (r.ok ? r.revision.id : r.unreadable.id));

  it("sorts by created_at, newest first, whatever order the service listed", () => {
    const rows = [
      row("1", "2030-01-01T00:00:00Z"),
      row("3", "2030-01-03T00:00:00Z"),
      row("2", "2030-01-02T00:00:00Z"),
    ];
    expect(ids(newestFirst(rows))).toEqual(["3", "2", "1"]);
  });

  it("sorts unreadable rows by their created_at too", async () => {
    const odd = await readRevisionItem({ id: "2", status: 1, created_at: "2030-01-02T00:00:00Z" });
    expect(
      ids(newestFirst([row("1", "2030-01-01T00:00:00Z"), odd, row("3", "2030-01-03T00:00:00Z")])),
    ).toEqual(["3", "2", "1"]);
  });

  it("keeps the service's order when a row has no date to sort by", () => {
    const rows = [row("1", "2030-01-01T00:00:00Z"), row("2"), row("3", "2030-01-03T00:00:00Z")];
    expect(ids(newestFirst(rows))).toEqual(["1", "2", "3"]);
  });
});

describe("deployedOf", () => {
  it.each([
    { config: { image_uri: "registry.example.com/agent:1.4.2" }, shown: "registry.example.com/agent:1.4.2" },
    { config: { repo_ref: "main", repo_commit_sha: "3f2a1bc9d0e" }, shown: "main@3f2a1bc" },
    { config: { repo_commit_sha: "3f2a1bc9d0e" }, shown: "@3f2a1bc" },
    { config: { repo_ref: "feature/x" }, shown: "feature/x" },
    { config: { source_tarball_path: "s3://b/agent.tgz" }, shown: "s3://b/agent.tgz" },
    { config: { image_uri: "", repo_ref: null }, shown: null },
    { config: undefined, shown: null },
  ])("$shown", ({ config, shown }) => {
    expect(deployedOf(config)).toBe(shown);
  });
});

describe("revisionLines", () => {
  it("marks the active and the latest revision from the deployment, and an unreadable row by its id", async () => {
    const rows = await Promise.all([
      readRevisionItem({ id: B, status: "DEPLOYING" }),
      readRevisionItem({ id: A, status: "DEPLOYED" }),
      readRevisionItem({ status: "DEPLOYED" }),
    ]);
    const lines = revisionLines(rows, deployment({ latest_revision_id: B, active_revision_id: A }));
    expect(lines.map((l) => [l.id, l.active, l.latest, l.unreadable !== undefined])).toEqual([
      [B, false, true, false],
      [A, true, false, false],
      [null, false, false, true],
    ]);
  });
});

describe("liveRevision", () => {
  it.each([
    {
      reason: "a repository source, settled: the commit, 7 characters",
      d: deployment({ source_revision_config: { repo_commit_sha: "3f2a1bc9d0e8f7" } }),
      previous: undefined,
      live: "aaaaaaaa@3f2a1bc",
    },
    {
      reason: "an image, settled: the service's image version first",
      d: deployment({
        source: "external_docker",
        image_version: "0.4.2",
        source_revision_config: { image_uri: "r/a:1" },
      }),
      previous: undefined,
      live: "aaaaaaaa@0.4.2",
    },
    {
      reason: "an image without a version: its tag",
      d: deployment({
        source: "external_docker",
        source_revision_config: { image_uri: "registry:5000/agent:1.4.2" },
      }),
      previous: undefined,
      live: "aaaaaaaa@1.4.2",
    },
    {
      reason:
        "rolling out: the new revision's commit is not the live one, so what was known of the active one stays",
      d: deployment({ latest_revision_id: B, source_revision_config: { repo_commit_sha: "9999999aaaa" } }),
      previous: "aaaaaaaa@3f2a1bc",
      live: "aaaaaaaa@3f2a1bc",
    },
    {
      reason: "rolling out with nothing known of the active revision: its id alone",
      d: deployment({ latest_revision_id: B, source_revision_config: { repo_commit_sha: "9999999aaaa" } }),
      previous: "cccccccc@1234567",
      live: "aaaaaaaa",
    },
    {
      reason: "no active revision yet",
      d: deployment({ active_revision_id: null }),
      previous: "aaaaaaaa@3f2a1bc",
      live: undefined,
    },
  ])("$reason", ({ d, previous, live }) => {
    expect(liveRevision(d, previous)).toBe(live);
  });

  it.each([
    ["registry.example.com/agent:1.4.2", "1.4.2"],
    ["registry.example.com:5000/agent", undefined],
    ["agent@sha256:abc", undefined],
    ["agent:1.0@sha256:abc", "1.0"],
    ["agent:", undefined],
    [undefined, undefined],
  ])("imageTag(%s) = %s", (uri, tag) => {
    expect(imageTag(uri)).toBe(tag);
  });
});
