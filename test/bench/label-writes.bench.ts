/**
 * The API server's capacity for the sharder's one write: a merge patch of a Deployment resource's
 * shard labels under a resourceVersion precondition (`patchShardLabels`, as the sharder and a
 * drain's acknowledgement send it). A control plane of the benchmark's own, N resources, then N
 * patches at each concurrency in turn (each patch carries the resourceVersion its resource was
 * last read or written at, so none loses a race): writes/s and each write's p50 / p99.
 *
 * What it answers: how many label writes a second a failover or a join can count on here, and at
 * how many in flight the server stops giving more (a failover's relabelling of a dead replica's
 * share is bound by it while the labels are its critical path).
 *
 * `--write` also times the reconciler's status write the same way, as it is sent (`status-apply`:
 * server-side apply of the status subresource, forced, under the resourceVersion read) and as a
 * JSON Patch that sets the whole status under the same precondition (`status-json`), and as a
 * JSON merge patch of what changed since the status the resource has (`status-merge`, under the
 * same precondition; {@link mergePatchOf}): what a create or an adoption costs the API server
 * per status write, beside its label write, and what sending only the difference would save. The
 * writes run in the order given, so `--write status-apply,labels` times label writes on objects
 * that have a status, as the operator's have.
 *
 * Each round also reads the API server's CPU time (`/proc/<pid>/stat`) and reports it per write
 * (`details.apiServerCpuMsPerWrite`): what the server spends on a write whatever else the machine
 * runs, where writes/s moves with the rest of its load.
 *
 * `--crd-rules off` installs the CRDs with their CEL rules (`x-kubernetes-validations`) left out,
 * to measure what the rules cost each write: the API server evaluates every rule of the whole
 * object on each write, a status or label write included (validation ratcheting only forgives
 * their errors on unchanged values). Never what the operator ships.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { CustomResources, DEPLOYMENTS, FIELD_MANAGER } from "../../src/kube/custom-resources.ts";
import { collectionPath, type DeploymentObject } from "../../src/kube/object.ts";
import { patchShardLabels } from "../../src/kube/shards.ts";
import { isRecord, jsonEqual } from "../../src/runtime/json.ts";
import { DRAIN_LABEL, OWNER_LABEL } from "../../src/sharding/labels.ts";
import { ControlPlane } from "../controlplane/harness.ts";
import { type Benchmark, type BenchRow, benchDeploymentBody } from "./harness.ts";
import { APPLY_CONCURRENCY, planeClient, pool, progress, round } from "./operator-run.ts";
import { cpuSeconds } from "./probes.ts";

const NS = "label-writes";

/** Parses a comma-separated list of positive whole numbers, naming the option on a bad one. */
function wholeNumbers(option: string, text: string): number[] {
  const values = text.split(",").map((t) => Number(t.trim()));
  if (values.length === 0 || values.some((v) => !Number.isInteger(v) || v < 1))
    throw new Error(`--${option}: '${text}' is not a comma-separated list of whole numbers ≥ 1`);
  return values;
}

/** The writes this benchmark can time (see the module comment). */
const WRITES = ["labels", "status-apply", "status-json", "status-merge"] as const;
type Write = (typeof WRITES)[number];

function writeKinds(text: string): Write[] {
  const kinds = text.split(",").map((t) => t.trim());
  const unknown = kinds.find((k) => !(WRITES as readonly string[]).includes(k));
  if (unknown !== undefined) throw new Error(`--write: '${unknown}' is not one of ${WRITES.join(", ")}`);
  return kinds as Write[];
}

/** A reconciled resource's status, as large as a steady one (each round a real change: `round`). */
function benchStatus(name: string, round: number): Record<string, unknown> {
  const at = new Date(Date.UTC(2026, 0, 1, 0, 0, round)).toISOString().replace(/\.\d+Z$/, "Z");
  const id = `0000${round}`.slice(-4);
  const condition = (type: string, status: string, reason: string, message: string) => ({
    type,
    status,
    observedGeneration: 1,
    lastTransitionTime: at,
    reason,
    message,
  });
  return {
    connection: "default/bench",
    deploymentId: `3f1c2a9e-5b7d-4e21-9c3a-8d6f${id}a1b2c3`,
    tenantId: "7a0e4c2b-1d3f-4b5a-8c9e-0f1a2b3c4d5e",
    remoteStatus: "ACTIVE",
    latestRevisionId: `9b8c7d6e-5f4a-4b3c-8d2e-1f0a${id}b8c7`,
    latestRevisionStatus: "DEPLOYED",
    activeRevisionId: `9b8c7d6e-5f4a-4b3c-8d2e-1f0a${id}b8c7`,
    shortRevisions: "9b8c7d6e/9b8c7d6e",
    observedGeneration: 1,
    appliedGeneration: 1,
    appliedSecretsHash: "hmac-sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
    ...(round % 2 === 0 ? { createRequestedAt: at } : {}),
    conditions: [
      condition("Ready", "True", "Synced", `deployment ${name} is live`),
      condition("Reconciling", "False", "Synced", ""),
      condition("Stalled", "False", "Synced", ""),
      condition("Synced", "True", "Synced", "the spec is applied"),
    ],
  };
}

/**
 * The JSON merge patch (RFC 7386) that turns `from` into `to`: the keys whose values differ, an
 * object patched key by key, anything else (arrays included) replaced whole, a key `to` lacks set
 * to null. Undefined when nothing differs. A null in `to` cannot be said by a merge patch (it
 * removes the key): such a value must not be sent this way.
 */
export function mergePatchOf(
  from: Record<string, unknown>,
  to: Record<string, unknown>,
): Record<string, unknown> | undefined {
  const patch: Record<string, unknown> = {};
  for (const key of Object.keys(from)) if (!(key in to)) patch[key] = null;
  for (const [key, value] of Object.entries(to)) {
    const before = from[key];
    if (isRecord(before) && isRecord(value)) {
      const inner = mergePatchOf(before, value);
      if (inner !== undefined) patch[key] = inner;
    } else if (!jsonEqual(before, value)) patch[key] = value;
  }
  return Object.keys(patch).length > 0 ? patch : undefined;
}

/** Drops every `x-kubernetes-validations` below `node` (in place); returns how many rules went. */
export function dropRules(node: unknown): number {
  if (Array.isArray(node)) return node.reduce((sum: number, item) => sum + dropRules(item), 0);
  if (node === null || typeof node !== "object") return 0;
  const record = node as Record<string, unknown>;
  const rules = record["x-kubernetes-validations"];
  const dropped = Array.isArray(rules) ? rules.length : 0;
  delete record["x-kubernetes-validations"];
  return Object.values(record).reduce((sum: number, value) => sum + dropRules(value), dropped);
}

/** Installs the repository's CRDs without their CEL rules (`--crd-rules off`). */
async function installWithoutRules(plane: ControlPlane): Promise<void> {
  const source = join(import.meta.dirname, "..", "..", "crds");
  const dir = mkdtempSync(join(tmpdir(), "dms-crds-without-rules-"));
  try {
    let dropped = 0;
    for (const file of readdirSync(source).filter((f) => f.endsWith(".yaml"))) {
      const docs = parseAllDocuments(readFileSync(join(source, file), "utf8")).map((doc) => doc.toJS());
      dropped += dropRules(docs);
      writeFileSync(join(dir, file), docs.map((doc) => JSON.stringify(doc)).join("\n---\n"));
    }
    progress(`label-writes: the CRDs installed without their ${dropped} CEL rules`);
    await plane.installCrds(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const percentile = (sorted: readonly number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0;

/** See the module comment. */
export const benchmark: Benchmark = {
  name: "label-writes",
  description:
    "shard label patches (resourceVersion precondition) against the API server at several writes in flight: writes/s, p50 / p99 (own control plane)",
  options: {
    "label-resources": {
      description: "resources created, each patched once per level of writes in flight",
      default: "2000",
    },
    "in-flight": { description: "writes in flight, comma-separated, run in turn", default: "8,16,32,64" },
    write: {
      description: `the writes timed, comma-separated, each at every level in turn: ${WRITES.join(", ")}`,
      default: "labels",
    },
    "crd-rules": {
      description: "on: the CRDs as shipped; off: their CEL rules left out (what the rules cost each write)",
      default: "on",
    },
  },
  async run({ args }) {
    const n = wholeNumbers("label-resources", args["label-resources"] ?? "2000")[0] ?? 2000;
    const levels = wholeNumbers("in-flight", args["in-flight"] ?? "8,16,32,64");
    const writes = writeKinds(args.write ?? "labels");
    const rules = args["crd-rules"] ?? "on";
    if (rules !== "on" && rules !== "off")
      throw new Error(`--crd-rules: '${rules}' is neither 'on' nor 'off'`);
    const plane = await ControlPlane.start();
    // Read while it runs: a server gone mid-round fails the read, never reports 0 ms.
    const apiServerCpu = () => {
      const pid = plane.pids.apiServer;
      if (pid === undefined) throw new Error("label-writes: the API server is not running");
      return cpuSeconds(pid);
    };
    const rows: BenchRow[] = [];
    const cpuMsPerWrite: Record<string, number> = {};
    // Label writes after a status write are on objects that have one, as the operator's have.
    let withStatus = false;
    const load: number[] = [loadavg()[0] ?? 0];
    try {
      if (rules === "on") await plane.installCrds();
      else await installWithoutRules(plane);
      const { client } = await planeClient(plane, "dms-label-writes-bench");
      await client.request({ method: "POST", path: "/api/v1/namespaces", body: { metadata: { name: NS } } });
      // The operator's own status write (server-side apply), a JSON Patch of the whole status, and
      // a merge patch of what changed since the status each resource was last written with.
      const deployments = new CustomResources<DeploymentObject, unknown>(DEPLOYMENTS, { client });
      const statuses = new Map<string, Record<string, unknown>>();
      const writeStatus = (
        write: Write,
        ref: { namespace: string; name: string },
        rv: string,
        status: Record<string, unknown>,
      ): Promise<unknown> => {
        const signal = AbortSignal.timeout(60_000);
        if (write === "status-apply") return deployments.patchStatus(ref, status, signal, rv);
        if (write === "status-merge")
          return client.request({
            method: "PATCH",
            path: `${collectionPath(DEPLOYMENTS, NS)}/${encodeURIComponent(ref.name)}/status`,
            query: { fieldManager: FIELD_MANAGER },
            contentType: "application/merge-patch+json",
            body: {
              metadata: { resourceVersion: rv },
              status: mergePatchOf(statuses.get(ref.name) ?? {}, status) ?? {},
            },
            signal,
          });
        return client.request({
          method: "PATCH",
          path: `${collectionPath(DEPLOYMENTS, NS)}/${encodeURIComponent(ref.name)}/status`,
          query: { fieldManager: FIELD_MANAGER },
          contentType: "application/json-patch+json",
          body: [
            { op: "replace", path: "/metadata/resourceVersion", value: rv },
            { op: "add", path: "/status", value: status },
          ],
          signal,
        });
      };
      const versions: string[] = new Array(n);
      const names = Array.from({ length: n }, (_, i) => `lw-${String(i).padStart(5, "0")}`);
      await pool(n, APPLY_CONCURRENCY, async (i) => {
        const created = (await client.request({
          method: "POST",
          path: collectionPath(DEPLOYMENTS, NS),
          body: benchDeploymentBody(names[i] ?? ""),
        })) as DeploymentObject;
        versions[i] = created.metadata.resourceVersion ?? "";
      });
      progress(`label-writes: ${n} resources created`);
      const rounds = writes.flatMap((write) => levels.map((inFlight) => ({ write, inFlight })));
      const named = new Set<string>();
      for (const [round_, { write, inFlight }] of rounds.entries()) {
        // An owner label, then a drain beside it, then the owner again: each round a real change.
        const labels: Record<string, string | null> =
          round_ % 2 === 0
            ? { [OWNER_LABEL]: `replica-${round_}`, [DRAIN_LABEL]: null }
            : { [DRAIN_LABEL]: `replica-${round_ + 1}` };
        const took: number[] = [];
        let errors = 0;
        const cpuBefore = apiServerCpu();
        const started = performance.now();
        await pool(n, inFlight, async (i) => {
          const ref = { namespace: NS, name: names[i] ?? "" };
          const at = performance.now();
          try {
            if (write === "labels") {
              const outcome = await patchShardLabels(
                client,
                ref,
                versions[i] ?? "",
                labels,
                AbortSignal.timeout(60_000),
              );
              if (outcome !== "written") errors += 1;
            } else {
              const status = benchStatus(ref.name, round_);
              const written = (await writeStatus(write, ref, versions[i] ?? "", status)) as
                | DeploymentObject
                | undefined;
              versions[i] = written?.metadata.resourceVersion ?? versions[i] ?? "";
              statuses.set(ref.name, status);
            }
          } catch (err) {
            if (errors === 0) progress(`label-writes: ${write}: ${String(err).slice(0, 400)}`);
            errors += 1;
          }
          took.push(performance.now() - at);
        });
        const seconds = (performance.now() - started) / 1000;
        const cpuMs = (apiServerCpu() - cpuBefore) * 1000;
        // A label patch's answer is discarded: read the new versions back in one list.
        const list = (await client.request({ method: "GET", path: collectionPath(DEPLOYMENTS, NS) })) as {
          items: DeploymentObject[];
        };
        const byName = new Map(list.items.map((o) => [o.metadata.name, o.metadata.resourceVersion ?? ""]));
        for (const [i, name] of names.entries()) versions[i] = byName.get(name) ?? versions[i] ?? "";
        took.sort((a, b) => a - b);
        if (write !== "labels") withStatus = true;
        const kind =
          write !== "labels"
            ? `${write}, ${inFlight} in flight`
            : withStatus
              ? `labels on a status, ${inFlight} in flight`
              : `${inFlight} in flight`;
        // A write timed again at the same level is its own row (and figure): the objects have
        // grown by then (managed fields, a status), and one figure would overwrite the other.
        const variant = named.has(kind) ? `${kind}, round ${round_ + 1}` : kind;
        named.add(kind);
        // The API server's CPU a write: steadier than writes/s, which the rest of the machine moves.
        cpuMsPerWrite[variant] = round(cpuMs / n, 2);
        rows.push({
          variant,
          requests: n,
          seconds: round(seconds, 2),
          requestsPerSecond: round(n / seconds, 1),
          p50Ms: round(percentile(took, 50), 1),
          p99Ms: round(percentile(took, 99), 1),
          errors,
        });
        progress(
          `label-writes: ${variant}: ${round(n / seconds, 1)} writes/s, ${round(cpuMs / n, 2)} ms of the API server's CPU a write`,
        );
      }
    } finally {
      await plane.stop();
    }
    load.push(loadavg()[0] ?? 0);
    return {
      rows,
      details: {
        resources: n,
        crdRules: rules,
        apiServerCpuMsPerWrite: cpuMsPerWrite,
        loadAverage: { start: round(load[0] ?? 0, 1), end: round(load[1] ?? 0, 1) },
      },
    };
  },
};
