/**
 * A mistake in how the command was called, in a module of its own with no imports: the program's
 * harness (`program.ts`) catches it before any command's code is loaded.
 */

/**
 * A mistake in how the command was called (bad flag value, missing setting): printed without a
 * stack trace and exits with status 1, as every error does. `lines` are shown one per line.
 */
export class UsageError extends Error {
  override readonly name = "UsageError";
  readonly lines: readonly string[];
  constructor(lines: readonly string[]) {
    super(lines.join("; "));
    this.lines = lines;
  }
}
