/**
 * `tr-proxy assets restore` of a trace too big to hold: a 60k-exchange trace file (61 MB) pushed under a tag of a
 * real git remote (git daemon on loopback) is restored in a process whose heap is capped at 128 MB, and its peak
 * RSS stays bounded. Restore used to read the file whole (and `git cat-file` into one buffer), hold the trace and
 * put it whole: that process dies there ("JavaScript heap out of memory").
 * In a file of its own: the runner gives each file 120 s.
 */
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { cli, generate, PEAK_RSS, peakRssMb } from './support/big-trace-file.ts'
import { type GitDaemon, startGitDaemon } from './support/git-daemon.ts'

const root = await mkdtemp(join(tmpdir(), 'tr-restore-memory-'))
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

test('a 60k-exchange trace restores with a 128 MB heap, in bounded RSS, and exports to the pinned digest', { timeout: 115_000 }, async (t) => {
  const served = join(root, 'served')
  mkdirSync(served)
  daemon = await startGitDaemon(served)
  daemon.bareRepo('recordings')
  const remote = daemon.url('recordings')
  const work = join(root, 'work')
  const git = (...args: string[]) => execFileSync('git', ['-C', work, '-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { stdio: 'pipe' })
  mkdirSync(join(work, 'traces'), { recursive: true })
  git('init', '--quiet')
  const digest = await generate(join(work, 'traces', 'big.trace.json'), 'big', 60_000)
  git('add', '.')
  git('commit', '--quiet', '-m', 'big')
  git('tag', 'tool-replay/big')
  git('push', '--quiet', remote, 'refs/tags/tool-replay/big')
  const pointer = join(root, 'tool-replay.assets.json')
  writeFileSync(pointer, JSON.stringify({ format: 'tool-replay-assets', version: 1, remote, tag: 'tool-replay/big', traces: { big: digest } }))

  const store = join(root, 'store')
  const restore = ['assets', 'restore', '--store', store, '--pointer', pointer, '--cache', join(root, 'cache'), '--json']
  const restored = await cli(restore, ['--max-old-space-size=128', PEAK_RSS])
  assert.equal(restored.code, 0, restored.stderr.slice(-2000))
  assert.deepEqual(JSON.parse(restored.stdout).traces, [{ name: 'big', digest, action: 'imported' }])
  const peak = peakRssMb(restored.stderr)
  t.diagnostic(`restore peak RSS ${peak} MB`)
  assert.ok(peak > 0 && peak < RSS_LIMIT_MB, `restore peaked at ${peak} MB RSS (limit ${RSS_LIMIT_MB})`)

  const exported = await cli(['export', 'big', '--out', join(root, 'again.trace.json'), '--store', store, '--json'])
  assert.equal(exported.code, 0, exported.stderr.slice(-2000))
  assert.equal(JSON.parse(exported.stdout).digest, digest)
})
