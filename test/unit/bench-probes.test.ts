import { describe, expect, it } from "vitest";
import {
  apiRequestDelta,
  cpuMsPer,
  cpuReading,
  cpuSeconds,
  cpuSpent,
  etcdWriteDelta,
  memoryMiB,
  parseSamples,
  sumOf,
} from "../bench/probes.ts";

// The scale benchmark's figures come from these readings; a wrong parse would publish wrong figures.

const EXPOSITION = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="dms.dev",resource="deployments",scope="resource",subresource="",verb="GET",version="v1alpha1"} 120
apiserver_request_total{code="200",component="apiserver",dry_run="",group="dms.dev",resource="deployments",scope="resource",subresource="status",verb="APPLY",version="v1alpha1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="dms.dev",resource="deployments",scope="namespace",subresource="",verb="WATCH",version="v1alpha1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 40
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 3
apiserver_request_duration_seconds_bucket{le="0.005",verb="GET"} 99
`;

describe("parseSamples", () => {
  it("reads every sample of the named metric with its labels, and nothing else", () => {
    const samples = parseSamples(EXPOSITION, "apiserver_request_total");
    expect(samples).toHaveLength(5);
    expect(samples[1]).toEqual({
      name: "apiserver_request_total",
      labels: {
        code: "200",
        component: "apiserver",
        dry_run: "",
        group: "dms.dev",
        resource: "deployments",
        scope: "resource",
        subresource: "status",
        verb: "APPLY",
        version: "v1alpha1",
      },
      value: 7,
    });
    expect(sumOf(samples, (l) => l.resource === "deployments")).toBe(129);
  });

  it("keeps escaped quotes inside label values and reads samples without labels", () => {
    const samples = parseSamples('x_total{path="a\\"b"} 2\nx_total 5\n');
    expect(samples.map((s) => [s.labels, s.value])).toEqual([
      [{ path: 'a\\"b' }, 2],
      [{}, 5],
    ]);
  });
});

describe("apiRequestDelta", () => {
  const before = parseSamples(EXPOSITION, "apiserver_request_total");
  const after = parseSamples(
    EXPOSITION.replace('verb="GET",version="v1alpha1"} 120', 'verb="GET",version="v1alpha1"} 150')
      .replace('verb="APPLY",version="v1alpha1"} 7', 'verb="APPLY",version="v1alpha1"} 17')
      .replace('verb="WATCH",version="v1alpha1"} 2', 'verb="WATCH",version="v1alpha1"} 9')
      .replace('verb="PUT",version="v1"} 40', 'verb="PUT",version="v1"} 41')
      .concat(
        'apiserver_request_total{code="201",component="apiserver",dry_run="",group="dms.dev",resource="deployments",scope="resource",subresource="",verb="POST",version="v1alpha1"} 4\n',
      ),
    "apiserver_request_total",
  );

  it("counts the resource's requests by verb, a series new since the first scrape too, and never a WATCH", () => {
    const delta = apiRequestDelta(before, after, "dms.dev", "deployments");
    expect(delta.target).toBe(30 + 10 + 4);
    expect(delta.byVerb).toEqual({ GET: 30, "APPLY/status": 10, POST: 4 });
  });

  it("lists the other resources' requests apart, and leaves out what did not change", () => {
    expect(apiRequestDelta(before, after, "dms.dev", "deployments").other).toEqual({ "PUT leases": 1 });
    expect(apiRequestDelta(before, before, "dms.dev", "deployments")).toEqual({
      target: 0,
      byVerb: {},
      other: {},
    });
  });
});

describe("/proc readings of a process", () => {
  it("CPU seconds follow the process's own account of its CPU time", () => {
    const usage0 = process.cpuUsage();
    const proc0 = cpuSeconds(process.pid);
    // Busy until the process has used 300 ms of CPU (however loaded the machine is).
    let x = 0;
    while (process.cpuUsage(usage0).user < 300_000) x += Math.sqrt(x + 1);
    expect(x).toBeGreaterThan(0);
    const used = process.cpuUsage(usage0);
    const byProc = cpuSeconds(process.pid) - proc0;
    // /proc counts in clock ticks (10 ms); allow for them and for the other threads of the process.
    expect(byProc).toBeGreaterThan(0.2);
    expect(Math.abs(byProc - (used.user + used.system) / 1e6)).toBeLessThan(0.1);
    // 300 ms of CPU is seconds of wall time on a loaded machine: the bound is the CPU, not the clock.
  }, 60_000);

  it("CPU by group: summed over its processes, a process started between the readings from zero, one gone left out", () => {
    const reading = (entries: Array<[number, string, number]>) =>
      new Map(entries.map(([pid, group, seconds]) => [pid, { group, seconds }]));
    const before = reading([
      [10, "apiServer", 5],
      [20, "operators", 1],
      [21, "operators", 2],
      [30, "etcd", 0.5],
    ]);
    // 21 exited; 22 started; etcd used nothing.
    const after = reading([
      [10, "apiServer", 7.5],
      [20, "operators", 1.25],
      [22, "operators", 0.5],
      [30, "etcd", 0.5],
    ]);
    expect(cpuSpent(before, after)).toEqual({ apiServer: 2.5, operators: 0.75, etcd: 0 });
    // A group whose every process is gone between the readings is there, at zero.
    expect(cpuSpent(reading([[40, "benchmark", 1]]), reading([]))).toEqual({ benchmark: 0 });
  });

  it("CPU per item is each group's seconds in ms per item, to 0.1 ms, and nothing without items", () => {
    expect(cpuMsPer({ operator: 1.5, apiServer: 9.01234, etcd: 0 }, 300)).toEqual({
      operator: 5,
      apiServer: 30,
      etcd: 0,
    });
    expect(cpuMsPer({ apiServer: 0.01234 }, 1)).toEqual({ apiServer: 12.3 });
    expect(cpuMsPer({ operator: 1 }, 0)).toEqual({});
  });

  it("a CPU reading reads each live process and leaves out a pid that does not exist", () => {
    // pid_max is at most 2^22 on Linux: this one is never a process.
    const reading = cpuReading({ benchmark: [process.pid], gone: [2 ** 22 + 7] });
    expect([...reading.keys()]).toEqual([process.pid]);
    expect(reading.get(process.pid)?.group).toBe("benchmark");
    expect(reading.get(process.pid)?.seconds).toBeGreaterThan(0);
  });

  it("resident memory matches what Node reports, and the peak is at least the current", () => {
    const { rss, peak } = memoryMiB(process.pid);
    const own = process.memoryUsage().rss / 1024 / 1024;
    expect(Math.abs(rss - own) / own).toBeLessThan(0.1);
    expect(peak).toBeGreaterThanOrEqual(rss);
  });
});

describe("etcdWriteDelta", () => {
  const scrape = (update: number, get: number) =>
    parseSamples(
      `etcd_requests_total{group="dms.dev",operation="update",resource="deployments"} ${update}
etcd_requests_total{group="dms.dev",operation="get",resource="deployments"} ${get}
etcd_requests_total{group="apps",operation="update",resource="deployments"} ${update * 2}
`,
      "etcd_requests_total",
    );

  it("counts the resource's writes only: no reads, no other group's writes", () => {
    expect(etcdWriteDelta(scrape(10, 50), scrape(13, 90), "dms.dev", "deployments")).toBe(3);
  });
});
