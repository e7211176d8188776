/**
 * Reverse mode: the proxy serves as an upstream's origin on its own port. A client that only takes a base
 * URL (plain fetch, no proxy variables, no CA) records and replays; the trace holds the upstream's URLs and
 * Host, never the proxy's; redirects into a mounted upstream come back pointing at the proxy; the wrapper
 * gives the command the base URLs beside the proxy variables (so a host no mount serves is still proxied).
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, type TestContext, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Agent, fetch, ProxyAgent, request } from 'undici'
import { openSession } from '../engine/index.ts'
import { type CertificateAuthority, loadCertificateAuthority, parseReverse, startProxy } from '../proxy/index.ts'
import { openStore, type TraceStore } from '../store/index.ts'
import { run, tempDir } from './support/proxy-harness.ts'
import { createTestPki, HELLO, JSON_BODY, startUpstream, type TestUpstream } from './support/proxy-upstream.ts'

const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
const HOST = 'api.test'
const work = tempDir('tr-reverse-')
const storeDir = join(work, 'store')
let pki: Awaited<ReturnType<typeof createTestPki>>
let api: TestUpstream
let crm: TestUpstream
let store: TraceStore
let ca: CertificateAuthority
/** A client with no proxy and no extra CA: it reaches the proxy as it would the real server. */
const direct = new Agent()

before(async () => {
  pki = await createTestPki([HOST])
  api = await startUpstream(pki.certs[HOST])
  crm = await startUpstream()
  store = await openStore(storeDir)
  ca = await loadCertificateAuthority(storeDir)
})
after(async () => {
  await direct.close()
  await store?.close()
  await api?.close()
  await crm?.close()
})

const apiOrigin = () => `https://${HOST}:${api.port}`
const mounts = () => parseReverse([apiOrigin(), `crm=http://127.0.0.1:${crm.port}`])
const upstream = () => ({ ca: pki.caPem, resolve: { [HOST]: { host: '127.0.0.1', port: api.port } } })

/** A reverse proxy for `trace`, closed after the test even when the test fails. */
async function reverseProxy(t: TestContext, mode: 'record' | 'replay' | 'passthrough', trace: string, reverse = mounts()) {
  const proxy = await startProxy({ session: await openSession({ mode, trace, store }), ca, ...(reverse.length > 0 ? { reverse } : {}), upstream: upstream() })
  t.after(() => proxy.close())
  return proxy
}

/** What a base-URL client sees: status, the Location it is sent, the body. */
async function exercise(base: string): Promise<string[]> {
  const out: string[] = []
  const get = async (path: string, init: { method?: string; body?: string } = {}) => {
    const r = await request(`${base}${path}`, { dispatcher: direct, method: (init.method ?? 'GET') as 'GET', ...(init.body ? { body: init.body } : {}) })
    const location = r.headers.location === undefined ? '' : ` → ${String(r.headers.location).replace(base, '<proxy>')}`
    out.push(`${path}: ${r.statusCode}${location} ${await r.body.text()}`)
  }
  await get('/hello')
  await get('/json')
  await get('/echo', { method: 'POST', body: '{"q":"reverse"}' })
  await get('/whoami')
  await get('/crm/whoami')
  await get('/redirect?to={self}/json')
  await get('/crm/redirect?to=/hello')
  return out
}

describe('reverse mode in-process', () => {
  let live: string[]

  test('records a base-URL client (no proxy variables, no CA) under the upstream URLs and Host', async (t) => {
    const proxy = await reverseProxy(t, 'record', 'reverse')
    live = await exercise(proxy.url)
    const summary = await proxy.close()
    assert.equal(summary.recorded, 7)
    const whoami = (line: string) => JSON.parse(line.slice(line.indexOf('{'))) as { host: string; headers: string[] }
    assert.deepEqual(
      [live[0], live[1], live[2], live[5], live[6]],
      [
        `/hello: 200 ${HELLO}`,
        `/json: 200 ${JSON_BODY}`,
        '/echo: 200 {"q":"reverse"}',
        // An absolute redirect into the mount at / comes back pointing at the proxy; a path-absolute one keeps its prefix.
        '/redirect?to={self}/json: 302 → <proxy>/json ',
        '/crm/redirect?to=/hello: 302 → /crm/hello ',
      ],
    )
    // The upstream was addressed as itself: Host is its authority, not the proxy's.
    assert.equal(whoami(live[3] as string).host, `${HOST}:${api.port}`)
    assert.equal(whoami(live[4] as string).host, `127.0.0.1:${crm.port}`)
    const trace = await store.readTrace('reverse')
    assert.deepEqual(
      trace.exchanges.map((x) => `${x.request.method} ${x.request.url}`),
      [
        `GET ${apiOrigin()}/hello`,
        `GET ${apiOrigin()}/json`,
        `POST ${apiOrigin()}/echo`,
        `GET ${apiOrigin()}/whoami`,
        `GET http://127.0.0.1:${crm.port}/whoami`,
        `GET ${apiOrigin()}/redirect?to={self}/json`,
        `GET http://127.0.0.1:${crm.port}/redirect?to=/hello`,
      ],
    )
    // The trace never names the proxy: the Host it recorded is the upstream's, and Location is the upstream's own.
    const text = JSON.stringify(trace.exchanges)
    assert.equal(text.includes(`:${proxy.port}`), false, text)
    const redirect = trace.exchanges[5]?.outcome
    assert.ok(redirect?.kind === 'response')
    assert.deepEqual(
      redirect.response.headers.find(([k]) => k === 'location'),
      ['location', `${apiOrigin()}/json`],
    )
  })

  test('replays strictly offline: the same answers, redirects rewritten the same way, zero upstream connections', async (t) => {
    const connections = api.connections + crm.connections
    const proxy = await reverseProxy(t, 'replay', 'reverse')
    assert.deepEqual(await exercise(proxy.url), live)
    const summary = await proxy.close()
    assert.ok(summary.ok, JSON.stringify(summary))
    assert.equal(summary.replayed, 7)
    assert.equal(api.connections + crm.connections, connections)
  })

  test('following a redirect stays on the proxy, so replay follows it offline too', async (t) => {
    const follow = async (base: string) => (await fetch(`${base}/redirect?to={self}/json`, { dispatcher: direct })).text()
    const rec = await reverseProxy(t, 'record', 'reverse-follow')
    assert.equal(await follow(rec.url), JSON_BODY)
    await rec.close()
    const connections = api.connections
    const rep = await reverseProxy(t, 'replay', 'reverse-follow')
    assert.equal(await follow(rep.url), JSON_BODY)
    assert.ok((await rep.close()).ok)
    assert.equal(api.connections, connections)
  })

  test('a client that also has the proxy variables reaches the reverse URL through the proxy: served once, not proxied to itself', async (t) => {
    const proxy = await reverseProxy(t, 'record', 'reverse-self')
    const viaProxy = new ProxyAgent({ uri: proxy.url })
    const r = await request(`${proxy.url}/hello`, { dispatcher: viaProxy })
    assert.equal(await r.body.text(), HELLO)
    await viaProxy.close()
    await proxy.close()
    const trace = await store.readTrace('reverse-self')
    assert.deepEqual(
      trace.exchanges.map((x) => x.request.url),
      [`${apiOrigin()}/hello`],
    )
  })

  test('a path no mount serves gets 404 naming the mounts; without --reverse the proxy explains it is a forward proxy', async (t) => {
    const named = await reverseProxy(t, 'passthrough', 'unused', parseReverse([`crm=http://127.0.0.1:${crm.port}`]))
    const r = await request(`${named.url}/billing/x`, { dispatcher: direct })
    assert.equal(r.statusCode, 404)
    assert.equal(r.headers['x-tool-replay-error'], 'TR_PROXY_BAD_REQUEST')
    assert.match(
      await r.body.text(),
      new RegExp(
        `no upstream for "GET /billing/x": mounted ${named.url.replaceAll('.', '\\.')}/crm/ → http://127\\.0\\.0\\.1:${crm.port}\\. .*--reverse NAME=URL`,
      ),
    )
    const forward = await reverseProxy(t, 'passthrough', 'unused', [])
    const f = await request(`${forward.url}/v1/models`, { dispatcher: direct })
    assert.equal(f.statusCode, 400)
    assert.match(await f.body.text(), /in origin form\. It is a forward proxy: .*--reverse/)
  })
})

describe('reverse mode through the CLI wrapper', { timeout: 60_000 }, () => {
  /** The wrapped command: prints the variables it got, then fetches through the reverse URLs. */
  const script = [
    "const e = process.env, keys = ['TOOL_REPLAY_REVERSE_URL', 'TOOL_REPLAY_REVERSE_URL_CRM', 'HTTPS_PROXY', 'HTTP_PROXY', 'NODE_EXTRA_CA_CERTS', 'NODE_USE_ENV_PROXY'];",
    'const seen = Object.fromEntries(keys.map((k) => [k, e[k] ?? null]));',
    "const a = await (await fetch(e.TOOL_REPLAY_REVERSE_URL + '/hello')).text();",
    "const b = await (await fetch(e.TOOL_REPLAY_REVERSE_URL_CRM + '/json')).text();",
    // A host addressed directly, not through a mount: it must still go through the proxy (recorded, replayed offline).
    'const c = await (await fetch(e.DIRECT_URL)).text();',
    'console.log(JSON.stringify({ seen, a, b, c }));',
  ].join(' ')
  const cli = (mode: 'record' | 'replay') =>
    run(
      process.execPath,
      [
        BIN,
        mode,
        '--store',
        join(work, 'cli-store'),
        '--trace',
        'wrapped',
        '--reverse',
        apiOrigin(),
        '--reverse',
        `crm=http://127.0.0.1:${crm.port}`,
        '--resolve',
        `${HOST}=127.0.0.1:${api.port}`,
        '--upstream-ca',
        pki.caPath,
        '--',
        process.execPath,
        '--input-type=module',
        '-e',
        script,
      ],
      { ...process.env, HTTPS_PROXY: '', HTTP_PROXY: '', NODE_EXTRA_CA_CERTS: '', DIRECT_URL: `http://127.0.0.1:${crm.port}/json` },
    )

  test('`tr-proxy record|replay --reverse URL -- cmd`: the command gets base URLs and the proxy variables; every request replays offline', async () => {
    const rec = await cli('record')
    assert.equal(rec.code, 0, rec.stderr)
    const recorded = JSON.parse(rec.stdout) as { seen: Record<string, string | null>; a: string; b: string; c: string }
    const base = recorded.seen.TOOL_REPLAY_REVERSE_URL as string
    assert.match(base, /^http:\/\/127\.0\.0\.1:\d+$/)
    assert.match(recorded.seen.NODE_EXTRA_CA_CERTS ?? '', /ca/)
    assert.deepEqual(recorded, {
      seen: {
        TOOL_REPLAY_REVERSE_URL: base,
        TOOL_REPLAY_REVERSE_URL_CRM: `${base}/crm`,
        HTTPS_PROXY: base,
        HTTP_PROXY: base,
        NODE_EXTRA_CA_CERTS: recorded.seen.NODE_EXTRA_CA_CERTS,
        NODE_USE_ENV_PROXY: '1',
      },
      a: HELLO,
      b: JSON_BODY,
      c: JSON_BODY,
    })
    assert.match(rec.stderr, /record of trace "wrapped": 0 replayed, 3 recorded/)
    const connections = api.connections + crm.connections
    const rep = await cli('replay')
    assert.equal(rep.code, 0, rep.stderr)
    assert.deepEqual({ ...JSON.parse(rep.stdout), seen: null }, { ...recorded, seen: null })
    assert.match(rep.stderr, /replay of trace "wrapped": 3 replayed, 0 recorded, 0 passed through; 0 unmatched, 0 over the recorded count, 0 unused/)
    assert.equal(api.connections + crm.connections, connections)
  })

  test('a bad --reverse fails before anything runs, exit 64', async () => {
    const r = await run(process.execPath, [BIN, 'record', '--store', join(work, 'bad-store'), '--reverse', 'api.openai.com', '--', 'true'], process.env)
    assert.equal(r.code, 64, r.stderr)
    assert.match(r.stderr, /TR_INVALID_OPTION: Invalid --reverse "api\.openai\.com": it is not an absolute URL/)
  })
})
