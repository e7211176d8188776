import assert from 'node:assert/strict'
import { test } from 'node:test'
import { websocketExchange } from '../store/fixtures/exchanges.ts'
import { exchangeLine } from './format.ts'

test('a WebSocket session shows as one line: its messages each way, their bytes, how it closed', () => {
  const { exchange } = websocketExchange(0)
  assert.equal(
    exchangeLine(exchange),
    '#0 GET https://api.test/realtime → 101 Switching Protocols (WebSocket: 1 client and 3 server messages, 62 B; closed 1000)',
  )
  const ended = { ...exchange, websocket: { messages: [], end: { code: 'ECONNRESET', message: 'reset', atMs: 5 } } }
  assert.equal(
    exchangeLine(ended),
    '#0 GET https://api.test/realtime → 101 Switching Protocols (WebSocket: 0 client and 0 server messages, 0 B; ended ECONNRESET)',
  )
})
