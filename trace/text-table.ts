/** Pads the columns of a small text table; the last column is not padded and no line ends in spaces. */
export function textTable(rows: ReadonlyArray<ReadonlyArray<string>>): string {
  const widths: number[] = []
  for (const r of rows) for (let i = 0; i < r.length; i++) widths[i] = Math.max(widths[i] ?? 0, (r[i] as string).length)
  return rows
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')
}
