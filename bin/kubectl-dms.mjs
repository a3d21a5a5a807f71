#!/usr/bin/env node
// Entry point of the kubectl plugin: kubectl runs the executable named `kubectl-dms` on PATH for
// `kubectl dms …`, with the arguments after `dms`. It is the `dms-operator` CLI itself (the same
// Node check, the same commands and flags); the program names itself after the file it was started
// as (src/commands/program-name.ts), so its help and usage say `kubectl dms`.
import "./dms-operator.mjs";
