// Ensures the control-plane binaries exist before the test runner starts, so a first build (minutes)
// happens outside any test or hook timeout. Usage: node test/controlplane/ensure.ts
import { ControlPlaneBinariesError, ensureBinaries } from "./binaries.ts";

try {
  const started = Date.now();
  const binaries = await ensureBinaries({ log: (line) => process.stderr.write(`controlplane: ${line}\n`) });
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  process.stderr.write(
    `controlplane: binaries ready in ${seconds} s: ${binaries.kubeApiServer}, ${binaries.etcd}, ${binaries.kubectl}\n`,
  );
} catch (error) {
  const message = error instanceof ControlPlaneBinariesError ? error.message : String(error);
  process.stderr.write(`controlplane: ${message}\n`);
  process.exitCode = 1;
}
