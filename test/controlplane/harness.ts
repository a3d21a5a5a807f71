// A real, local Kubernetes control plane (etcd + kube-apiserver) for tests and the demo.
//
// Flags follow controller-runtime's envtest: everything on 127.0.0.1, RBAC on, an admin token in
// group system:masters, service-account tokens signed with a key pair made here. No controller
// manager runs: namespaces are never finalized, garbage collection does not cascade, and no
// `default` ServiceAccount appears (hence the ServiceAccount admission plugin is off, as in envtest).
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { type ControlPlaneBinaries, ensureBinaries } from "./binaries.ts";
import { apiServerArgs, etcdArgs } from "./flags.ts";
import { caFromServingBundle, writeTokenKubeconfig } from "./kubeconfig.ts";
import { type KubectlResult, runKubectl } from "./kubectl.ts";
import { freePort, httpsGet } from "./net.ts";
import {
  registerEmergencyCleanup,
  ServerExitedError,
  ServerProcess,
  startWatchdog,
  waitUntil,
} from "./process.ts";

export type { KubectlResult } from "./kubectl.ts";

/** Options of {@link ControlPlane.start}. */
export interface ControlPlaneOptions {
  /** etcd's data directory. When given it is kept on stop() and reused by the next start; default: a temp dir. */
  dataDir?: string;
  /** Receives every output line of etcd and kube-apiserver (prefixed) and harness progress. */
  log?: (line: string) => void;
  /** Binaries to run; default: {@link ensureBinaries} (which may build them). */
  binaries?: ControlPlaneBinaries;
  /** Extra kube-apiserver flags, e.g. `--etcd-compaction-interval=10s` for a test of 410 Gone. */
  apiServerFlags?: string[];
  /** How long etcd and kube-apiserver each get to become ready; default 60 s. */
  readyTimeoutMs?: number;
}

const REPO_ROOT = join(import.meta.dirname, "..", "..");
const STOP_GRACE_MS = 5_000;

/** A running etcd + kube-apiserver pair on loopback; stop() it (or let process exit clean it up). */
export class ControlPlane {
  readonly binaries: ControlPlaneBinaries;
  readonly #dir: string;
  readonly #log: (line: string) => void;
  readonly #options: ControlPlaneOptions;
  readonly #adminToken = randomBytes(32).toString("base64url");
  readonly #env: NodeJS.ProcessEnv;
  #etcd: ServerProcess | undefined;
  #apiServer: ServerProcess | undefined;
  #apiArgs: string[] = [];
  #port = 0;
  #caPem = "";
  #pgidFile = "";
  #kubeconfigs = 0;
  #stopping: Promise<void> | undefined;
  #cleanups: Array<() => void> = [];

  private constructor(binaries: ControlPlaneBinaries, dir: string, options: ControlPlaneOptions) {
    this.binaries = binaries;
    this.#dir = dir;
    this.#options = options;
    this.#log = options.log ?? (() => {});
    // etcd reads ETCD_* variables as flags; a developer's own settings must not leak into the test server.
    this.#env = Object.fromEntries(
      Object.entries(process.env).filter(([key]) => !key.startsWith("ETCD_") && key !== "KUBECONFIG"),
    );
  }

  /** Starts etcd and kube-apiserver and resolves once /readyz passes; cleans up fully if that fails. */
  static async start(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
    const binaries = options.binaries ?? (await ensureBinaries({ log: options.log }));
    const dir = await mkdtemp(join(tmpdir(), "dms-controlplane-"));
    const plane = new ControlPlane(binaries, dir, options);
    try {
      await plane.#boot();
      return plane;
    } catch (error) {
      await plane.stop();
      throw error;
    }
  }

  /** `https://127.0.0.1:<port>` */
  get server(): string {
    return `https://127.0.0.1:${this.#port}`;
  }

  /** kubectl's discovery cache for this control plane, so runs never share (or pollute) ~/.kube/cache. */
  get kubectlCacheDir(): string {
    return join(this.#dir, "kubectl-cache");
  }

  /** The pids of etcd and kube-apiserver while they run (a benchmark reads their CPU time). */
  get pids(): { etcd: number | undefined; apiServer: number | undefined } {
    const pid = (p: ServerProcess | undefined) => (p?.running ? p.pid : undefined);
    return { etcd: pid(this.#etcd), apiServer: pid(this.#apiServer) };
  }

  /** {@link pids} as groups of a CPU reading (`cpuReading` in test/bench/probes.ts): none for one not running. */
  get cpuGroups(): { apiServer: number[]; etcd: number[] } {
    const { apiServer, etcd } = this.pids;
    return { apiServer: apiServer === undefined ? [] : [apiServer], etcd: etcd === undefined ? [] : [etcd] };
  }

  /** Admin kubeconfig (static token in group system:masters). Gone after stop(). */
  get kubeconfigPath(): string {
    return join(this.#dir, "admin.kubeconfig");
  }

  async #boot(): Promise<void> {
    const started = Date.now();
    const watchdog = startWatchdog(this.#dir, [this.#dir]);
    this.#pgidFile = watchdog.pgidFile;
    this.#cleanups.push(watchdog.retire);
    this.#cleanups.push(
      registerEmergencyCleanup({
        // The watchdog too: once this cleanup ran, it has nothing left to do.
        pgids: () => [
          ...[this.#etcd, this.#apiServer].flatMap((p) => (p?.running ? [p.pid] : [])),
          ...(watchdog.pid === undefined ? [] : [watchdog.pid]),
        ],
        dirs: [this.#dir],
      }),
    );
    const { publicKey, privateKey } = generateKeyPairSync("rsa", {
      modulusLength: 2048,
      publicKeyEncoding: { type: "spki", format: "pem" },
      privateKeyEncoding: { type: "pkcs8", format: "pem" },
    });
    writeFileSync(join(this.#dir, "sa.pub"), publicKey);
    writeFileSync(join(this.#dir, "sa.key"), privateKey, { mode: 0o600 });
    writeFileSync(join(this.#dir, "tokens.csv"), `${this.#adminToken},admin,admin,"system:masters"\n`, {
      mode: 0o600,
    });
    mkdirSync(join(this.#dir, "certs"));

    const etcdUrl = await this.#startEtcd();
    await this.#retryOnPortClash(async () => {
      this.#port = await freePort();
      this.#apiArgs = apiServerArgs({
        etcdUrl,
        port: this.#port,
        dir: this.#dir,
        extra: this.#options.apiServerFlags ?? [],
      });
      await this.#startApiServer();
    });
    this.#caPem = caFromServingBundle(await readFile(join(this.#dir, "certs", "apiserver.crt"), "utf8"));
    await writeTokenKubeconfig(this.kubeconfigPath, {
      server: this.server,
      caPem: this.#caPem,
      token: this.#adminToken,
      user: "admin",
    });
    this.#log(`control plane ready at ${this.server} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }

  async #startEtcd(): Promise<string> {
    const dataDir = this.#options.dataDir ?? join(this.#dir, "etcd");
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    let clientUrl = "";
    await this.#retryOnPortClash(async () => {
      clientUrl = `http://127.0.0.1:${await freePort()}`;
      const peerUrl = `http://127.0.0.1:${await freePort()}`;
      const args = etcdArgs({ dataDir, clientUrl, peerUrl });
      const etcd = await this.#spawn("etcd", this.binaries.etcd, args);
      this.#etcd = etcd;
      await waitUntil(etcd, this.#readyTimeout, async () => {
        const res = await fetch(`${clientUrl}/health`, { signal: AbortSignal.timeout(2_000) });
        return res.ok && ((await res.json()) as { health?: string }).health === "true";
      });
    });
    return clientUrl;
  }

  async #startApiServer(): Promise<void> {
    const apiServer = await this.#spawn("kube-apiserver", this.binaries.kubeApiServer, this.#apiArgs);
    this.#apiServer = apiServer;
    const bundle = join(this.#dir, "certs", "apiserver.crt");
    await waitUntil(apiServer, this.#readyTimeout, async () => {
      const ca = await readFile(bundle, "utf8").catch(() => undefined);
      return ca !== undefined && (await httpsGet(`${this.server}/readyz`, ca, this.#adminToken)) === 200;
    });
  }

  get #readyTimeout(): number {
    return this.#options.readyTimeoutMs ?? 60_000;
  }

  async #spawn(name: string, binary: string, args: string[]): Promise<ServerProcess> {
    const proc = await ServerProcess.start(name, binary, args, { env: this.#env, log: this.#log });
    const pgids = [this.#etcd, this.#apiServer, proc].flatMap((p) => (p?.running ? [p.pid] : []));
    writeFileSync(this.#pgidFile, `${pgids.join("\n")}\n`);
    return proc;
  }

  /** A free port found by binding :0 can be taken before the server binds it; try again then. */
  async #retryOnPortClash(attempt: () => Promise<void>): Promise<void> {
    for (let i = 1; ; i++) {
      try {
        return await attempt();
      } catch (error) {
        if (
          i >= 3 ||
          !(error instanceof ServerExitedError) ||
          !/address already in use/.test(error.message)
        ) {
          throw error;
        }
        this.#log(`port clash, retrying: ${error.message.split("\n")[0]}`);
      }
    }
  }

  /** Runs kubectl against this control plane (admin kubeconfig unless `opts.kubeconfig`); never throws on exit codes. */
  kubectl(
    args: string[],
    opts: { input?: string; kubeconfig?: string; timeoutMs?: number } = {},
  ): Promise<KubectlResult> {
    return runKubectl(this.binaries.kubectl, args, {
      ...opts,
      kubeconfig: opts.kubeconfig ?? this.kubeconfigPath,
      cacheDir: this.kubectlCacheDir,
      env: this.#env,
    });
  }

  /**
   * Applies every CustomResourceDefinition found in the YAML files of `dir` (default: the
   * repository's `crds/`; other documents there, like a kustomization, are left out) server-side,
   * and waits until each is Established. Returns the CRD names; none found installs nothing.
   */
  async installCrds(dir: string = join(REPO_ROOT, "crds")): Promise<string[]> {
    const files = (await readdir(dir).catch(() => [])).filter((f) => /\.ya?ml$/.test(f)).sort();
    const crds: string[] = [];
    for (const file of files) {
      for (const doc of parseAllDocuments(await readFile(join(dir, file), "utf8"))) {
        const value: unknown = doc.toJS();
        if (isObject(value) && value.kind === "CustomResourceDefinition") crds.push(doc.toString());
      }
    }
    if (crds.length === 0) return [];
    const applied = await this.kubectl(
      [
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=dms-test-harness",
        "-o",
        "name",
        "-f",
        "-",
      ],
      { input: crds.join("\n---\n") },
    );
    if (applied.code !== 0) throw new Error(`installing CRDs from ${dir} failed: ${applied.stderr.trim()}`);
    const names = applied.stdout.split("\n").filter((line) => line.startsWith("customresourcedefinition"));
    const established = await this.kubectl(
      ["wait", "--for=condition=Established", "--timeout=60s", ...names],
      { timeoutMs: 70_000 },
    );
    if (established.code !== 0) {
      throw new Error(`CRDs from ${dir} did not become Established: ${established.stderr.trim()}`);
    }
    return names.map((name) => name.replace(/^[^/]+\//, ""));
  }

  /**
   * Stops kube-apiserver (SIGTERM, as in a rollout) and starts it again on the same port; etcd
   * keeps running. `flags` are added to its command line from then on (e.g. a feature gate).
   */
  async restartApiServer(flags: string[] = []): Promise<void> {
    if (this.#stopping) throw new Error("restartApiServer() after stop()");
    await this.#apiServer?.stop(STOP_GRACE_MS * 2);
    this.#apiArgs = [...this.#apiArgs, ...flags];
    await this.#startApiServer();
  }

  /**
   * A token for an existing ServiceAccount, minted via the TokenRequest API. The API server
   * enforces at least 600 s for `expirationSeconds`.
   */
  async serviceAccountToken(
    namespace: string,
    name: string,
    opts: { expirationSeconds?: number; audiences?: string[] } = {},
  ): Promise<string> {
    const args = ["create", "token", name, "-n", namespace];
    if (opts.expirationSeconds !== undefined) args.push(`--duration=${opts.expirationSeconds}s`);
    for (const audience of opts.audiences ?? []) args.push(`--audience=${audience}`);
    const result = await this.kubectl(args);
    if (result.code !== 0) {
      throw new Error(`TokenRequest for ${namespace}/${name} failed: ${result.stderr.trim()}`);
    }
    return result.stdout.trim();
  }

  /** Writes a kubeconfig that authenticates with `token` (default path: inside the temp dir) and returns its path. */
  async kubeconfigForToken(token: string, path?: string): Promise<string> {
    const target = path ?? join(this.#dir, `token-${++this.#kubeconfigs}.kubeconfig`);
    await writeTokenKubeconfig(target, { server: this.server, caPem: this.#caPem, token, user: "token" });
    return target;
  }

  /** Stops both servers and removes the temp dir (not a caller's `dataDir`). Idempotent; safe after a failed start. */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      await this.#apiServer?.stop(STOP_GRACE_MS);
      await this.#etcd?.stop(STOP_GRACE_MS);
      await rm(this.#dir, { recursive: true, force: true });
      for (const cleanup of this.#cleanups) cleanup();
    })();
    return this.#stopping;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}
