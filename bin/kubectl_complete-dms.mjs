#!/usr/bin/env node
// kubectl's completion of its plugin `kubectl dms`: on a TAB after `kubectl dms`, kubectl runs the
// executable `kubectl_complete-dms` on PATH with the words typed after `dms` (the last one being
// completed) and offers what it prints, one candidate a line, then `:<directive>`. The same CLI
// (the same Node check), which knows it is asked to complete by the name it was started as
// (src/commands/program-name.ts).
import "./dms-operator.mjs";
