/**
 * `version`: the client's version and, as `kubectl version` shows the server's, the version of
 * the operator running in the cluster. The operator is found by its label
 * `app.kubernetes.io/name=dms-operator` (the manifests' and the Helm chart's) on apps/v1
 * Deployments, in every namespace (else, without the right to list them all, in
 * `--operator-namespace`, default dms-system); its version is its `app.kubernetes.io/version`
 * label, else the tag of its image. Not finding it is said, not an error: the client's version is
 * printed all the same.
 */
import { type Command, Option } from "commander";
import { KubeApiError } from "../kube/errors.ts";
import { isRecord } from "../runtime/json.ts";
import { VERSION } from "../version.ts";
import { namespaceArgument, type RegisterCommand } from "./context.ts";
import type { OutputFlags } from "./output.ts";
import { addOutputOptions } from "./output-options.ts";
import { addKubectlOptions, type KubectlFlags } from "./plugin-flags.ts";
import { UsageError } from "./usage-error.ts";

/** The label the operator's Deployment carries (manifests/manager, charts/dms-operator). */
export const OPERATOR_LABEL = "app.kubernetes.io/name=dms-operator";
/** Where the manifests install the operator. */
export const DEFAULT_OPERATOR_NAMESPACE = "dms-system";
/** Most operator installs listed (each namespaced install is one). */
const MAX_INSTALLS = 50;

/** One install of the operator as found in the cluster. */
export interface OperatorInstall {
  namespace: string;
  name: string;
  /** `app.kubernetes.io/version`, else the image's tag; undefined when neither says. */
  version: string | undefined;
  image: string | undefined;
  ready: number;
  replicas: number;
}

/** The tag of an image reference (`registry:5000/x/dms-operator:0.1.0@sha256:…` → `0.1.0`). */
export function imageTag(image: string): string | undefined {
  const name = image.split("@")[0] ?? "";
  const last = name.slice(name.lastIndexOf("/") + 1);
  const colon = last.lastIndexOf(":");
  return colon < 0 ? undefined : last.slice(colon + 1) || undefined;
}

/** An apps/v1 Deployment of the list, read tolerantly; undefined when it is not one. */
export function installOf(item: unknown): OperatorInstall | undefined {
  if (!isRecord(item) || !isRecord(item.metadata)) return undefined;
  const { metadata } = item;
  if (typeof metadata.name !== "string" || typeof metadata.namespace !== "string") return undefined;
  const labels = isRecord(metadata.labels) ? metadata.labels : {};
  const spec = isRecord(item.spec) ? item.spec : {};
  const pod = isRecord(spec.template) && isRecord(spec.template.spec) ? spec.template.spec : {};
  const containers = Array.isArray(pod.containers) ? pod.containers.filter(isRecord) : [];
  const container = containers.find((c) => c.name === "operator") ?? containers[0];
  const image = typeof container?.image === "string" ? container.image : undefined;
  const label = labels["app.kubernetes.io/version"];
  const status = isRecord(item.status) ? item.status : {};
  const count = (v: unknown) => (typeof v === "number" && Number.isInteger(v) && v >= 0 ? v : 0);
  return {
    namespace: metadata.namespace,
    name: metadata.name,
    version: typeof label === "string" && label !== "" ? label : image && imageTag(image),
    image,
    ready: count(status.readyReplicas),
    replicas: typeof spec.replicas === "number" ? count(spec.replicas) : 1,
  };
}

/** The line of one install: `0.1.0 (dms-system/dms-operator, 2/2 ready, image dms-operator:0.1.0)`. */
export function describeInstall(install: OperatorInstall): string {
  const image = install.image === undefined ? "" : `, image ${install.image}`;
  return `${install.version ?? "unknown"} (${install.namespace}/${install.name}, ${install.ready}/${install.replicas} ready${image})`;
}

interface VersionFlags extends KubectlFlags, OutputFlags {
  client?: boolean;
  operatorNamespace?: string;
}

/** Registers `version`. */
export const registerVersionCommand: RegisterCommand = (program, ctx) => {
  const command = program
    .command("version")
    .description(
      `print the client's version and the operator's, read from the cluster: the apps/v1 Deployments labelled ${OPERATOR_LABEL} (their app.kubernetes.io/version label, else their image's tag)`,
    )
    .option("--client", "print the client's version only (no cluster is read)")
    .option(
      "--operator-namespace <ns>",
      `look for the operator only in this namespace (default: every namespace, else ${DEFAULT_OPERATOR_NAMESPACE} when they cannot all be listed)`,
      namespaceArgument,
    );
  addOutputOptions(command, { formats: ["table", "json", "yaml"], default: "table", headers: false });
  // -n names the namespace of Deployment resources in the other verbs, where the operator seldom
  // runs: taken here, it would narrow the search to the wrong namespace, or be ignored. Refused
  // with the flag that narrows it, rather than as an unknown one.
  addKubectlOptions(command, { namespace: false }).addOption(new Option("-n, --namespace <ns>").hideHelp());
  command.action(async (_flags: unknown, cmd: Command) => {
    const flags = cmd.optsWithGlobals<VersionFlags>();
    if (flags.namespace !== undefined)
      throw new UsageError([
        "version takes no -n, --namespace (the namespace of Deployment resources): it looks for the operator in every namespace; narrow it with --operator-namespace <ns>",
      ]);
    // -o json|yaml: one document, as `kubectl version -o json` prints ({clientVersion, ...}).
    const format = flags.output === "json" || flags.output === "yaml" ? flags.output : undefined;
    const say = format ? () => {} : (line: string) => ctx.out(line);
    const document: { clientVersion: string; operators?: OperatorInstall[]; operatorVersion?: string } = {
      clientVersion: VERSION,
    };
    // The writers, the cluster's client and its types are loaded only when asked for.
    const output = format ? await import("./output.ts") : undefined;
    const finish = () => {
      if (format && output) ctx.out(output.renderDocument(format, document));
    };
    say(`Client Version: ${VERSION}\n`);
    if (flags.client) return finish();
    const [{ pluginCluster }, { listItems }] = await Promise.all([
      import("./plugin-cluster.ts"),
      import("../kube/listing.ts"),
    ]);
    const cluster = pluginCluster(flags, ctx.env, "kubectl-dms-version");
    const list = async (namespace: string | undefined) =>
      listItems(
        await cluster.client.request({
          method: "GET",
          path: namespace
            ? `/apis/apps/v1/namespaces/${encodeURIComponent(namespace)}/deployments`
            : "/apis/apps/v1/deployments",
          query: { labelSelector: OPERATOR_LABEL, limit: MAX_INSTALLS },
          signal: ctx.stopSignal,
        }),
      );
    let where =
      flags.operatorNamespace === undefined ? "any namespace" : `namespace ${flags.operatorNamespace}`;
    let items: unknown[];
    try {
      items = await list(flags.operatorNamespace);
    } catch (error) {
      if (!(error instanceof KubeApiError && error.status === 403 && flags.operatorNamespace === undefined))
        return unknown(error);
      where = `namespace ${DEFAULT_OPERATOR_NAMESPACE} (not allowed to list every namespace)`;
      try {
        items = await list(DEFAULT_OPERATOR_NAMESPACE);
      } catch (again) {
        return unknown(again);
      }
    }
    const installs = items.flatMap((item) => installOf(item) ?? []);
    document.operators = installs;
    if (installs.length === 0) {
      document.operatorVersion = `not found (no Deployment labelled ${OPERATOR_LABEL} in ${where})`;
      say(`Operator Version: ${document.operatorVersion}\n`);
      return finish();
    }
    for (const install of installs) say(`Operator Version: ${describeInstall(install)}\n`);
    finish();

    function unknown(error: unknown): void {
      // Credentials the API server does not take fail the command, as `kubectl version`'s do.
      if (!(error instanceof KubeApiError) || error.status === 401) throw error;
      document.operatorVersion = `unknown (${error.message})`;
      say(`Operator Version: ${document.operatorVersion}\n`);
      finish();
    }
  });
};
