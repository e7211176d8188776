import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { isToolReplayError } from '../trace/index.ts'
import { withFileLock } from './cache-lock.ts'

const dir = mkdtempSync(join(tmpdir(), 'tr-lock-'))
after(() => rmSync(dir, { recursive: true, force: true }))
const LOCK_MODULE = fileURLToPath(new URL('./cache-lock.ts', import.meta.url))

test('holders never overlap: 4 processes x 5 turns append start/end pairs that never interleave', async () => {
  const lock = join(dir, 'turns.lock')
  const log = join(dir, 'turns.log')
  writeFileSync(log, '')
  const script = `
    import { appendFileSync } from 'node:fs'
    import { withFileLock } from ${JSON.stringify(LOCK_MODULE)}
    for (let i = 0; i < 5; i++) {
      await withFileLock(${JSON.stringify(lock)}, async () => {
        appendFileSync(${JSON.stringify(log)}, 'start ' + process.pid + '\\n')
        await new Promise((r) => setTimeout(r, 5))
        appendFileSync(${JSON.stringify(log)}, 'end ' + process.pid + '\\n')
      }, { timeoutMs: 60000 })
    }`
  const children = Array.from({ length: 4 }, () =>
    spawn(process.execPath, ['--conditions=tool-replay-source', '--input-type=module', '-e', script], { stdio: ['ignore', 'inherit', 'inherit'] }),
  )
  const codes = await Promise.all(children.map(async (c) => (await once(c, 'exit'))[0]))
  assert.deepEqual(codes, [0, 0, 0, 0])
  const lines = readFileSync(log, 'utf8').trim().split('\n')
  assert.equal(lines.length, 40)
  for (let i = 0; i < lines.length; i += 2) assert.equal(lines[i + 1], lines[i]?.replace('start', 'end'), `turn ${i / 2} overlapped another`)
})

test('a lock left by a process that died is broken; one held by a live process is waited for, then TR_ASSETS_LOCKED names it', async () => {
  const dead = spawn(process.execPath, ['-e', ''])
  await once(dead, 'exit')
  const stale = join(dir, 'stale.lock')
  writeFileSync(stale, JSON.stringify({ pid: dead.pid, host: hostname(), since: '2020-01-01T00:00:00.000Z' }))
  assert.equal(await withFileLock(stale, async () => 'ran', { timeoutMs: 5000 }), 'ran')

  const held = join(dir, 'held.lock')
  writeFileSync(held, JSON.stringify({ pid: process.pid, host: hostname(), since: '2020-01-01T00:00:00.000Z' }))
  let ran = false
  await assert.rejects(
    withFileLock(held, async () => (ran = true), { timeoutMs: 200, what: 'the test cache' }),
    (err: unknown) =>
      isToolReplayError(err, 'TR_ASSETS_LOCKED') &&
      err.message.includes(`Waited 200 ms for the test cache, held by process ${process.pid}`) &&
      err.message.includes(held),
  )
  assert.equal(ran, false)
  // Another host's holder cannot be checked: it is waited for, never broken.
  const foreign = join(dir, 'foreign.lock')
  writeFileSync(foreign, JSON.stringify({ pid: 1, host: 'some-other-host', since: '2020-01-01T00:00:00.000Z' }))
  await assert.rejects(
    withFileLock(foreign, async () => {}, { timeoutMs: 100 }),
    (err: unknown) => isToolReplayError(err, 'TR_ASSETS_LOCKED'),
  )
  assert.ok(readFileSync(foreign, 'utf8').includes('some-other-host'))
})

test('in one process, concurrent callers take turns and the lock is released when fn throws', async () => {
  const lock = join(dir, 'inproc.lock')
  const events: string[] = []
  const turn = (n: number) =>
    withFileLock(lock, async () => {
      events.push(`in ${n}`)
      await sleep(10)
      events.push(`out ${n}`)
      if (n === 1) throw new Error('boom')
    })
  const results = await Promise.allSettled([turn(1), turn(2), turn(3)])
  assert.equal(results[0]?.status, 'rejected')
  for (let i = 0; i < events.length; i += 2) assert.equal(events[i + 1], events[i]?.replace('in', 'out'))
  assert.equal(events.length, 6)
})
