/**
 * Replayed streams go out on the app's pull: an app that awaits I/O between reads (a 1 ms timer here, as an
 * agent that writes each token to a file or a socket does) still reads every recorded chunk on its own, with
 * Node's built-in fetch and with undici's fetch through the dispatcher. Counted where the app reads (`for await`
 * over the body). The control: pace 'none' hands every chunk over at once, and the same app reads them merged
 * on Node 22 and 24 (Node 26's fetch hands over one chunk per read whatever it holds), so the counts can fail.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { fetch as undiciFetch } from 'undici'
import type { PaceOption } from '../capture/index.ts'
import { openSession } from '../engine/index.ts'
import { createRecordReplayDispatcher, install } from '../interceptor/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { bodyFromChunks, TRACE_FORMAT_VERSION, type Trace } from '../trace/index.ts'

const CHUNKS = 50
const URL_ = 'https://sse.test/stream'
const event = (i: number) => `data: {"n":${i},"text":"event ${i} of ${CHUNKS}"}\n\n`
const nodeMajor = Number(process.versions.node.split('.')[0])

/** A trace of one SSE answer recorded as CHUNKS chunks, 2 ms apart. */
function sseTrace(name: string): Trace {
  const body = bodyFromChunks(Array.from({ length: CHUNKS }, (_, i) => ({ bytes: Buffer.from(event(i)), atMs: 10 + 2 * i })))
  return {
    meta: { name, format: TRACE_FORMAT_VERSION },
    exchanges: [
      {
        seq: 0,
        request: { method: 'GET', url: URL_, headers: [], body: null },
        outcome: {
          kind: 'response',
          response: { status: 200, statusText: 'OK', headers: [['content-type', 'text/event-stream']], body: body.ref, trailers: [] },
        },
        timing: { startMs: 0, headersMs: 5 },
      },
    ],
    bodies: new Map([[body.ref.digest, body.bytes]]),
  }
}

/** Reads a body as an app that awaits a 1 ms timer after each read; counts the reads. */
async function readWithTimer(body: AsyncIterable<Uint8Array>): Promise<{ reads: number; text: string }> {
  let reads = 0
  let text = ''
  const decoder = new TextDecoder()
  for await (const chunk of body) {
    reads++
    text += decoder.decode(chunk, { stream: true })
    await sleep(1)
  }
  return { reads, text }
}

const whole = Array.from({ length: CHUNKS }, (_, i) => event(i)).join('')

for (const [name, replay] of [
  [
    'Node built-in fetch (install)',
    async (store: ReturnType<typeof createMemoryStore>, trace: string, pace: PaceOption | undefined) => {
      const tr = await install({ mode: 'replay', trace, store, nodeHttp: false, ...(pace !== undefined ? { pace } : {}) })
      try {
        return await readWithTimer((await fetch(URL_)).body as unknown as AsyncIterable<Uint8Array>)
      } finally {
        tr.assertDone()
        await tr.close()
      }
    },
  ],
  [
    'undici fetch through the dispatcher',
    async (store: ReturnType<typeof createMemoryStore>, trace: string, pace: PaceOption | undefined) => {
      const session = await openSession({ mode: 'replay', trace, store })
      const dispatcher = createRecordReplayDispatcher({ session, ...(pace !== undefined ? { pace } : {}) })
      try {
        return await readWithTimer((await undiciFetch(URL_, { dispatcher })).body as AsyncIterable<Uint8Array>)
      } finally {
        session.assertDone()
        await session.close()
      }
    },
  ],
] as const) {
  test(`${name}: an app awaiting a 1 ms timer between reads reads ${CHUNKS} of ${CHUNKS} chunks apart`, async (t) => {
    const store = createMemoryStore()
    await store.putTrace(sseTrace('pull'))
    // Three streams in a row: one lucky run would not prove it.
    for (let i = 0; i < 3; i++) {
      const got = await replay(store, 'pull', undefined)
      assert.equal(got.text, whole)
      assert.equal(got.reads, CHUNKS, `run ${i + 1}: ${got.reads} reads of ${CHUNKS} recorded chunks`)
    }
    const merged = await replay(store, 'pull', 'none')
    assert.equal(merged.text, whole)
    if (nodeMajor < 26) assert.ok(merged.reads < CHUNKS / 2, `'none' merges them for this app (${merged.reads} reads), so the check above can fail`)
    else t.diagnostic(`Node ${process.version}: unpaced replay gave ${merged.reads} reads (this fetch hands over one chunk per read)`)
    await store.close()
  })
}
