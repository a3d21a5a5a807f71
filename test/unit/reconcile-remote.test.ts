// The resync snapshot: a listing never undoes a write answered while it was under way, and a
// caller that stops waiting for a shared listing fails alone.
import { describe, expect, it } from "vitest";
import type { Deployment } from "../../src/api/wire.ts";
import type { DeploymentsPort } from "../../src/reconcile/ports.ts";
import { RemoteSnapshot } from "../../src/reconcile/remote.ts";
import { systemClock } from "../../src/runtime/clock.ts";
import { remote } from "./plan-fixtures.ts";

/** An in-memory service whose listings answer only when the test releases them. */
function heldListings() {
  const pending: Array<{ signal: AbortSignal; answer: (all: Deployment[]) => void }> = [];
  const unused = () => Promise.reject(new Error("not used by the snapshot"));
  const port: DeploymentsPort = {
    listAll: (signal) =>
      new Promise((resolve, reject) => {
        signal.addEventListener("abort", () => reject(signal.reason), { once: true });
        pending.push({ signal, answer: resolve });
      }),
    getById: unused,
    findByName: unused,
    create: unused,
    patch: unused,
    delete: unused,
    listRepos: unused,
    getRevision: unused,
  };
  const snapshot = new RemoteSnapshot(port, systemClock, 60_000);
  return { snapshot, pending };
}

const scaled = (maxScale: number) =>
  remote({ source_config: { resource_spec: { min_scale: 1, max_scale: maxScale } } });
const scaleOf = (d: Deployment | null | undefined) => d?.source_config.resource_spec?.max_scale;

describe("RemoteSnapshot", () => {
  it("keeps a write answered while the listing was under way, and takes the listing over older writes", async () => {
    const { snapshot, pending } = heldListings();
    const before = scaled(2);
    const other = remote({ id: "0f0e0d0c-0b0a-4908-8706-050403020100", name: "other" });

    snapshot.remember(scaled(5)); // answered before the listing started: the listing is newer
    const listing = snapshot.refresh(new AbortController().signal);
    snapshot.remember(scaled(3)); // a PATCH answered while the listing was under way
    snapshot.forget(other.id); // a deployment found gone meanwhile
    pending[0]?.answer([before, other]);
    await listing;

    expect(scaleOf(snapshot.byId(before.id))).toBe(3);
    expect(snapshot.byId(other.id)).toBeNull();

    // The next listing, started after those writes, is the newer word.
    const next = snapshot.refresh(new AbortController().signal);
    pending[1]?.answer([scaled(4), other]);
    await next;
    expect(scaleOf(snapshot.byId(before.id))).toBe(4);
    expect(snapshot.byId(other.id)?.name).toBe("other");
  });

  it("lets a caller stop waiting for a shared listing without failing the others", async () => {
    const { snapshot, pending } = heldListings();
    const impatient = new AbortController();
    const first = snapshot.refresh(impatient.signal);
    const second = snapshot.refresh(new AbortController().signal);
    expect(pending).toHaveLength(1);

    impatient.abort(new Error("reconcile timed out"));
    await expect(first).rejects.toThrow("reconcile timed out");
    expect(pending[0]?.signal.aborted).toBe(false);

    pending[0]?.answer([scaled(7)]);
    await second;
    expect(scaleOf(snapshot.byId(scaled(7).id))).toBe(7);
  });

  it("stops the listing once every caller gave up, and the next caller lists afresh", async () => {
    const { snapshot, pending } = heldListings();
    const a = new AbortController();
    const b = new AbortController();
    const first = snapshot.refresh(a.signal);
    const second = snapshot.refresh(b.signal);
    a.abort(new Error("a gave up"));
    b.abort(new Error("b gave up"));
    await expect(first).rejects.toThrow("a gave up");
    await expect(second).rejects.toThrow("b gave up");
    expect(pending[0]?.signal.aborted).toBe(true);
    expect(snapshot.isFresh()).toBe(false);

    const third = snapshot.refresh(new AbortController().signal);
    expect(pending).toHaveLength(2);
    pending[1]?.answer([scaled(2)]);
    await third;
    expect(snapshot.isFresh()).toBe(true);
  });

  it("rejects at once, listing nothing, for a caller whose signal already aborted", async () => {
    const { snapshot, pending } = heldListings();
    const gone = new AbortController();
    gone.abort(new Error("already stopped"));
    await expect(snapshot.refresh(gone.signal)).rejects.toThrow("already stopped");
    expect(pending).toHaveLength(0);
  });
});
