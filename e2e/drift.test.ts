/**
 * `tr-proxy drift`: a trace recorded through the proxy against a local HTTPS upstream (reached with --resolve
 * and --upstream-ca, as record reaches it), re-sent live against the same upstream and against its "next
 * version" that renames a field, changes a type and drops an SSE event type. A counting upstream proves what
 * was (and was not) sent; the recorded trace's digest proves drift never changes it.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { createServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { runCli } from '../cli/index.ts'
import type { DriftReport } from '../engine/index.ts'
import { openStore, traceDigest } from '../store/index.ts'
import { tempDir } from './support/proxy-harness.ts'
import { createTestPki } from './support/proxy-upstream.ts'

const TOKEN = 'Bearer drift-e2e-credential-7c1f0a9b3d'
const AUTH_ENV = 'TR_DRIFT_E2E_AUTH'

/** The upstream's API, version 1 or 2; every request it receives is logged in `seen`. */
interface VersionedUpstream {
  port: number
  version: 1 | 2
  seen: string[]
  /** When set, each request is also logged here, beside what the CLI prints, to check what came first. */
  log?: string[]
  close(): Promise<void>
}

function chatCompletion(version: 1 | 2): string {
  const args = version === 1 ? '{"city":"Oslo","days":3}' : '{"location":"Oslo","days":"3"}'
  return JSON.stringify({
    id: `chatcmpl-${Math.random().toString(36).slice(2)}`,
    object: 'chat.completion',
    created: Date.now(),
    model: 'gpt-test',
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: args } }] },
        finish_reason: 'tool_calls',
      },
    ],
  })
}

function answer(u: VersionedUpstream, req: IncomingMessage, res: ServerResponse): void {
  const [status, type, body] = route(u.version, req)
  res.writeHead(status, { 'content-type': type })
  res.end(body)
}

/** What version `v` of the API answers: status, content type, body. Values change on every call; only shapes are compared. */
function route(v: 1 | 2, req: IncomingMessage): [number, string, string] {
  const path = req.url ?? '/'
  const n = Math.floor(Math.random() * 1000)
  const json = (status: number, body: unknown): [number, string, string] => [status, 'application/json', typeof body === 'string' ? body : JSON.stringify(body)]
  if (path === '/catalog/1')
    return json(200, v === 1 ? { id: n, name: 'Ada', price: n, tags: ['a'] } : { id: n, title: 'Ada', price: String(n), tags: ['a', 'b'] })
  if (path === '/events') {
    const progress = v === 1 ? 'event: progress\ndata: {"pct":50}\n\n' : ''
    return [200, 'text/event-stream', `${progress}event: done\ndata: {"ok":true,"items":${n % 9}}\n\n`]
  }
  if (path === '/private') return req.headers.authorization === TOKEN ? json(200, { secret: false, plan: 'pro' }) : json(401, { error: 'unauthorized' })
  if (path === '/orders' && req.method === 'POST') return json(201, { order: n })
  if (path === '/v1/chat/completions' && req.method === 'POST') return json(200, chatCompletion(v))
  return json(404, { error: 'not found' })
}

async function startVersionedUpstream(tls: { cert: string; key: string }): Promise<VersionedUpstream> {
  const u: VersionedUpstream = { port: 0, version: 1, seen: [], close: async () => {} }
  const server = createServer(tls, (req, res) => {
    req.resume()
    req.on('end', () => {
      u.seen.push(`${req.method} ${req.url}`)
      u.log?.push(`upstream: ${req.method} ${req.url}`)
      answer(u, req, res)
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  u.port = (server.address() as AddressInfo).port
  u.close = async () => {
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
  return u
}

/** The app: a catalog read, an event stream, an authorized read, an order, a model call. */
const APP = `
const get = (p, init) => fetch('https://api.test' + p, init).then(async (r) => r.status + ' ' + (await r.text()).length)
console.log(await get('/catalog/1'))
console.log(await get('/events'))
console.log(await get('/private', { headers: { authorization: process.env.${AUTH_ENV} } }))
console.log(await get('/orders', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"sku":"A1"}' }))
console.log(await get('/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'weather in Oslo?' }], tools: [{ type: 'function', function: { name: 'get_weather', parameters: {} } }] }) }))
`

let up: VersionedUpstream
let upstreamCa: string
const work = tempDir('tr-drift-e2e-')
const store = join(work, 'store')

async function cli(args: string[], log?: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = []
  const err: string[] = []
  const code = await runCli(args, {
    out: (t) => out.push(t),
    err: (t) => {
      err.push(t)
      log?.push(`stderr: ${t}`)
    },
  })
  return { code, stdout: out.join('\n'), stderr: err.join('\n') }
}

const upstreamArgs = () => ['--store', store, '--resolve', `api.test=127.0.0.1:${up.port}`, '--upstream-ca', upstreamCa]

async function digestOf(name: string): Promise<string> {
  const s = await openStore(store, { create: false })
  try {
    return traceDigest(await s.readTrace(name))
  } finally {
    await s.close()
  }
}

before(async () => {
  const pki = await createTestPki(['api.test'])
  upstreamCa = pki.caPath
  up = await startVersionedUpstream(pki.certs['api.test'] as { cert: string; key: string })
  process.env[AUTH_ENV] = TOKEN
  const rec = await cli(['record', ...upstreamArgs(), '--trace', 'shop', '--', process.execPath, '--input-type=module', '-e', APP])
  assert.equal(rec.code, 0, rec.stderr)
  assert.match(rec.stderr, /5 recorded/)
})
after(async () => {
  delete process.env[AUTH_ENV]
  await up?.close()
})

describe('tr-proxy drift', { timeout: 120_000 }, () => {
  test('an unchanged upstream: exit 0, every safe request re-sent, the POSTs never (counting upstream), the trace unchanged', async () => {
    up.version = 1
    const digest = await digestOf('shop')
    const seen = up.seen.length
    const r = await cli(['drift', 'shop', ...upstreamArgs(), '--fill-header', `authorization=${AUTH_ENV}`])
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.deepEqual(up.seen.slice(seen), ['GET /catalog/1', 'GET /events', 'GET /private'])
    assert.match(r.stdout, /drift of trace "shop": 3 re-sent live, 0 drifted, 3 unchanged, 2 skipped/)
    assert.match(r.stdout, /skip {2}POST https:\/\/api\.test\/orders #0: POST is not a safe method: pass --unsafe to re-send it/)
    assert.match(r.stdout, /skip {2}POST https:\/\/api\.test\/v1\/chat\/completions #0: a model call \(it costs tokens\): pass --model-calls/)
    assert.equal(await digestOf('shop'), digest, 'drift never changes the trace')
  })

  test('a redacted credential is not sent as "[REDACTED]": without --fill-header the 401 is drift, with a note saying why', async () => {
    up.version = 1
    const r = await cli(['drift', 'shop', ...upstreamArgs(), '--json'])
    assert.equal(r.code, 1)
    const report = JSON.parse(r.stdout) as DriftReport
    const priv = report.traces[0]?.exchanges.find((e) => e.exchange.includes('/private'))
    assert.deepEqual(priv?.changes, [{ kind: 'status_changed', before: '200', after: '401' }])
    assert.match(
      priv?.notes.join('\n') ?? '',
      /header authorization was redacted in the recording and is sent without it \(give it with --fill-header authorization=ENV_VAR\)/,
    )
  })

  test('the next version renames a field, changes a type and drops an SSE event type: each named with its path, exit 1', async () => {
    up.version = 2
    const text = await cli(['drift', 'shop', ...upstreamArgs(), '--fill-header', `authorization=${AUTH_ENV}`])
    assert.equal(text.code, 1, text.stderr)
    assert.equal(
      text.stdout,
      [
        'drift of trace "shop": 3 re-sent live, 2 drifted, 1 unchanged, 2 skipped',
        '  DRIFT GET https://api.test/catalog/1 #0',
        '      removed $.name (string)',
        '      type changed $.price: number → string',
        '      added $.title (string)',
        '  DRIFT GET https://api.test/events #0',
        '      event type "progress" no longer sent',
        '  same  GET https://api.test/private #0',
        '  skip  POST https://api.test/orders #0: POST is not a safe method: pass --unsafe to re-send it',
        '  skip  POST https://api.test/v1/chat/completions #0: a model call (it costs tokens): pass --model-calls to re-send it',
      ].join('\n'),
    )
    const json = await cli(['drift', 'shop', ...upstreamArgs(), '--fill-header', `authorization=${AUTH_ENV}`, '--json'])
    assert.equal(json.code, 1)
    const report = JSON.parse(json.stdout) as DriftReport
    assert.equal(report.format, 'tool-replay-drift')
    // 2 since the "unreachable" status (docs/drift-and-assets.md says what a reader does with a version 1 report).
    assert.equal(report.version, 2)
    assert.equal(report.drift, true)
    assert.deepEqual(report.traces[0]?.exchanges[0]?.changes, [
      { kind: 'field_removed', path: '$.name', before: 'string' },
      { kind: 'type_changed', path: '$.price', before: 'number', after: 'string' },
      { kind: 'field_added', path: '$.title', after: 'string' },
    ])
    assert.deepEqual(report.traces[0]?.exchanges[1]?.changes, [{ kind: 'event_type_removed', event: 'progress' }])
    // As diff: --no-exit-code reports and exits 0.
    assert.equal((await cli(['drift', 'shop', ...upstreamArgs(), '--no-exit-code'])).code, 0)
  })

  test('--unsafe lists every POST before the first request leaves; --model-calls prints the count first and compares tool calls', async () => {
    up.version = 2
    const log: string[] = []
    const seen = up.seen.length
    up.log = log
    const r = await cli(['drift', 'shop', ...upstreamArgs(), '--fill-header', `authorization=${AUTH_ENV}`, '--unsafe', '--model-calls'], log)
    up.log = undefined
    assert.equal(r.code, 1, r.stderr)
    assert.deepEqual(up.seen.slice(seen), ['GET /catalog/1', 'GET /events', 'GET /private', 'POST /orders', 'POST /v1/chat/completions'])
    const announced = log.findIndex((l) => l.includes('re-sending 1 request(s) whose method is not safe'))
    const firstSent = log.findIndex((l) => l.startsWith('upstream:'))
    assert.ok(announced >= 0 && firstSent > announced, log.join('\n'))
    assert.match(r.stderr, /drift: re-sending 1 model call\(s\) live \(--model-calls\); each one costs tokens\.\n/)
    assert.match(r.stderr, /\n {2}shop: POST https:\/\/api\.test\/orders #0\n/)
    assert.match(r.stdout, /same {2}POST https:\/\/api\.test\/orders #0/)
    assert.match(
      r.stdout,
      /DRIFT POST https:\/\/api\.test\/v1\/chat\/completions #0\n {6}tool "get_weather" arguments removed \$\.city \(string\)\n {6}tool "get_weather" arguments type changed \$\.days: number → string\n {6}tool "get_weather" arguments added \$\.location \(string\)/,
    )
  })

  test('--update writes the live answers beside the trace (redacted as record redacts); the recorded trace stays as it was', async () => {
    up.version = 2
    const digest = await digestOf('shop')
    const r = await cli(['drift', 'shop', ...upstreamArgs(), '--fill-header', `authorization=${AUTH_ENV}`, '--update'])
    assert.equal(r.code, 1)
    assert.match(r.stdout, /live answers written to trace "shop\.drift" \(the recorded trace is unchanged\)/)
    assert.equal(await digestOf('shop'), digest)
    const exported = join(work, 'exported.trace.json')
    assert.equal((await cli(['export', 'shop.drift', '--store', store, '--out', exported])).code, 0)
    const text = readFileSync(exported, 'utf8')
    assert.match(text, /\\"title\\":\\"Ada\\"/, 'the live catalog answer')
    assert.ok(!text.includes(TOKEN.slice(7)), 'the filled credential never reaches the store')
    assert.match(text, /"authorization",\s*"\[REDACTED\]"/)
    assert.equal((await cli(['scan', store])).code, 0)
    // The updated trace replays what the next version says: drift against it finds nothing.
    const again = await cli(['drift', 'shop.drift', ...upstreamArgs(), '--fill-header', `authorization=${AUTH_ENV}`])
    assert.equal(again.code, 0, again.stdout)
    // A trace file: the new trace is a file beside it, and the recorded file keeps its bytes.
    const file = join(work, 'shop.trace.json')
    assert.equal((await cli(['export', 'shop', '--store', store, '--out', file])).code, 0)
    const bytes = readFileSync(file)
    const fromFile = await cli(['drift', file, ...upstreamArgs(), '--fill-header', `authorization=${AUTH_ENV}`, '--update'])
    assert.equal(fromFile.code, 1)
    assert.match(fromFile.stdout, new RegExp(`live answers written to ${join(work, 'shop.drift.trace.json').replace(/[.]/g, '\\.')}`))
    assert.deepEqual(readFileSync(file), bytes)
    assert.match(readFileSync(join(work, 'shop.drift.trace.json'), 'utf8'), /"driftOf": "shop"/)
    // Not twice: the new name exists, which fails before anything is sent.
    const seen = up.seen.length
    const twice = await cli(['drift', 'shop', ...upstreamArgs(), '--update', '--json'])
    assert.equal(twice.code, 66)
    assert.match(twice.stdout, /TR_TRACE_EXISTS.*Trace \\"shop\.drift\\" exists: pass --force/)
    assert.equal(up.seen.length, seen)
  })

  test('offline: a refused connection or a DNS failure is "unreachable" with its cause, not drift; exit 74', async () => {
    const refused = await cli(['drift', 'shop', '--store', store, '--resolve', 'api.test=127.0.0.1:9', '--upstream-ca', upstreamCa])
    assert.equal(refused.code, 74, refused.stdout)
    assert.match(refused.stdout, /^drift of trace "shop": 3 re-sent live, 0 drifted, 3 unreachable, 0 unchanged, 2 skipped$/m)
    assert.match(refused.stdout, /UNREACHABLE GET https:\/\/api\.test\/catalog\/1 #0: ECONNREFUSED during connect/)
    assert.match(refused.stdout, /3 exchange\(s\) unreachable: the server could not be reached from here .* This is not drift/)
    assert.doesNotMatch(refused.stdout, /DRIFT/)
    // No --resolve: api.test is a reserved name no resolver knows, as a real API's name is to a machine offline.
    const dns = await cli(['drift', 'shop', '--store', store, '--json'])
    assert.equal(dns.code, 74, dns.stdout)
    const report = JSON.parse(dns.stdout) as DriftReport
    assert.deepEqual([report.drift, report.unreachable], [false, true])
    const sent = report.traces[0]?.exchanges.filter((e) => e.status !== 'skipped') ?? []
    assert.equal(sent.length, 3)
    for (const e of sent) assert.match(`${e.status} ${e.reason}`, /^unreachable (ENOTFOUND|EAI_AGAIN) during connect/)
    // --no-exit-code: the report still says so, the exit is 0.
    const quiet = await cli(['drift', 'shop', '--store', store, '--resolve', 'api.test=127.0.0.1:9', '--no-exit-code'])
    assert.equal(quiet.code, 0)
    assert.match(quiet.stdout, /3 unreachable/)
  })
})
