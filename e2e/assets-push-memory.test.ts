/**
 * `tr-proxy assets push` of a trace too big to hold: a 60k-exchange trace (61 MB as a file) is exported, scanned
 * and pushed to a real git remote (git daemon on loopback) by a process whose heap is capped at 64 MB, in
 * bounded RSS. Push used to read the stored trace whole to export it, and the exported file whole to scan it:
 * that process dies there ("JavaScript heap out of memory").
 * In a file of its own: the runner gives each file 120 s.
 */
import assert from 'node:assert/strict'
import { mkdirSync, readFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { cli, generate, PEAK_RSS, peakRssMb } from './support/big-trace-file.ts'
import { type GitDaemon, startGitDaemon } from './support/git-daemon.ts'

const root = await mkdtemp(join(tmpdir(), 'tr-push-memory-'))
let daemon: GitDaemon | undefined
after(async () => {
  await daemon?.close()
  await rm(root, { recursive: true, force: true })
})

/**
 * A ceiling with room for a loaded machine's allocator and for V8's heap sizing, which differs by Node version
 * (at load 6: ~195-215 MB on Node 22, 309-314 on Node 24). The heap cap is what the code before streaming fails.
 */
const RSS_LIMIT_MB = 400

test('a 60k-exchange trace is pushed with a 64 MB heap, in bounded RSS, under its digest', { timeout: 115_000 }, async (t) => {
  const served = join(root, 'served')
  mkdirSync(served)
  daemon = await startGitDaemon(served)
  daemon.bareRepo('recordings')
  const file = join(root, 'big.trace.json')
  const digest = await generate(file, 'big', 60_000)
  const store = join(root, 'store')
  const imported = await cli(['import', file, '--store', store])
  assert.equal(imported.code, 0, imported.stderr.slice(-2000))

  const pointer = join(root, 'tool-replay.assets.json')
  const push = ['assets', 'push', 'big', '--remote', daemon.url('recordings'), '--store', store, '--pointer', pointer, '--cache', join(root, 'cache')]
  const pushed = await cli(push, ['--max-old-space-size=64', PEAK_RSS])
  assert.equal(pushed.code, 0, pushed.stderr.slice(-2000))
  assert.deepEqual(JSON.parse(readFileSync(pointer, 'utf8')).traces, { big: digest })
  const peak = peakRssMb(pushed.stderr)
  t.diagnostic(`push peak RSS ${peak} MB`)
  assert.ok(peak > 0 && peak < RSS_LIMIT_MB, `push peaked at ${peak} MB RSS (limit ${RSS_LIMIT_MB})`)
})
