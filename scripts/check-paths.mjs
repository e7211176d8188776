#!/usr/bin/env node
/**
 * The path check (`npm run lint` runs it): every path of this repository named in a comment, a shell or YAML
 * comment, or a Markdown page must exist, so a moved file leaves no stale mention behind.
 *
 *   node scripts/check-paths.mjs [--root DIR]     exit 0: every mention resolves; exit 1: each stale one on stderr
 *
 * A mention is `<folder>/.../<name>.<ext>` whose first folder is one of the repository's (scripts/folders.mjs,
 * plus docs/, bin/ and .ci/), read relative to the root. Code strings are not read (tests create the files they
 * name; code that names a missing file fails when it runs). Not mentions: placeholders in capitals
 * (`bench/suites/NAME.ts`), a path inside a longer one (`ollama/docs/api.md`), and a line marked
 * `path-check: generated` (a file a command writes, such as a promoted test), or the line after such a mark.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { basename, dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { CHECKED_OUTSIDE, PACKAGE_FOLDERS } from './folders.mjs'

const TOP = [...PACKAGE_FOLDERS, ...CHECKED_OUTSIDE, 'docs', 'bin', '.ci']
const MENTION = new RegExp(
  `(?<![\\w./@~-])((?:${TOP.map((t) => t.replace('.', '\\.')).join('|')})/[\\w./-]*[\\w-]\\.(?:tsx?|mts|mjs|cjs|js|md|json|sh|ya?ml))(?![\\w/-])`,
  'g',
)
const PLACEHOLDER = /(^|\/)[A-Z][A-Z_]+(\.|\/)/
const MARK = 'path-check: generated'
const SKIP_DIRS = new Set(['node_modules', 'dist', '.git', '.tool-replay'])
const SCRIPT = /\.(tsx?|mts|mjs|cjs|js)$/

/** The text a file's mentions are read from, line by line: comments of code, shell and YAML; all of Markdown. */
function readableLines(path) {
  const text = readFileSync(path, 'utf8')
  if (path.endsWith('.md')) return text.split('\n')
  const lines = text.split('\n').map(() => '')
  if (/\.(sh|ya?ml)$/.test(path) || !basename(path).includes('.')) {
    text.split('\n').forEach((line, i) => {
      const at = line.search(/(^|\s)#/)
      if (at >= 0) lines[i] = line.slice(at)
    })
    return lines
  }
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, path.endsWith('x') ? ts.LanguageVariant.JSX : ts.LanguageVariant.Standard, text)
  const starts = [0]
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) starts.push(i + 1)
  const lineOf = (pos) => {
    let lo = 0
    let hi = starts.length - 1
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1
      if (starts[mid] <= pos) lo = mid
      else hi = mid - 1
    }
    return lo
  }
  for (let kind = scanner.scan(); kind !== ts.SyntaxKind.EndOfFileToken; kind = scanner.scan()) {
    if (kind !== ts.SyntaxKind.SingleLineCommentTrivia && kind !== ts.SyntaxKind.MultiLineCommentTrivia) continue
    const from = scanner.getTokenStart?.() ?? scanner.getTokenPos()
    const comment = scanner.getTokenText()
    comment.split('\n').forEach((part, k) => {
      const i = lineOf(from) + k
      lines[i] = `${lines[i]} ${part}`
    })
  }
  return lines
}

function* filesUnder(root, dir) {
  for (const name of readdirSync(dir).sort()) {
    if (SKIP_DIRS.has(name)) continue
    const path = join(dir, name)
    const st = statSync(path)
    if (st.isDirectory()) yield* filesUnder(root, path)
    else if (SCRIPT.test(name) || /\.(md|sh|ya?ml)$/.test(name) || relative(root, dir) === '.ci') yield path
  }
}

/**
 * The stale mentions under `root`, one line each: `file:line: path (no such file)`.
 * @example
 * const problems = checkPaths(process.cwd())
 */
export function checkPaths(root) {
  const problems = []
  for (const file of filesUnder(root, root)) {
    const lines = readableLines(file)
    lines.forEach((line, i) => {
      if (line.includes(MARK) || (lines[i - 1] ?? '').includes(MARK)) return
      for (const m of line.matchAll(MENTION)) {
        const path = m[1]
        if (PLACEHOLDER.test(path) || existsSync(join(root, path))) continue
        problems.push(`${relative(root, file)}:${i + 1}: ${path} (no such file: mend the mention, or mark a generated one with "${MARK}")`)
      }
    })
  }
  return problems
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf('--root')
  const root = at >= 0 ? resolve(process.argv[at + 1] ?? '.') : dirname(dirname(fileURLToPath(import.meta.url)))
  const problems = checkPaths(root)
  if (problems.length > 0) {
    process.stderr.write(`Path check failed (${problems.length}):\n${problems.map((p) => `  ${p}`).join('\n')}\n`)
    process.exitCode = 1
  } else process.stdout.write('Path check: every path named in comments and docs exists.\n')
}
