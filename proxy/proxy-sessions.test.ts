import assert from 'node:assert/strict'
import { test } from 'node:test'
import { openSession } from '../engine/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import { ProxySessions } from './proxy-sessions.ts'

const store = createMemoryStore()
const open = (trace: string) => () => openSession({ mode: 'record', trace, store })

test('select: the named session, else the default; unknown names and missing defaults are TR_SESSION_UNKNOWN', async () => {
  const fallback = await openSession({ mode: 'passthrough', trace: 'default', store })
  const sessions = new ProxySessions(fallback)
  const a = await sessions.open('a', open('trace-a'))
  assert.equal(sessions.select('a'), a)
  assert.equal(sessions.select(undefined), fallback)
  const unknown = sessions.select('b')
  assert.ok(unknown instanceof ToolReplayError)
  assert.equal(unknown.code, ErrorCodes.SESSION_UNKNOWN)
  assert.match(unknown.message, /The request names session "b", which is not open on this proxy \(open: "a"\)\. Open it first/)

  const only = new ProxySessions(undefined)
  const none = only.select(undefined)
  assert.ok(none instanceof ToolReplayError)
  assert.match(
    none.message,
    /no default session, and the request names none\. Name an open session with the x-tool-replay-session header or with proxy credentials/,
  )
  await sessions.closeAll()
  await fallback.close()
})

test('open reserves the name first: a racing open of the same name fails, the loser never opens a session', async () => {
  const sessions = new ProxySessions(undefined)
  let opened = 0
  const slow = async () => {
    await new Promise((r) => setTimeout(r, 20))
    opened++
    return openSession({ mode: 'record', trace: 'race', store })
  }
  const first = sessions.open('race', slow)
  const during = sessions.select('race')
  assert.ok(during instanceof ToolReplayError && /is still being opened/.test(during.message))
  await assert.rejects(
    sessions.open('race', slow),
    (err: ToolReplayError) =>
      err.code === ErrorCodes.SESSION_EXISTS && /already open on this proxy .*Close it with `tr-proxy session close race`/.test(err.message),
  )
  await first
  assert.equal(opened, 1)
  await assert.rejects(sessions.open('bad name', slow), (err: ToolReplayError) => err.code === ErrorCodes.INVALID_OPTION)
  await sessions.closeAll()
})

test('close takes the session out first, then closes it; closeAll keeps what was left open', async () => {
  const sessions = new ProxySessions(undefined)
  await sessions.open('a', open('close-a'))
  await sessions.open('b', open('close-b'))
  const summary = await sessions.close('a')
  assert.equal(summary.trace, 'close-a')
  assert.ok(sessions.select('a') instanceof ToolReplayError)
  await assert.rejects(
    sessions.close('a'),
    (err: ToolReplayError) => err.code === ErrorCodes.SESSION_UNKNOWN && /Failed to close session "a"/.test(err.message),
  )
  assert.deepEqual(
    sessions.list().map((s) => s.name),
    ['b'],
  )
  const left = await sessions.closeAll()
  assert.deepEqual(
    left.map((s) => [s.name, s.summary.trace]),
    [['b', 'close-b']],
  )
  assert.deepEqual(sessions.leftOpen(), left)
  assert.ok(await store.hasTrace('close-a'))
  assert.ok(await store.hasTrace('close-b'))
})

test('a session still opening when closeAll runs is discarded, not left open unseen', async () => {
  const sessions = new ProxySessions(undefined)
  let release = () => {}
  const gate = new Promise<void>((resolve) => (release = resolve))
  const opening = sessions.open('late', async () => {
    const s = await openSession({ mode: 'record', trace: 'late-trace', store })
    await gate
    return s
  })
  assert.deepEqual(await sessions.closeAll(), [])
  release()
  await assert.rejects(opening, (err: ToolReplayError) => err.code === ErrorCodes.STORE_CLOSED && /the proxy stopped/.test(err.message))
  assert.equal(sessions.get('late'), undefined)
  assert.equal(await store.hasTrace('late-trace'), false, 'the discarded recording never became a trace')
})
