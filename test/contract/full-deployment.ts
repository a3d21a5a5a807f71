/**
 * The largest honest deployment the tests know: every field the spec shows filled in, with long
 * values, many labels, annotations, containers, environment variables and secret names. A
 * listing page of 100 of these is what `--max-response-bytes` must let through with room to spare
 * (see the default in src/config.ts).
 */
import { RESOURCE_SPEC_NUMBER_FIELDS } from "../../src/api/wire.ts";
import type { SeedDeployment } from "../../src/simulator/seed.ts";

const text = (prefix: string, length: number): string =>
  `${prefix}-${"x".repeat(Math.max(0, length - prefix.length - 1))}`;

/** `n` entries of a string map: keys of about 60 characters, values of `valueLength`. */
const stringMap = (prefix: string, n: number, valueLength: number): Record<string, string> =>
  Object.fromEntries(
    Array.from({ length: n }, (_, i) => [
      text(`${prefix}.example.com/key-${i}`, 60),
      text(`v${i}`, valueLength),
    ]),
  );

const volumeMount = (i: number) => ({
  name: text(`volume-${i}`, 60),
  mountPath: `/var/run/${text(`mount-${i}`, 100)}`,
  subPath: text(`sub-${i}`, 60),
  mountPropagation: "HostToContainer",
  subPathExpr: "$(POD_NAME)",
  readOnly: true,
});

const container = (kind: string, i: number) => ({
  name: text(`${kind}-${i}`, 60),
  image: `registry.example.com/${text(`team/${kind}-${i}`, 150)}@sha256:${"a".repeat(64)}`,
  imagePullPolicy: "IfNotPresent",
  workingDir: `/srv/${text("work", 60)}`,
  restartPolicy: "Always",
  command: ["/bin/sh", "-c", text("exec /usr/local/bin/entrypoint --serve", 200)],
  args: Array.from({ length: 6 }, (_, a) => text(`--flag-${a}=value`, 60)),
  env: Array.from({ length: 16 }, (_, e) =>
    e % 4 === 0
      ? {
          name: text(`FROM_SECRET_${e}`, 40),
          valueFrom: { secretKeyRef: { name: text("s", 60), key: "key" } },
        }
      : { name: text(`ENV_VAR_${e}`, 40), value: text(`value-${e}`, 100) },
  ),
  envFrom: Array.from({ length: 2 }, (_, f) => ({ configMapRef: { name: text(`config-${f}`, 60) } })),
  resources: {
    limits: { cpu: "2", memory: "4Gi", "ephemeral-storage": "10Gi" },
    requests: { cpu: "500m", memory: "1Gi", "ephemeral-storage": "1Gi" },
  },
  volumeMounts: Array.from({ length: 2 }, (_, v) => volumeMount(v)),
  securityContext: {
    runAsNonRoot: true,
    runAsUser: 10001,
    readOnlyRootFilesystem: true,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ["ALL"] },
    seccompProfile: { type: "RuntimeDefault" },
  },
});

/** Deployment `i` (0 ≤ i < 10,000): distinct names, every field of the spec filled generously. */
export function fullDeployment(i: number): SeedDeployment {
  const numbers = Object.fromEntries(RESOURCE_SPEC_NUMBER_FIELDS.map((f, n) => [f, 1000 + n + 0.5]));
  return {
    name: text(`full-agent-${String(i).padStart(4, "0")}`, 120),
    source: "external_docker",
    image_version: text("v1.2.3", 60),
    source_config: {
      custom_url: `https://${text("custom", 200)}.example.com/`,
      build_on_push: true,
      install_command: text("pip install -r requirements.txt", 500),
      build_command: text("make build", 500),
      listener_id: "6f1c1d2e-0000-4000-8000-000000000009",
      listener_config: { k8s_namespace: text("tenant-namespace", 63) },
      resource_spec: {
        ...numbers,
        labels: stringMap("labels", 16, 63),
        annotations: stringMap("annotations", 16, 200),
        service_account_name: text("service-account", 63),
        image_pull_secrets: Array.from({ length: 4 }, (_, p) => ({ name: text(`pull-secret-${p}`, 63) })),
        volumes: Array.from({ length: 4 }, (_, v) => ({
          name: text(`volume-${v}`, 60),
          configMap: { name: text(`config-${v}`, 60), items: [{ key: "k", path: text("p", 60) }] },
        })),
        volume_mounts: Array.from({ length: 4 }, (_, v) => volumeMount(v)),
        init_containers: Array.from({ length: 1 }, (_, c) => container("init", c)),
        sidecars: Array.from({ length: 2 }, (_, c) => container("sidecar", c)),
      },
    },
    source_revision_config: {
      image_uri: `registry.example.com/${text("team/agent", 200)}:${text("tag", 100)}`,
      repo_commit_sha: "0".repeat(40),
    },
    secrets: Array.from({ length: 64 }, (_, s) => ({ name: text(`SECRET_NAME_${s}`, 64), value: "v" })),
    secret_references: Array.from({ length: 32 }, (_, r) => ({
      name: text(`SECRET_REF_${r}`, 64),
      secret_name: text(`k8s-secret-${r}`, 63),
      secret_key: text(`key-${r}`, 63),
    })),
  };
}
