/** The command tree as completion sees it (completion-table.ts holds the plugin's). Imports nothing. */

/** A flag as completion sees it. */
export interface CompletionFlag {
  long?: string;
  short?: string;
  takesValue: boolean;
  description: string;
  /** The values it takes, where they are a known list (`-o`, `--status`, `--type`). */
  values?: readonly string[];
}

/** A command as completion sees it: its path of names, its flags, and whether it takes resource names. */
export interface CompletionNode {
  /** e.g. `["deployments", "list"]`. */
  path: readonly string[];
  flags: readonly CompletionFlag[];
  subcommands: readonly string[];
  /** Takes a Deployment resource's name as its argument (`<name>`, `[name...]` or `<resource>`). */
  takesResource: boolean;
  /** Takes several (`[name...]`): names are offered for every argument, not only the first. */
  variadic?: boolean;
}
