/**
 * The size check on small trees: an oversized file or function fails with its place and length, a `size:` line or
 * an allowlist entry lets it stay with its reason, what is within the limits or a test or a UI component is left
 * alone, and an allowlist entry naming no oversized part is reported stale. Last, the checkout itself holds.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
// @ts-expect-error a plain script without declarations
import { MAX_FILE_LINES, MAX_FUNCTION_LINES, measureSizes, SIZE_ALLOWLIST, staleAllowances } from './check-sizes.mjs'

type Found = { where: string; part: string; lines: number; limit: number; reason?: string }

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'tr-sizes-'))
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true })
    writeFileSync(join(root, path), text)
  }
  return root
}

const fn = (name: string, bodyLines: number, above = ''): string =>
  `${above}export function ${name}(): number {\n${'  let x = 1\n'.repeat(bodyLines)}  return 1\n}\n`
const filler = (lines: number): string => 'export const y = 1\n'.repeat(lines)

test('an oversized file and function fail with place and length; those within the limits pass', (t) => {
  const root = tree({
    'engine/big.ts': filler(MAX_FILE_LINES + 1),
    'engine/edge.ts': filler(MAX_FILE_LINES),
    'capture/long.ts': `// a file\n${fn('tooLong', MAX_FUNCTION_LINES - 2)}${fn('justFits', MAX_FUNCTION_LINES - 3)}`,
    'capture/arrow.ts': `export const arrow = () => {\n${'  let x = 1\n'.repeat(MAX_FUNCTION_LINES)}}\n`,
  })
  t.after(() => rmSync(root, { recursive: true, force: true }))
  const found: Found[] = measureSizes(root, [])
  assert.deepEqual(
    found.map((f) => [f.where, f.lines, f.limit, f.reason]),
    [
      ['engine/big.ts', MAX_FILE_LINES + 1, MAX_FILE_LINES, undefined],
      ['capture/arrow.ts:1 arrow', MAX_FUNCTION_LINES + 2, MAX_FUNCTION_LINES, undefined],
      ['capture/long.ts:2 tooLong', MAX_FUNCTION_LINES + 1, MAX_FUNCTION_LINES, undefined],
    ],
  )
})

test('a size: line, an allowlist entry, a test file and a UI component let a part stay', (t) => {
  const root = tree({
    'engine/kept.ts': `/**\n * Kept whole.\n * size: one table the reader scans at once\n */\n${filler(MAX_FILE_LINES)}`,
    'engine/listed.ts': filler(MAX_FILE_LINES + 1),
    'capture/reasoned.ts': fn('reasoned', MAX_FUNCTION_LINES, '// size: one state machine, read top to bottom\n'),
    'capture/listed-fn.ts': fn('listedFn', MAX_FUNCTION_LINES),
    'capture/big.test.ts': filler(MAX_FILE_LINES + 1),
    'inspector/ui/view.tsx': `export function View() {\n${'  let x = 1\n'.repeat(MAX_FUNCTION_LINES)}  return null\n}\n`,
  })
  t.after(() => rmSync(root, { recursive: true, force: true }))
  const allowlist = [
    { part: 'engine/listed.ts', reason: 'being rewritten' },
    { part: 'capture/listed-fn.ts listedFn', reason: 'being rewritten too' },
  ]
  const found: Found[] = measureSizes(root, allowlist)
  assert.deepEqual(
    found.map((f) => [f.part, f.reason]),
    [
      ['engine/kept.ts', 'one table the reader scans at once'],
      ['engine/listed.ts', 'being rewritten'],
      ['capture/listed-fn.ts listedFn', 'being rewritten too'],
      ['capture/reasoned.ts reasoned', 'one state machine, read top to bottom'],
    ],
  )
  assert.deepEqual(staleAllowances(found, allowlist), [])
})

test('an allowlist entry naming no oversized part is stale', (t) => {
  const root = tree({ 'store/small.ts': filler(10), 'store/big.ts': filler(MAX_FILE_LINES + 1) })
  t.after(() => rmSync(root, { recursive: true, force: true }))
  const allowlist = [
    { part: 'store/small.ts', reason: 'split already' },
    { part: 'store/big.ts', reason: 'being rewritten' },
    { part: 'store/gone.ts makeIt', reason: 'renamed' },
  ]
  const stale = staleAllowances(measureSizes(root, allowlist), allowlist)
  assert.deepEqual(
    stale.map((a: { part: string }) => a.part),
    ['store/small.ts', 'store/gone.ts makeIt'],
  )
})

test('the checkout holds: every oversized part has a reason and every allowlist entry is in use', () => {
  const root = dirname(dirname(fileURLToPath(import.meta.url)))
  const found: Found[] = measureSizes(root)
  assert.deepEqual(
    found.filter((f) => !f.reason).map((f) => f.where),
    [],
  )
  assert.deepEqual(staleAllowances(found, SIZE_ALLOWLIST), [])
})

test('the script exits 1 naming each oversized part and how to fix it (on a small tree: the checkout is measured above)', (t) => {
  const root = tree({ 'engine/big.ts': filler(MAX_FILE_LINES + 1) })
  t.after(() => rmSync(root, { recursive: true, force: true }))
  const script = join(dirname(fileURLToPath(import.meta.url)), 'check-sizes.mjs')
  const run = spawnSync(process.execPath, [script, '--root', root], { encoding: 'utf8', timeout: 60_000 })
  assert.equal(run.status, 1, run.stderr)
  assert.match(run.stderr, new RegExp(`engine/big.ts: ${MAX_FILE_LINES + 1} lines \\(over ${MAX_FILE_LINES}\\): split it`))
})
