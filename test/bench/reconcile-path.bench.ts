/**
 * The path one resource takes through the operator, as files: an adopted resource (the simulator
 * already has its deployment; the resource takes it over), an edit of its image, and V8's
 * function coverage of the operator from the edit's watch event to the status write that
 * answers it. Counted: the `src/` files with a function executed in that window, by folder, with
 * each file's lines (those over 400 flagged, so the count cannot fall by merging files). Three
 * edits are measured, each in its own window, and a file counts when it ran in two of them or
 * three: a timer of the operator's that fell in one window is listed apart, as beside the path.
 * Beside the count, the lines: of the path's files together (and so the fewest files of 400 lines
 * that could hold them, what merging alone could reach), and of them, the lines of the functions
 * that ran in some window, which is how much of that code an edit runs; and a bound: the lines
 * that would stay were every function an edit never enters taken out of its file, and the fewest
 * files of 400 lines each folder could hold them in (`unentered-functions.ts` says how).
 *
 * The operator runs from its sources (`node src/cli.ts run`, as `npm start` does) with its
 * inspector on loopback, against a control plane of the benchmark's own and the simulator over
 * loopback HTTP. Once the resource is Ready and the operator quiet, coverage starts and is taken
 * once (which sets every count to zero: what ran before the window is not counted); then an
 * edit is sent, the benchmark waits for the operator's status write for it (seen through its own
 * watch), lets the reconcile finish (nothing more happens for 300 ms: what it schedules after its
 * write belongs to the path) and takes coverage again. What runs beside the reconcile in most
 * windows (the watch's bookkeeping) counts too: it is the cost of following one edit.
 *
 * With `RECONCILE_PATH_FUNCTIONS=<file>`, the functions that ran (name, offset, calls) are
 * written to that file, one object per edit, by source file: where to look when a file enters
 * the path; and to `<file>.unentered.json`, the functions of each file an edit never enters.
 *
 * Reported, never asserted; runs accumulate in `docs/bench/reconcile-path.json`, one per commit.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DEPLOYMENTS } from "../../src/kube/custom-resources.ts";
import { collectionPath, type DeploymentObject, decodeDeployment } from "../../src/kube/object.ts";
import { Reflector } from "../../src/kube/reflector.ts";
import { startSimulator } from "../../src/simulator/server.ts";
import { startBenchPlane } from "../support/bench-plane.ts";
import { type Benchmark, benchDeploymentBody, benchImageEdit, benchSeedDeployment } from "./harness.ts";
import { Inspector } from "./inspector.ts";
import { commitOf, LOGS, ReadyWatch, type Setup, startOperator, Tap } from "./operator-run.ts";
import {
  executedFiles,
  executedFunctions,
  executedSpans,
  lineCount,
  linesWithin,
  pathFigures,
  pathListing,
  pathOfEdits,
  savePathRun,
} from "./reconcile-path-report.ts";
import { unenteredLine, unenteredOut } from "./unentered-functions.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const SRC = join(ROOT, "src");
const NAMESPACE = "reconcile-path";
const RESOURCE = "adopted";
/** Quiet before the window: no service call and no change of the resource for this long. */
const QUIET_MS = 2_000;
/** After the status write: the window closes once nothing more happened for this long. */
const SETTLE_MS = 300;
/** Edits measured, each in its own window: the path is what most of them ran (see pathOfEdits). */
const EDITS = 3;
const DESCRIPTION =
  "the src/ files (and folders) with a function executed from one edit's watch event to its status write, for an adopted resource (V8 coverage of the operator from its sources; own control plane, simulator)";

/** See the module comment. */
export const benchmark: Benchmark = {
  name: "reconcile-path",
  description: DESCRIPTION,
  writesOwnReport: true,
  async run() {
    const commit = commitOf();
    const { plane, client, work, stop } = await startBenchPlane("reconcile-path");
    const tap = new Tap();
    const sim = await startSimulator({
      seed: { deployments: [benchSeedDeployment(RESOURCE)] },
      timing: { readyAfterMs: 0, revisionActiveAfterMs: 0 },
      onRequest: tap.hook,
    });
    const stopWatch = new AbortController();
    const resources = new Reflector<DeploymentObject>({
      client,
      resource: DEPLOYMENTS,
      namespace: NAMESPACE,
      decode: decodeDeployment,
    });
    let changedAt = performance.now();
    let onStatusWrite: ((o: DeploymentObject) => void) | undefined;
    let statusWrites = 0;
    resources.subscribe({
      onAdd: () => {
        changedAt = performance.now();
      },
      onUpdate: (old, o) => {
        changedAt = performance.now();
        if (JSON.stringify(old.status) === JSON.stringify(o.status)) return;
        statusWrites++;
        onStatusWrite?.(o);
      },
      onDelete: () => {},
    });
    const ready = new ReadyWatch(client, NAMESPACE);
    let inspector: Inspector | undefined;
    try {
      await client.request({
        method: "POST",
        path: "/api/v1/namespaces",
        body: { metadata: { name: NAMESPACE } },
      });
      await client.request({
        method: "POST",
        path: collectionPath(DEPLOYMENTS, NAMESPACE),
        body: benchDeploymentBody(RESOURCE),
      });
      const watching = resources.run(stopWatch.signal);
      await resources.synced;
      await ready.start();
      const setup: Setup = {
        entry: join(SRC, "cli.ts"),
        logs: join(LOGS, "reconcile-path"),
        nodeOptions: undefined,
        runtimeEnv: {},
        // No resync pass in the window.
        resync: "10m",
        commit,
        profile: work,
      };
      const operator = await startOperator(setup, plane.kubeconfigPath, NAMESPACE, sim.url, work);
      try {
        await operator.ready();
        await ready.untilReady(1, operator.process, 120_000);
        const adopted = resources.list()[0];
        if (
          adopted?.status === undefined ||
          !JSON.stringify(adopted.status).includes(sim.store.list()[0]?.id ?? "-")
        )
          throw new Error(
            `the resource did not adopt the seeded deployment: ${JSON.stringify(adopted?.status)}`,
          );
        /** Waits until neither the service nor the resource saw anything for QUIET_MS. */
        const quiet = async () => {
          const deadline = Date.now() + 60_000;
          while (performance.now() - Math.max(changedAt, tap.lastRequestAt) < QUIET_MS) {
            if (Date.now() > deadline) throw new Error("the operator was not quiet for 2 s within 60 s");
            await sleep(100);
          }
        };
        await quiet();
        inspector = await Inspector.connect(operator.inspectPort);
        await inspector.startPreciseCoverage();
        sim.resetCounters();
        statusWrites = 0;
        const windows: string[][] = [];
        const functions: Array<Record<string, string[]>> = [];
        const spans = new Map<string, Array<readonly [number, number]>>();
        for (let edit = 1; edit <= EDITS; edit++) {
          if (edit > 1) await quiet();
          await inspector.takePreciseCoverage();
          const written = new Promise<DeploymentObject>((resolve) => {
            onStatusWrite = resolve;
          });
          await client.request(benchImageEdit(NAMESPACE, RESOURCE, edit + 1));
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([
            written,
            new Promise((_, reject) => {
              timer = setTimeout(
                () => reject(new Error(`no status write within 60 s:\n${operator.process.logTail(15)}`)),
                60_000,
              );
            }),
          ]).finally(() => clearTimeout(timer));
          // The reconcile's tail after its write (what it schedules next) belongs to the path: the
          // window closes once nothing more happened for SETTLE_MS.
          const settled = Date.now() + 30_000;
          while (performance.now() - Math.max(changedAt, tap.lastRequestAt) < SETTLE_MS) {
            if (Date.now() > settled)
              throw new Error("the operator did not settle within 30 s of its status write");
            await sleep(20);
          }
          const coverage = await inspector.takePreciseCoverage();
          windows.push(executedFiles(coverage, SRC));
          functions.push(executedFunctions(coverage, SRC));
          for (const [file, ran] of Object.entries(executedSpans(coverage, SRC)))
            spans.set(file, [...(spans.get(file) ?? []), ...ran]);
        }
        const serviceCallsByRoute = sim.counters();
        await inspector.stopPreciseCoverage();
        const { files, beside } = pathOfEdits(windows);
        const textOf = (file: string) => readFileSync(join(SRC, file), "utf8");
        const figures = pathFigures(
          files,
          (file) => lineCount(textOf(file)),
          (file) => linesWithin(textOf(file), spans.get(file) ?? []),
        );
        const { takenOut, ...bound } = unenteredOut(files, textOf, (file) => spans.get(file) ?? []);
        const functionsOut = process.env.RECONCILE_PATH_FUNCTIONS;
        if (functionsOut) {
          writeFileSync(functionsOut, JSON.stringify(functions, null, 1));
          writeFileSync(`${functionsOut}.unentered.json`, JSON.stringify(takenOut, null, 1));
        }
        const out = join(ROOT, "docs", "bench", "reconcile-path.json");
        savePathRun(out, DESCRIPTION, {
          commit,
          date: new Date().toISOString(),
          node: process.version,
          ...figures,
          serviceCallsByRoute,
          statusWrites,
          edits: EDITS,
          filesByEdit: Object.fromEntries(windows.map((w, i) => [String(i + 1), w.length])),
          beside,
          unenteredOut: bound,
        });
        const besideLines = beside.map((b) => `beside, in ${b.edits} of ${EDITS} windows: ${b.file}`);
        process.stdout.write(
          `${[...pathListing(figures), unenteredLine(bound), `each edit's window: ${windows.map((w) => w.length).join(", ")} files`, ...besideLines].join("\n")}\nwritten ${out}\n`,
        );
        return {
          rows: [],
          table: {
            head: [
              "commit",
              "files",
              "folders",
              "files over 400 lines",
              "lines (fewest files)",
              "lines that ran",
              "lines were unentered functions out (fewest files)",
              "status writes",
              "service calls in the window",
            ],
            rows: [
              [
                commit,
                figures.files,
                figures.folders,
                figures.longFiles.length,
                `${figures.lines} (${figures.fewestFiles})`,
                figures.ranLines ?? "",
                `${bound.lines} (${bound.fewestFiles})`,
                statusWrites,
                Object.entries(serviceCallsByRoute)
                  .map(([route, byStatus]) => `${route} ${JSON.stringify(byStatus)}`)
                  .join("; "),
              ],
            ],
          },
        };
      } finally {
        inspector?.close();
        await operator.process.stop(30_000);
        stopWatch.abort();
        await watching;
      }
    } finally {
      await ready.stop();
      await sim.close();
      await stop();
    }
  },
};
