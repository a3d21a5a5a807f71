/**
 * Helpers of the end-to-end tests: install from `manifests/` with kubectl, mint a token for the
 * manifests' own ServiceAccount, and run `dms-operator run` as a child process with that token and
 * the very arguments the manifests give the container, so a permission the manifests lack fails
 * the test just as it would fail in a cluster.
 */
import { readFileSync } from "node:fs";
import { mkdtemp, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parse, parseAllDocuments } from "yaml";
import { OperatorProcess } from "../../scripts/demo/operator-process.ts";
import { writeTokenKubeconfig } from "../controlplane/kubeconfig.ts";
import { freePort } from "../controlplane/net.ts";
import { kubectl, kubectlOk, testKubeconfigPath, testServer } from "../support/cluster.ts";
import { nodeCacheEnv } from "../support/node-env.ts";

/** The repository's `manifests/` directory. */
export const MANIFESTS = join(import.meta.dirname, "..", "..", "manifests");

/** Objects of a multi-document YAML text (e.g. `kubectl kustomize` output), as plain values. */
export function documents(text: string): Record<string, unknown>[] {
  return parseAllDocuments(text)
    .map((doc) => doc.toJS() as unknown)
    .filter((v): v is Record<string, unknown> => typeof v === "object" && v !== null);
}

/** The operator container as `kubectl kustomize <dir>` renders it (only the fields read here). */
interface OperatorContainer {
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: unknown }[];
}

/** The "operator" container of the Deployment `kubectl kustomize <dir>` renders; throws when there is none. */
async function operatorContainer(dir: string): Promise<OperatorContainer> {
  const rendered = documents(await kubectlOk(["kustomize", dir]));
  const deployment = rendered.find((o) => o.kind === "Deployment") as
    | { spec?: { template?: { spec?: { containers?: (OperatorContainer & { name: string })[] } } } }
    | undefined;
  const container = deployment?.spec?.template?.spec?.containers?.find((c) => c.name === "operator");
  if (!container) throw new Error(`${dir} renders no Deployment with an "operator" container`);
  return container;
}

/**
 * The operator container's `args` in the Deployment that `kubectl kustomize <dir>` renders, with
 * `$(VAR)` references expanded from `env` as the kubelet would. Throws when there is no such container.
 */
export async function containerArgs(dir: string, env: Record<string, string>): Promise<string[]> {
  const { args } = await operatorContainer(dir);
  if (!args) throw new Error(`${dir} renders an "operator" container without args`);
  return args.map((arg) => arg.replace(/\$\(([A-Z_]+)\)/g, (all, name: string) => env[name] ?? all));
}

/**
 * The environment variables the operator container sets literally (`value`, not `valueFrom`) in
 * the Deployment `kubectl kustomize <dir>` renders: its runtime (NODE_OPTIONS, MALLOC_*), which a
 * child process must get too for its memory to be bounded as in the pod.
 */
export async function containerEnv(dir: string): Promise<Record<string, string>> {
  const { env = [] } = await operatorContainer(dir);
  return Object.fromEntries(env.flatMap((e) => (e.value === undefined ? [] : [[e.name, e.value] as const])));
}

/**
 * A kubeconfig (written into `dir`) for the run's API server that authenticates as
 * ServiceAccount `namespace/name` with a token from the TokenRequest API.
 */
export async function serviceAccountKubeconfig(
  namespace: string,
  name: string,
  dir: string,
): Promise<string> {
  const token = (await kubectlOk(["create", "token", name, "-n", namespace, "--duration=3600s"])).trim();
  const admin = parse(readFileSync(testKubeconfigPath(), "utf8")) as {
    clusters: { cluster: { "certificate-authority-data": string } }[];
  };
  const caData = admin.clusters[0]?.cluster["certificate-authority-data"];
  if (!caData) throw new Error("the admin kubeconfig has no certificate-authority-data");
  const path = join(dir, `${namespace}-${name}.kubeconfig`);
  await writeTokenKubeconfig(path, {
    server: testServer(),
    caPem: Buffer.from(caData, "base64").toString("utf8"),
    token,
    user: `${namespace}-${name}`,
  });
  return path;
}

/** `kubectl auth can-i` as ServiceAccount `namespace/name`: true for yes, false for no. */
export async function canI(sa: { namespace: string; name: string }, args: string[]): Promise<boolean> {
  // can-i answers on stdout and exits 1 for "no"; anything else is a broken question.
  const result = await kubectl([
    "auth",
    "can-i",
    `--as=system:serviceaccount:${sa.namespace}:${sa.name}`,
    ...args,
  ]);
  const answer = result.stdout.trim();
  if (answer !== "yes" && answer !== "no")
    throw new Error(`kubectl auth can-i ${args.join(" ")}: ${result.stderr.trim() || answer}`);
  return answer === "yes";
}

/** Options of {@link startOperatorAs}. */
export interface OperatorAsOptions {
  /** Arguments after `run`, as the manifests give them; bind addresses are replaced by loopback ones. */
  args: string[];
  kubeconfig: string;
  serviceUrl: string;
  apiKey: string;
  /** What the Downward API would give the pod. */
  podNamespace: string;
  podName: string;
  /** Where the API key file and the log go (the caller removes it). */
  dir: string;
  /**
   * More environment (e.g. {@link containerEnv}, DMS_* settings). It replaces the short poll
   * interval, never the pod's own (POD_NAMESPACE, POD_NAME) nor the service URL and key file.
   */
  env?: Record<string, string>;
  /** Where /metrics listens instead of the manifests' address; by default it is off (`0`). */
  metricsBindAddress?: string;
  /**
   * The CLI script to run instead of this tree's `src/cli.ts`: another version's, as the image
   * of an older release would run it.
   */
  entry?: string;
}

/** A started operator with where its probes listen. */
export interface StartedOperator {
  process: OperatorProcess;
  probesUrl: string;
  logText(): string;
  /**
   * `waiting`, or a rejection quoting the end of the log as soon as the operator exits: a wait
   * for what a dead operator would never do fails with why, not with a timeout long after.
   */
  whileRunning<T>(waiting: Promise<T>): Promise<T>;
}

/**
 * Runs `node src/cli.ts run <args>` with the environment the manifests' Deployment sets (the API
 * key from a file, POD_NAMESPACE and POD_NAME), a short poll interval so the test is quick, and
 * `options.env`.
 */
export async function startOperatorAs(options: OperatorAsOptions): Promise<StartedOperator> {
  const dir = await mkdtemp(join(options.dir, "operator-"));
  const keyFile = join(dir, "api-key");
  await writeFile(keyFile, `${options.apiKey}\n`, { mode: 0o600 });
  const probesPort = await freePort();
  const args = [
    ...options.args.filter((a) => !/^--(metrics|health-probe)-bind-address/.test(a)),
    `--metrics-bind-address=${options.metricsBindAddress ?? "0"}`,
    `--health-probe-bind-address=127.0.0.1:${probesPort}`,
    `--kubeconfig=${options.kubeconfig}`,
  ];
  const process = OperatorProcess.start({
    args,
    entry: options.entry,
    logPath: join(dir, "operator.log"),
    workDir: join(dir, "work"),
    env: {
      PATH: globalThis.process.env.PATH ?? "",
      ...nodeCacheEnv(),
      DMS_POLL_INTERVAL: "1s",
      ...options.env,
      // What stands in for the pod's Downward API and mounted Secret wins over `options.env`.
      POD_NAMESPACE: options.podNamespace,
      POD_NAME: options.podName,
      DMS_BASE_URL: options.serviceUrl,
      DMS_API_KEY_FILE: keyFile,
    },
  });
  return {
    process,
    probesUrl: `http://127.0.0.1:${probesPort}`,
    logText: () => readFileSync(process.logPath, "utf8"),
    whileRunning: (waiting) =>
      Promise.race([
        waiting,
        process.exited.then((): never => {
          process.assertRunning();
          throw new Error("the operator exited");
        }),
      ]),
  };
}

/** Log lines that say the API server refused the operator something (HTTP 403). */
export function forbiddenLines(log: string): string[] {
  // A namespace being deleted refuses new objects (NamespaceLifecycle answers 403 too): another
  // file's namespace going away while this operator, watching every namespace, records an event
  // there is no refusal of the operator's rights.
  return log
    .split("\n")
    .filter(
      (line) =>
        /HTTP 403|forbidden/i.test(line) && !/in namespace \S+ because it is being terminated/.test(line),
    );
}
