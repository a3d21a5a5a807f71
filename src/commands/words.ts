/**
 * The words a command's flags and help are written with, known without loading the modules that
 * define them (the CRD schemas, which load TypeBox: ~200 modules; the logger), so that `--help`
 * (`run`'s too), a flag's choices and shell completion start as fast as `--version`.
 *
 * Copies, not definitions: test/unit/cli-completion.test.ts checks each equals the constant it copies;
 * the service's words are not copied but taken from src/api/wire-values.ts, which imports nothing.
 * Imports nothing else: keep it so.
 */

export {
  DEPLOYMENT_STATUSES,
  DEPLOYMENT_TYPES,
  type DeploymentType,
  isUuid,
  PAGE_LIMIT,
} from "../api/wire-values.ts";

/** A revision's logs (src/api/revision-logs.ts `LOG_TYPES`). */
export const LOG_TYPES = ["build", "deploy"] as const;
export type LogType = (typeof LOG_TYPES)[number];

/** `run --log-format` values (src/runtime/log.ts `LOG_FORMATS`). */
export const LOG_FORMATS = ["json", "console"] as const;

/** `run --max-connections-per-namespace`'s default (src/connection/namespace-bound.ts). */
export const DEFAULT_MAX_CONNECTIONS_PER_NAMESPACE = 20;

/** The annotations the verbs set (src/crd/schema.ts). */
export const ANNOTATION_RECONCILE_REQUESTED_AT = "dms.dev/reconcile-requested-at";
export const ANNOTATION_PAUSED = "dms.dev/paused";
export const ANNOTATION_ROLLOUT_NOW = "dms.dev/rollout-now";
export const ANNOTATION_REBUILD_REQUESTED_AT = "dms.dev/rebuild-requested-at";

/** `plan --max-secret-bytes`, the `run` setting it shares (src/commands/settings.ts `RUN_SETTINGS`). */
export const PLAN_MAX_SECRET_BYTES = {
  flag: "--max-secret-bytes",
  arg: "<bytes>",
  default: "1048576",
  env: "DMS_MAX_SECRET_BYTES",
} as const;

/** The shells a completion script is written for. */
export const SHELLS = ["bash", "zsh", "fish"] as const;
export type Shell = (typeof SHELLS)[number];

/** How kubectl names our kind in its answers and in `-o name`: `deployment.dms.dev/<name>`. */
export const RESOURCE_PREFIX = "deployment.dms.dev";

/** What a completion says of a value of `--status`, `--type` and `-o`. */
export const VALUE_DESCRIPTIONS: Readonly<Record<string, string>> = {
  AWAITING_DATABASE: "waiting for its database",
  READY: "running",
  UNUSED: "created, never deployed",
  AWAITING_DELETE: "being deleted",
  UNKNOWN: "the service cannot tell",
  dev_free: "free development deployment",
  dev: "development deployment",
  prod: "production deployment",
  build: "the build log",
  deploy: "the deploy log",
  table: "a table, kubectl-style",
  wide: "a table with more columns, ids and times whole",
  name: "one name per line",
  json: "the data as JSON",
  yaml: "the data as YAML",
  text: "the former name of table",
  bash: "bash completion script",
  zsh: "zsh completion script",
  fish: "fish completion script",
  true: "only these",
  false: "only the others",
};
