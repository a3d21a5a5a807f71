// `dms-operator plan` and the PR review show a change the rollout windows would hold as such,
// with the controller's own window rules: when it would go out, and what goes at once.
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { RolloutWindowSpec } from "../../src/crd/rollout-windows-schema.ts";
import { ANNOTATION_ROLLOUT_NOW, type DeploymentSpec } from "../../src/crd/schema.ts";
import { renderPlanJson, renderPlanText } from "../../src/gitops/plan-report.ts";
import { type ReviewInputs, reviewResource } from "../../src/gitops/review.ts";
import { remote } from "./plan-fixtures.ts";

/** Tuesday 13:00 in Berlin, and 23:00 the same day. */
const AFTERNOON = Date.parse("2026-11-24T12:00:00Z");
const NIGHT = Date.parse("2026-11-24T22:00:00Z");
const NIGHTS: RolloutWindowSpec = {
  kind: "allow",
  schedule: "0 22 * * 1-5",
  duration: "8h",
  timeZone: "Europe/Berlin",
};

const deployed = remote({
  name: "agent",
  source: "external_docker",
  source_config: { resource_spec: { cpu: 1 } },
  source_revision_config: { image_uri: "r/agent:1" },
});

/** A new image and more CPU, under `windows` when given. */
const spec = (windows?: RolloutWindowSpec[]): DeploymentSpec => ({
  source: "external_docker",
  sourceConfig: { resourceSpec: { cpu: 2 } },
  sourceRevisionConfig: { imageUri: "r/agent:2" },
  ...(windows ? { rolloutWindows: windows } : {}),
});

const inputs = (s: DeploymentSpec, over: Partial<ReviewInputs> = {}): ReviewInputs => ({
  file: "deploy/agent.yaml",
  line: 1,
  resource: { metadata: { name: "agent" }, spec: s },
  namespace: "team",
  observed: deployed,
  adopted: false,
  warnings: [],
  now: AFTERNOON,
  ...over,
});

const report = (input: ReviewInputs) => ({
  entries: [reviewResource(input)],
  fileErrors: [],
  clusterRead: true,
});

describe("plan: rollout windows", () => {
  it("outside the windows: the revision part is shown held until the opening, the rest goes now", () => {
    const entry = reviewResource(inputs(spec([NIGHTS])));
    expect(entry.action).toBe("patch");
    expect(entry.held).toEqual({
      until: "2026-11-24T21:00:00Z",
      local: "2026-11-24 22:00 Europe/Berlin (GMT+01:00)",
      windows: "spec.rolloutWindows",
      fields: ["sourceRevisionConfig.imageUri"],
      when: expect.stringContaining("it goes out at 2026-11-24T21:00:00Z"),
    });
    const text = renderPlanText(report(inputs(spec([NIGHTS]))));
    expect(text).toContain("    ~ sourceConfig.resourceSpec.cpu: 1 → 2");
    expect(text).toContain(
      "    held until 2026-11-24T21:00:00Z (2026-11-24 22:00 Europe/Berlin (GMT+01:00)): outside rollout windows (spec.rolloutWindows): sourceRevisionConfig.imageUri",
    );
    const json = JSON.parse(renderPlanJson(report(inputs(spec([NIGHTS]))))) as {
      resources: { held?: { until?: string } }[];
    };
    expect(json.resources[0]?.held?.until).toBe("2026-11-24T21:00:00Z");
  });

  it("a schedule that starts no window is an error naming it, as the controller refuses it", () => {
    const never: RolloutWindowSpec = { kind: "deny", schedule: "0 0 31 11 *", duration: "1h" };
    const entry = reviewResource(inputs(spec([NIGHTS, never])));
    expect(entry.action).toBe("error");
    expect(entry.error).toMatch(
      /^spec\.rolloutWindows\[1\]\.schedule: "0 0 31 11 \*" never starts a window within 8 years in UTC/,
    );
  });

  it("inside a window, without windows, or with a change that makes no revision: nothing held", () => {
    expect(reviewResource(inputs(spec([NIGHTS]), { now: NIGHT })).held).toBeUndefined();
    expect(reviewResource(inputs(spec())).held).toBeUndefined();
    const scaleOnly = { ...spec([NIGHTS]), sourceRevisionConfig: { imageUri: "r/agent:1" } };
    expect(reviewResource(inputs(scaleOnly)).held).toBeUndefined();
  });

  it("a new dms.dev/rollout-now lets it through; the value the live status acknowledged does not", () => {
    const annotated = (value: string) => ({
      metadata: { name: "agent", annotations: { [ANNOTATION_ROLLOUT_NOW]: value } },
      spec: spec([NIGHTS]),
    });
    expect(reviewResource(inputs(spec([NIGHTS]), { resource: annotated("2") })).held).toBeUndefined();
    const handled = inputs(spec([NIGHTS]), {
      resource: annotated("1"),
      live: { lastHandledRolloutNow: "1" },
    });
    expect(reviewResource(handled).held?.until).toBe("2026-11-24T21:00:00Z");
  });

  it("a rollout-now value over 1 KiB the status recorded as its digest counts as acknowledged, as the controller reads it", () => {
    const long = "x".repeat(2_000);
    const digest = `sha256:${createHash("sha256").update(long).digest("hex")}`;
    const handled = inputs(spec([NIGHTS]), {
      resource: {
        metadata: { name: "agent", annotations: { [ANNOTATION_ROLLOUT_NOW]: long } },
        spec: spec([NIGHTS]),
      },
      live: { lastHandledRolloutNow: digest },
    });
    expect(reviewResource(handled).held?.until).toBe("2026-11-24T21:00:00Z");
  });

  it("a rollout-now value 0.1.0 recorded as given (a line break), which this version keeps as its digest, counts as acknowledged", () => {
    const handled = inputs(spec([NIGHTS]), {
      resource: {
        metadata: { name: "agent", annotations: { [ANNOTATION_ROLLOUT_NOW]: "release-1\n" } },
        spec: spec([NIGHTS]),
      },
      live: { lastHandledRolloutNow: "release-1\n" },
    });
    expect(reviewResource(handled).held?.until).toBe("2026-11-24T21:00:00Z");
  });

  it("the connection's windows apply to a resource that sets none, and are named", () => {
    const inherited = { windows: [NIGHTS], from: "ServiceConnection team/prod" };
    const entry = reviewResource(inputs(spec(), { inheritedWindows: inherited }));
    expect(entry.held?.windows).toBe("spec.rolloutWindows of ServiceConnection team/prod");
    expect(reviewResource(inputs(spec([]), { inheritedWindows: inherited })).held).toBeUndefined();
  });

  it("a connection's binding windows are held against the resource's empty list and rollout-now, and named", () => {
    const binding = {
      windows: [NIGHTS],
      from: "ClusterServiceConnection prod",
      binding: { liftedBy: "cluster admins" },
    };
    const now = { [ANNOTATION_ROLLOUT_NOW]: "1" };
    const entry = reviewResource(
      inputs(spec([]), {
        inheritedWindows: binding,
        resource: { metadata: { name: "agent", annotations: now }, spec: spec([]) },
      }),
    );
    expect(entry.held).toMatchObject({
      until: "2026-11-24T21:00:00Z",
      windows:
        "spec.rolloutWindows of ClusterServiceConnection prod, binding: spec.rolloutWindowsPolicy Binding",
    });
  });

  it("a window the operator cannot read is the resource's error", () => {
    const entry = reviewResource(inputs(spec([{ ...NIGHTS, schedule: "0 25 * * *" }])));
    expect(entry.action).toBe("error");
    expect(entry.error).toMatch(
      /^spec\.rolloutWindows\[0\]\.schedule: "0 25 \* \* \*" is not a cron schedule/,
    );
  });
});
