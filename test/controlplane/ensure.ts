// Ensures the control-plane binaries exist before the test runner starts, so a first build (minutes)
// (and the Go tools': actionlint, gitops-health, template-render, kargo-expr, helm, promtool) happens outside any test or hook timeout.
// Usage: node test/controlplane/ensure.ts
import {
  ACTIONLINT,
  ControlPlaneBinariesError,
  ensureBinaries,
  ensureGoTool,
  GITOPS_HEALTH,
  HELM,
  KARGO_EXPR,
  PROMTOOL,
  TEMPLATE_RENDER,
} from "./binaries.ts";
import { ensureShells } from "./shells.ts";

try {
  const started = Date.now();
  const binaries = await ensureBinaries({ log: (line) => process.stderr.write(`controlplane: ${line}\n`) });
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  process.stderr.write(
    `controlplane: binaries ready in ${seconds} s: ${binaries.kubeApiServer}, ${binaries.etcd}, ${binaries.kubectl}\n`,
  );
  // The workflows' linter, built the same way (seconds, once), for test/e2e/workflows.test.ts.
  await ensureGoTool(ACTIONLINT, { log: (line) => process.stderr.write(`controlplane: ${line}\n`) });
  // The health engines of Argo CD and Flux (minutes, once), for test/e2e/gitops-health.test.ts.
  await ensureGoTool(GITOPS_HEALTH, { log: (line) => process.stderr.write(`controlplane: ${line}\n`) });
  // The template languages of Argo CD's ApplicationSet and Flux's ResourceSet (seconds, once), for
  // test/e2e/previews.test.ts.
  await ensureGoTool(TEMPLATE_RENDER, { log: (line) => process.stderr.write(`controlplane: ${line}\n`) });
  // Kargo's expression engine (seconds, once), for test/e2e/promotion.test.ts.
  await ensureGoTool(KARGO_EXPR, { log: (line) => process.stderr.write(`controlplane: ${line}\n`) });
  // helm (minutes, once), for the chart's tests: test/tools/helm-chart.test.ts, test/e2e/helm-chart.test.ts.
  await ensureGoTool(HELM, { log: (line) => process.stderr.write(`controlplane: ${line}\n`) });
  // promtool (minutes, once), which checks and unit-tests the alert rules: test/tools/alerts.test.ts.
  await ensureGoTool(PROMTOOL, { log: (line) => process.stderr.write(`controlplane: ${line}\n`) });
  // zsh and fish (Debian packages), whose completion scripts test/unit/cli-completion.test.ts and
  // test/e2e/kubectl-plugin.test.ts run in the shells themselves.
  ensureShells(["zsh", "fish"], (line) => process.stderr.write(`controlplane: ${line}\n`));
} catch (error) {
  const message = error instanceof ControlPlaneBinariesError ? error.message : String(error);
  process.stderr.write(`controlplane: ${message}\n`);
  process.exitCode = 1;
}
