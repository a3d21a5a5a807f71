// Vitest global setup of the `cluster` project: one real control plane per run, with crds/ installed.
// Tests get its coordinates through inject() (see test/support/cluster.ts) and isolate themselves
// by namespace. Set DMS_CONTROLPLANE_LOG=1 to see etcd and kube-apiserver output.
import type { TestProject } from "vitest/node";
import { ensureBinaries } from "./binaries.ts";
import { ControlPlane } from "./harness.ts";

declare module "vitest" {
  export interface ProvidedContext {
    /** Admin kubeconfig of the run's control plane. */
    kubeconfigPath: string;
    /** `https://127.0.0.1:<port>` of the run's kube-apiserver. */
    server: string;
    /** The kubectl binary matching the control plane. */
    kubectlPath: string;
    /** kubectl's discovery cache for this control plane (keeps ~/.kube/cache out of it). */
    kubectlCacheDir: string;
  }
}

const say = (line: string) => process.stderr.write(`controlplane: ${line}\n`);

/** Starts the control plane, installs crds/, provides its coordinates; the returned teardown stops it. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Usually a no-op: `node test/controlplane/ensure.ts` runs before vitest and builds what is missing.
  const binaries = await ensureBinaries({ log: say });
  const plane = await ControlPlane.start({
    binaries,
    log: (line) => {
      if (process.env.DMS_CONTROLPLANE_LOG || !line.startsWith("[")) say(line);
    },
  });
  try {
    const crds = await plane.installCrds();
    say(crds.length > 0 ? `installed ${crds.join(", ")}` : "crds/ holds no CRD yet");
  } catch (error) {
    await plane.stop();
    throw error;
  }
  project.provide("kubeconfigPath", plane.kubeconfigPath);
  project.provide("server", plane.server);
  project.provide("kubectlPath", plane.binaries.kubectl);
  project.provide("kubectlCacheDir", plane.kubectlCacheDir);
  return () => plane.stop();
}
