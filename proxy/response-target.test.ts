/**
 * The proxy's pacing between replayed chunks, driven without a network: node:http's own ServerResponse on an
 * in-memory stream, played by the capture lifecycle's driver at the default pace.
 */
import assert from 'node:assert/strict'
import { IncomingMessage, ServerResponse } from 'node:http'
import { Socket } from 'node:net'
import { PassThrough } from 'node:stream'
import { test } from 'node:test'
import { DEFAULT_PACE, drivePlayback } from '../capture/index.ts'
import type { Playback } from '../engine/index.ts'
import { responseTarget } from './response-target.ts'

/** A ServerResponse whose socket is a PassThrough: each write lands in `writes`, as one entry. */
function pipedResponse(): { res: ServerResponse; writes: Buffer[] } {
  const req = new IncomingMessage(new Socket())
  req.httpVersionMajor = 1
  req.httpVersionMinor = 1
  const res = new ServerResponse(req)
  const sink = new PassThrough()
  const writes: Buffer[] = []
  sink.on('data', (c: Buffer) => writes.push(c))
  Object.assign(sink, { setNoDelay: () => sink, setTimeout: () => sink, _httpMessage: null })
  res.assignSocket(sink as unknown as Socket)
  return { res, writes }
}

/** A recorded stream of chunks at the given offsets (ms after the request). */
function recorded(offsets: number[]): Playback {
  return {
    kind: 'response',
    head: { status: 200, statusText: 'OK', headers: [['content-type', 'text/event-stream']] },
    headersMs: 0,
    chunks: offsets.map((atMs, i) => ({ bytes: Buffer.from(`data: ${i}\n\n`), atMs })),
    trailers: [],
  }
}

test('the proxy waits between chunks at most the recorded gap: chunks recorded together go out together, not a gap apart', async () => {
  // A path gap of 300 ms (what --chunk-gap-ms asks for): three back-to-back gaps and one of 150 ms wait about
  // 150 ms in all; waiting the path's gap every time would take 1200 ms.
  const { res, writes } = pipedResponse()
  // Event-loop turns, counted: chunks the upstream wrote together are written in one turn, as they came live.
  let turn = 0
  let counting = true
  const count = () => {
    turn++
    if (counting) setImmediate(count)
  }
  setImmediate(count)
  const turns: number[] = []
  res.socket?.on('data', () => turns.push(turn))
  const t0 = performance.now()
  await drivePlayback(recorded([0, 0, 0, 0, 150]), DEFAULT_PACE, responseTarget(res, 300))
  const ms = performance.now() - t0
  counting = false
  assert.ok(ms >= 140, `the 150 ms recorded gap was kept up to the path's gap (${ms.toFixed(0)} ms)`)
  assert.ok(ms < 700, `no wait longer than the recording's (${ms.toFixed(0)} ms for 150 ms recorded)`)
  const body = Buffer.concat(writes).toString('latin1')
  for (let i = 0; i < 5; i++) assert.ok(body.includes(`data: ${i}\n\n`), `chunk ${i} written`)
  const turnOf = (i: number) => turns[writes.findIndex((w) => w.toString('latin1').includes(`data: ${i}\n\n`))]
  assert.deepEqual(
    [1, 2, 3].map(turnOf),
    [0, 0, 0].map(() => turnOf(0)),
    'chunks recorded together leave in one turn',
  )
  assert.ok((turnOf(4) ?? 0) > (turnOf(0) ?? 0), 'the chunk recorded 150 ms later leaves in a later turn')
})

test('the proxy waits between chunks at most its own gap: a long recorded gap is cut to the path gap at the default pace', async () => {
  const { res } = pipedResponse()
  const t0 = performance.now()
  await drivePlayback(recorded([0, 2000, 4000]), DEFAULT_PACE, responseTarget(res, 100))
  const ms = performance.now() - t0
  assert.ok(ms >= 190, `each chunk waited the path's gap (${ms.toFixed(0)} ms for two gaps of 100 ms)`)
  assert.ok(ms < 1500, `not the recorded 4 s (${ms.toFixed(0)} ms)`)
})
