/**
 * One WebSocket conversation, the same on every capture path (e2e/cross-path-websocket.test.ts): the `ws` client
 * against a `ws` server that greets, answers JSON text by content (its `event_id` volatile), answers binary with a
 * fragmented message, answers a ping with a pong and closes with 4002 "done". Scenarios: `full` (the whole
 * conversation), `abort` (the client drops the connection after its first answer), `cut` (the server sends half a
 * frame and drops the connection). Run as a script (`node websocket-conversation.ts URL SCENARIO`) it prints what
 * the client saw, one JSON line per event: what a sealed run's child does.
 */
import { randomUUID } from 'node:crypto'
import type { ClientRequestArgs } from 'node:http'
import type { Server } from 'node:https'
import { fileURLToPath } from 'node:url'
import { type ClientOptions, WebSocket, WebSocketServer } from 'ws'

export type Scenario = 'full' | 'abort' | 'cut'

const BINARY = Buffer.from(Array.from({ length: 200 }, (_, i) => (i * 7) & 0xff))

/** Serves the conversation on `server` (an HTTPS server the caller listens and closes). */
export function serveConversation(server: Server): WebSocketServer {
  const wss = new WebSocketServer({ server })
  wss.on('connection', (s) => {
    s.send(JSON.stringify({ type: 'hello', event_id: randomUUID() }))
    s.on('message', (data, isBinary) => {
      if (isBinary) {
        s.send(BINARY.subarray(0, 64), { binary: true, fin: false })
        s.send(Buffer.concat([BINARY.subarray(64), data as Buffer]), { binary: true, fin: true })
        return
      }
      const m = JSON.parse(String(data)) as { type: string; n?: number }
      if (m.type === 'bye') s.close(4002, 'done')
      else if (m.type === 'cut') {
        // Half a text frame (it announces 5 bytes, 2 come), then the connection drops.
        const raw = (s as unknown as { _socket: import('node:net').Socket })._socket
        raw.write(Buffer.from([0x81, 0x05, 0x68, 0x65]), () => raw.destroy())
      } else s.send(JSON.stringify({ type: 'answer', n: (m.n ?? 0) * 2, event_id: randomUUID() }))
    })
  })
  return wss
}

/** Runs `scenario` against `url`; resolves with what the client saw, in order (bounded: 5 s at most). */
export function converse(url: string, scenario: Scenario, options: ClientOptions & Pick<ClientRequestArgs, 'lookup'> = {}): Promise<string[]> {
  const ws = new WebSocket(url, options)
  const got: string[] = []
  const send = (m: object) => ws.send(JSON.stringify({ ...m, event_id: randomUUID() }))
  const step = (line: string) => {
    got.push(line)
    if (line.startsWith('text hello')) send({ type: 'ask', n: 1 })
    else if (line.startsWith('text answer')) {
      if (scenario === 'abort') ws.terminate()
      else if (scenario === 'cut') send({ type: 'cut' })
      else ws.ping(Buffer.from('p'))
    } else if (line === 'pong p') {
      ws.send(Buffer.from([0xfe, 0x01]), { binary: true, fin: false })
      ws.send(Buffer.from([0x02]), { binary: true, fin: true })
    } else if (line.startsWith('binary')) send({ type: 'bye' })
  }
  ws.on('message', (data, isBinary) => {
    if (isBinary) step(`binary ${(data as Buffer).toString('hex')}`)
    else {
      const m = JSON.parse(String(data)) as { type: string; n?: number }
      step(`text ${m.type}${m.n === undefined ? '' : ` ${m.n}`}`)
    }
  })
  ws.on('pong', (data) => step(`pong ${String(data)}`))
  ws.on('error', (err) => got.push(`error ${err.message}`))
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      ws.terminate()
      resolve([...got, 'timed out'])
    }, 5000)
    ws.on('close', (code, reason) => {
      clearTimeout(timer)
      resolve([...got, `close ${code} ${String(reason)}`])
    })
  })
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [url, scenario] = process.argv.slice(2) as [string, Scenario]
  for (const line of await converse(url, scenario)) process.stdout.write(`${JSON.stringify(line)}\n`)
}
