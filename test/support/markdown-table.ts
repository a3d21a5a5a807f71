/**
 * A Markdown table of a document's section, read as the tests that compare a doc's table with
 * what the code or an engine computes read it: a cell by column name, the doc named in errors.
 */

/** The table of `section` (its first `|` lines): the rows' cells, and a column's index by its header. */
export function markdownTable(
  section: string,
  doc: string,
): { rows: string[][]; column: (name: string) => number } {
  const lines = section.split("\n").filter((line) => line.startsWith("|"));
  const cells = (line: string) =>
    line
      .split("|")
      .slice(1, -1)
      .map((cell) => cell.trim());
  const header = cells(lines[0] ?? "");
  const column = (name: string) => {
    const index = header.indexOf(name);
    if (index < 0) throw new Error(`the table of ${doc} has no column "${name}": ${header.join(" | ")}`);
    return index;
  };
  return { rows: lines.slice(2).map(cells), column };
}
