import { describe, expect, it } from "vitest";
import { classifyStack, cpuByKind, KINDS } from "../bench/api-server-profile.ts";

/** Stacks as `go tool pprof -traces` prints them: the value and the leaf, then the callers. */
function traces(...blocks: Array<[string, string[]]>): string {
  const separator = "-----------+-------------------------------------------------------";
  const lines = ["File: kube-apiserver", "Type: cpu", "Duration: 20s, Total samples = 1s (5%)"];
  for (const [value, frames] of blocks) {
    lines.push(separator, `${value.padStart(10)}   ${frames[0]}`);
    for (const frame of frames.slice(1)) lines.push(`             ${frame}`);
  }
  lines.push(separator);
  return `${lines.join("\n")}\n`;
}

const STATUS_WRITE = [
  "runtime.mallocgc",
  "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel.(*Validator).Validate",
  "k8s.io/apiextensions-apiserver/pkg/registry/customresource.(*StatusREST).Update",
  "k8s.io/apiserver/pkg/endpoints/handlers.(*patcher).patchResource.func2",
  "k8s.io/apiserver/pkg/endpoints/handlers/finisher.finishRequest.func1",
];
const LABEL_WRITE = [
  "encoding/json.Marshal",
  "k8s.io/apiserver/pkg/registry/generic/registry.(*Store).Update",
  "k8s.io/apiserver/pkg/endpoints/handlers.(*patcher).patchResource.func2",
  "k8s.io/apiserver/pkg/endpoints/handlers/finisher.finishRequest.func1",
];
const CREATE = [
  "k8s.io/apiserver/pkg/registry/generic/registry.(*Store).Create",
  "k8s.io/apiserver/pkg/endpoints/handlers.createHandler.func1.1",
  "k8s.io/apiserver/pkg/endpoints/handlers/finisher.finishRequest.func1",
];
const FILTERS = [
  "net/http.HandlerFunc.ServeHTTP",
  "k8s.io/apiserver/pkg/server.DefaultBuildHandlerChain.WithWarningRecorder.func11",
  "k8s.io/apiserver/pkg/server/filters.(*timeoutHandler).ServeHTTP.func1",
];
const GC = [
  "runtime.scanobject",
  "runtime.gcDrain",
  "runtime.gcBgMarkWorker.func2",
  "runtime.gcBgMarkWorker",
];
const WATCH_DECODE = [
  "k8s.io/apiserver/pkg/storage/etcd3.decodeObj",
  "k8s.io/apiserver/pkg/storage/etcd3.(*watchChan).transform",
  "k8s.io/apiserver/pkg/storage/etcd3.(*watchChan).serialProcessEvents",
];

describe("the API server's profile by kind of work", () => {
  it("classifies a stack by the request it serves, the status subresource before any write", () => {
    expect(classifyStack(STATUS_WRITE)).toBe("status writes");
    expect(classifyStack(LABEL_WRITE)).toBe("other writes");
    expect(classifyStack(CREATE)).toBe("creates");
    expect(classifyStack(FILTERS)).toBe("request handling");
    expect(classifyStack(GC)).toBe("garbage collection");
    expect(classifyStack(WATCH_DECODE)).toBe("changes read from etcd");
    expect(classifyStack(["k8s.io/apiserver/pkg/storage/cacher.(*cacheWatcher).process"])).toBe(
      "watches served",
    );
    expect(classifyStack(["k8s.io/apiserver/pkg/endpoints/handlers.ListResource.func1"])).toBe("reads");
    expect(classifyStack(["go.etcd.io/etcd/client/v3.(*watchGRPCStream).run"])).toBe("etcd client");
    expect(classifyStack(["runtime.schedule", "runtime.park_m", "runtime.mcall"])).toBe("other");
  });

  it("sums each sample's value, in any of pprof's units, under its stack's kind", () => {
    const sums = cpuByKind(
      traces(
        ["10ms", STATUS_WRITE],
        ["1.50s", STATUS_WRITE],
        ["250us", LABEL_WRITE],
        ["20ms", GC],
        ["30ms", FILTERS],
        ["5ms", ["runtime.findRunnable", "runtime.schedule"]],
      ),
    );
    expect(Object.keys(sums)).toEqual([...KINDS]);
    expect(sums["status writes"]).toBeCloseTo(1.51, 9);
    expect(sums["other writes"]).toBeCloseTo(0.00025, 9);
    expect(sums["garbage collection"]).toBeCloseTo(0.02, 9);
    expect(sums["request handling"]).toBeCloseTo(0.03, 9);
    expect(sums.other).toBeCloseTo(0.005, 9);
    expect(sums.creates).toBe(0);
  });

  it("counts nothing from a text without stacks", () => {
    const sums = cpuByKind("File: kube-apiserver\nType: cpu\n");
    expect(Object.values(sums).every((s) => s === 0)).toBe(true);
  });
});
