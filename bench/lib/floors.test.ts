import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import { Agent, Dispatcher, fetch } from 'undici'
import { readableKeepsChunksApart } from '../../interceptor/index.ts'
import { ChunkFloor, type FloorResponse, RecordFloor } from './floors.ts'

const events = Array.from({ length: 20 }, (_, n) => Buffer.from(`data: {"n":${n}}\n\n`))
const answer = (): FloorResponse => ({ statusCode: 200, headers: { 'content-type': 'text/event-stream' }, chunks: events })

async function reads(dispatcher: Dispatcher): Promise<{ reads: number; text: string }> {
  const res = await fetch('http://floor.test/stream', { dispatcher })
  let reads = 0
  let text = ''
  for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
    reads++
    text += Buffer.from(chunk).toString()
  }
  return { reads, text }
}

/** The same chunks handed over in one tick: what the chunk floor's macrotask is there to prevent. */
class OneTick extends Dispatcher {
  override dispatch(_opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const controller = { aborted: false, paused: false, reason: null, rawHeaders: null, rawTrailers: null, pause() {}, resume() {}, abort() {} }
    handler.onRequestStart?.(controller, {})
    queueMicrotask(() => {
      handler.onResponseStart?.(controller, 200, { 'content-type': 'text/event-stream' }, 'OK')
      setImmediate(() => {
        for (const chunk of events) handler.onResponseData?.(controller, chunk)
        handler.onResponseEnd?.(controller, {})
      })
    })
    return true
  }
}

test('the chunk floor hands fetch every chunk as its own read; in one tick they merge where the runtime merges them', async () => {
  const whole = Buffer.concat(events).toString()
  const apart = await reads(new ChunkFloor(answer))
  assert.equal(apart.text, whole)
  assert.equal(apart.reads, events.length)
  // The control: on Node 22 and 24 chunks handed over in one tick merge (so the floor's macrotask is needed);
  // where the probe says the runtime keeps them apart (Node 26), the floor hands them over at once, and so may fetch.
  const oneTick = await reads(new OneTick())
  assert.equal(oneTick.text, whole)
  if (readableKeepsChunksApart()) assert.equal(oneTick.reads, events.length)
  else assert.ok(oneTick.reads < events.length, `one tick gave ${oneTick.reads} reads`)
})

test('the record floor forwards the request and its body, answers the app, and counts what it kept', async () => {
  const seen: string[] = []
  const server = http.createServer((req, res) => {
    let body = ''
    req.on('data', (c: Buffer) => {
      body += c.toString()
    })
    req.on('end', () => {
      seen.push(`${req.method} ${req.url} ${body}`)
      res.writeHead(200, { 'content-type': 'application/json' })
      res.write('{"ok":')
      setImmediate(() => res.end('true}'))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const agent = new Agent()
  try {
    const floor = new RecordFloor(agent)
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/echo`
    const res = await fetch(url, { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' }, dispatcher: floor })
    assert.equal(await res.text(), '{"ok":true}')
    assert.deepEqual(seen, ['POST /echo {"a":1}'])
    assert.equal(floor.recorded, 1)
  } finally {
    await agent.close()
    server.close()
  }
})
