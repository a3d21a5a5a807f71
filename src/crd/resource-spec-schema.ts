/**
 * `spec.sourceConfig.resourceSpec` of the Deployment resource: the service's ResourceSpec in
 * Kubernetes camelCase. Part of the one schema (see `schema.ts`) that yields both the CRD and
 * the TypeScript types.
 *
 * Nested Kubernetes-shaped objects (volume sources, env `valueFrom`, `envFrom`, `securityContext`,
 * `resources.limits`/`requests`, labels, annotations) are kept as given: the service documents
 * their field names but not their contents, so the CRD preserves unknown fields inside them.
 */
import { type TNumber, type TOptional, Type } from "@sinclair/typebox";
import { BoundedMap, PreservedObject } from "./openapi-types.ts";

/**
 * Bounds of what `resourceSpec` may hold, from Kubernetes' own limits where it has one (names,
 * label keys and values) and otherwise from what a deployment needs with room to spare: together
 * they keep the largest valid Deployment resource under 512 KiB (`test/unit/crd-size.test.ts`).
 * Anything larger belongs in a ConfigMap or a Secret the containers read.
 */
export const RESOURCE_SPEC_LIMITS = {
  /** A DNS label: container, volume and volume mount names. */
  dnsLabel: 63,
  /** A Kubernetes object name: service account, image pull Secret. */
  objectName: 253,
  /** A qualified name: an optional DNS-subdomain prefix (253), "/", a name (63). */
  qualifiedName: 317,
  labels: 32,
  labelValue: 63,
  annotations: 16,
  annotationValue: 512,
  imagePullSecrets: 8,
  volumes: 16,
  volumeMounts: 8,
  /** A path in a container: mount paths, sub-paths, working directory. */
  path: 256,
  /** `mountPropagation`, `imagePullPolicy`, `restartPolicy`: a Kubernetes enum word. */
  keyword: 32,
  initContainers: 2,
  sidecars: 4,
  image: 512,
  command: 4,
  args: 16,
  argument: 256,
  env: 16,
  envName: 128,
  envValue: 256,
  envFrom: 4,
  containerVolumeMounts: 4,
  /** Fields of a Kubernetes-shaped object kept as given (its own fields, not their contents). */
  preservedFields: 32,
} as const;
const L = RESOURCE_SPEC_LIMITS;

const RS = "spec.sourceConfig.resourceSpec";
const Str = (maxLength: number, description: string) => Type.String({ maxLength, description });
const Preserved = (description: string) => PreservedObject(description, L.preservedFields);

/**
 * Every numeric ResourceSpec field: camelCase name in the resource, snake_case name on the wire,
 * and the description `kubectl explain` shows. Explicit on purpose: no case conversion at runtime.
 */
export const RESOURCE_SPEC_NUMBERS = [
  ["minScale", "min_scale", "Minimum number of replicas of the main service. At most maxScale."],
  ["maxScale", "max_scale", "Maximum number of replicas of the main service. At least minScale."],
  ["cpu", "cpu", "CPU requested by the main service, in the service's CPU units. At most cpuLimit."],
  ["cpuLimit", "cpu_limit", "CPU limit of the main service. At least cpu."],
  ["memoryMb", "memory_mb", "Memory requested by the main service, in MB. At most memoryLimitMb."],
  ["memoryLimitMb", "memory_limit_mb", "Memory limit of the main service, in MB. At least memoryMb."],
  ["queueMinScale", "queue_min_scale", "Minimum number of queue workers. At most queueMaxScale."],
  ["queueMaxScale", "queue_max_scale", "Maximum number of queue workers. At least queueMinScale."],
  ["queueCpu", "queue_cpu", "CPU requested by each queue worker. At most queueCpuLimit."],
  ["queueCpuLimit", "queue_cpu_limit", "CPU limit of each queue worker. At least queueCpu."],
  [
    "queueMemoryMb",
    "queue_memory_mb",
    "Memory requested by each queue worker, in MB. At most queueMemoryLimitMb.",
  ],
  [
    "queueMemoryLimitMb",
    "queue_memory_limit_mb",
    "Memory limit of each queue worker, in MB. At least queueMemoryMb.",
  ],
  ["orchestratorCpu", "orchestrator_cpu", "CPU requested by the orchestrator. At most orchestratorCpuLimit."],
  [
    "orchestratorCpuLimit",
    "orchestrator_cpu_limit",
    "CPU limit of the orchestrator. At least orchestratorCpu.",
  ],
  [
    "orchestratorMemoryMb",
    "orchestrator_memory_mb",
    "Memory requested by the orchestrator, in MB. At most orchestratorMemoryLimitMb.",
  ],
  [
    "orchestratorMemoryLimitMb",
    "orchestrator_memory_limit_mb",
    "Memory limit of the orchestrator, in MB. At least orchestratorMemoryMb.",
  ],
  [
    "orchestratorMinScale",
    "orchestrator_min_scale",
    "Minimum number of orchestrator replicas. At most orchestratorMaxScale.",
  ],
  [
    "orchestratorMaxScale",
    "orchestrator_max_scale",
    "Maximum number of orchestrator replicas. At least orchestratorMinScale.",
  ],
  ["executorCpu", "executor_cpu", "CPU requested by each executor. At most executorCpuLimit."],
  ["executorCpuLimit", "executor_cpu_limit", "CPU limit of each executor. At least executorCpu."],
  [
    "executorMemoryMb",
    "executor_memory_mb",
    "Memory requested by each executor, in MB. At most executorMemoryLimitMb.",
  ],
  [
    "executorMemoryLimitMb",
    "executor_memory_limit_mb",
    "Memory limit of each executor, in MB. At least executorMemoryMb.",
  ],
  ["redisCpu", "redis_cpu", "CPU requested by Redis. At most redisCpuLimit."],
  ["redisCpuLimit", "redis_cpu_limit", "CPU limit of Redis. At least redisCpu."],
  ["redisMemoryMb", "redis_memory_mb", "Memory requested by Redis, in MB. At most redisMemoryLimitMb."],
  ["redisMemoryLimitMb", "redis_memory_limit_mb", "Memory limit of Redis, in MB. At least redisMemoryMb."],
  ["dbCpu", "db_cpu", "CPU requested by the database. At most dbCpuLimit."],
  ["dbCpuLimit", "db_cpu_limit", "CPU limit of the database. At least dbCpu."],
  ["dbMemoryMb", "db_memory_mb", "Memory requested by the database, in MB. At most dbMemoryLimitMb."],
  ["dbMemoryLimitMb", "db_memory_limit_mb", "Memory limit of the database, in MB. At least dbMemoryMb."],
  ["dbStorageGi", "db_storage_gi", "Storage of the database, in GiB."],
  ["dbMaxConnections", "db_max_connections", "Maximum number of database connections."],
] as const;
export type ResourceSpecNumberKey = (typeof RESOURCE_SPEC_NUMBERS)[number][0];

/**
 * Pairs (lower, upper) where the lower value must not exceed the upper one when both are set:
 * a request and its limit, a minimum scale and its maximum. Each becomes one CEL rule.
 */
export const ORDERED_PAIRS: ReadonlyArray<readonly [ResourceSpecNumberKey, ResourceSpecNumberKey]> = [
  ["minScale", "maxScale"],
  ["cpu", "cpuLimit"],
  ["memoryMb", "memoryLimitMb"],
  ["queueMinScale", "queueMaxScale"],
  ["queueCpu", "queueCpuLimit"],
  ["queueMemoryMb", "queueMemoryLimitMb"],
  ["orchestratorCpu", "orchestratorCpuLimit"],
  ["orchestratorMemoryMb", "orchestratorMemoryLimitMb"],
  ["orchestratorMinScale", "orchestratorMaxScale"],
  ["executorCpu", "executorCpuLimit"],
  ["executorMemoryMb", "executorMemoryLimitMb"],
  ["redisCpu", "redisCpuLimit"],
  ["redisMemoryMb", "redisMemoryLimitMb"],
  ["dbCpu", "dbCpuLimit"],
  ["dbMemoryMb", "dbMemoryLimitMb"],
];

const RESOURCE_SPEC_PATH = "spec.sourceConfig.resourceSpec";

/** The CEL rules of `resourceSpec`: one per ordered pair, each naming the field and the fix. */
export const orderedPairRules = ORDERED_PAIRS.map(([low, high]) => ({
  rule: `!has(self.${low}) || !has(self.${high}) || self.${low} <= self.${high}`,
  message: `${RESOURCE_SPEC_PATH}.${low} must not exceed ${RESOURCE_SPEC_PATH}.${high}: lower ${low} or raise ${high}`,
  fieldPath: `.${low}`,
  reason: "FieldValueInvalid",
}));

/**
 * Upper bound of a numeric field, by what it counts: far above any real deployment, so that only
 * a mistake (a unit off by a thousand, a stray exponent) is refused.
 */
export function maximumOf(key: ResourceSpecNumberKey): number {
  if (key.endsWith("Scale")) return 10_000; // replicas
  if (/cpu/i.test(key)) return 1_024; // cores
  if (/memory/i.test(key)) return 16_777_216; // MB: 16 TiB
  if (key === "dbStorageGi") return 1_048_576; // GiB: 1 PiB
  return 1_000_000; // dbMaxConnections
}

/**
 * Whether a field counts things (replicas, workers, connections): a whole number. The service
 * documents every ResourceSpec field only as a number; half a replica is meaningless, so the CRD
 * refuses it where the service would have to round. CPU, memory and storage sizes stay numbers:
 * the service does not say they are whole, and 0.5 CPU or 1.5 GiB are ordinary values.
 *
 * A count is a `number` that is a multiple of 1, not an `integer`: 0.1.0's CRD accepted any
 * number, and the API server cannot evaluate a CEL rule that reads an `integer` field holding
 * 1.5 (`expected int, got float64`), an error it does not ratchet. Such a stored resource would
 * refuse every later write (a label, the status, its finalizer's removal); `multipleOf` is
 * ratcheted, so it stays writable until that field is edited, and then must be whole.
 */
export function isCount(key: ResourceSpecNumberKey): boolean {
  return key.endsWith("Scale") || key === "dbMaxConnections";
}

const numberFields = Object.fromEntries(
  RESOURCE_SPEC_NUMBERS.map(([key, , description]) => {
    const bounds = { minimum: 0, maximum: maximumOf(key) };
    const field = isCount(key)
      ? Type.Number({
          ...bounds,
          multipleOf: 1,
          description: `${description} A whole number from 0 to ${maximumOf(key)}.`,
        })
      : Type.Number({ ...bounds, description: `${description} Non-negative, at most ${maximumOf(key)}.` });
    return [key, Type.Optional(field)];
  }),
) as { [K in ResourceSpecNumberKey]: TOptional<TNumber> };

const VolumeMount = Type.Object(
  {
    name: Type.Optional(Str(L.dnsLabel, "Name of the volume to mount.")),
    mountPath: Type.Optional(Str(L.path, "Path in the container where the volume is mounted.")),
    subPath: Type.Optional(Str(L.path, "Path within the volume to mount instead of its root.")),
    mountPropagation: Type.Optional(Str(L.keyword, "How mounts are propagated (Kubernetes semantics).")),
    subPathExpr: Type.Optional(
      Str(L.path, "Like subPath, with $(VAR) references expanded from the environment."),
    ),
    readOnly: Type.Optional(Type.Boolean({ description: "Mount the volume read-only." })),
  },
  { description: "A volume mount, shaped like a Kubernetes VolumeMount." },
);

const VolumeMounts = (maxItems: number, description: string) =>
  Type.Array(VolumeMount, { maxItems, description });

const Volume = Type.Object(
  {
    name: Type.Optional(Str(L.dnsLabel, "Name of the volume, referenced by volume mounts.")),
    configMap: Type.Optional(Preserved("A ConfigMap volume source, kept as given.")),
    secret: Type.Optional(Preserved("A Secret volume source, kept as given.")),
    emptyDir: Type.Optional(Preserved("An emptyDir volume source, kept as given.")),
    persistentVolumeClaim: Type.Optional(Preserved("A PersistentVolumeClaim volume source, kept as given.")),
    nfs: Type.Optional(Preserved("An NFS volume source, kept as given.")),
    projected: Type.Optional(Preserved("A projected volume source, kept as given.")),
    downwardAPI: Type.Optional(Preserved("A downward API volume source, kept as given.")),
    csi: Type.Optional(Preserved("A CSI volume source, kept as given.")),
  },
  { description: "A volume, shaped like a Kubernetes Volume: a name and one volume source." },
);

const EnvVar = Type.Object(
  {
    name: Type.Optional(Str(L.envName, "Name of the environment variable (case kept).")),
    value: Type.Optional(
      Str(L.envValue, "Literal value. A longer one belongs in a ConfigMap, read through valueFrom."),
    ),
    valueFrom: Type.Optional(
      Preserved("Where the value comes from (Kubernetes EnvVarSource), kept as given."),
    ),
  },
  { description: "An environment variable, shaped like a Kubernetes EnvVar." },
);

const Container = Type.Object(
  {
    name: Type.Optional(Str(L.dnsLabel, "Name of the container.")),
    image: Type.Optional(Str(L.image, "Container image reference.")),
    imagePullPolicy: Type.Optional(Str(L.keyword, "Always, IfNotPresent or Never.")),
    workingDir: Type.Optional(Str(L.path, "Working directory of the container.")),
    restartPolicy: Type.Optional(Str(L.keyword, "Container restart policy (Kubernetes semantics).")),
    command: Type.Optional(
      Type.Array(Str(L.argument, "One word of the entrypoint."), {
        maxItems: L.command,
        description: "Entrypoint, replacing the image's.",
      }),
    ),
    args: Type.Optional(
      Type.Array(Str(L.argument, "One argument."), {
        maxItems: L.args,
        description: "Arguments to the entrypoint. A longer script belongs in a ConfigMap mounted as a file.",
      }),
    ),
    env: Type.Optional(
      Type.Array(EnvVar, { maxItems: L.env, description: "Environment variables, in order." }),
    ),
    envFrom: Type.Optional(
      Type.Array(Preserved("A Kubernetes EnvFromSource, kept as given."), {
        maxItems: L.envFrom,
        description: "Sources of environment variables (ConfigMaps, Secrets).",
      }),
    ),
    resources: Type.Optional(
      Type.Object(
        {
          limits: Type.Optional(Preserved("Resource limits, e.g. cpu and memory quantities.")),
          requests: Type.Optional(Preserved("Resource requests, e.g. cpu and memory quantities.")),
        },
        { description: "Compute resources of the container." },
      ),
    ),
    volumeMounts: Type.Optional(VolumeMounts(L.containerVolumeMounts, "Volumes mounted into the container.")),
    securityContext: Type.Optional(Preserved("A Kubernetes SecurityContext, kept as given.")),
  },
  { description: "A container, shaped like a Kubernetes Container (the fields the service knows)." },
);

const Containers = (maxItems: number, description: string) =>
  Type.Array(Container, { maxItems, description });

/** The resource settings of a deployment (`spec.sourceConfig.resourceSpec`). */
export const ResourceSpecSchema = Type.Object(
  {
    ...numberFields,
    labels: Type.Optional(
      BoundedMap(Str(L.labelValue, "A label value."), {
        path: `${RS}.labels`,
        maxProperties: L.labels,
        maxKeyLength: L.qualifiedName,
        description: `Labels the service puts on the deployment's workloads. Keys kept as given. At most ${L.labels}, keys of at most ${L.qualifiedName} characters (prefix/name), values of at most ${L.labelValue}.`,
      }),
    ),
    annotations: Type.Optional(
      BoundedMap(Str(L.annotationValue, "An annotation value."), {
        path: `${RS}.annotations`,
        maxProperties: L.annotations,
        maxKeyLength: L.qualifiedName,
        description: `Annotations the service puts on the deployment's workloads. Keys kept as given. At most ${L.annotations}, keys of at most ${L.qualifiedName} characters, values of at most ${L.annotationValue}.`,
      }),
    ),
    serviceAccountName: Type.Optional(
      Str(L.objectName, "Kubernetes service account the deployment's workloads run as."),
    ),
    imagePullSecrets: Type.Optional(
      Type.Array(
        Type.Object(
          { name: Str(L.objectName, "Name of a Secret holding registry credentials.") },
          { description: "A reference to an image pull Secret." },
        ),
        { maxItems: L.imagePullSecrets, description: "Secrets used to pull the deployment's images." },
      ),
    ),
    volumes: Type.Optional(
      Type.Array(Volume, { maxItems: L.volumes, description: "Volumes available to the containers." }),
    ),
    volumeMounts: Type.Optional(VolumeMounts(L.volumeMounts, "Volumes mounted into the main container.")),
    initContainers: Type.Optional(Containers(L.initContainers, "Containers run before the main one.")),
    sidecars: Type.Optional(Containers(L.sidecars, "Containers run beside the main one.")),
  },
  {
    description:
      "Resource settings. The service replaces them as a whole on every change; the operator sends the fields set here merged over what the service has, so fields left out keep their current values.",
    "x-kubernetes-validations": orderedPairRules,
  },
);
