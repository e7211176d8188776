/**
 * Reads the shell walk-through of a README, so an e2e test runs exactly the commands the README shows and
 * compares their output with what the README says they print.
 *
 * In a ```sh block: a command is any line that does not start with `#`, continued onto the next line by a
 * trailing backslash. The `#` lines right under a command are what it prints (`#   TEXT`, three spaces; a bare
 * `#` for an empty line); any other `#` line is prose. In an expected line, `…` stands for text left out in the
 * README (a machine path, the tail of a long message); it also matches the `…` the tool prints where it cuts a
 * value short.
 */

/** One command of the walk-through and the lines the README says it prints. */
export interface ReadmeCommand {
  /** The command as a shell line (continuations joined, as the shell joins them). */
  command: string
  expected: string[]
}

/** The commands of every ```sh block in `markdown`, in order. */
export function readmeCommands(markdown: string): ReadmeCommand[] {
  const commands: ReadmeCommand[] = []
  const blocks = markdown.split(/^```sh\n/m).slice(1)
  for (const block of blocks) {
    const lines = (block.split(/^```$/m)[0] ?? '').split('\n')
    let outputMayFollow = false
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i] as string
      if (line.trim() === '') {
        outputMayFollow = false
        continue
      }
      if (line.startsWith('#')) {
        const last = commands.at(-1)
        if (!outputMayFollow || !last) continue // prose
        if (line !== '#' && !line.startsWith('#   ')) throw new Error(`README output line must start with "#   ": ${line}`)
        last.expected.push(line.slice(4))
        continue
      }
      let command = line
      while (command.endsWith('\\') && i + 1 < lines.length) command = `${command.slice(0, -1)}${(lines[++i] as string).trimStart()}`
      commands.push({ command, expected: [] })
      outputMayFollow = true
    }
  }
  return commands
}

/** Replaces what differs from run to run (patch ids, trace digests, tool call ids) with stable markers. */
export function normalizeOutput(text: string): string {
  return text
    .replace(/\b[0-9a-f]{64}\b/g, '<sha256>')
    .replace(/\b[0-9a-f]{12}\b/g, '<patch-id>')
    .replace(/\bcall_[A-Za-z0-9]{24}\b/g, '<call-id>')
}

/** Whether `actual` output lines are what the README shows (`…` matching any text within a line). */
export function outputMatches(expected: string[], actual: string[]): boolean {
  if (expected.length !== actual.length) return false
  return expected.every((e, i) => lineMatcher(normalizeOutput(e)).test(normalizeOutput(actual[i] as string)))
}

function lineMatcher(expected: string): RegExp {
  const parts = expected.split('…').map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
  return new RegExp(`^${parts.join('.*')}$`, 's')
}

/** Whether every `expected` line shows in `actual`, in order, other lines between them allowed (`…` as in outputMatches). */
export function outputContains(expected: string[], actual: string[]): boolean {
  let at = 0
  for (const want of expected) {
    const matcher = lineMatcher(normalizeOutput(want))
    while (at < actual.length && !matcher.test(normalizeOutput(actual[at] as string))) at++
    if (at === actual.length) return false
    at++
  }
  return true
}
