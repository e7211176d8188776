/**
 * HAR in and out end to end, on a HAR Playwright recorded from Chromium (e2e/fixtures/har/README.md):
 * `tr-proxy import-har` into a real LevelDB store, then a strict replay through the interceptor with the
 * recorded site gone (its host name never resolves here), then `export-har` and back.
 */
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { EXIT_CODES, runCli } from 'tool-replay/cli'
import { install } from 'tool-replay/interceptor'
import type { Har } from 'tool-replay/interop'
import { traceFromHar } from 'tool-replay/interop'
import { openStore } from 'tool-replay/store'
import { type Exchange, parseJson, type Trace } from 'tool-replay/trace'
import { BLOB, DEFLATE_JSON, FAKE_SECRETS, GZIP_JSON, ITEMS_JSON, SSE_EVENTS } from './fixtures/har/fixture-server.ts'
import { filesUnder } from './support/files-under.ts'

const HAR_FILE = new URL('./fixtures/har/playwright-chromium.har', import.meta.url).pathname
const harText = await readFile(HAR_FILE, 'utf8')
const har = parseJson(harText) as Har

let dir: string
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tr-har-'))
})
after(() => rm(dir, { recursive: true, force: true }))

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = []
  const err: string[] = []
  const code = await runCli(args, { out: (t) => out.push(t), err: (t) => err.push(t) })
  return { code, out: out.join('\n'), err: err.join('\n') }
}

async function readStored(store: string, name: string): Promise<Trace> {
  const s = await openStore(store)
  try {
    return await s.readTrace(name)
  } finally {
    await s.close()
  }
}

/** The decoded response body the HAR holds for entry `i`. */
function harBody(i: number): Buffer {
  const c = har.log.entries[i]?.response.content
  assert.ok(c?.text !== undefined, `entry ${i} has content`)
  return Buffer.from(c.text, c.encoding === 'base64' ? 'base64' : 'utf8')
}

describe('a Playwright/Chromium HAR: import, strict offline replay through the interceptor, export and back', () => {
  let store: string
  before(async () => {
    store = join(dir, 'store')
    const r = await cli(['import-har', HAR_FILE, '--as', 'pw', '--store', store])
    assert.equal(r.code, 0, r.err)
    assert.match(r.out, /Imported .*playwright-chromium\.har as trace "pw" \(11 exchanges\)/)
  })

  test('every entry is an exchange in request order; the refused request is a recorded ECONNREFUSED', async () => {
    const trace = await readStored(store, 'pw')
    assert.deepEqual(
      trace.exchanges.map((x) => `${x.request.method} ${new URL(x.request.url).pathname}`),
      har.log.entries.map((e) => `${e.request.method} ${new URL(e.request.url).pathname}`),
    )
    const refused = trace.exchanges.at(-1) as Exchange
    assert.equal(refused.outcome.kind, 'error')
    assert.equal(refused.outcome.kind === 'error' && refused.outcome.error.code, 'ECONNREFUSED')
    // startedDateTime offsets and timings survive: the second counter call started after the first ended.
    const [c1, c2] = trace.exchanges.filter((x) => x.request.url.endsWith('/api/counter')) as [Exchange, Exchange]
    assert.ok(c2.timing.startMs >= c1.timing.startMs + c1.timing.headersMs, JSON.stringify([c1.timing, c2.timing]))
    assert.equal(c1.timing.headersMs, Math.round(har.log.entries[3]?.timings.wait ?? -1))
  })

  test('the fake Authorization key and Set-Cookie value are redacted in the store (files and decoded trace)', async () => {
    for await (const f of filesUnder(store)) {
      const bytes = await readFile(f)
      for (const secret of FAKE_SECRETS) assert.equal(bytes.indexOf(secret), -1, `${secret} in ${f}`)
    }
    const trace = await readStored(store, 'pw')
    const decoded = JSON.stringify(trace.exchanges) + [...trace.bodies.values()].map((b) => Buffer.from(b).toString('latin1')).join('')
    for (const secret of FAKE_SECRETS) assert.equal(decoded.includes(secret), false, secret)
    assert.match(decoded, /Bearer|\[REDACTED\]/)
  })

  test('strict replay through the interceptor gives every recorded response byte for byte, with the site gone', async () => {
    const s = await openStore(store)
    const trace = await s.readTrace('pw')
    const tr = await install({ mode: 'replay', trace: 'pw', store: s })
    try {
      for (const [i, x] of trace.exchanges.entries()) {
        const type = x.request.headers.find(([k]) => k.toLowerCase() === 'content-type')?.[1]
        const stored = x.request.body ? trace.bodies.get(x.request.body.digest) : undefined
        const body = stored ? Buffer.from(stored) : undefined
        const pending = fetch(x.request.url, { method: x.request.method, headers: type ? { 'content-type': type } : {}, body })
        if (x.outcome.kind === 'error') {
          await assert.rejects(pending, (err: Error & { cause?: { code?: string } }) => err.cause?.code === 'ECONNREFUSED')
          continue
        }
        const res = await pending
        assert.equal(res.status, har.log.entries[i]?.response.status, `status of entry ${i}`)
        const got = Buffer.from(await res.arrayBuffer())
        assert.ok(got.equals(harBody(i)), `body of entry ${i} (${x.request.url}): ${got.toString('latin1').slice(0, 80)}`)
      }
      tr.assertDone() // every recording used, nothing missed, nothing repeated
    } finally {
      await tr.close()
      await s.close()
    }
  })

  test('the replayed bodies are what the site sent: decoded gzip and deflate, binary, the counter sequence, the stream', async () => {
    const s = await openStore(store)
    const tr = await install({ mode: 'replay', trace: 'pw', store: s })
    const base = 'http://har-fixture.test'
    try {
      assert.equal(await (await fetch(`${base}/`)).text().then((t) => t.includes('<script>')), true)
      const items = await fetch(`${base}/api/items?a=1&b=2`) // query order does not matter to matching
      assert.equal(await items.text(), ITEMS_JSON)
      assert.equal(items.headers.get('set-cookie'), 'session=[REDACTED]; Path=/; HttpOnly')
      const created = await fetch(`${base}/api/items`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"umbrella","qty":2}' })
      assert.equal(created.status, 201)
      assert.equal(await created.text(), '{"created":{"name":"umbrella","qty":2},"id":3}')
      assert.equal(await (await fetch(`${base}/api/counter`)).text(), 'count 1')
      assert.equal(await (await fetch(`${base}/api/counter`)).text(), 'count 2')
      const gz = await fetch(`${base}/api/gzip`)
      assert.equal(gz.headers.get('content-encoding'), null, 'stored decoded, so not labelled gzip')
      assert.equal(gz.headers.get('content-length'), String(Buffer.byteLength(GZIP_JSON)))
      assert.equal(await gz.text(), GZIP_JSON)
      assert.equal(await (await fetch(`${base}/api/deflate`)).text(), DEFLATE_JSON)
      assert.deepEqual(new Uint8Array(await (await fetch(`${base}/blob.bin`)).arrayBuffer()), BLOB)
      assert.equal((await fetch(`${base}/api/missing`)).status, 404)
      assert.equal(await (await fetch(`${base}/api/stream`)).text(), SSE_EVENTS.join(''))
      await assert.rejects(fetch('http://refused.test/api/down'), (err: Error & { cause?: { code?: string } }) => err.cause?.code === 'ECONNREFUSED')
      // A third counter call was never recorded: strict replay refuses it instead of repeating the last one.
      const third = await fetch(`${base}/api/counter`)
      assert.equal(third.status, 403)
      assert.equal(third.headers.get('x-tool-replay-error'), 'TR_REPLAY_EXHAUSTED')
      assert.throws(() => tr.assertDone(), /TR_REPLAY_EXHAUSTED|request #3/)
    } finally {
      await tr.close()
      await s.close()
    }
  })

  test('export-har then import-har gives the same trace back, and the exported HAR is HAR 1.2 a reader accepts', async () => {
    const out = join(dir, 'out', 'pw.har')
    const exported = await cli(['export-har', 'pw', '--out', out, '--store', store, '--started-at', '2026-11-30T20:18:07.963Z'])
    assert.equal(exported.code, 0, exported.err)
    const again = await cli(['import-har', out, '--as', 'pw-again', '--store', store])
    assert.equal(again.code, 0, again.err)
    const a = await readStored(store, 'pw')
    const b = await readStored(store, 'pw-again')
    assert.deepEqual(b.exchanges, a.exchanges)
    for (const [digest, bytes] of a.bodies) assert.deepEqual(b.bodies.get(digest), bytes)
    const text = await readFile(out, 'utf8')
    const reread = traceFromHar(text, { name: 'x' })
    assert.equal(reread.trace.exchanges.length, 11)
    const written = parseJson(text) as Har
    assert.equal(written.log.version, '1.2')
    assert.equal(written.log.entries[0]?.startedDateTime, '2026-11-30T20:18:07.963Z')
    // HAR keeps decoded bodies: the gzip entry's text is the JSON, not gzip bytes.
    assert.equal(written.log.entries[5]?.response.content.text, GZIP_JSON)
    // To standard output without --out.
    const stdout = await cli(['export-har', 'pw', '--store', store])
    assert.equal(stdout.code, 0)
    assert.equal((parseJson(stdout.out) as Har).log.entries.length, 11)
  })

  test('a bad HAR is refused with TR_HAR_INVALID (exit 65, bad data) naming entry and field, and nothing is stored', async () => {
    const broken = join(dir, 'broken.har')
    const h = parseJson(harText) as Har
    ;(h.log.entries[2] as { request: { headers: Array<{ name: string; value: string }> } }).request.headers.push({ name: 'x', value: 'a\nb' })
    await (await import('node:fs/promises')).writeFile(broken, JSON.stringify(h))
    const r = await cli(['import-har', broken, '--as', 'broken', '--store', store, '--json'])
    assert.equal(r.code, EXIT_CODES.TR_HAR_INVALID)
    assert.equal(r.code, 65)
    const res = JSON.parse(r.out) as { error: { code: string; details: { entry: number; field: string } } }
    assert.equal(res.error.code, 'TR_HAR_INVALID')
    assert.equal(res.error.details.entry, 2)
    assert.match(res.error.details.field, /^log\.entries\[2\]\.request\.headers\[\d+\]\.value$/)
    const ls = await cli(['ls', '--store', store, '--json'])
    assert.equal(
      (JSON.parse(ls.out) as { traces: Array<{ name: string }> }).traces.some((t) => t.name === 'broken'),
      false,
    )
    const missing = await cli(['import-har', join(dir, 'nope.har'), '--as', 'n', '--store', store])
    assert.equal(missing.code, EXIT_CODES.TR_HAR_INVALID)
    assert.match(missing.err, /TR_HAR_INVALID: Failed to read HAR/)
  })
})
