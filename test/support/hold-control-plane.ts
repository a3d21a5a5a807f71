// Starts a control plane, prints `{"kubeconfigPath": ...}` on stdout and holds it until a signal
// ends this process or its parent goes away (so a crashed test run cannot leave it holding forever).
// A child process for the tests that check an interrupted run leaves nothing behind.
import { ControlPlane } from "../controlplane/harness.ts";

const parent = process.ppid;
const plane = await ControlPlane.start();
process.stdout.write(`${JSON.stringify({ kubeconfigPath: plane.kubeconfigPath })}\n`);
setInterval(async () => {
  if (process.ppid === parent) return;
  await plane.stop();
  process.exit(0);
}, 1000);
