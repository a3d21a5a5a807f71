/**
 * The command tree of `kubectl dms` as completion sees it: written out from the commands by
 * test/unit/cli-completion.test.ts (UPDATE_COMPLETION_TABLE=1 vitest run
 * test/unit/cli-completion.test.ts rewrites it), so that a TAB loads no command (see
 * completion-plugin.ts). Each flag is written once, in FLAGS; a command lists the indexes of its
 * own. Do not edit by hand.
 */
import type { CompletionFlag, CompletionNode } from "./completion-node.ts";

const FLAGS: readonly CompletionFlag[] = [
  { long: "--version", takesValue: false, description: "print the version of dms-operator" },
  {
    long: "--verbose",
    takesValue: false,
    description: "log each service request to stderr and print stack traces of errors",
  },
  { long: "--help", short: "-h", takesValue: false, description: "display help" },
  {
    long: "--output",
    short: "-o",
    takesValue: true,
    description: "output format (default table)",
    values: ["table", "wide", "name", "json", "yaml"],
  },
  { long: "--no-headers", takesValue: false, description: "print tables without their header line" },
  {
    long: "--namespace",
    short: "-n",
    takesValue: true,
    description: "namespace (default: the kubeconfig context's, else default)",
  },
  {
    long: "--kubeconfig",
    takesValue: true,
    description: "path to the kubeconfig file (default: KUBECONFIG, else ~/.kube/config, as kubectl)",
  },
  {
    long: "--context",
    takesValue: true,
    description: "kubeconfig context to use (default: its current context)",
  },
  {
    long: "--all-namespaces",
    short: "-A",
    takesValue: false,
    description: "every namespace (overrides -n and the context's namespace)",
  },
  {
    long: "--all",
    takesValue: false,
    description: "every Deployment resource of the namespace (of every namespace with -A)",
  },
  {
    long: "--selector",
    short: "-l",
    takesValue: true,
    description: "the Deployment resources whose labels match, e.g. team=payments or 'tier in (web,api)'",
  },
  {
    long: "--wait",
    takesValue: false,
    description: "wait until the operator acknowledges it (status.lastHandledReconcileAt), for each",
  },
  {
    long: "--timeout",
    takesValue: true,
    description: "how long --wait waits for each, from 1s to 1h (default 60s)",
  },
  {
    long: "--wait",
    takesValue: false,
    description: "wait until the operator acknowledges it (status.lastHandledRolloutNow), for each",
  },
  {
    long: "--wait",
    takesValue: false,
    description: "wait until the operator acknowledges it (status.lastHandledRebuildAt), for each",
  },
  { long: "--name-contains", takesValue: true, description: "only names containing this text" },
  {
    long: "--status",
    takesValue: true,
    description:
      "only deployments in this status: AWAITING_DATABASE, READY, UNUSED, AWAITING_DELETE, UNKNOWN, or another value the service uses",
    values: ["AWAITING_DATABASE", "READY", "UNUSED", "AWAITING_DELETE", "UNKNOWN"],
  },
  {
    long: "--remote-reconciled",
    takesValue: true,
    description: "only (or no) remote-reconciled deployments",
    values: ["true", "false"],
  },
  {
    long: "--tag-value-ids",
    takesValue: true,
    description: "only deployments with these tag value ids (comma-separated)",
  },
  { long: "--image-version", takesValue: true, description: "only this image version" },
  {
    long: "--deployment-type",
    takesValue: true,
    description: "only this deployment type",
    values: ["dev_free", "dev", "prod"],
  },
  {
    long: "--deployment-ids",
    takesValue: true,
    description: "only these deployment ids (comma-separated uuids)",
  },
  {
    long: "--limit",
    takesValue: true,
    description: "page size asked of the service, 1-100 (default 100); all pages are listed",
  },
  {
    long: "--show-secret-values",
    takesValue: false,
    description: "print secret values as the service returns them (hidden by default)",
  },
  {
    long: "--base-url",
    takesValue: true,
    description: "service base URL, e.g. https://api.example.com (env DMS_BASE_URL)",
  },
  {
    long: "--api-key",
    takesValue: true,
    description:
      "API key; prefer the env variable or a file: flags are visible to other users (env DMS_API_KEY)",
  },
  {
    long: "--api-key-file",
    takesValue: true,
    description: "file holding the API key, e.g. a mounted Secret (env DMS_API_KEY_FILE)",
  },
  {
    long: "--tenant-id",
    takesValue: true,
    description: "tenant id sent with every request (env DMS_TENANT_ID)",
  },
  {
    long: "--api-key-header",
    takesValue: true,
    description: "header carrying the key (default X-Api-Key) (env DMS_API_KEY_HEADER)",
  },
  {
    long: "--tenant-header",
    takesValue: true,
    description: "header carrying the tenant (default X-Tenant-Id) (env DMS_TENANT_HEADER)",
  },
  {
    long: "--insecure-skip-tls-verify",
    takesValue: false,
    description:
      "accept any TLS certificate (self-signed endpoints only) (default off) (env DMS_INSECURE_SKIP_TLS_VERIFY)",
  },
  {
    long: "--ca-file",
    takesValue: true,
    description:
      "PEM file of CA certificates trusted besides the system's, e.g. a private CA of a self-hosted service (env DMS_CA_FILE)",
  },
  {
    long: "--timeout-ms",
    takesValue: true,
    description: "timeout of each request (default 10000) (env DMS_TIMEOUT_MS)",
  },
  {
    long: "--max-response-bytes",
    takesValue: true,
    description:
      "largest response body accepted, after decompression (default 8388608) (env DMS_MAX_RESPONSE_BYTES)",
  },
  {
    long: "--retries",
    takesValue: true,
    description: "retries of a retryable failure (default 4) (env DMS_RETRIES)",
  },
  {
    long: "--qps",
    takesValue: true,
    description: "client-side requests per second (default 20) (env DMS_QPS)",
  },
  { long: "--burst", takesValue: true, description: "client-side burst (default 40) (env DMS_BURST)" },
  { long: "--integration", takesValue: true, description: "forge GitHub integration id (uuid)" },
  {
    long: "--name",
    takesValue: true,
    description: "only the deployment of exactly this name (an error when there is none)",
  },
  {
    long: "--name-contains",
    takesValue: true,
    description: "only deployments whose name contains this text",
  },
  {
    long: "--status",
    takesValue: true,
    description: "only deployments in this status",
    values: ["AWAITING_DATABASE", "READY", "UNUSED", "AWAITING_DELETE", "UNKNOWN"],
  },
  {
    long: "--namespace",
    short: "-n",
    takesValue: true,
    description:
      "metadata.namespace of every object written (with a ServiceConnection: its namespace, default the kubeconfig context's)",
  },
  {
    long: "--secrets-from",
    takesValue: true,
    description:
      "read every secret from this one Kubernetes Secret (keys <metadata.name>.<secret>) and write its manifest",
  },
  {
    long: "--out-dir",
    takesValue: true,
    description: "write one file per resource into this directory instead of stdout",
  },
  {
    long: "--force",
    takesValue: false,
    description:
      "with --out-dir: overwrite files that exist (without it, import writes nothing when one exists)",
  },
  {
    long: "--print-secret-values",
    takesValue: false,
    description:
      "with --secrets-from and no --out-dir: print the Secret manifest even when it holds real secret values",
  },
  {
    long: "--connection",
    takesValue: true,
    description:
      "import this connection's tenant, writing spec.connectionRef in each resource: ServiceConnection/<name> (of --namespace, else the kubeconfig context's) or ClusterServiceConnection/<name>, read with the Secret of its API key from the cluster (needs --kubeconfig); replaces --base-url, --api-key(-file), --tenant-id, --insecure-skip-tls-verify and --ca-file",
  },
  {
    long: "--kubeconfig",
    takesValue: true,
    description: "read --connection and its Secret from this cluster",
  },
  { long: "--context", takesValue: true, description: "kubeconfig context to use" },
  {
    long: "--filename",
    short: "-f",
    takesValue: true,
    description:
      "manifest file or directory (recursive; .yaml, .yml, .json), or - for standard input (e.g. kubectl kustomize output); repeatable",
  },
  {
    long: "--offline",
    takesValue: false,
    description:
      "check the files as kubectl apply would have the API server check them (the CRD's schema and CEL rules), asking neither the service nor a cluster: for CI without credentials; exit 0 valid, 1 a refusal (file:line:col)",
  },
  {
    long: "--kubeconfig",
    takesValue: true,
    description:
      "read referenced Secrets, the live resources and the connections they name from this cluster (without it, secret values are not checked, and resources with spec.connectionRef cannot be planned)",
  },
  {
    long: "--namespace",
    short: "-n",
    takesValue: true,
    description:
      "namespace of the resources that name none, as kubectl apply -n (default: the kubeconfig context's, else default)",
  },
  {
    long: "--protection-namespaces",
    takesValue: true,
    description:
      "with --kubeconfig: more namespaces where plan looks for protected resources (spec.deletionProtection: true) that the files no longer hold, beyond the files' namespaces and those a GitOps tool's label marks lead to; a resource of the files without metadata.namespace counts as in each (Argo CD's destination or Flux's targetNamespace may put it there); repeatable",
  },
  {
    long: "--operator-namespace",
    takesValue: true,
    description:
      "with --kubeconfig: the operator's namespace, whose Secret dms-operator-install-key keys the secrets digests in status (default dms-system); without the right to get it, secret values are compared only with digests recorded before the key",
  },
  {
    long: "--connection",
    takesValue: true,
    description:
      "review only the resources using this connection (the others are listed as skipped): ServiceConnection/<name> (of --namespace, else the kubeconfig context's) or ClusterServiceConnection/<name>, read with the Secret of its API key from the cluster (needs --kubeconfig); replaces --base-url, --api-key(-file), --tenant-id, --insecure-skip-tls-verify and --ca-file. Without it, each resource is reviewed through its own",
  },
  {
    long: "--max-secret-bytes",
    takesValue: true,
    description:
      "with --kubeconfig: the operator's limit on the secret values one resource sends; over it the resource is an error, as the operator would stall it (SecretsTooLarge) (default 1048576) (env DMS_MAX_SECRET_BYTES)",
  },
  {
    long: "--output",
    short: "-o",
    takesValue: true,
    description: "output format (default table; text, its former name, is read as table)",
    values: ["table", "name", "json", "yaml", "text"],
  },
  { long: "--max-items", takesValue: true, description: "read at most this many revisions (default 1000)" },
  {
    long: "--namespace",
    short: "-n",
    takesValue: true,
    description:
      "namespace of the resource, and of a ServiceConnection (default: the kubeconfig context's, else default)",
  },
  {
    long: "--kubeconfig",
    takesValue: true,
    description:
      "read the Deployment resource (and its connection) from this cluster (default: KUBECONFIG, else ~/.kube/config)",
  },
  {
    long: "--service",
    takesValue: false,
    description:
      "<resource> is the service's deployment name or id on the service of --base-url / DMS_BASE_URL, not a Deployment resource of the cluster",
  },
  {
    long: "--connection",
    takesValue: true,
    description:
      "<resource> is the service's deployment name or id on this connection's tenant: ServiceConnection/<name> (of --namespace, else the kubeconfig context's) or ClusterServiceConnection/<name>, read with the Secret of its API key from the cluster (--kubeconfig, else KUBECONFIG, else ~/.kube/config); replaces --base-url, --api-key(-file), --tenant-id, --insecure-skip-tls-verify and --ca-file",
  },
  {
    long: "--type",
    takesValue: true,
    description: "which log (default: build while the revision is being built or failed to be, else deploy)",
    values: ["build", "deploy"],
  },
  { long: "--revision", takesValue: true, description: "the revision (default: the deployment's latest)" },
  {
    long: "--follow",
    short: "-f",
    takesValue: false,
    description: "keep printing new entries until the revision ends (live, skipped or failed) or Ctrl-C",
  },
  { long: "--since", takesValue: true, description: "only entries of the last <duration>, e.g. 10m" },
  {
    long: "--service",
    takesValue: false,
    description:
      "<resource> is a deployment name on the service of --base-url / DMS_BASE_URL, not a Deployment resource of the cluster",
  },
  {
    long: "--connection",
    takesValue: true,
    description:
      "<resource> is a deployment name on this connection's tenant: ServiceConnection/<name> (of --namespace, else the kubeconfig context's) or ClusterServiceConnection/<name>, read with the Secret of its API key from the cluster (--kubeconfig, else KUBECONFIG, else ~/.kube/config); replaces --base-url, --api-key(-file), --tenant-id, --insecure-skip-tls-verify and --ca-file",
  },
  {
    long: "--output",
    short: "-o",
    takesValue: true,
    description: "output format (default table; text, its former name, is read as table)",
    values: ["table", "json", "yaml", "text"],
  },
  {
    long: "--client",
    takesValue: false,
    description: "print the client's version only (no cluster is read)",
  },
  {
    long: "--operator-namespace",
    takesValue: true,
    description:
      "look for the operator only in this namespace (default: every namespace, else dms-system when they cannot all be listed)",
  },
  {
    long: "--output",
    short: "-o",
    takesValue: true,
    description: "output format (default table)",
    values: ["table", "json", "yaml"],
  },
];

const NODES: readonly (Omit<CompletionNode, "flags"> & { flags: readonly number[] })[] = [
  {
    path: [],
    subcommands: [
      "status",
      "reconcile",
      "suspend",
      "resume",
      "rollout-now",
      "rebuild",
      "deployments",
      "providers",
      "repos",
      "import",
      "plan",
      "revisions",
      "logs",
      "version",
      "completion",
    ],
    takesResource: false,
    flags: [0, 1, 2],
  },
  { path: ["status"], subcommands: [], takesResource: false, flags: [3, 4, 5, 6, 7, 8, 2] },
  {
    path: ["reconcile"],
    subcommands: [],
    takesResource: true,
    variadic: true,
    flags: [9, 10, 5, 6, 7, 8, 11, 12, 2],
  },
  { path: ["suspend"], subcommands: [], takesResource: true, variadic: true, flags: [9, 10, 5, 6, 7, 8, 2] },
  { path: ["resume"], subcommands: [], takesResource: true, variadic: true, flags: [9, 10, 5, 6, 7, 8, 2] },
  {
    path: ["rollout-now"],
    subcommands: [],
    takesResource: true,
    variadic: true,
    flags: [9, 10, 5, 6, 7, 8, 13, 12, 2],
  },
  {
    path: ["rebuild"],
    subcommands: [],
    takesResource: true,
    variadic: true,
    flags: [9, 10, 5, 6, 7, 8, 14, 12, 2],
  },
  { path: ["deployments"], subcommands: ["list"], takesResource: false, flags: [2] },
  {
    path: ["deployments", "list"],
    subcommands: [],
    takesResource: false,
    flags: [15, 16, 17, 18, 19, 20, 21, 22, 23, 3, 4, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 2],
  },
  { path: ["providers"], subcommands: ["list"], takesResource: false, flags: [2] },
  {
    path: ["providers", "list"],
    subcommands: [],
    takesResource: false,
    flags: [3, 4, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 2],
  },
  { path: ["repos"], subcommands: ["list"], takesResource: false, flags: [2] },
  {
    path: ["repos", "list"],
    subcommands: [],
    takesResource: false,
    flags: [37, 3, 4, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 2],
  },
  {
    path: ["import"],
    subcommands: [],
    takesResource: false,
    flags: [
      38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 2,
    ],
  },
  {
    path: ["plan"],
    subcommands: [],
    takesResource: false,
    flags: [49, 50, 51, 48, 52, 53, 54, 55, 56, 57, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 2],
  },
  {
    path: ["revisions"],
    subcommands: [],
    takesResource: true,
    flags: [58, 59, 60, 48, 61, 62, 3, 4, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 2],
  },
  {
    path: ["logs"],
    subcommands: [],
    takesResource: true,
    flags: [63, 64, 65, 66, 59, 60, 48, 67, 68, 69, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 2],
  },
  { path: ["version"], subcommands: [], takesResource: false, flags: [70, 71, 72, 6, 7, 2] },
  { path: ["completion"], subcommands: [], takesResource: false, flags: [2] },
];

export const PLUGIN_COMPLETION: readonly CompletionNode[] = NODES.map((node) => ({
  ...node,
  flags: node.flags.flatMap((i) => FLAGS[i] ?? []),
}));
