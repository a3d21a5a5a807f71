/** The shell commands a page of documentation gives, as the tests that run or check them read them. */

/**
 * The commands of the first `sh` block of `markdown` after the heading `## <section>`: `\`
 * continuations joined, comments dropped, each command split into words. Throws naming `page`
 * when there is no such block.
 */
export function shBlockCommands(markdown: string, section: string, page: string): string[][] {
  const start = markdown.indexOf(`## ${section}`);
  const block = /```sh\n([\s\S]*?)```/.exec(markdown.slice(start))?.[1];
  if (start < 0 || !block) throw new Error(`${page} has no sh block under "## ${section}"`);
  return block
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((line) => line.replace(/(^|\s)#.*$/, "").trim())
    .filter(Boolean)
    .map((line) => line.split(/\s+/));
}
