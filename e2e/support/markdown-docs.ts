/**
 * Reading the Markdown pages for the docs test (e2e/docs.test.ts): their links, their headings' anchors as
 * GitHub makes them, and the fenced blocks marked runnable (```sh runnable).
 */

/** The info string that marks a fenced shell block the docs test runs. */
export const RUNNABLE = 'sh runnable'

/** A link of a page: its target as written and the line it is on (1-based). */
export interface MarkdownLink {
  target: string
  line: number
}

/** The page's lines with fenced code blocks blanked (kept as empty lines, so line numbers stay right). */
function proseLines(markdown: string): string[] {
  let fence: string | undefined
  return markdown.split('\n').map((line) => {
    const open = /^(`{3,}|~{3,})/.exec(line)
    if (fence === undefined && open) {
      fence = open[1]
      return ''
    }
    if (fence !== undefined) {
      if (line.startsWith(fence as string) && line.slice((fence as string).length).trim() === '') fence = undefined
      return ''
    }
    return line
  })
}

/** Every `[text](target)` and `![alt](target)` outside code (fenced blocks and inline code spans). */
export function markdownLinks(markdown: string): MarkdownLink[] {
  const links: MarkdownLink[] = []
  proseLines(markdown).forEach((raw, i) => {
    const line = raw.replace(/`[^`]*`/g, '')
    for (const m of line.matchAll(/\]\(([^()\s]+)(?:\s+"[^"]*")?\)/g)) links.push({ target: m[1] as string, line: i + 1 })
  })
  return links
}

/** GitHub's anchor of a heading: lower case, punctuation dropped (hyphens and underscores kept), spaces to hyphens. */
export function headingSlug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '')
    .replace(/ /g, '-')
}

/** The anchors a page's headings get, a repeated one numbered `-1`, `-2` as GitHub numbers them. */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  for (const line of proseLines(markdown)) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (!m) continue
    const slug = headingSlug(m[1] as string)
    const n = seen.get(slug)
    seen.set(slug, (n ?? -1) + 1)
    anchors.add(n === undefined ? slug : `${slug}-${n + 1}`)
  }
  return anchors
}

/** The runnable blocks of a page, in order: their text and the line their fence opens on. */
export function runnableBlocks(markdown: string): Array<{ text: string; line: number }> {
  const blocks: Array<{ text: string; line: number }> = []
  const lines = markdown.split('\n')
  for (let i = 0; i < lines.length; i++) {
    if ((lines[i] as string).trim() !== `\`\`\`${RUNNABLE}`) continue
    const end = lines.findIndex((l, k) => k > i && l === '```')
    if (end === -1) throw new Error(`line ${i + 1}: a runnable block that is never closed`)
    blocks.push({ text: lines.slice(i + 1, end).join('\n'), line: i + 1 })
    i = end
  }
  return blocks
}
