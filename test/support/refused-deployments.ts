// Deployment specs the API server refuses on create, each with the message it answers: applied
// to a real kube-apiserver by test/integration/crd-validation.test.ts, and given to plan's own
// validation by test/unit/plan-validation.test.ts, so the two verdicts are compared on the same input.

type Spec = Record<string, unknown>;

/** A spec the API server refuses, why, and the message it answers with. */
export interface RefusedSpec {
  reason: string;
  spec: Spec;
  message: RegExp;
}

export const UUID = "6f1c1d2e-0000-4000-8000-000000000001";

/**
 * `spec.rolloutWindows` refused, the same on a Deployment (with `source`) and on a connection:
 * a kind outside the enum, a schedule of other than 5 fields, a duration that is not a Go
 * duration, a time zone that is not a name, and more than 16 windows.
 */
export function rolloutWindowCases(source?: string): RefusedSpec[] {
  const night = { kind: "allow", schedule: "0 22 * * 1-5", duration: "8h" };
  const windows = (list: unknown[]) => ({ ...(source ? { source } : {}), rolloutWindows: list });
  return [
    {
      reason: "a rollout window of kind maybe",
      spec: windows([{ ...night, kind: "maybe" }]),
      message: /spec\.rolloutWindows\[0\]\.kind: Unsupported value: "maybe"/,
    },
    {
      reason: "a rollout window schedule of one word",
      spec: windows([{ ...night, schedule: "nightly" }]),
      message: /spec\.rolloutWindows\[0\]\.schedule: Invalid value: "nightly"/,
    },
    {
      reason: "a rollout window duration in words",
      spec: windows([{ ...night, duration: "1 hour" }]),
      message: /spec\.rolloutWindows\[0\]\.duration: Invalid value: "1 hour"/,
    },
    {
      reason: "a rollout window time zone that is a path",
      spec: windows([{ ...night, timeZone: "../etc/passwd" }]),
      message: /spec\.rolloutWindows\[0\]\.timeZone: Invalid value: "\.\.\/etc\/passwd"/,
    },
    {
      reason: "17 rollout windows",
      spec: windows(Array.from({ length: 17 }, () => night)),
      message: /spec\.rolloutWindows: Too many: 17: must have at most 16 items/,
    },
  ];
}

const secretRef = { secretKeyRef: { name: "s", key: "k" } };
export const REFUSED_DEPLOYMENT_SPECS: RefusedSpec[] = [
  { reason: "source is required", spec: {}, message: /spec\.source: Required value/ },
  {
    reason: "source outside the enum",
    spec: { source: "ftp" },
    message: /spec\.source: Unsupported value: "ftp"/,
  },
  {
    reason: "source github with neither spec.github nor sourceConfig.repoUrl and integrationId",
    spec: { source: "github", sourceRevisionConfig: { repoRef: "main" } },
    message:
      /spec\.source: Required value: spec\.source github needs its repository: set spec\.github \(repository owner\/name and integrationId\), or sourceConfig\.repoUrl and sourceConfig\.integrationId/,
  },
  {
    reason: "source github with sourceConfig.repoUrl but no integrationId",
    spec: { source: "github", sourceConfig: { repoUrl: "https://github.com/acme/agent" } },
    message: /spec\.source: Required value: spec\.source github needs its repository/,
  },
  {
    reason: "revisionSource outside the enum",
    spec: { source: "github", revisionSource: "external_docker" },
    message: /spec\.revisionSource: Unsupported value/,
  },
  {
    reason: "managementPolicy outside the enum",
    spec: { source: "github", managementPolicy: "Sometimes" },
    message: /spec\.managementPolicy: Unsupported value/,
  },
  {
    reason: "deletionPolicy outside the enum",
    spec: { source: "github", deletionPolicy: "Keep" },
    message: /spec\.deletionPolicy: Unsupported value/,
  },
  {
    reason: "a secret with both value and valueFrom",
    spec: { source: "github", secrets: [{ name: "A", value: "v", valueFrom: secretRef }] },
    message: /spec\.secrets\[0\].*set exactly one of value or valueFrom/,
  },
  {
    reason: "a secret with neither value nor valueFrom",
    spec: { source: "github", secrets: [{ name: "A" }] },
    message: /spec\.secrets\[0\].*set exactly one of value or valueFrom/,
  },
  {
    reason: "two secrets of the same name",
    spec: {
      source: "github",
      secrets: [
        { name: "A", value: "1" },
        { name: "A", value: "2" },
      ],
    },
    message: /spec\.secrets\[1\]: Duplicate value/,
  },
  {
    reason: "a secretKeyRef key that no Secret can hold",
    spec: {
      source: "github",
      secrets: [{ name: "A", valueFrom: { secretKeyRef: { name: "s", key: "a/b" } } }],
    },
    message: /spec\.secrets\[0\]\.valueFrom\.secretKeyRef\.key: Invalid value/,
  },
  {
    reason: "secretReferences with a source other than external_docker",
    spec: { source: "github", secretReferences: [{ name: "A", secretName: "s", secretKey: "k" }] },
    message:
      /spec\.secretReferences: Forbidden: spec\.secretReferences is allowed only with spec\.source external_docker/,
  },
  {
    reason: "a negative number",
    spec: { source: "github", sourceConfig: { resourceSpec: { memoryMb: -1 } } },
    message: /spec\.sourceConfig\.resourceSpec\.memoryMb: Invalid value: -1: .*greater than or equal to 0/,
  },
  {
    reason: "cpu above cpuLimit",
    spec: { source: "github", sourceConfig: { resourceSpec: { cpu: 2, cpuLimit: 1 } } },
    message:
      /spec\.sourceConfig\.resourceSpec\.cpu: Invalid value: .*must not exceed spec\.sourceConfig\.resourceSpec\.cpuLimit/,
  },
  {
    reason: "memoryMb above memoryLimitMb",
    spec: { source: "github", sourceConfig: { resourceSpec: { memoryMb: 2048, memoryLimitMb: 1024.5 } } },
    message: /spec\.sourceConfig\.resourceSpec\.memoryMb: .*must not exceed .*memoryLimitMb/,
  },
  {
    reason: "a database request above its limit",
    spec: { source: "github", sourceConfig: { resourceSpec: { dbCpu: 1.5, dbCpuLimit: 1 } } },
    message: /spec\.sourceConfig\.resourceSpec\.dbCpu: .*must not exceed .*dbCpuLimit/,
  },
  {
    reason: "minScale above maxScale",
    spec: { source: "github", sourceConfig: { resourceSpec: { minScale: 3, maxScale: 1 } } },
    message: /spec\.sourceConfig\.resourceSpec\.minScale: .*must not exceed .*maxScale/,
  },
  {
    reason: "queueMinScale above queueMaxScale",
    spec: { source: "github", sourceConfig: { resourceSpec: { queueMinScale: 3, queueMaxScale: 1 } } },
    message: /spec\.sourceConfig\.resourceSpec\.queueMinScale: .*must not exceed .*queueMaxScale/,
  },
  {
    reason: "orchestratorMinScale above orchestratorMaxScale",
    spec: {
      source: "github",
      sourceConfig: { resourceSpec: { orchestratorMinScale: 2, orchestratorMaxScale: 1 } },
    },
    message:
      /spec\.sourceConfig\.resourceSpec\.orchestratorMinScale: .*must not exceed .*orchestratorMaxScale/,
  },
  {
    reason: "an integration id that is not a uuid",
    spec: { source: "github", sourceConfig: { integrationId: "not-a-uuid" } },
    message: /spec\.sourceConfig\.integrationId: Invalid value: "not-a-uuid"/,
  },
  {
    reason: "the github shorthand with another source",
    spec: { source: "external_docker", github: { integrationId: UUID, repository: "acme/a" } },
    message: /spec\.github: Forbidden: spec\.github is allowed only with spec\.source github/,
  },
  {
    reason: "the github shorthand together with repoUrl",
    spec: {
      source: "github",
      github: { integrationId: UUID, repository: "acme/a" },
      sourceConfig: { repoUrl: "x" },
    },
    message: /spec\.github: Forbidden: spec\.github sets sourceConfig\.repoUrl/,
  },
  {
    reason: "a github repository that is not owner/name",
    spec: { source: "github", github: { integrationId: UUID, repository: "just-a-name" } },
    message: /spec\.github\.repository: Invalid value: "just-a-name"/,
  },
  {
    reason: "1,000 labels",
    spec: {
      source: "github",
      sourceConfig: {
        resourceSpec: {
          labels: Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`l${i}`, "v"])),
        },
      },
    },
    message: /spec\.sourceConfig\.resourceSpec\.labels: Too many: 1000: must have at most 32 items/,
  },
  {
    reason: "a label key longer than a qualified name",
    spec: { source: "github", sourceConfig: { resourceSpec: { labels: { ["k".repeat(318)]: "v" } } } },
    message:
      /spec\.sourceConfig\.resourceSpec\.labels: Invalid value: .*spec\.sourceConfig\.resourceSpec\.labels: a key is longer than 317 characters/,
  },
  {
    reason: "a sidecar with 10,000 args",
    spec: {
      source: "external_docker",
      sourceConfig: {
        resourceSpec: { sidecars: [{ name: "s", args: Array.from({ length: 10_000 }, () => "-v") }] },
      },
    },
    message:
      /spec\.sourceConfig\.resourceSpec\.sidecars\[0\]\.args: Too many: 10000: must have at most 16 items/,
  },
  {
    reason: "a 100 KB imageUri",
    spec: { source: "external_docker", sourceRevisionConfig: { imageUri: `r/${"a".repeat(100_000)}:1` } },
    message: /spec\.sourceRevisionConfig\.imageUri: Too long: may not be (more|longer) than 512/,
  },
  {
    reason: "a literal secret value longer than 512 characters",
    spec: { source: "github", secrets: [{ name: "A", value: "v".repeat(513) }] },
    message: /spec\.secrets\[0\]\.value: Too long: may not be (more|longer) than 512/,
  },
  {
    reason: "257 secrets",
    spec: {
      source: "github",
      secrets: Array.from({ length: 257 }, (_, i) => ({ name: `S${i}`, value: "v" })),
    },
    message: /spec\.secrets: Too many: 257: must have at most 256 items/,
  },
  {
    reason: "a cpu of a million cores",
    spec: { source: "github", sourceConfig: { resourceSpec: { cpu: 1e6 } } },
    message: /spec\.sourceConfig\.resourceSpec\.cpu: Invalid value: .*less than or equal to 1024/,
  },
  {
    reason: "1.5 replicas",
    spec: { source: "github", sourceConfig: { resourceSpec: { minScale: 1.5 } } },
    message: /spec\.sourceConfig\.resourceSpec\.minScale: Invalid value: 1\.5: .*should be a multiple of 1/,
  },
  {
    reason: "half a database connection",
    spec: { source: "github", sourceConfig: { resourceSpec: { dbMaxConnections: 10.5 } } },
    message:
      /spec\.sourceConfig\.resourceSpec\.dbMaxConnections: Invalid value: 10\.5: .*should be a multiple of 1/,
  },
  {
    reason: "the github shorthand without a repository",
    spec: { source: "github", github: { integrationId: UUID } },
    message: /spec\.github\.repository: Required value/,
  },
  {
    // A name only: the ConfigMap is in the resource's own namespace, never another.
    reason: "an export naming a ConfigMap of another namespace",
    spec: { source: "external_docker", export: { configMapName: "other-team/agent-endpoint" } },
    message: /spec\.export\.configMapName: Invalid value: "other-team\/agent-endpoint"/,
  },
  {
    reason: "an export without a ConfigMap name",
    spec: { source: "external_docker", export: {} },
    message: /spec\.export\.configMapName: Required value/,
  },
  ...rolloutWindowCases("github"),
];
