/**
 * What a Node process a test starts inherits of the run's Node settings. Tests start `node
 * src/cli.ts` (the CLI, the operator) with an environment of their choosing; with Node's compile
 * cache (set for the run in vitest.config.ts) each start reuses the code the previous ones
 * compiled instead of compiling every module again, which is most of a start's CPU.
 */
export function nodeCacheEnv(): Record<string, string> {
  const dir = process.env.NODE_COMPILE_CACHE;
  return dir ? { NODE_COMPILE_CACHE: dir } : {};
}
