/**
 * The test suite's cache of type-stripped sources (scripts/strip-cache.mjs, loaded by scripts/run-tests.mjs): on
 * Node 22 a process that loads a .ts file keeps the stripped form, the next process runs that form without
 * stripping again, an edited file is stripped anew, and no warning reaches stderr. On Node 24 and later (which
 * cache stripped sources themselves) it does nothing.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'

const HOOK = new URL('./strip-cache.mjs', import.meta.url).href
const onNode22 = process.versions.node.startsWith('22.')

function run(dir: string): { stdout: string; stderr: string } {
  // The suite's own NODE_OPTIONS (this hook, pointed at the real temp folder) must not reach the child.
  const { NODE_OPTIONS: _, ...env } = process.env
  const r = spawnSync(process.execPath, ['--import', HOOK, join(dir, 'app.ts')], {
    encoding: 'utf8',
    env: { ...env, TMPDIR: join(dir, 'tmp') },
    timeout: 60_000,
  })
  assert.equal(r.status, 0, r.stderr)
  return { stdout: r.stdout, stderr: r.stderr }
}

const cached = (dir: string): string[] => {
  const root = join(dir, 'tmp', 'tool-replay-test-strip-cache', process.version)
  return existsSync(root) ? readdirSync(root).map((f) => join(root, f)) : []
}

test('a .ts file is stripped once, kept, reused by the next process, and stripped again when it changes', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tr-strip-cache-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n')
  writeFileSync(join(dir, 'app.ts'), 'const n: number = 41\nconsole.log(n + 1)\n')

  const first = run(dir)
  assert.equal(first.stdout, '42\n')
  assert.equal(first.stderr, '', 'no ExperimentalWarning, no other output')
  if (!onNode22) {
    assert.deepEqual(cached(dir), [], 'Node 24 and later cache stripped sources themselves')
    return
  }
  const [entry, ...more] = cached(dir)
  assert.ok(entry && more.length === 0, 'one cache entry')
  assert.equal(readFileSync(entry, 'utf8'), 'const n         = 41\nconsole.log(n + 1)\n', "Node's stripping: types become blanks")

  // The next process runs what the cache holds: changed here, so only a cache hit prints it.
  writeFileSync(entry, "console.log('from the cache')\n")
  assert.equal(run(dir).stdout, 'from the cache\n')

  // An edited source has another key: stripped again, its own entry.
  writeFileSync(join(dir, 'app.ts'), 'const n: number = 1\nconsole.log(n + 1)\n')
  assert.equal(run(dir).stdout, '2\n')
  assert.equal(cached(dir).length, 2)
})
