/**
 * The path check on small trees: a mention of a moved file fails with its place, one that exists passes, and what
 * is not a mention (code strings, placeholders, a path inside a longer one, a marked generated file) is left alone.
 */
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
// @ts-expect-error a plain script without declarations
import { checkPaths } from './check-paths.mjs'

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'tr-paths-'))
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true })
    writeFileSync(join(root, path), text)
  }
  return root
}

test('a comment or a page naming a file that moved fails, with the file and line; names that resolve pass', (t) => {
  const root = tree({
    'capture/refusal.ts': 'export const x = 1\n',
    'engine/session.ts': '/** Refusals: see capture/refusal.ts. */\n// moved: engine/refusal.ts\nexport const y = 2\n',
    'docs/guide.md': '# Guide\n\nRead `capture/refusal.ts` and `engine/pacing.ts`.\n',
    '.ci/run': '#!/bin/sh\n# runs scripts/gone.sh\n',
  })
  t.after(() => rmSync(root, { recursive: true, force: true }))
  const problems: string[] = checkPaths(root)
  assert.deepEqual(
    problems.map((p) => p.slice(0, p.indexOf(' ('))),
    ['.ci/run:2: scripts/gone.sh', 'docs/guide.md:3: engine/pacing.ts', 'engine/session.ts:2: engine/refusal.ts'],
  )
  assert.match(problems[0] ?? '', /no such file: mend the mention, or mark a generated one with "path-check: generated"/)
})

test('code strings, placeholders, paths inside longer ones and marked generated files are not mentions', (t) => {
  const root = tree({
    'scripts/make.test.ts': "writeFileSync('trace/a.ts', '')\n",
    'docs/page.md': [
      'A suite is `bench/suites/NAME.ts`; Ollama documents it in github.com/ollama/ollama/blob/main/docs/api.md.',
      '<!-- path-check: generated -->',
      'Run `examples/app/cases/one/one.test.mjs`, which promote writes.',
    ].join('\n'),
  })
  t.after(() => rmSync(root, { recursive: true, force: true }))
  assert.deepEqual(checkPaths(root), [])
})
