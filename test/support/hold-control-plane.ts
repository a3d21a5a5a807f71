// Starts a control plane, prints `{"kubeconfigPath": ...}` on stdout and holds it until killed.
// A child process for the tests that check an interrupted run leaves nothing behind.
import { ControlPlane } from "../controlplane/harness.ts";

const plane = await ControlPlane.start();
process.stdout.write(`${JSON.stringify({ kubeconfigPath: plane.kubeconfigPath })}\n`);
// The running servers' pipes keep the event loop alive until a signal ends the process.
