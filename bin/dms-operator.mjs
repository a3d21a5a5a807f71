#!/usr/bin/env node
// Entry point of the `dms-operator` command: the compiled CLI when built, the TypeScript
// source otherwise (Node >= 22.18 runs it directly by stripping types).
import { existsSync } from "node:fs";

const compiled = new URL("../dist/cli.js", import.meta.url);
await import(existsSync(compiled) ? compiled.href : new URL("../src/cli.ts", import.meta.url).href);
