import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createMemoryStore } from '../store/index.ts'
import type { HeaderPairs } from '../trace/index.ts'
import type { CapturedRequest } from './decision.ts'
import { formatSummary } from './ledger.ts'
import { openSession } from './open-session.ts'
import type { Session } from './session.ts'

const enc = new TextEncoder()
const post = (content: string, headers: HeaderPairs = []): CapturedRequest => ({
  method: 'POST',
  url: 'https://api.openai.test/v1/chat/completions',
  headers: [['content-type', 'application/json'], ...headers],
  body: enc.encode(JSON.stringify({ model: 'm', messages: [{ role: 'user', content }] })),
})
const retry = (n: number): HeaderPairs => [['x-stainless-retry-count', String(n)]]

/** A strict replay of a trace holding one exchange for `post('recorded')`. */
async function replayOfOne(): Promise<Session> {
  const store = createMemoryStore()
  const rec = await openSession({ mode: 'record', trace: 't', store })
  const d = await rec.handle(post('recorded'))
  assert.equal(d.kind, 'forward')
  if (d.kind === 'forward') {
    d.recorder.responseStart({ status: 200, statusText: 'OK', headers: [] })
    await d.recorder.responseEnd()
  }
  await rec.close()
  return openSession({ mode: 'replay', trace: 't', store })
}

const refuse = async (s: Session, r: CapturedRequest) => assert.equal((await s.handle(r)).kind, 'fail')

test('an SDK retrying one missed request (x-stainless-retry-count 0, 1, 2) is one ledger entry with 3 attempts', async () => {
  const s = await replayOfOne()
  for (const n of [0, 1, 2]) await refuse(s, post('changed', retry(n)))
  const summary = s.summary()
  assert.equal(summary.misses.length, 1)
  assert.equal(summary.misses[0]?.attempts, 3)
  assert.match(formatSummary(summary), /1 unmatched/)
  assert.match(formatSummary(summary), /TR_REPLAY_MISS POST https:\/\/api\.openai\.test\/v1\/chat\/completions \(3 attempts\): Failed to replay/)
})

test('retries that announce themselves fold even when other requests come in between', async () => {
  const s = await replayOfOne()
  await refuse(s, post('a', retry(0)))
  await refuse(s, post('b', retry(0)))
  await refuse(s, post('a', retry(1)))
  await refuse(s, post('b', retry(1)))
  assert.deepEqual(
    s.summary().misses.map((m) => m.attempts ?? 1),
    [2, 2],
  )
})

test('without a retry header, the same request right after its refusal is a retry (LangChain, plain clients)', async () => {
  const s = await replayOfOne()
  for (let i = 0; i < 7; i++) await refuse(s, post('changed'))
  assert.deepEqual(
    s.summary().misses.map((m) => m.attempts),
    [7],
  )
})

test('separate requests stay separate: a served request in between, another identity, a retry of nothing refused', async () => {
  const s = await replayOfOne()
  await refuse(s, post('a'))
  assert.equal((await s.handle(post('recorded'))).kind, 'replay')
  await refuse(s, post('a'))
  await refuse(s, post('b', retry(0)))
  await refuse(s, post('c', retry(1)))
  const misses = s.summary().misses
  assert.equal(misses.length, 4)
  assert.ok(misses.every((m) => m.attempts === undefined))
})

test('overruns of one recorded request fold the same way', async () => {
  const s = await replayOfOne()
  assert.equal((await s.handle(post('recorded', retry(0)))).kind, 'replay')
  for (const n of [0, 1, 2]) await refuse(s, post('recorded', retry(n)))
  const summary = s.summary()
  assert.equal(summary.exhausted.length, 1)
  assert.equal(summary.exhausted[0]?.attempts, 3)
  assert.equal(summary.ok, false)
})
