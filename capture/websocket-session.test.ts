/**
 * What a replayed session answers a client that breaks RFC 6455's framing: a server closes with 1002, as the
 * recorded server would have. Played over an in-memory socket pair.
 */
import assert from 'node:assert/strict'
import { duplexPair } from 'node:stream'
import { test } from 'node:test'
import { WebSocketConversation, type WebSocketPlayback } from '../engine/index.ts'
import { DEFAULT_PACE } from './pacing.ts'
import { encodeFrame, FrameParser, OPCODE, type WebSocketFrame } from './websocket-frames.ts'
import { playWebSocket } from './websocket-session.ts'

const enc = new TextEncoder()

const recorded = (): WebSocketPlayback => ({
  head: { status: 101, statusText: 'Switching Protocols', headers: [] },
  headersMs: 1,
  messages: [
    { from: 'client', opcode: 'text', atMs: 10, frames: [enc.encode('hello')] },
    { from: 'server', opcode: 'text', atMs: 12, frames: [enc.encode('world')] },
  ],
})

/** The recording played on one end of an in-memory socket pair; the client's end and the server frames it reads. */
function playedTo(onFrame: (f: WebSocketFrame) => void) {
  const [server, client] = duplexPair()
  const played = playWebSocket(server, new WebSocketConversation(recorded(), 'GET ws://api.test/rt', 't'), {
    pace: DEFAULT_PACE,
    maxPayload: 1024 * 1024,
    onMiss: () => {},
  })
  const parser = new FrameParser(1024 * 1024)
  client.on('data', (chunk: Buffer) => {
    for (const f of parser.push(chunk)) onFrame(f)
  })
  const end = async () => {
    client.destroy()
    server.destroy()
    await played
  }
  return { client, end }
}

/** Waits for `answer` at most 3 s (undefined then). */
async function within<T>(answer: Promise<T>): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined
  const got = await Promise.race([answer, new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), 3000)))])
  clearTimeout(timer)
  return got
}

/** Plays the recording, writes `frames` as the client, and gives the close code the server answered with. */
async function closeCodeFor(frames: Buffer[]): Promise<number | undefined> {
  let answered = (_code: number | undefined) => {}
  const code = new Promise<number | undefined>((resolve) => (answered = resolve))
  const session = playedTo((f) => {
    if (f.opcode === OPCODE.close) answered(f.payload.byteLength >= 2 ? Buffer.from(f.payload).readUInt16BE(0) : undefined)
  })
  session.client.on('close', () => answered(undefined))
  for (const f of frames) session.client.write(f)
  const got = await within(code)
  await session.end()
  return got
}

const frame = (opcode: number, text: string, fin = true) => encodeFrame(opcode, enc.encode(text), fin, true)

test('a client that breaks the framing rules gets close 1002, as from a server', async () => {
  for (const [name, frames] of [
    ['a new message inside a fragmented one', [frame(OPCODE.text, 'hel', false), frame(OPCODE.text, 'hello')]],
    ['a continuation of no message', [frame(OPCODE.continuation, 'lo')]],
    ['a reserved opcode', [frame(0x3, 'hello')]],
    ['a fragmented ping', [frame(OPCODE.ping, 'p', false)]],
  ] as const) {
    assert.equal(await closeCodeFor([...frames]), 1002, name)
  }
})

test('a message in fragments, with a ping between them, is read whole and answered', async () => {
  const texts: string[] = []
  let answered = () => {}
  const answer = new Promise<void>((resolve) => (answered = resolve))
  const session = playedTo((f) => {
    if (f.opcode !== OPCODE.text) return
    texts.push(Buffer.from(f.payload).toString())
    answered()
  })
  session.client.write(frame(OPCODE.text, 'hel', false))
  session.client.write(frame(OPCODE.ping, 'p'))
  session.client.write(frame(OPCODE.continuation, 'lo'))
  await within(answer)
  assert.deepEqual(texts, ['world'])
  await session.end()
})
