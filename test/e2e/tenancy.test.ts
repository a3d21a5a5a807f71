// One cluster, many teams, seen from outside: the operator installed from manifests/default runs
// as a child process (`dms-operator run` with the container's arguments and runtime environment,
// so a 96 MiB old space bounds its heap as in the pod) with the token of its ServiceAccount, over
// a victim team and a hostile team. Each numbered test is one threat; each shows that the same
// process is still running and ready, that the offending resource or connection says why
// (condition reason, and a message naming the bound or field), that the victim's resources keep
// converging (an edit is PATCHed, a drift is corrected by the next resync), and that no service
// saw a call it should not have.
//
// The settings under test are given by their environment variables (DMS_LISTING_DEADLINE,
// DMS_DEFAULT_CONNECTION_NAMESPACE_SELECTOR), which a build without them ignores, so that the
// rows that do not depend on them still run there; the flags read the same settings.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ConnectionKind } from "../../src/crd/connection-schema.ts";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { call } from "../contract/simulator-http.ts";
import { freshNamespace, kubectl, kubectlOk, waitFor } from "../support/cluster.ts";
import { startTestSimulator } from "../support/operator.ts";
import { ClusterUser, conditionOf, hasCondition } from "../support/resources.ts";
import {
  containerArgs,
  containerEnv,
  forbiddenLines,
  MANIFESTS,
  type StartedOperator,
  serviceAccountKubeconfig,
  startOperatorAs,
} from "./install-support.ts";

const DEFAULT = join(MANIFESTS, "default");
/**
 * The shortest period `--resync-period` accepts: every row waits for a pass to correct the
 * victim's drift, so the period is most of the file's time.
 */
const RESYNC_MS = 10_000;
/** Short, the least the flag accepts being 1 s: row 4 waits for it to pass; the endless listing never ends. */
const LISTING_DEADLINE_MS = 2_000;
/**
 * How long a drift on the victim may stay: the next resync pass starts a period (±10 %) after
 * the last one ended, its listing may run into the deadline of a hostile connection's listing,
 * it spreads its reconciles over a tenth of the period, and the correcting PATCH takes a moment.
 */
const DRIFT_BOUND_MS = RESYNC_MS * 1.1 + LISTING_DEADLINE_MS + RESYNC_MS / 10 + 5_000;
/** A row waits for a hostile outcome (up to a resync and a listing deadline), an edit and a drift. */
const ROW_TIMEOUT_MS = 150_000;

const PLATFORM_KEY = "tenancy-platform-key-5a1e";
const VICTIM_KEY = "tenancy-victim-key-7c2d";
const SHARED_KEY = "tenancy-shared-key-9e4f";
const HOSTILE_KEY = "tenancy-hostile-key-0b3a";
const KEY_SECRET = "dms-api-key";

const suffix = randomBytes(3).toString("hex");
/** Namespace label the victim's ClusterServiceConnection selects. */
const TEAM_LABEL = "e2e.dms.dev/team";
const VICTIM_TEAM = `victim-${suffix}`;
/** Namespace label the operator's default connection selects (the victim's namespace only). */
const DEFAULT_LABEL = "e2e.dms.dev/default-connection";
/** The ClusterServiceConnection meant for the victim only. */
const SHARED = `tenancy-shared-${suffix}`;
/** A deployment of the shared tenant that no resource claims. */
const UNCLAIMED = "payroll";

type Ref = Pick<DeploymentSpec, "connectionRef">;
const own = (name: string): Ref => ({ connectionRef: { kind: "ServiceConnection", name } });
const shared: Ref = { connectionRef: { kind: "ClusterServiceConnection", name: SHARED } };
const image = (name: string) => `registry.example.com/${name}:1`;
const spec = (name: string, more: Partial<DeploymentSpec> = {}): DeploymentSpec => ({
  source: "internal_docker",
  sourceConfig: { resourceSpec: { minScale: 1, maxScale: 2 } },
  sourceRevisionConfig: { imageUri: image(name) },
  ...more,
});

/**
 * The victim team's resources: `ledger` is edited and `billing` drifted by every row, `mailer`
 * is the deployment row 7 aims at, `portal` uses the default connection and `reports` the
 * ClusterServiceConnection, showing that both selectors let the victim in.
 */
const VICTIMS = {
  ledger: own("victim"),
  billing: own("victim"),
  mailer: own("victim"),
  portal: {},
  reports: shared,
} satisfies Record<string, Ref>;
type Victim = keyof typeof VICTIMS;

const onService = (sim: RunningSimulator, name: string) => sim.store.list().find((d) => d.name === name);

/** Sets a simulator's faults as a user would (`PUT /_sim/faults`); throws when it refuses them. */
async function setFaults(sim: RunningSimulator, faults: Record<string, unknown>): Promise<void> {
  const answer = await call(sim, "PUT", "/_sim/faults", faults);
  if (answer.status >= 300)
    throw new Error(
      `the simulator refused the faults ${JSON.stringify(faults)}: HTTP ${answer.status} ${JSON.stringify(answer.body)}`,
    );
}

/**
 * A connection object: a ServiceConnection in `namespace`, or (without one) a
 * ClusterServiceConnection, whose key is the `api-key` of the Secret `secret`.
 */
function connection(
  kind: ConnectionKind,
  name: string,
  spec: Record<string, unknown>,
  secret: { name: string; namespace?: string },
  namespace?: string,
) {
  return {
    apiVersion: "dms.dev/v1alpha1",
    kind,
    metadata: { name, ...(namespace ? { namespace } : {}) },
    spec: { apiKeySecretRef: { ...secret, key: "api-key" }, ...spec },
  };
}

/** A team's ServiceConnection in `namespace`, with the key of that namespace's Secret. */
const teamConnection = (name: string, spec: Record<string, unknown>, namespace: string) =>
  connection("ServiceConnection", name, spec, { name: KEY_SECRET }, namespace);

const apply = (object: object, ...flags: string[]) =>
  kubectl(["apply", ...flags, "-f", "-"], { input: JSON.stringify(object) });

/**
 * Deletes `target` (a name, or `--all`) of `kind`, and removes the finalizers of what is still
 * there after a while: the operator may be unable to act on it (that is what some rows test).
 */
async function deleteOrRelease(
  kind: string,
  target: string,
  namespace: string | undefined,
  graceMs: number,
): Promise<void> {
  const scope = namespace ? ["-n", namespace] : [];
  await kubectl(["delete", kind, target, ...scope, "--wait=false"]);
  const left = async () => {
    const listed = await kubectl([
      "get",
      kind,
      ...(target === "--all" ? [] : [target]),
      ...scope,
      "-o",
      "name",
    ]);
    return listed.stdout.split("\n").filter((line) => line !== "");
  };
  const remaining = await waitFor(async () => ((await left()).length === 0 ? [] : undefined), {
    timeoutMs: graceMs,
    description: `${kind} ${target} to be deleted`,
  }).catch(left);
  for (const object of remaining)
    await kubectl(["patch", object, ...scope, "--type=merge", "-p", '{"metadata":{"finalizers":null}}']);
}

describe("one operator, a victim team and a hostile team", () => {
  const user = new ClusterUser();
  let work: string;
  let operator: StartedOperator;
  let platformSim: RunningSimulator;
  let victimSim: RunningSimulator;
  let sharedSim: RunningSimulator;
  let hostileSim: RunningSimulator;
  let gzipSim: RunningSimulator;
  let plainSim: RunningSimulator;
  let endlessSim: RunningSimulator;
  let victimNs: string;
  let hostileNs: string;
  /** The victims' deployment ids on their services. */
  const ids = {} as Record<Victim, string>;
  /** `/readyz` answers other than 200 since the operator first became ready. */
  const notReady: string[] = [];
  let readyzPolls = 0;
  let poller: NodeJS.Timeout | undefined;
  let edits = 0;

  /** `waiting`, or why the operator died as soon as it does. */
  const running = <T>(waiting: Promise<T>) => operator.whileRunning(waiting);

  /** The process started for this file never exited (so never restarted) and is ready. */
  const operatorUnharmed = async () => {
    operator.process.assertRunning();
    expect(notReady).toEqual([]);
    expect((await fetch(`${operator.probesUrl}/readyz`)).status).toBe(200);
    expect(forbiddenLines(operator.logText())).toEqual([]);
  };

  /**
   * The victim is still served: an edit of `ledger` is PATCHed on its service, and a drift of
   * `billing` made there now is corrected by the next resync pass.
   */
  const victimStillServed = async () => {
    edits += 1;
    const maxScale = 2 + edits;
    const mark = Date.now();
    await user.patch(victimNs, "ledger", { spec: { sourceConfig: { resourceSpec: { maxScale } } } });
    victimSim.store.drift(ids.billing, {
      source_revision_config: { image_uri: `registry.example.com/billing:drifted-${edits}` },
    });
    await running(
      waitFor(() => onService(victimSim, "ledger")?.source_config.resource_spec?.max_scale === maxScale, {
        timeoutMs: 20_000,
        description: `the edit of ledger (maxScale ${maxScale}) to reach the victim's service`,
      }),
    );
    const patched = victimSim.requests({ method: "PATCH", since: mark }).map((r) => r.url);
    expect(patched).toContain(`/v2/deployments/${ids.ledger}`);
    await running(
      waitFor(() => onService(victimSim, "billing")?.source_revision_config.image_uri === image("billing"), {
        timeoutMs: DRIFT_BOUND_MS,
        intervalMs: 250,
        description: "the drift of billing on the victim's service to be corrected by the next resync",
      }),
    );
    const corrected = victimSim.requests({ method: "PATCH", since: mark }).map((r) => r.url);
    expect(corrected).toContain(`/v2/deployments/${ids.billing}`);
  };

  /** The operator is unharmed before and after the victim shows it is still served. */
  const unharmedAndServing = async () => {
    await operatorUnharmed();
    await victimStillServed();
    await operatorUnharmed();
  };

  /** Waits for the resource to report Synced=False with `reason`; returns it. */
  const refusedWith = (namespace: string, name: string, reason: string, timeoutMs = 20_000) =>
    running(
      user.waitFor(
        namespace,
        name,
        (o) => hasCondition(o, "Synced", "False", reason),
        `Synced=False ${reason}`,
        timeoutMs,
      ),
    );

  beforeAll(async () => {
    await kubectlOk(["apply", "-k", DEFAULT]);
    work = await mkdtemp(join(tmpdir(), "dms-e2e-tenancy-"));
    // Independent of each other: started, created and labelled at once.
    [platformSim, victimSim, sharedSim, hostileSim, gzipSim, plainSim, endlessSim, victimNs, hostileNs] =
      await Promise.all([
        startTestSimulator({ apiKey: PLATFORM_KEY }),
        startTestSimulator({ apiKey: VICTIM_KEY }),
        startTestSimulator({
          apiKey: SHARED_KEY,
          seed: {
            deployments: [
              {
                name: UNCLAIMED,
                source: "internal_docker",
                source_config: {},
                source_revision_config: { image_uri: image(UNCLAIMED) },
              },
            ],
          },
        }),
        startTestSimulator({ apiKey: HOSTILE_KEY }),
        startTestSimulator({ apiKey: HOSTILE_KEY }),
        startTestSimulator({ apiKey: HOSTILE_KEY }),
        startTestSimulator({ apiKey: HOSTILE_KEY }),
        freshNamespace("tenancy-victim"),
        freshNamespace("tenancy-hostile"),
      ]);
    await Promise.all([
      kubectlOk([
        "label",
        "namespace",
        victimNs,
        `${TEAM_LABEL}=${VICTIM_TEAM}`,
        `${DEFAULT_LABEL}=${suffix}`,
      ]),
      kubectlOk(["label", "namespace", hostileNs, `${TEAM_LABEL}=hostile-${suffix}`]),
      user.putSecret(victimNs, KEY_SECRET, { "api-key": VICTIM_KEY }),
      user.putSecret(hostileNs, KEY_SECRET, { "api-key": HOSTILE_KEY }),
      user.putSecret("dms-system", `${KEY_SECRET}-${suffix}`, { "api-key": SHARED_KEY }),
      ...[
        teamConnection("victim", { baseUrl: victimSim.url }, victimNs),
        teamConnection("own", { baseUrl: hostileSim.url }, hostileNs),
      ].map((object) => kubectlOk(["apply", "-f", "-"], { input: JSON.stringify(object) })),
    ]);
    const sharedConnection = connection(
      "ClusterServiceConnection",
      SHARED,
      { baseUrl: sharedSim.url, namespaceSelector: { matchLabels: { [TEAM_LABEL]: VICTIM_TEAM } } },
      { name: `${KEY_SECRET}-${suffix}`, namespace: "dms-system" },
    );
    // Warn rather than refuse an unknown field: a build without spec.namespaceSelector drops it,
    // which the row that depends on it reports, and the other rows still run.
    const applied = await apply(sharedConnection, "--validate=warn");
    if (applied.code !== 0) throw new Error(`kubectl apply ${SHARED}: ${applied.stderr}`);

    const [command, ...args] = await containerArgs(DEFAULT, { POD_NAMESPACE: "dms-system" });
    expect(command).toBe("run");
    operator = await startOperatorAs({
      // A Lease of its own: another file's operator may have left the default one held.
      args: [...args, `--resync-period=${RESYNC_MS / 1000}s`, "--leader-election-id=dms-operator-tenancy"],
      env: {
        ...(await containerEnv(DEFAULT)),
        DMS_LISTING_DEADLINE: `${LISTING_DEADLINE_MS / 1000}s`,
        DMS_DEFAULT_CONNECTION_NAMESPACE_SELECTOR: `${DEFAULT_LABEL}=${suffix}`,
      },
      kubeconfig: await serviceAccountKubeconfig("dms-system", "dms-operator", work),
      serviceUrl: platformSim.url,
      apiKey: PLATFORM_KEY,
      podNamespace: "dms-system",
      podName: "dms-operator-tenancy-0",
      dir: work,
    });
    await waitFor(
      async () => {
        operator.process.assertRunning();
        return (await fetch(`${operator.probesUrl}/readyz`)).status === 200;
      },
      { timeoutMs: 30_000, intervalMs: 300, description: "/readyz to answer 200" },
    );
    // As a kubelet would probe it, every second; an answer slower than 5 s (a probe's timeout,
    // generous for a loaded test machine) counts as not ready.
    let probing = false;
    poller = setInterval(() => {
      if (probing) return;
      probing = true;
      fetch(`${operator.probesUrl}/readyz`, { signal: AbortSignal.timeout(5_000) })
        .then((res) => {
          readyzPolls += 1;
          if (res.status !== 200) notReady.push(`${new Date().toISOString()} HTTP ${res.status}`);
        })
        .catch((error: unknown) => notReady.push(`${new Date().toISOString()} ${String(error)}`))
        .finally(() => {
          probing = false;
        });
    }, 1_000);

    await Promise.all(
      Object.entries(VICTIMS).map(([name, ref]) => user.create(victimNs, name, spec(name, ref))),
    );
    await Promise.all(
      (Object.keys(VICTIMS) as Victim[]).map(async (name) => {
        const ready = await running(user.waitReady(victimNs, name, 30_000));
        ids[name] = ready.status?.deploymentId ?? "";
      }),
    );
    await running(
      user.waitForConnection(
        "ServiceConnection",
        "own",
        hostileNs,
        (c) => hasCondition(c, "Ready", "True"),
        "Ready",
      ),
    );
  });

  afterAll(async () => {
    clearInterval(poller);
    // Leave nothing behind: other files read the cluster as a whole (name claims, plan).
    const namespaces = [victimNs, hostileNs].filter(Boolean);
    // A dead operator releases no finalizer: then they are removed at once.
    const grace = () => (operator?.process.running ? 15_000 : 0);
    // The Deployments go before their connections, which the operator needs to release them.
    await Promise.all(namespaces.map((ns) => deleteOrRelease("deployments.dms.dev", "--all", ns, grace())));
    await Promise.all([
      ...namespaces.map((ns) => deleteOrRelease("serviceconnections.dms.dev", "--all", ns, grace())),
      deleteOrRelease("clusterserviceconnections.dms.dev", SHARED, undefined, grace()),
      kubectl(["delete", "secret", `${KEY_SECRET}-${suffix}`, "-n", "dms-system", "--wait=false"]),
    ]);
    await operator?.process.stop(10_000);
    for (const sim of [platformSim, victimSim, sharedSim, hostileSim, gzipSim, plainSim, endlessSim])
      await sim?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it(
    "0. serves the victim team while nothing hostile happens: the baseline the rows below compare with",
    async () => {
      expect(Object.values(ids).every((id) => id !== "")).toBe(true);
      expect(onService(platformSim, "portal")?.id).toBe(ids.portal);
      expect(onService(sharedSim, "reports")?.id).toBe(ids.reports);
      await unharmedAndServing();
    },
    ROW_TIMEOUT_MS,
  );

  it(
    "1. refuses a Deployment whose 200 secrets all read one 700 KB Secret: SecretsTooLarge, nothing sent",
    async () => {
      const since = Date.now();
      await user.putSecret(hostileNs, "blob", { blob: "x".repeat(700 * 1024) });
      const secrets = Array.from({ length: 200 }, (_, i) => ({
        name: `BLOB_${i}`,
        valueFrom: { secretKeyRef: { name: "blob", key: "blob" } },
      }));
      await user.create(hostileNs, "hoarder", spec("hoarder", { ...own("own"), secrets }));
      const refused = await refusedWith(hostileNs, "hoarder", "SecretsTooLarge", 30_000);
      expect(hasCondition(refused, "Stalled", "True", "SecretsTooLarge")).toBe(true);
      const message = conditionOf(refused, "Synced")?.message ?? "";
      expect(message).toMatch(/--max-secret-bytes|DMS_MAX_SECRET_BYTES/);
      expect(message).not.toContain("xxxxxxxx");
      expect(hostileSim.requests({ since }).filter((r) => r.method !== "GET")).toEqual([]);
      await unharmedAndServing();
    },
    ROW_TIMEOUT_MS,
  );

  /** A ServiceConnection to `sim` answering `oversized` is Ready=False ResponseTooLarge. */
  const refusesOversized = async (sim: RunningSimulator, name: string, fault: Record<string, unknown>) => {
    await setFaults(sim, { oversized: [fault] });
    const since = Date.now();
    const applied = await apply(teamConnection(name, { baseUrl: sim.url }, hostileNs));
    expect(applied.stderr).toBe("");
    const refused = await running(
      user.waitForConnection(
        "ServiceConnection",
        name,
        hostileNs,
        (c) => hasCondition(c, "Ready", "False", "ResponseTooLarge"),
        "Ready=False ResponseTooLarge",
        30_000,
      ),
    );
    expect(conditionOf(refused, "Ready")?.message).toMatch(/--max-response-bytes|DMS_MAX_RESPONSE_BYTES/);
    // It was the answer that was refused: the probe reached the simulator.
    expect(sim.requests({ since }).length).toBeGreaterThan(0);
    await unharmedAndServing();
  };

  it(
    "2. marks a ServiceConnection answering 260 KB of gzip that inflates to 256 MiB Ready=False ResponseTooLarge",
    () => refusesOversized(gzipSim, "inflating", { bytes: 268_435_456, gzip: true }),
    ROW_TIMEOUT_MS,
  );

  it(
    "3. marks a ServiceConnection answering a plain 200 MiB body Ready=False ResponseTooLarge",
    () => refusesOversized(plainSim, "bloated", { bytes: 209_715_200 }),
    ROW_TIMEOUT_MS,
  );

  it(
    "4. reports ListingDeadlineExceeded on the resources of a connection whose listing never ends, and still corrects the victim's drift",
    async () => {
      await setFaults(endlessSim, { endlessListing: { pageDelayMs: 8_000 } });
      const applied = await apply(teamConnection("endless", { baseUrl: endlessSim.url }, hostileNs));
      expect(applied.stderr).toBe("");
      await running(
        user.waitForConnection(
          "ServiceConnection",
          "endless",
          hostileNs,
          (c) => hasCondition(c, "Ready", "True"),
          "Ready (its probe is not the listing)",
        ),
      );
      await user.create(hostileNs, "stuck", spec("stuck", own("endless")));
      const stuck = await refusedWith(hostileNs, "stuck", "ListingDeadlineExceeded", DRIFT_BOUND_MS + 10_000);
      expect(conditionOf(stuck, "Synced")?.message).toMatch(/--listing-deadline|DMS_LISTING_DEADLINE/);
      expect(endlessSim.requests({ route: "GET /v2/deployments" }).length).toBeGreaterThan(0);
      // The drift is made while the endless listing is in force: the pass that corrects it lists
      // that connection too.
      await unharmedAndServing();
    },
    ROW_TIMEOUT_MS,
  );

  it(
    "5. refuses another namespace the victim's ClusterServiceConnection: ConnectionNotAllowed, no call for it, the deployment survives its delete",
    async () => {
      const selected = await user.connection("ClusterServiceConnection", SHARED);
      expect(
        (selected?.spec as Record<string, unknown> | undefined)?.namespaceSelector,
        "spec.namespaceSelector as the API server stored it",
      ).toEqual({ matchLabels: { [TEAM_LABEL]: VICTIM_TEAM } });
      const target = onService(sharedSim, UNCLAIMED);
      if (!target) throw new Error(`the shared tenant holds no ${UNCLAIMED}`);
      const since = Date.now();
      await user.create(
        hostileNs,
        UNCLAIMED,
        spec("payroll-hijacked", { ...shared, deletionPolicy: "Delete" }),
      );
      const refused = await refusedWith(hostileNs, UNCLAIMED, "ConnectionNotAllowed");
      expect(hasCondition(refused, "Stalled", "True", "ConnectionNotAllowed")).toBe(true);
      expect(conditionOf(refused, "Synced")?.message).toContain("namespaceSelector");
      await running(
        user.waitForConnection(
          "ClusterServiceConnection",
          SHARED,
          undefined,
          (c) => (c?.status as { refused?: number } | undefined)?.refused === 1,
          "status.refused to count the refused resource",
        ),
      );
      const deleted = await kubectl(["delete", "dmsd", UNCLAIMED, "-n", hostileNs, "--timeout=30s"], {
        timeoutMs: 35_000,
      });
      expect(deleted.stderr).toBe("");
      expect(deleted.code).toBe(0);
      // The resync's listings of the tenant are the connection's; nothing else may come.
      const forIt = sharedSim
        .requests({ since })
        .filter((r) => r.method !== "GET" || r.url.includes(target.id) || r.url.includes(UNCLAIMED));
      expect(forIt).toEqual([]);
      expect(onService(sharedSim, UNCLAIMED)).toMatchObject({ id: target.id, status: "READY" });
      // The selector lets the victim in.
      expect(hasCondition(await user.get(victimNs, "reports"), "Synced", "True")).toBe(true);
      await unharmedAndServing();
    },
    ROW_TIMEOUT_MS,
  );

  it(
    "6. refuses the default connection to a namespace outside its selector: ConnectionNotAllowed, no POST",
    async () => {
      const since = Date.now();
      await user.create(hostileNs, "freeloader", spec("freeloader"));
      const refused = await refusedWith(hostileNs, "freeloader", "ConnectionNotAllowed");
      expect(conditionOf(refused, "Synced")?.message).toMatch(
        /--default-connection-namespace-selector|DMS_DEFAULT_CONNECTION_NAMESPACE_SELECTOR/,
      );
      expect(platformSim.requests({ method: "POST", since })).toEqual([]);
      expect(onService(platformSim, "freeloader")).toBeUndefined();
      // The selector lets the victim in.
      expect(hasCondition(await user.get(victimNs, "portal"), "Synced", "True")).toBe(true);
      await unharmedAndServing();
    },
    ROW_TIMEOUT_MS,
  );

  it(
    "7. does not delete another resource's deployment named by a forged status.deploymentId: Warning NotOwned",
    async () => {
      await user.create(victimNs, "forger", spec("forger", { ...own("victim"), deletionPolicy: "Delete" }));
      await running(user.waitReady(victimNs, "forger"));
      const since = Date.now();
      const forged = JSON.stringify({ status: { deploymentId: ids.mailer } });
      await kubectlOk([
        "patch",
        "dmsd",
        "forger",
        "-n",
        victimNs,
        "--subresource=status",
        "--type=merge",
        "-p",
        forged,
      ]);
      await kubectlOk(["delete", "dmsd", "forger", "-n", victimNs, "--wait=false"]);
      // The deletion was handled: refused with a warning, or done (and then it is known what it did).
      await running(
        waitFor(
          async () =>
            (await user.events(victimNs, "forger")).some((e) => e.reason === "NotOwned") ||
            (await user.get(victimNs, "forger")) === undefined,
          { timeoutMs: 30_000, intervalMs: 250, description: "the deletion of forger to be handled" },
        ),
      );
      const onMailer = victimSim
        .requests({ since })
        .filter((r) => r.method !== "GET" && r.url.startsWith(`/v2/deployments/${ids.mailer}`))
        .map((r) => `${r.method} ${r.url}`);
      expect(onMailer).toEqual([]);
      expect(onService(victimSim, "mailer")).toMatchObject({ id: ids.mailer, status: "READY" });
      const warning = await running(user.waitForEvent(victimNs, "forger", "NotOwned", 10_000));
      expect(warning.type).toBe("Warning");
      await unharmedAndServing();
    },
    ROW_TIMEOUT_MS,
  );

  /** Applies each object; returns, per name, whether it was refused with a message naming `field`. */
  const applyEach = async (objects: { object: object; name: string; field: string }[]) => {
    const results: Record<string, string> = {};
    for (const { object, name, field } of objects) {
      const { code, stderr } = await apply(object);
      results[name] =
        code === 0 ? "accepted" : stderr.includes(field) ? `refused naming ${field}` : `refused: ${stderr}`;
    }
    return results;
  };

  it("8. has the API server refuse a base URL with a fragment or query, and the Host header as the key's", async () => {
    const refusals = [
      { name: "metadata-token", spec: { baseUrl: "http://169.254.169.254/computeMetadata/v1/token#" } },
      { name: "metadata-query", spec: { baseUrl: "http://169.254.169.254/computeMetadata/v1/x?y=" } },
      { name: "host-header", spec: { baseUrl: hostileSim.url, apiKeyHeader: "Host" } },
    ];
    const results = await applyEach(
      refusals.map(({ name, spec }) => ({
        name,
        // No such Secret: were it accepted, the operator could not call anything with it.
        object: connection("ServiceConnection", name, spec, { name: "no-such-secret" }, hostileNs),
        field: "apiKeyHeader" in spec ? "spec.apiKeyHeader" : "spec.baseUrl",
      })),
    );
    expect(results).toEqual({
      "metadata-token": "refused naming spec.baseUrl",
      "metadata-query": "refused naming spec.baseUrl",
      "host-header": "refused naming spec.apiKeyHeader",
    });
    await operatorUnharmed();
  });

  it("9. has the API server refuse 1,000 labels, a sidecar with 10,000 args, and a 100 KB imageUri", async () => {
    // A connection that does not exist: were one accepted, the operator would call nothing for it.
    const nowhere = own("nowhere");
    const results = await applyEach(
      [
        {
          name: "many-labels",
          field: "spec.sourceConfig.resourceSpec.labels",
          spec: spec("many-labels", {
            ...nowhere,
            sourceConfig: {
              resourceSpec: {
                labels: Object.fromEntries(Array.from({ length: 1_000 }, (_, i) => [`label-${i}`, "x"])),
              },
            },
          }),
        },
        {
          name: "long-args",
          field: "spec.sourceConfig.resourceSpec.sidecars[0].args",
          spec: spec("long-args", {
            ...nowhere,
            sourceConfig: {
              resourceSpec: {
                sidecars: [{ name: "chatty", image: "busybox", args: Array(10_000).fill("--verbose") }],
              },
            },
          }),
        },
        {
          name: "huge-image",
          field: "spec.sourceRevisionConfig.imageUri",
          spec: spec("huge-image", {
            ...nowhere,
            sourceRevisionConfig: { imageUri: `registry.example.com/${"a".repeat(100 * 1024)}:1` },
          }),
        },
      ].map(({ name, field, spec }) => ({
        name,
        field,
        object: {
          apiVersion: "dms.dev/v1alpha1",
          kind: "Deployment",
          metadata: { name, namespace: hostileNs },
          spec,
        },
      })),
    );
    expect(results).toEqual({
      "many-labels": "refused naming spec.sourceConfig.resourceSpec.labels",
      "long-args": "refused naming spec.sourceConfig.resourceSpec.sidecars[0].args",
      "huge-image": "refused naming spec.sourceRevisionConfig.imageUri",
    });
    await operatorUnharmed();
  });

  it("answered 200 on /readyz throughout, and was never refused anything by the API server", async () => {
    expect(readyzPolls).toBeGreaterThan(0);
    await operatorUnharmed();
  });
});
