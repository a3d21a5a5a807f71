// The shells the completion tests run their scripts in, installed from the machine's Debian
// packages when missing (as root, where apt-get is), else a clear error naming what to install.
import { spawnSync } from "node:child_process";

const has = (command: string) => spawnSync("sh", ["-c", `command -v ${command}`]).status === 0;

/** Installs the missing `shells` (Debian packages of the same names); throws when it cannot. */
export function ensureShells(shells: readonly string[], log: (line: string) => void): void {
  const missing = shells.filter((shell) => !has(shell));
  if (missing.length === 0) return;
  const root = process.getuid?.() === 0;
  if (!root || !has("apt-get"))
    throw new Error(
      `the completion tests run their scripts in ${missing.join(" and ")}, not installed here: install the package${missing.length > 1 ? "s" : ""} ${missing.join(" ")} (e.g. sudo apt-get install ${missing.join(" ")}) and retry`,
    );
  log(`installing ${missing.join(", ")} (apt-get) for the completion tests`);
  const apt = (args: string[]) =>
    spawnSync("apt-get", args, {
      stdio: ["ignore", "ignore", "inherit"],
      env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
    }).status === 0;
  const install = ["install", "-y", "--no-install-recommends", ...missing];
  if (!apt(install) && !(apt(["update"]) && apt(install)))
    throw new Error(`apt-get could not install ${missing.join(" ")}: install them and retry`);
}
