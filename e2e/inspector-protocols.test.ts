/**
 * Every protocol in the page, in a real browser (Debian chromium via playwright-core), on runs recorded
 * in-process with install() from real clients:
 *  - gRPC over HTTP/2 (@grpc/grpc-js against a real grpc-js server): each call a gRPC row (service/method, the
 *    messages each side sent, its status), the exchange's length-prefixed messages one row each, the trailers;
 *  - a support agent on the OpenAI SDK: a model turn asks for a tool, the app looks the order up (nested under
 *    the turn), sends an unrelated metrics beacon (not nested: it answers no tool call), and the next turn
 *    streams its answer in chunks ~40 ms apart: the row's duration runs to the last chunk, the chunk table
 *    shows each event with its chunk and time without clipping its data, and the summary has a time to first
 *    token;
 *  - a WebSocket session (Node's global WebSocket against a `ws` server): a WebSocket row with the messages
 *    each way and how it closed; in the panel every message its own row (direction, opcode, a fragmented
 *    message's frames, binary as hex, the close's code and reason); search finds a message's text;
 *  - a plain HTTP/2 request (node:http2 against an h2c server) labelled HTTP/2 in its row and its panel, as the
 *    gRPC calls' panels are.
 * The servers are stopped before the inspector opens: the page reads the store alone.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import http2 from 'node:http2'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import * as grpc from '@grpc/grpc-js'
import OpenAI from 'openai'
import type { Page } from 'playwright-core'
import { install } from 'tool-replay/interceptor'
import { openStore } from 'tool-replay/store'
import { WebSocketServer } from 'ws'
import { browserMissing, launchBrowser, visibleText } from './support/browser.ts'
import { callGreeter, greeterClient, startGreeter } from './support/grpc-fixture.ts'
import { type RunningInspector, startInspectCli } from './support/inspector-harness.ts'
import { tempDir } from './support/proxy-harness.ts'
import { listenCounting } from './support/websocket-server.ts'

const SHOTS = process.env.TOOL_REPLAY_SCREENSHOTS
const skip = browserMissing()
const work = tempDir('tr-inspector-protocols-')
const store = join(work, 'store')
/** The streamed answer: six chunks, 40 ms apart, each a long line (the chunk table must wrap, not clip, it). */
const CHUNKS = Array.from(
  { length: 6 },
  (_, i) =>
    `Part ${i + 1} of the answer: order A-77 shipped on Monday with the carrier's tracking number TRK-${1000 + i}, expected within two days; end-of-part-${i + 1}. `,
)
const CHUNK_GAP_MS = 40
let inspector: RunningInspector
let browser: Awaited<ReturnType<typeof launchBrowser>>

/** The model and the order service the agent talks to: turn 1 asks for lookup_order, turn 2 streams the answer. */
async function startAgentServices(): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = ''
    req.on('data', (c: Buffer) => (body += c))
    req.on('end', () => void answer(req, res, body))
  })
  const answer = async (req: IncomingMessage, res: ServerResponse, body: string): Promise<unknown> => {
    if (req.url === '/orders/A-77') {
      res.writeHead(200, { 'content-type': 'application/json' })
      return res.end(JSON.stringify({ order_id: 'A-77', status: 'shipped', tracking: 'TRK-1000' }))
    }
    if (req.url === '/metrics') {
      res.writeHead(204)
      return res.end()
    }
    const request = JSON.parse(body) as { stream?: boolean }
    if (!request.stream) {
      res.writeHead(200, { 'content-type': 'application/json' })
      return res.end(
        JSON.stringify({
          id: 'chatcmpl-1',
          object: 'chat.completion',
          created: 1,
          model: 'gpt-4.1-mini-2025-04-14',
          choices: [
            {
              index: 0,
              finish_reason: 'tool_calls',
              message: {
                role: 'assistant',
                content: null,
                tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'lookup_order', arguments: '{"order_id":"A-77"}' } }],
              },
            },
          ],
          usage: { prompt_tokens: 40, completion_tokens: 12, total_tokens: 52 },
        }),
      )
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    const event = (delta: object, finish: string | null) =>
      `data: ${JSON.stringify({ id: 'chatcmpl-2', object: 'chat.completion.chunk', created: 2, model: 'gpt-4.1-mini-2025-04-14', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`
    for (const [i, text] of CHUNKS.entries()) {
      res.write(event(i === 0 ? { role: 'assistant', content: text } : { content: text }, null))
      await new Promise((r) => setTimeout(r, CHUNK_GAP_MS))
    }
    return res.end(`${event({}, 'stop')}data: [DONE]\n\n`)
  }
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  }
}

/** The agent: asks the model, runs the tool it asked for, sends a beacon, and streams the model's answer. */
async function runAgent(url: string): Promise<string> {
  const openai = new OpenAI({ apiKey: 'sk-proj-dummy-inspector-protocols-0000', baseURL: `${url}/v1`, maxRetries: 0 })
  const tools = [
    { type: 'function' as const, function: { name: 'lookup_order', parameters: { type: 'object', properties: { order_id: { type: 'string' } } } } },
  ]
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Where is my order A-77?' }]
  const first = await openai.chat.completions.create({ model: 'gpt-4.1-mini', messages, tools })
  const call = first.choices[0]?.message.tool_calls?.[0]
  assert.ok(call && call.type === 'function')
  const { order_id } = JSON.parse(call.function.arguments) as { order_id: string }
  const order = await (await fetch(`${url}/orders/${order_id}`)).text()
  await fetch(`${url}/metrics`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"event":"tool_done","ms":12}' })
  messages.push(first.choices[0]?.message as OpenAI.Chat.ChatCompletionMessageParam, { role: 'tool', tool_call_id: call.id, content: order })
  let text = ''
  for await (const chunk of await openai.chat.completions.create({ model: 'gpt-4.1-mini', messages, tools, stream: true })) {
    text += chunk.choices[0]?.delta.content ?? ''
  }
  return text
}

/** Greets; answers `hi` with an echo and a message sent in two frames, binary with the bytes reversed. */
async function startChatServer() {
  const server = createServer()
  const wss = new WebSocketServer({ server })
  wss.on('connection', (s) => {
    s.send(JSON.stringify({ type: 'hello', room: 'orders' }))
    s.on('message', (data, isBinary) => {
      if (isBinary) return s.send(Buffer.from(data as Buffer).reverse(), { binary: true })
      s.send(`echo ${String(data)}`)
      s.send('part-a ', { fin: false })
      s.send('part-b', { fin: true })
    })
  })
  return listenCounting(server, wss)
}

/** The app: greeted, says hi, answers the two-frame message with two bytes, closes on the binary answer. */
async function chat(port: number): Promise<string[]> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/chat`)
  ws.binaryType = 'arraybuffer'
  const got: string[] = []
  const closed = new Promise<void>((resolve) => {
    ws.onclose = () => resolve()
  })
  ws.onmessage = (e) => {
    got.push(typeof e.data === 'string' ? e.data : Buffer.from(e.data as ArrayBuffer).toString('hex'))
    if (typeof e.data !== 'string') ws.close(1000, 'bye')
    else if (e.data.startsWith('{')) ws.send('hi')
    else if (e.data.startsWith('part-a')) ws.send(new Uint8Array([1, 2]))
  }
  await Promise.race([closed, new Promise((r) => setTimeout(r, 5000))])
  return got
}

before(async () => {
  if (skip) return
  const s = await openStore(store)
  try {
    const greeter = await startGreeter()
    const rec = await install({ mode: 'record', trace: 'greeter', store: s })
    const client = greeterClient(`localhost:${greeter.port}`, grpc.credentials.createInsecure())
    await callGreeter(client).finally(() => {
      client.close()
      return rec.close()
    })
    await greeter.close()

    const services = await startAgentServices()
    const agent = await install({ mode: 'record', trace: 'support-agent', store: s })
    const answer = await runAgent(services.url).finally(() => agent.close())
    assert.equal(answer, CHUNKS.join(''))
    await services.close()

    const h2 = http2.createServer((_req, res) => res.end('{"ok":true}'))
    h2.listen(0, '127.0.0.1')
    await once(h2, 'listening')
    const rec3 = await install({ mode: 'record', trace: 'h2-plain', store: s })
    try {
      const session = http2.connect(`http://127.0.0.1:${(h2.address() as AddressInfo).port}`)
      const stream = session.request({ ':path': '/status' })
      stream.end()
      let text = ''
      for await (const c of stream) text += String(c)
      session.close()
      assert.equal(text, '{"ok":true}')
    } finally {
      await rec3.close()
    }
    await new Promise<void>((r) => h2.close(() => r()))

    const chatServer = await startChatServer()
    const rec2 = await install({ mode: 'record', trace: 'chat-ws', store: s })
    const said = await chat(chatServer.port).finally(() => rec2.close())
    assert.deepEqual(said, ['{"type":"hello","room":"orders"}', 'echo hi', 'part-a part-b', '0201'])
    await chatServer.close()
  } finally {
    await s.close()
  }
  inspector = await startInspectCli(store, work)
  browser = await launchBrowser()
})
after(async () => {
  await browser?.close()
  await inspector?.stop()
})

const row = (page: Page, seq: number) => page.locator(`[data-testid="timeline-row"][data-seq="${seq}"]`)

test('gRPC calls: service/method, messages each way and the status; the messages one by one; the trailers', { skip, timeout: 90_000 }, async () => {
  const page = await browser.context.newPage()
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(String(e)))
  await page.goto(`${inspector.url}#/run/greeter`)
  await row(page, 2).waitFor()
  for (const seq of [0, 1, 2]) assert.equal(await row(page, seq).getAttribute('data-kind'), 'grpc')
  assert.match(await visibleText(row(page, 0)), /^#0 gRPC test\.Greeter\/SayHello 200 .*→ 1 message ← 1 message · OK$/)
  assert.match(await visibleText(row(page, 1)), /^#1 gRPC test\.Greeter\/StreamHellos 200 .*→ 1 message ← 3 messages · OK$/)
  assert.match(await visibleText(row(page, 2)), /^#2 gRPC test\.Greeter\/Missing 200 .*→ 1 message ← 0 messages · NOT_FOUND: no such greeting$/)
  assert.match((await row(page, 2).getAttribute('class')) ?? '', /\bfailed\b/)

  // The streaming call: three messages, each its own row with its value, then the trailers.
  await row(page, 1).click()
  await page.getByTestId('exchange-panel').waitFor()
  const messages = page.getByTestId('grpc-message')
  await messages.nth(2).waitFor()
  assert.equal(await messages.count(), 3)
  for (const n of [0, 1, 2]) assert.match(await visibleText(messages.nth(n)), new RegExp(`^message #${n} 31 B json .*n: ${n} message: "hello Bo #${n}"`))
  assert.match(await visibleText(page.getByTestId('trailers')), /^Trailers grpc-status 0 grpc-message OK/)
  assert.equal(await visibleText(page.getByTestId('exchange-http-version')), 'HTTP/2')
  await page.getByTestId('tab-request').click()
  assert.match(await visibleText(page.getByTestId('grpc-messages')), /^message #0 23 B json .*name: "Bo" count: 3/)
  if (SHOTS) await page.screenshot({ path: join(SHOTS, 'inspector-grpc.png') })

  // Search reads the messages, not the framed bytes.
  await page.getByTestId('run-search').fill('"hello Bo #2"')
  await page.locator('[data-testid="search-count"]', { hasText: /^1 of 3$/ }).waitFor({ timeout: 30_000 })
  assert.deepEqual(errors, [])
})

test('a streamed model turn after a tool call: nesting, a beacon left alone, durations to the last chunk, the chunk table', {
  skip,
  timeout: 90_000,
}, async () => {
  const page = await browser.context.newPage()
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(String(e)))
  await page.goto(`${inspector.url}#/run/support-agent`)
  await row(page, 3).waitFor()
  assert.deepEqual(await page.getByTestId('timeline-row').evaluateAll((els) => els.map((e) => e.getAttribute('data-kind'))), ['model', 'http', 'http', 'model'])
  // The order lookup answers the tool call; the beacon in between answers nothing and stays where it is.
  await row(page, 1).getByText('↳ lookup_order of #0').waitFor({ timeout: 30_000 })
  assert.match((await row(page, 1).getAttribute('class')) ?? '', /\bnested\b/)
  assert.doesNotMatch((await row(page, 2).getAttribute('class')) ?? '', /\bnested\b/, 'the metrics beacon is not the tool call')
  assert.doesNotMatch(await visibleText(row(page, 2)), /↳/)

  // The streamed turn lasts to its last chunk (six chunks 40 ms apart), not to its response head.
  const duration = await visibleText(row(page, 3).getByTestId('row-duration'))
  const durationMs = duration.endsWith(' s') ? Number.parseFloat(duration) * 1000 : Number.parseFloat(duration)
  assert.ok(durationMs >= (CHUNKS.length - 1) * CHUNK_GAP_MS, `the streamed turn shows ${duration}`)
  await row(page, 3).click()
  await page.getByTestId('llm-view').waitFor()
  assert.match(await visibleText(page.getByTestId('exchange-last-chunk')), /^last chunk after \d/)
  assert.equal(await visibleText(page.getByTestId('llm-output')), CHUNKS.join('').trim())

  // The chunk table: each event with the chunk it arrived in; the data column wraps, nothing is cut off.
  await page.getByTestId('tab-response').click()
  const table = page.getByTestId('sse-events')
  await table.waitFor()
  const text = await visibleText(table)
  for (const n of [1, 6]) assert.ok(text.includes(`end-of-part-${n}.`), `the chunk table shows part ${n} whole: ${text.slice(0, 300)}`)
  assert.match(text, /^chunk 0 \d+(\.\d+)? ms message/)
  const clipped = await table.locator('td.data').evaluateAll(
    (cells) =>
      cells.filter((c) => {
        const r = c.getBoundingClientRect()
        const panel = (c.closest('[data-testid="exchange-panel"]') as HTMLElement).getBoundingClientRect()
        return c.scrollWidth > c.clientWidth + 1 || r.right > panel.right + 1
      }).length,
  )
  assert.equal(clipped, 0, 'a data cell is wider than its column or the panel')
  if (SHOTS) await page.screenshot({ path: join(SHOTS, 'inspector-stream.png') })

  // The summary: time to first token of the streamed turn, tokens of the other.
  await page.getByTestId('view-summary').click()
  // model, calls, input and output tokens (only the first turn's usage was sent), cost, time to first token, durations.
  assert.match(await visibleText(page.getByTestId('summary-models')), /gpt-4\.1-mini-2025-04-14 2 40 12 not reported \d+(\.\d+)? m?s \d/)
  assert.deepEqual(errors, [])
})

test('a WebSocket session: a row with the messages each way and its close; each message a row in the panel; search reads them', {
  skip,
  timeout: 90_000,
}, async () => {
  const page = await browser.context.newPage()
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(String(e)))
  await page.goto(`${inspector.url}#/run/chat-ws`)
  await row(page, 0).waitFor()
  assert.equal(await row(page, 0).getAttribute('data-kind'), 'websocket')
  assert.match(await visibleText(row(page, 0)), /^#0 WS .*\/chat 101 .*→ 3 messages ← 5 messages · closed 1000 by the client: bye$/)

  await row(page, 0).click()
  const messages = page.getByTestId('websocket-message')
  await messages.nth(7).waitFor()
  const rows: string[] = []
  for (let i = 0; i < (await messages.count()); i++) rows.push(await visibleText(messages.nth(i)))
  assert.equal(rows.length, 8)
  assert.match(rows[0] as string, /^#0 ← \d+(\.\d+)? m?s text 32 B \{"type":"hello","room":"orders"\}$/)
  assert.match(rows[1] as string, /^#1 → .* text 2 B hi$/)
  assert.match(rows[3] as string, /^#3 ← .* text 13 B · 2 frames part-a part-b$/)
  assert.match(rows[4] as string, /^#4 → .* binary 2 B 01 02$/)
  assert.match(rows[5] as string, /^#5 ← .* binary 2 B 02 01$/)
  assert.match(rows[6] as string, /^#6 → .* close 5 B 1000 bye$/)
  assert.match(await visibleText(page.getByTestId('websocket-messages')), /^8 messages: 3 from the client \(→\), 5 from the server \(←\)/)
  if (SHOTS) await page.screenshot({ path: join(SHOTS, 'inspector-websocket.png') })

  // Search reads the messages' text.
  await page.getByTestId('run-search').fill('part-b')
  await page.locator('[data-testid="search-count"]', { hasText: /^1 of 1$/ }).waitFor({ timeout: 30_000 })
  assert.deepEqual(errors, [])
})

test('a plain HTTP/2 request is labelled HTTP/2 in its row and its panel', { skip, timeout: 60_000 }, async () => {
  const page = await browser.context.newPage()
  await page.goto(`${inspector.url}#/run/h2-plain`)
  await row(page, 0).waitFor()
  assert.match(await visibleText(row(page, 0)), /^#0 GET HTTP\/2 127\.0\.0\.1:\d+\/status 200/)
  await row(page, 0).click()
  assert.equal(await visibleText(page.getByTestId('exchange-http-version')), 'HTTP/2')
  // An HTTP/1.1 exchange carries no label.
  await page.goto(`${inspector.url}#/run/support-agent`)
  await row(page, 1).waitFor()
  assert.equal(await row(page, 1).getByTestId('http-version').count(), 0)
})
