import assert from 'node:assert/strict'
import { test } from 'node:test'
import { websocketExchange } from '../store/fixtures/exchanges.ts'
import { createMemoryStore } from '../store/index.ts'
import { bodyFromBytes, type Exchange, type Trace } from '../trace/index.ts'
import { answered, answerMiss } from './answer-miss.ts'

const enc = (s: string) => new TextEncoder().encode(s)
const bodies = new Map<string, Uint8Array>()
const body = (s: string) => {
  const b = bodyFromBytes(enc(s))
  bodies.set(b.ref.digest, b.bytes)
  return b.ref
}

function x(seq: number, method: string, path: string, req: string | null, res: string | 'miss'): Exchange {
  const request = { method, url: `https://api.test/${path}`, headers: [], body: req === null ? null : body(req) }
  const timing = { startMs: seq * 10, headersMs: 2 }
  if (res === 'miss') return { seq, request, timing, outcome: { kind: 'error', error: { code: 'TR_REPLAY_MISS', message: 'refused', phase: 'connect' } } }
  return { seq, request, timing, outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: [], body: body(res), trailers: [] } } }
}

const trace = (name: string, exchanges: Exchange[], labels?: Record<string, string>): Trace => ({
  meta: { name, format: 1, ...(labels ? { labels } : {}), app: { command: ['node', 'app.js'], cwd: '/app' } },
  exchanges,
  bodies: new Map(bodies),
})

test('a strict run that stopped at a new model request: the new branch answers it with the recorded answer, offline', async () => {
  const store = createMemoryStore()
  const model0 = x(0, 'POST', 'v1/chat', '{"messages":["order?"]}', '{"tool":"lookup"}')
  const tool1 = x(1, 'GET', 'orders/42', null, '{"refundable":0}')
  const model2 = x(2, 'POST', 'v1/chat', '{"messages":["order?","refundable 8999"]}', '{"decision":"approve"}')
  await store.putTrace(trace('branch', [model0, tool1, model2]))
  // The run replayed #0 and #1 (copies of the branch's) and sent a new #2: the tool result it got changed it.
  const asked = x(2, 'POST', 'v1/chat', '{"messages":["order?","refundable 0"]}', 'miss')
  const run = trace('branch-run', [model0, tool1, asked], { observedAgainst: 'branch' })
  await store.beginTrace(run.meta).then(async (rec) => {
    for (const e of run.exchanges) await rec.append(e, run.bodies)
    await rec.close({ command: ['node', 'app.js'], cwd: '/app', exit: { code: 0, stdout: { text: '', bytes: 0 }, stderr: { text: '', bytes: 0 } } })
  })
  const r = await answerMiss(store, { run: 'branch-run', to: 'branch-next' })
  assert.equal(r.seq, 2)
  const next = await store.readTrace('branch-next')
  assert.equal(next.exchanges.length, 3)
  const answered = next.exchanges[2] as Exchange
  assert.equal(answered.request.body?.digest, asked.request.body?.digest, 'the request the app sent now')
  assert.deepEqual(answered.outcome, model2.outcome, "with the branch's recorded answer")
  assert.equal(answered.origin, 'patched')
  assert.equal(next.meta.lineage?.sourceName, 'branch')
  assert.match(next.meta.lineage?.patches.at(-1)?.spec ?? '', /^#2 request=the request the app sent at #2 of run "branch-run"/)
  assert.deepEqual(next.meta.app, { command: ['node', 'app.js'], cwd: '/app' }, 'the command, no outcome yet')
  await assert.rejects(answerMiss(store, { run: 'branch', to: 'x' }), /only a strict run of the app against a trace/)
})

test('a WebSocket session before the miss keeps its messages in the new branch, with their bodies', () => {
  const ws = websocketExchange(0)
  for (const [d, b] of ws.bodies) bodies.set(d, b)
  const branch = trace('ws-branch', [ws.exchange, x(1, 'POST', 'v1/chat', '{"messages":["hi"]}', '{"decision":"approve"}')])
  const run = trace('ws-branch-run', [ws.exchange, x(1, 'POST', 'v1/chat', '{"messages":["hi again"]}', 'miss')], { observedAgainst: 'ws-branch' })
  const next = answered(run, branch, 1, 'ws-branch-next')
  const messages = next.exchanges[0]?.websocket?.messages ?? []
  assert.equal(messages.length, ws.exchange.websocket?.messages.length)
  // The branch is a whole trace: every body it references is in it (a trace file written from it needs them).
  for (const m of messages) assert.deepEqual(next.bodies.get(m.body.digest), ws.bodies.get(m.body.digest))
})
