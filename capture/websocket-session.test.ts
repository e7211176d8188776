/**
 * What a replayed session answers a client that breaks RFC 6455's framing: a server closes with 1002, as the
 * recorded server would have. Played over an in-memory socket pair.
 */
import assert from 'node:assert/strict'
import { duplexPair } from 'node:stream'
import { test } from 'node:test'
import { WebSocketConversation, type WebSocketPlayback } from '../engine/index.ts'
import { DEFAULT_PACE } from './pacing.ts'
import { encodeFrame, FrameParser, OPCODE } from './websocket-frames.ts'
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

/** Plays the recording, writes `frames` as the client, and gives the close code the server answered with. */
async function closeCodeFor(frames: Buffer[]): Promise<number | undefined> {
  const [server, client] = duplexPair()
  const played = playWebSocket(server, new WebSocketConversation(recorded(), 'GET ws://api.test/rt', 't'), {
    pace: DEFAULT_PACE,
    maxPayload: 1024 * 1024,
    onMiss: () => {},
  })
  const parser = new FrameParser(1024 * 1024)
  const code = new Promise<number | undefined>((resolve) => {
    client.on('data', (chunk: Buffer) => {
      for (const f of parser.push(chunk)) if (f.opcode === OPCODE.close) resolve(f.payload.byteLength >= 2 ? Buffer.from(f.payload).readUInt16BE(0) : undefined)
    })
    client.on('close', () => resolve(undefined))
  })
  for (const f of frames) client.write(f)
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), 3000)))
  const answer = await Promise.race([code, timeout])
  clearTimeout(timer)
  client.destroy()
  server.destroy()
  await played
  return answer === 'timeout' ? undefined : answer
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
  const [server, client] = duplexPair()
  const played = playWebSocket(server, new WebSocketConversation(recorded(), 'GET ws://api.test/rt', 't'), {
    pace: DEFAULT_PACE,
    maxPayload: 1024 * 1024,
    onMiss: () => {},
  })
  const parser = new FrameParser(1024 * 1024)
  const texts: string[] = []
  const answered = new Promise<void>((resolve) =>
    client.on('data', (chunk: Buffer) => {
      for (const f of parser.push(chunk)) if (f.opcode === OPCODE.text) texts.push(Buffer.from(f.payload).toString()) && resolve()
    }),
  )
  client.write(frame(OPCODE.text, 'hel', false))
  client.write(frame(OPCODE.ping, 'p'))
  client.write(frame(OPCODE.continuation, 'lo'))
  let timer: NodeJS.Timeout | undefined
  await Promise.race([answered, new Promise((resolve) => (timer = setTimeout(resolve, 3000)))])
  clearTimeout(timer)
  assert.deepEqual(texts, ['world'])
  client.destroy()
  server.destroy()
  await played
})
