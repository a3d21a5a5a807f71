/**
 * `dms-operator plan -f <file-or-dir>`: what the operator would do for each Deployment resource
 * of the files, against the live service, with the controller's own planner. Exit status 0
 * nothing to do, 2 changes planned, 1 error — so it can gate a pull request. Reads only.
 */
import { type Command, Option } from "commander";
import { deploymentsPort } from "../api/port.ts";
import type { ServiceFlags } from "../config.ts";
import { readManifestFiles, STDIN_NAME, STDIN_PATH } from "../gitops/files.ts";
import type { ClusterReader, LiveResource } from "../gitops/live.ts";
import { reviewAll } from "../gitops/live.ts";
import { type ManifestProblem, type ManifestResource, parseManifests } from "../gitops/manifests.ts";
import { type PlanReport, planExitStatus, renderPlanJson, renderPlanText } from "../gitops/plan-report.ts";
import { KubeClient } from "../kube/client.ts";
import { loadKubeConfig } from "../kube/config.ts";
import { DEPLOYMENTS, decodeDeployment, KubeDeployments } from "../kube/deployments.ts";
import { KubeApiError } from "../kube/errors.ts";
import { listItems } from "../kube/object.ts";
import { secretsPort } from "../kube/ports.ts";
import { collectionPath } from "../kube/reflector.ts";
import { KubeSecrets } from "../kube/secrets.ts";
import { systemClock } from "../runtime/clock.ts";
import {
  addServiceOptions,
  type CliContext,
  type RegisterCommand,
  serviceClientFrom,
  UsageError,
} from "./context.ts";
import { CommandExit, EXIT } from "./program.ts";

interface PlanFlags extends ServiceFlags {
  filename: string[];
  kubeconfig?: string;
  context?: string;
  output: "text" | "json";
  verbose?: boolean;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** Registers `plan` on `program`. */
export const registerPlanCommand: RegisterCommand = (program, ctx) => {
  const command = program
    .command("plan")
    .description(
      "show what the operator would do for each Deployment resource in the files (create, adopt, patch, nothing, blocked); exit 0 nothing to do, 2 changes planned, 1 error",
    )
    .requiredOption(
      "-f, --filename <path>",
      "manifest file or directory (recursive; .yaml, .yml, .json), or - for standard input (e.g. kubectl kustomize output); repeatable",
      collect,
    )
    .option(
      "--kubeconfig <path>",
      "read referenced Secrets and the live resources from this cluster (without it, secret values are not checked)",
    )
    .option("--context <name>", "kubeconfig context to use")
    .addOption(new Option("-o, --output <format>", "output format").choices(["text", "json"]).default("text"))
    // 2 means "changes planned" here, so a mistake in the call must not end with 2.
    .exitOverride((error) => {
      throw error.exitCode === 0 ? error : new CommandExit(EXIT.failed);
    });
  addServiceOptions(command).action(async (_flags: unknown, cmd: Command) => {
    const flags = cmd.optsWithGlobals<PlanFlags>();
    let status: number;
    try {
      status = await runPlan(flags, ctx);
    } catch (error) {
      if (!(error instanceof UsageError)) throw error;
      for (const line of error.lines) ctx.err(`error: ${line}\n`);
      status = EXIT.failed;
    }
    if (status !== EXIT.ok) throw new CommandExit(status);
  });
};

/** Reads, reviews and prints; resolves the exit status. */
async function runPlan(flags: PlanFlags, ctx: CliContext): Promise<number> {
  if (flags.context !== undefined && flags.kubeconfig === undefined)
    throw new UsageError(["--context needs --kubeconfig"]);
  const client = serviceClientFrom(flags, ctx);
  const files = await readManifestFiles(flags.filename, ctx.readStdin);
  const resources: ManifestResource[] = [];
  const fileErrors: ManifestProblem[] = [];
  for (const file of files) {
    const parsed = parseManifests(file.text, file.path);
    resources.push(...parsed.resources);
    fileErrors.push(...parsed.problems);
  }
  // A wrong path must not pass a CI gate as "nothing to do".
  if (resources.length === 0 && fileErrors.length === 0)
    throw new UsageError([noResources(flags.filename, files.length)]);
  const cluster = flags.kubeconfig === undefined ? undefined : clusterReader(flags.kubeconfig, flags.context);
  const entries = await reviewAll(resources, {
    service: deploymentsPort(client),
    ...(cluster ? { cluster } : {}),
    clock: systemClock,
    signal: ctx.stopSignal,
  });
  const report: PlanReport = { entries, fileErrors, clusterRead: cluster !== undefined };
  ctx.out(flags.output === "json" ? renderPlanJson(report) : renderPlanText(report));
  return planExitStatus(report);
}

function noResources(paths: readonly string[], fileCount: number): string {
  const where = paths.map((p) => (p === STDIN_PATH ? STDIN_NAME : p)).join(", ");
  const read = fileCount === 1 ? "1 file" : `${fileCount} files`;
  return `no Deployment resources (apiVersion dms.dev/v1alpha1, kind Deployment) in ${where} (${read} read): check the path given to -f, or pipe the rendered manifests with -f -`;
}

/** Reads through the kubeconfig's credentials; nothing is cached or watched. */
function clusterReader(kubeconfig: string, context: string | undefined): ClusterReader {
  const kube = loadKubeConfig({ kubeconfig, ...(context ? { context } : {}) });
  const client = new KubeClient(kube.config, { userAgent: "dms-operator-plan" });
  const deployments = new KubeDeployments({ client });
  return {
    defaultNamespace: kube.namespace ?? "default",
    getResource: async (namespace, name, signal) => {
      const found = await deployments.getLive({ namespace, name }, signal);
      return found as LiveResource | undefined;
    },
    listResources: async (signal) => {
      try {
        const list = await client.request({ method: "GET", path: collectionPath(DEPLOYMENTS), signal });
        return listItems(list).flatMap((item) => {
          const decoded = decodeDeployment(item);
          return decoded ? [decoded as LiveResource] : [];
        });
      } catch (error) {
        // Without permission to list every namespace, claims in other namespaces go unchecked.
        if (error instanceof KubeApiError && (error.status === 403 || error.status === 404)) return undefined;
        throw error;
      }
    },
    secrets: secretsPort(new KubeSecrets({ client })),
  };
}
