/**
 * `npm run demo`: the operator end to end on this machine, no account and no cluster needed.
 *
 * Starts a local control plane (etcd + kube-apiserver, built once into a cache if missing), the
 * service simulator seeded with `src/simulator/seed.example.yaml`, and the operator as a child
 * process; applies `manifests/samples` into namespace `demo` through `manifests/samples-simulator`,
 * the overlay that puts in the seed's values where a sample says `# replace:`; shows a live table until every
 * resource is Ready; bumps one image and shows the new revision; prints how to explore; stops
 * everything. `--keep` stays up until Ctrl-C. Ctrl-C at any point stops everything.
 * Exit codes: 0 done, 1 failed or timed out, 2 bad arguments, 130 interrupted.
 */
import { mkdtempSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { parseDuration } from "../src/duration.ts";
import { loadSeed } from "../src/simulator/seed.ts";
import { type RunningSimulator, startSimulator } from "../src/simulator/server.ts";
import { ControlPlane } from "../test/controlplane/harness.ts";
import { freePort } from "../test/controlplane/net.ts";
import { type Screen, watchTable } from "./demo/live.ts";
import { type Exit, OperatorProcess } from "./demo/operator-process.ts";
import { describeNotDone, isDone, type ResourceRow, rowsFromList } from "./demo/status.ts";

const ROOT = join(import.meta.dirname, "..");
const NAMESPACE = "demo";
/** manifests/samples with the seed's values in place of the ones a tenant replaces. */
const SAMPLES = "manifests/samples-simulator";
/** The resource the demo edits, and the image it moves to. */
const EDITED = { name: "summarizer", imageUri: "summarizer:2025-07-01" };
/** ObserveOnly sample: the operator only reads a deployment of this name, so the demo seeds one. */
const OBSERVED = "intake-bot";

const HELP = `usage: npm run demo [-- --keep] [-- --timeout 120s] [-- --log-file <path>]

  --keep             stay up after the demo until Ctrl-C, to explore with kubectl and curl
  --timeout <dur>    how long to wait for the samples to become Ready (default 120s)
  --log-file <path>  where the operator's log goes (default ~/.cache/dms-operator/demo/operator.log)
`;

class Interrupted extends Error {
  override readonly name = "Interrupted";
}

/** Everything started so far, stopped in reverse order. */
interface Parts {
  plane?: ControlPlane;
  simulator?: RunningSimulator;
  operator?: OperatorProcess;
}

const out = process.stdout;
const say = (line: string) => out.write(`${line}\n`);

async function main(argv: string[]): Promise<number> {
  const options = parseOptions(argv);
  if (typeof options === "string") {
    process.stderr.write(options);
    return options === HELP ? 0 : 2;
  }
  const interrupt = new AbortController();
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    if (++signals > 1) process.exit(130); // exit handlers still kill what is left
    say(`\n${signal}: stopping everything…`);
    interrupt.abort(new Interrupted(signal));
  };
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, onSignal);

  const parts: Parts = {};
  let code = 0;
  try {
    await demo(parts, options, interrupt.signal);
    if (options.keep) {
      say("\nEverything stays up until you press Ctrl-C.");
      await new Promise((resolve) => interrupt.signal.addEventListener("abort", resolve, { once: true }));
    }
  } catch (error) {
    code = interrupt.signal.aborted ? 130 : 1;
    if (code === 1) {
      process.stderr.write(`\ndemo failed: ${error instanceof Error ? error.message : String(error)}\n`);
      if (parts.operator) process.stderr.write(`the operator's log: ${parts.operator.logPath}\n`);
    }
  }
  const operatorExit = await stopAll(parts);
  // A clean run ends with a clean operator shutdown; after Ctrl-C the control plane may already be gone.
  if (code === 0 && !options.keep && operatorExit && operatorExit.code !== 0) {
    process.stderr.write(
      `the operator did not shut down cleanly (${operatorExit.signal ?? `exit code ${operatorExit.code}`}); see ${options.logFile}\n`,
    );
    return 1;
  }
  return code;
}

interface DemoOptions {
  keep: boolean;
  timeoutMs: number;
  logFile: string;
}

function parseOptions(argv: string[]): DemoOptions | string {
  try {
    const { values } = parseArgs({
      args: argv,
      options: {
        keep: { type: "boolean", default: false },
        timeout: { type: "string", default: "120s" },
        "log-file": { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
    });
    if (values.help) return HELP;
    const timeoutMs = parseDuration(values.timeout);
    if (timeoutMs === undefined)
      return `--timeout: ${JSON.stringify(values.timeout)} is not a duration\n${HELP}`;
    const cache =
      process.env.DMS_CACHE_DIR ??
      join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "dms-operator");
    return {
      keep: values.keep,
      timeoutMs,
      logFile: values["log-file"] ?? join(cache, "demo", "operator.log"),
    };
  } catch (error) {
    return `${error instanceof Error ? error.message : String(error)}\n${HELP}`;
  }
}

async function demo(parts: Parts, options: DemoOptions, signal: AbortSignal): Promise<void> {
  say("1. Starting a local Kubernetes control plane (etcd + kube-apiserver).");
  say("   The first run builds them from source with Go (several minutes); later runs reuse the cache.");
  parts.plane = await ControlPlane.start({
    log: (line) => {
      if (!line.startsWith("[")) say(`   ${line}`); // harness progress, not the servers' own chatter
    },
  });
  signal.throwIfAborted();
  const plane = parts.plane;
  const kubectl = async (args: string[]) => {
    const result = await plane.kubectl(args);
    if (result.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${result.stderr.trim()}`);
    return result.stdout;
  };
  const crds = await plane.installCrds();
  say(`   installed CRDs ${crds.join(", ")}`);

  say("2. Starting the service simulator, seeded with src/simulator/seed.example.yaml.");
  const seed = await loadSeed(join(ROOT, "src", "simulator", "seed.example.yaml"));
  // ObserveOnly never creates: without a deployment of this name it would stay Ready=False NotFound.
  seed.deployments = [...(seed.deployments ?? []), { name: OBSERVED, source: "internal_template" }];
  parts.simulator = await startSimulator({ seed });
  say(`   ${parts.simulator.url} (plus a deployment "${OBSERVED}" for the ObserveOnly sample to observe)`);

  const metricsPort = await freePort();
  say(`3. Starting the operator: node src/cli.ts run … (log: ${options.logFile})`);
  parts.operator = OperatorProcess.start({
    args: [
      `--kubeconfig=${plane.kubeconfigPath}`,
      `--base-url=${parts.simulator.url}`,
      "--no-leader-elect",
      `--metrics-bind-address=127.0.0.1:${metricsPort}`,
      // Loopback only, for a curl without a token; in a cluster /metrics is HTTPS and reviewed.
      "--metrics-secure=false",
      "--health-probe-bind-address=127.0.0.1:0",
      "--poll-interval=1s",
    ],
    logPath: options.logFile,
    workDir: mkdtempSync(join(tmpdir(), "dms-demo-")),
  });
  const operator = parts.operator;

  say(
    `4. kubectl create namespace ${NAMESPACE}; kubectl apply -k ${SAMPLES} -n ${NAMESPACE}   # the samples, with the simulator's values`,
  );
  await kubectl(["create", "namespace", NAMESPACE]);
  const applied = await kubectl(["apply", "-k", join(ROOT, SAMPLES), "-n", NAMESPACE]);
  for (const line of applied.trimEnd().split("\n")) say(`   ${line}`);

  const read = async () => {
    const result = await plane.kubectl(["get", "dmsd", "-n", NAMESPACE, "-o", "json"], { timeoutMs: 10_000 });
    if (result.code !== 0) throw new Error(result.stderr.trim());
    return rowsFromList(JSON.parse(result.stdout));
  };
  const watch = (until: (rows: readonly ResourceRow[]) => boolean) =>
    watchTable({
      screen: out as Screen,
      read,
      until,
      check: () => operator.assertRunning(),
      timeoutMs: options.timeoutMs,
      signal,
    });

  say(
    `\n5. Waiting until every resource is Ready and Synced at its current generation (up to ${options.timeoutMs / 1000} s).`,
  );
  const all = await watch((rows) => rows.length > 0 && rows.every(isDone));
  if (!all.done)
    throw new Error(
      `not Ready after ${options.timeoutMs / 1000} s:\n  ${describeNotDone(all.rows).join("\n  ")}`,
    );
  say(
    `   All ${all.rows.length} Ready. (${OBSERVED} is ObserveOnly: Ready because the service has a deployment of that name.)`,
  );

  const before = all.rows.find((r) => r.name === EDITED.name);
  say(`\n6. Editing ${EDITED.name}: image ${EDITED.imageUri}, as a GitOps commit would.`);
  const patch = { spec: { sourceRevisionConfig: { imageUri: EDITED.imageUri } } };
  say(`   kubectl patch dmsd ${EDITED.name} -n ${NAMESPACE} --type=merge -p '${JSON.stringify(patch)}'`);
  await kubectl(["patch", "dmsd", EDITED.name, "-n", NAMESPACE, "--type=merge", "-p", JSON.stringify(patch)]);
  const edited = await watch((rows) =>
    rows.some(
      (r) => r.name === EDITED.name && isDone(r) && r.latest !== undefined && r.latest !== before?.latest,
    ),
  );
  const after = edited.rows.find((r) => r.name === EDITED.name);
  if (!edited.done || !after)
    throw new Error(
      `${EDITED.name} did not roll out a new revision: ${describeNotDone(edited.rows).join("; ")}`,
    );
  say(
    `   ${EDITED.name}: new revision ${after.latest} (was ${before?.latest ?? "none"}), active ${after.active}`,
  );

  explore(plane, parts.simulator, operator, metricsPort, options.keep);
}

function explore(
  plane: ControlPlane,
  simulator: RunningSimulator,
  operator: OperatorProcess,
  metricsPort: number,
  keep: boolean,
): void {
  say(`\n7. Explore${keep ? "" : " (run `npm run demo -- --keep` to keep it all up while you do)"}:`);
  say(`   export KUBECONFIG=${plane.kubeconfigPath}`);
  say(`   alias kubectl=${plane.binaries.kubectl}   # or any kubectl`);
  say(`   kubectl get dmsd -n ${NAMESPACE}`);
  say(`   kubectl describe dmsd ${EDITED.name} -n ${NAMESPACE}   # conditions and events`);
  say(`   kubectl wait --for=condition=Ready dmsd --all -n ${NAMESPACE} --timeout=60s`);
  // The CLI reads the service for `revisions` and `logs`: the default connection's base URL is the
  // simulator's (it takes no key). Node first on PATH: `kubectl-dms` runs on the first `node` found.
  say(
    `   export PATH=${dirname(process.execPath)}:$PATH DMS_BASE_URL=${simulator.url}   # Node ${process.versions.node}, the simulator`,
  );
  say("   npm link   # dms-operator and kubectl-dms from this clone");
  say(`   kubectl dms status -n ${NAMESPACE}`);
  say(`   kubectl dms revisions ${EDITED.name} -n ${NAMESPACE}`);
  say(`   curl -s '${simulator.url}/v2/deployments?limit=100'   # the simulated service`);
  say(`   curl -s ${simulator.url}/_sim/state`);
  say(`   curl -s http://127.0.0.1:${metricsPort}/metrics   # the operator's metrics`);
  say(`   the operator's log: ${operator.logPath}`);
}

async function stopAll(parts: Parts): Promise<Exit | undefined> {
  const stopped: string[] = [];
  const exit = await parts.operator?.stop(10_000);
  if (exit) stopped.push("operator");
  if (parts.simulator) {
    await parts.simulator.close();
    stopped.push("simulator");
  }
  if (parts.plane) {
    await parts.plane.stop();
    stopped.push("control plane");
  }
  if (stopped.length > 0) say(`Stopped: ${stopped.join(", ")}.`);
  return exit;
}

process.exitCode = await main(process.argv.slice(2));
