/**
 * A sealed run of the `ws` package without an agent (it never reads the proxy variables): the session is captured,
 * never around Tool Replay — recorded while relayed, then replayed strictly with the upstream STOPPED and a
 * counting listener at 0, the same output both times; a trace that lacks the session is a miss (exit 69).
 */
import assert from 'node:assert/strict'
import { createServer as createHttpsServer } from 'node:https'
import { before, describe, test } from 'node:test'
import { WebSocketServer } from 'ws'
import { cannotSeal, cli, countingListener, REPLAY_CONTRACT_EXIT, sealedWork } from './support/sealed-harness.ts'
import { type CountingWebSocketServer, listenCounting } from './support/websocket-server.ts'

let work: Awaited<ReturnType<typeof sealedWork>>
let skip: string | undefined

before(async () => {
  skip = await cannotSeal()
  work = await sealedWork('tr-sealed-ws-')
})

/** A WebSocket echo server on HTTPS (the `ws` package's own server), counting its connections. */
async function startWsUpstream(): Promise<CountingWebSocketServer> {
  const cert = work.pki.certs['api.test'] as { cert: string; key: string }
  const server = createHttpsServer(cert)
  const wss = new WebSocketServer({ server })
  wss.on('connection', (socket) => socket.on('message', (data) => socket.send(`echo: ${String(data)}`)))
  return listenCounting(server, wss)
}

// `ws` without an agent: it never reads the proxy variables.
const WS_CLIENT = `
import WebSocket from 'ws'
const socket = new WebSocket('wss://api.test/socket')
socket.on('open', () => socket.send('hello'))
socket.on('message', (data) => { process.stdout.write(String(data) + '\\n'); socket.close() })
socket.on('error', (err) => { process.stderr.write('ws error: ' + err.message + '\\n'); process.exit(3) })
`

describe('sealed runs: WebSocket sessions of a client that ignores the proxy variables', { timeout: 300_000 }, () => {
  test('`ws` without an agent: recorded sealed, replayed sealed and strict with the upstream stopped; a trace without it is a miss', async (t) => {
    if (skip) return t.skip(skip)
    let up: Awaited<ReturnType<typeof startWsUpstream>> | undefined = await startWsUpstream()
    const port = up.port
    let counting: Awaited<ReturnType<typeof countingListener>> | undefined
    try {
      const command = [process.execPath, '--input-type=module', '-e', WS_CLIENT]
      const sealed = ['--sealed', '--resolve', `api.test=127.0.0.1:${port}`, '--upstream-ca', work.pki.caPath]
      const rec = await cli(['record', '--store', work.store, '-t', 'ws', ...sealed, '--', ...command])
      assert.equal(rec.code, 0, rec.stderr)
      assert.equal(rec.stdout, 'echo: hello\n')
      assert.match(rec.stderr, /1 recorded/, 'the session went through Tool Replay and was recorded')
      assert.equal(up.connections, 1)
      await up.close()
      up = undefined
      counting = await countingListener(port)
      const rep = await cli(['replay', '--store', work.store, '-t', 'ws', '--sealed', '--', ...command])
      assert.equal(rep.code, 0, rep.stderr)
      assert.equal(rep.stdout, 'echo: hello\n')
      assert.match(rep.stderr, /1 replayed/)
      // A trace that lacks the session: the upgrade is a miss, the run exits 69.
      const empty = await cli(['record', '--store', work.store, '-t', 'no-ws', '--sealed', '--', process.execPath, '-e', '0'])
      assert.equal(empty.code, 0, empty.stderr)
      const miss = await cli(['replay', '--store', work.store, '-t', 'no-ws', '--sealed', '--', ...command])
      assert.equal(miss.code, REPLAY_CONTRACT_EXIT, miss.stderr)
      assert.match(miss.stderr, /TR_REPLAY_MISS GET https:\/\/api\.test\/socket/)
      assert.equal(counting.connections, 0)
    } finally {
      await up?.close()
      await counting?.close()
    }
  })
})
