/**
 * Faults through the proxy for clients in other languages: curl (one test per fault kind) and Python
 * requests, over HTTPS through the proxy's TLS interception, against a real local API that keeps its own
 * ledger. Then the CLI: a rule that never fires (exit 76 with the seed and the rerun command) and a faults
 * file that does not validate (exit 65 before anything opens). The lost-acknowledgement story through
 * `tr-proxy record|check|replay` is e2e/faults-example.test.ts (the walkthrough in docs/faults.md).
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { loadSessionFaults, openSession } from '../engine/index.ts'
import { loadCertificateAuthority, type ProxyServer, startProxy } from '../proxy/index.ts'
import { createMemoryStore, type TraceStore } from '../store/index.ts'
import { bodyBytes, type Exchange, parseJson, type Trace } from '../trace/index.ts'
import { EVENTS, type FaultUpstream, QUOTE, startFaultUpstream } from './support/fault-upstream.ts'
import { clientEnv, run, tempDir, writeBundle } from './support/proxy-harness.ts'
import { createTestPki } from './support/proxy-upstream.ts'

const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
/** curl's exit code when the connection was reset while it read ("Recv failure"). */
const CURL_RECV_FAILURE = 56

let pki: Awaited<ReturnType<typeof createTestPki>>
const work = tempDir('tr-faults-proxy-')
before(async () => {
  pki = await createTestPki(['api.test'])
})

const RULES = [
  { id: 'lost-ack', target: { method: 'POST', url: '/shipments' }, fault: 'response_lost' },
  { id: 'hang', target: { url: '/timeout' }, fault: 'timeout', options: { ms: 300 } },
  { id: 'rl', target: { url: '/limited' }, fault: 'rate_limit', options: { retryAfterMs: 1500 } },
  { id: 'boom', target: { url: '/broken' }, fault: 'server_error', options: { status: 503, provider: 'anthropic' } },
  { id: 'slow', target: { url: '/quote' }, fault: 'latency', options: { ms: 250 } },
  { id: 'drift', target: { url: '/drifting' }, fault: 'schema_drift', options: { changes: [{ op: 'type', path: '$.path', to: 'number' }] } },
  { id: 'down', target: { url: '/down' }, fault: 'blackout' },
  { id: 'down-503', target: { url: '/down-503' }, fault: 'blackout', options: { mode: '503' } },
  { id: 'cut', target: { url: '/events' }, fault: 'stream_cut', options: { afterEvents: 2 } },
  { id: 'reset', target: { url: '/events-broken' }, fault: 'stream_error', options: { afterEvents: 1 } },
]

/** A proxy recording with faults into a memory store, routing api.test to `api`. */
async function faultedProxy(store: TraceStore, trace: string, api: FaultUpstream, rules: unknown[]): Promise<{ proxy: ProxyServer; env: NodeJS.ProcessEnv }> {
  const dir = join(work, trace)
  mkdirSync(dir, { recursive: true })
  const session = await openSession({ mode: 'record', trace, store, faults: await loadSessionFaults({ seed: 9, rules }) })
  const ca = await loadCertificateAuthority(dir)
  const proxy = await startProxy({ session, ca, upstream: { ca: pki.caPem, resolve: { 'api.test': { host: '127.0.0.1', port: api.port } } } })
  return { proxy, env: clientEnv(proxy, writeBundle(dir, ca.certPem)) }
}

/**
 * curl through the proxy: exit code, body, status, headers and time. Over HTTP/1.1 unless `extra` says
 * otherwise: the proxy offers HTTP/2 by ALPN, and curl takes it (the faults over HTTP/2 have their own tests).
 */
async function curl(env: NodeJS.ProcessEnv, path: string, extra: string[] = ['--http1.1']) {
  const t0 = performance.now()
  const r = await run('curl', ['-sS', '-N', '-D', '-', '-w', '\n%{http_code}', ...extra, `https://api.test${path}`], env)
  const ms = performance.now() - t0
  const status = Number(r.stdout.slice(r.stdout.lastIndexOf('\n') + 1))
  let body = r.stdout.slice(0, r.stdout.lastIndexOf('\n'))
  let head = ''
  // -D - prints every head: the proxy's "200 Connection established" to CONNECT first, then the response's.
  while (body.startsWith('HTTP/')) {
    const split = body.indexOf('\r\n\r\n')
    if (split === -1) break
    head = body.slice(0, split)
    body = body.slice(split + 4)
  }
  const header = (name: string) => new RegExp(`^${name}: (.*)$`, 'im').exec(head)?.[1]?.trim()
  return { code: r.code, status, body, header, ms, stderr: r.stderr }
}

const POST = ['--http1.1', '-X', 'POST', '-H', 'content-type: application/json', '-d', '{"orderId":"o-1"}']

function text(trace: Trace, o: Exchange['outcome'] | null | undefined): string | undefined {
  if (!o) return undefined
  const ref = o.kind === 'response' ? o.response.body : o.error.partial?.body
  return ref ? new TextDecoder().decode(bodyBytes(trace, ref)) : undefined
}

describe('each fault kind through the proxy (curl over HTTPS)', { timeout: 120_000 }, () => {
  const store = createMemoryStore()
  let api: FaultUpstream
  let proxy: ProxyServer
  let env: NodeJS.ProcessEnv
  before(async () => {
    api = await startFaultUpstream(pki.certs['api.test'])
    ;({ proxy, env } = await faultedProxy(store, 'curl-faults', api, RULES))
  })
  after(async () => {
    // A failed close (reported by its test) must not keep the API open and hang the file.
    await proxy?.close().catch(() => {})
    await api?.close()
  })

  test('response_lost: the API commits the shipment, curl sees its connection reset', async () => {
    const r = await curl(env, '/shipments', POST)
    assert.equal(r.code, CURL_RECV_FAILURE, r.stderr)
    assert.match(r.stderr, /reset/i)
    assert.equal(r.status, 0, 'no status reached curl')
    assert.deepEqual(api.shipments, ['s-1'], 'the API committed it')
  })

  test('timeout: curl waits ms, then its connection fails; nothing reaches the API', async () => {
    const before = api.requests.length
    const r = await curl(env, '/timeout')
    assert.equal(r.code, CURL_RECV_FAILURE, r.stderr)
    assert.ok(r.ms >= 290, `failed after ${r.ms} ms`)
    assert.equal(api.requests.length, before)
  })

  test('rate_limit: 429 with retry-after and retry-after-ms, never forwarded', async () => {
    const before = api.requests.length
    const r = await curl(env, '/limited')
    assert.equal(r.code, 0)
    assert.equal(r.status, 429)
    assert.equal(r.header('retry-after'), '2')
    assert.equal(r.header('retry-after-ms'), '1500')
    assert.equal(api.requests.length, before)
  })

  test('server_error: a 503 in the Anthropic error shape', async () => {
    const r = await curl(env, '/broken')
    assert.equal(r.status, 503)
    const body = parseJson(r.body) as { type: string; error: { type: string } }
    assert.equal(body.type, 'error')
    assert.equal(body.error.type, 'api_error')
    assert.match(r.header('request-id') ?? '', /^req_trfault_/)
  })

  test('latency: the answer, 250 ms later', async () => {
    const r = await curl(env, '/quote')
    assert.equal(r.status, 200)
    assert.equal(r.body, QUOTE)
    assert.ok(r.ms >= 245, `took ${r.ms} ms`)
  })

  test('schema_drift: a field changes type in the JSON curl gets', async () => {
    const r = await curl(env, '/drifting')
    assert.equal(r.status, 200)
    assert.equal(typeof (parseJson(r.body) as { path: unknown }).path, 'number')
  })

  test('blackout: a reset connection (refused, as a proxy client sees it) or a provider-shaped 503', async () => {
    const before = api.requests.length
    const refused = await curl(env, '/down')
    assert.equal(refused.code, CURL_RECV_FAILURE, refused.stderr)
    const unavailable = await curl(env, '/down-503')
    assert.equal(unavailable.status, 503)
    assert.equal(api.requests.length, before)
  })

  test('stream_cut: curl -N reads 2 whole events and a clean end', async () => {
    const r = await curl(env, '/events')
    assert.equal(r.code, 0, r.stderr)
    assert.equal(r.status, 200)
    assert.equal(r.body, EVENTS.slice(0, 2).join(''))
  })

  test('stream_error: curl reads 1 event, then the connection is reset', async () => {
    const r = await curl(env, '/events-broken')
    assert.equal(r.code, CURL_RECV_FAILURE, r.stderr)
    assert.equal(r.body, EVENTS[0])
  })

  test('the trace holds one faulted exchange per rule, each with what the upstream really did', async () => {
    assert.equal(proxy.stats.faulted, RULES.length, 'GET /status counts the requests a fault acted on')
    await proxy.close()
    const trace = await store.readTrace('curl-faults')
    const byRule = new Map(trace.exchanges.map((x) => [x.fault?.rule, x]))
    assert.deepEqual([...byRule.keys()].sort(), RULES.map((r) => r.id).sort())
    const upstream = (rule: string) => {
      const u = byRule.get(rule)?.fault?.upstream
      return u === null ? null : u?.kind === 'response' ? u.response.status : u?.error.code
    }
    assert.deepEqual(
      RULES.map((r) => [r.id, upstream(r.id)]),
      [
        ['lost-ack', 201],
        ['hang', null],
        ['rl', null],
        ['boom', null],
        ['slow', 200],
        ['drift', 200],
        ['down', null],
        ['down-503', null],
        ['cut', 200],
        ['reset', 200],
      ],
    )
    assert.equal(text(trace, byRule.get('cut')?.fault?.upstream), EVENTS.join(''), 'the cut stream was read to its end upstream')
  })
})

/** curl's exit code when an HTTP/2 stream was reset (RST_STREAM) before it ended. */
const CURL_HTTP2_STREAM = 92

describe('faults over HTTP/2 (curl negotiates h2 by ALPN): a broken connection is the stream reset, the connection lives on', { timeout: 120_000 }, () => {
  const store = createMemoryStore()
  let api: FaultUpstream
  let proxy: ProxyServer
  let env: NodeJS.ProcessEnv
  before(async () => {
    api = await startFaultUpstream(pki.certs['api.test'])
    ;({ proxy, env } = await faultedProxy(store, 'curl-h2-faults', api, RULES))
  })
  after(async () => {
    await proxy?.close().catch(() => {})
    await api?.close()
  })
  const H2 = ['--http2']

  test('response_lost: the API commits, curl sees its stream reset (INTERNAL_ERROR) and no status', async () => {
    const r = await curl(env, '/shipments', [...H2, '-X', 'POST', '-H', 'content-type: application/json', '-d', '{"orderId":"o-1"}'])
    assert.equal(r.code, CURL_HTTP2_STREAM, r.stderr)
    assert.match(r.stderr, /HTTP\/2 stream \d+ was not closed cleanly/)
    assert.equal(r.status, 0, 'no status reached curl')
    assert.deepEqual(api.shipments, ['s-1'], 'the API committed it')
  })

  test('timeout, blackout and stream_error reset the stream; rate_limit answers 429 over HTTP/2', async () => {
    const before = api.requests.length
    const hang = await curl(env, '/timeout', H2)
    assert.equal(hang.code, CURL_HTTP2_STREAM, hang.stderr)
    assert.ok(hang.ms >= 290, `failed after ${hang.ms} ms`)
    const down = await curl(env, '/down', H2)
    assert.equal(down.code, CURL_HTTP2_STREAM, down.stderr)
    const limited = await curl(env, '/limited', ['--http2'])
    assert.equal(limited.status, 429)
    assert.equal(limited.header('retry-after-ms'), '1500')
    assert.equal(api.requests.length, before, 'nothing reached the API')
    const broken = await curl(env, '/events-broken', H2)
    assert.equal(broken.code, CURL_HTTP2_STREAM, broken.stderr)
    assert.equal(broken.body, EVENTS[0])
  })

  test('every fault that acted is counted, over HTTP/2 as over HTTP/1.1', () => {
    assert.equal(proxy.stats.faulted, 5)
    assert.equal(proxy.stats.requests, 5)
  })
})

describe('Python requests through the proxy', { timeout: 120_000 }, () => {
  test('gets a ConnectionError for a lost response, a 429 with retry-after-ms, and a cut stream as a clean end', async (t) => {
    const missing = await run('python3', ['-c', 'import requests'], process.env)
    if (missing.code !== 0) {
      // CI installs it (.ci/run): there a missing client is a failure, never a silent skip.
      if (process.env.CI) assert.fail(`Python requests is missing in CI: ${missing.stderr}`)
      t.skip('Python requests is not installed; apt-get install -y python3-requests')
      return
    }
    const store = createMemoryStore()
    const api = await startFaultUpstream(pki.certs['api.test'])
    const { proxy, env } = await faultedProxy(store, 'python-faults', api, RULES)
    const script = [
      'import json, requests',
      'out = []',
      'try:',
      '    requests.post("https://api.test/shipments", json={"orderId": "o-1"}, timeout=10)',
      '    out.append("answered")',
      'except requests.exceptions.ConnectionError as e:',
      '    out.append("ConnectionError")',
      'r = requests.get("https://api.test/limited", timeout=10)',
      'out.append([r.status_code, r.headers.get("retry-after-ms")])',
      'r = requests.get("https://api.test/events", stream=True, timeout=10)',
      'out.append([line.decode() for line in r.iter_lines() if line])',
      'print(json.dumps(out))',
    ].join('\n')
    try {
      const r = await run('python3', ['-c', script], env)
      assert.equal(r.code, 0, r.stderr)
      assert.deepEqual(parseJson(r.stdout), ['ConnectionError', [429, '1500'], ['data: {"n":0}', 'data: {"n":1}']])
      assert.deepEqual(api.shipments, ['s-1'], 'the lost response was committed')
    } finally {
      await proxy.close()
      await api.close()
    }
  })
})

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child: ChildProcess = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout?.on('data', (c: Buffer) => (stdout += c))
  child.stderr?.on('data', (c: Buffer) => (stderr += c))
  return once(child, 'exit').then(([code]) => ({ code: code as number | null, stdout, stderr }))
}

describe('tr-proxy record --faults: failing fast and failing loudly', { timeout: 120_000 }, () => {
  const dir = join(work, 'cli')
  const storeDir = join(dir, 'store')
  let api: FaultUpstream
  before(async () => {
    mkdirSync(dir, { recursive: true })
    api = await startFaultUpstream(pki.certs['api.test'])
  })
  after(() => api?.close())

  const proxyArgs = () => ['--store', storeDir, '--resolve', `api.test=127.0.0.1:${api.port}`, '--upstream-ca', pki.caPath]
  test('a rule that never fires fails the run with exit 76, naming it, the seed and the rerun command', async () => {
    const file = join(dir, 'typo.faults.yaml')
    writeFileSync(file, 'rules:\n  - { id: typo, target: { method: POST, url: /shipment }, fault: response_lost }\n')
    const rec = await cli(['record', ...proxyArgs(), '--trace', 'typo', '--faults', file, '--seed', '77', '--', 'sh', '-c', 'curl -sS https://api.test/quote'])
    assert.equal(rec.code, 76, rec.stderr)
    assert.match(rec.stderr, /faults seed 77 \(from --seed\)/)
    assert.match(
      rec.stderr,
      /TR_FAULT_NOT_FIRED: 1 fault rule\(s\) never fired.*"typo" \(response_lost on POST \/shipment\): its target POST \/shipment matched no request/,
    )
    assert.match(rec.stderr, /Faults seed 77; rerun: tr-proxy record .* --seed 77 -- sh -c 'curl -sS https:\/\/api.test\/quote'/)
  })

  test('a faults file that does not validate stops the run before anything opens (exit 65)', async () => {
    const file = join(dir, 'bad.faults.yaml')
    writeFileSync(file, 'rules:\n  - { id: bad, target: { url: /x }, fault: teleport }\n')
    const rec = await cli(['record', ...proxyArgs(), '--trace', 'bad', '--faults', file, '--', 'sh', '-c', 'exit 3'])
    assert.equal(rec.code, 65, rec.stderr)
    assert.match(rec.stderr, /TR_INVALID_FAULTS/)
  })
})
