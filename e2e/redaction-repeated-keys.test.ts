/**
 * Redaction and scan see what a server would see (issue 17, "Why" 3): a JSON body
 * `{"password":"x","password":"SECRET"}` with `$.password` redacted used to store the second occurrence —
 * the one a server reads, last key wins — and `tr-proxy scan` exited 0 on that store.
 * - Recorded through the interceptor (fetch) and through `tr-proxy record`, with a repeated key in a plain
 *   request, an escaped repeated key (`"pa\u0073sword"`) in a gzip request and a repeated key in a gzip
 *   response: no secret is in the store's decoded LevelDB values, pieces or an export; scan exits 0; the
 *   recordings still replay (requests are redacted the same way before matching).
 * - A store that holds such secrets (written through the store API, as an old recording or a foreign file
 *   would) is caught by scan (exit 77), in a repeated key, an escaped key, a comment and a body cut short.
 * - Every other way into the store redacts too: `import` of a trace file, `import-har`, and `fork` with a
 *   body file that repeats the key.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { writeFile } from 'node:fs/promises'
import { createServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { gunzipSync, gzipSync } from 'node:zlib'
import { Agent } from 'undici'
import { EXIT_CODES, runCli } from '../cli/index.ts'
import { install } from '../interceptor/index.ts'
import { openStore } from '../store/index.ts'
import { bodyFromBytes, ErrorCodes, type Exchange, type HeaderPairs, type Trace } from '../trace/index.ts'
import { placesHolding } from './support/decoded-content.ts'
import { tempDir } from './support/proxy-harness.ts'
import { createTestPki } from './support/proxy-upstream.ts'

const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
// Shapeless on purpose: only body-path redaction can catch them, no credential pattern would.
const REQUEST_SECRET = 'planted-request-secret-4f1a'
const ESCAPED_SECRET = 'planted-escaped-secret-9b2c'
const RESPONSE_SECRET = 'planted-response-secret-7d3e'
const SECRETS = [REQUEST_SECRET, ESCAPED_SECRET, RESPONSE_SECRET]
const PATHS = ['$.password', '$.token']
const FLAGS = PATHS.flatMap((p) => ['--redact-body-path', p])
const work = tempDir('tr-repeated-keys-')
let pki: Awaited<ReturnType<typeof createTestPki>>
let origin: string
let closeUpstream: () => Promise<void>
/** What the upstream really read (JSON.parse: the last key wins), per request. */
const received: string[] = []

before(async () => {
  pki = await createTestPki(['127.0.0.1'])
  const server = createServer(pki.certs['127.0.0.1'] as { cert: string; key: string }, async (req, res) => {
    const parts: Buffer[] = []
    for await (const c of req) parts.push(c as Buffer)
    const raw = Buffer.concat(parts)
    received.push((JSON.parse((req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw).toString()) as { password: string }).password)
    res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' })
    res.end(gzipSync(`{"token":"x","id":1,"token":"${RESPONSE_SECRET}"}`))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  origin = `https://127.0.0.1:${(server.address() as AddressInfo).port}`
  closeUpstream = async () => {
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
})
after(() => closeUpstream?.())

/**
 * The app: a plain JSON login that repeats the password key, then a gzip one whose first key is escaped;
 * returns what a server reads from each answer (JSON.parse, last key wins). Run as a file under the proxy,
 * imported in-process under the interceptor.
 */
const APP = `import { gzipSync } from 'node:zlib'
import { fileURLToPath } from 'node:url'
export async function login(origin, a, b, extra = {}) {
  const out = []
  for (const [body, gzip] of [['{"user":"u","password":"x","password":"' + a + '"}', false], ['{"pa\\u0073sword":"' + b + '","password":"y"}', true]]) {
    const headers = { 'content-type': 'application/json', ...(gzip ? { 'content-encoding': 'gzip' } : {}) }
    const res = await fetch(origin + '/login', { method: 'POST', headers, body: gzip ? gzipSync(body) : body, ...extra })
    out.push(res.status + ' ' + (await res.json()).token)
  }
  return out.join(',')
}
if (process.argv[1] === fileURLToPath(import.meta.url)) process.stdout.write(await login(...process.argv.slice(2)))
`
const appFile = join(work, 'login-app.mjs')

async function runApp(dispatcher: unknown, a: string, b: string): Promise<string> {
  await writeFile(appFile, APP)
  const { login } = (await import(appFile)) as { login: (origin: string, a: string, b: string, extra: object) => Promise<string> }
  return login(origin, a, b, { dispatcher })
}

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => (stdout += c))
  child.stderr.on('data', (c: Buffer) => (stderr += c))
  return once(child, 'exit').then(([code]) => ({ code: code as number | null, stdout, stderr }))
}

function capture() {
  const out: string[] = []
  const err: string[] = []
  return { io: { out: (t: string) => out.push(t), err: (t: string) => err.push(t) }, out, err }
}

/** No secret in the store's decoded LevelDB values and pieces, nor in an export of `trace`; scan exits 0. */
async function assertClean(storeDir: string, trace: string, secrets = SECRETS): Promise<void> {
  assert.deepEqual(await placesHolding(storeDir, secrets), [], 'decoded store content')
  const exported = join(work, `export-${trace}-${Math.random().toString(36).slice(2)}`)
  const ex = capture()
  assert.equal(await runCli(['export', trace, '--out', join(exported, `${trace}.trace.json`), '--store', storeDir], ex.io), 0, ex.err.join('\n'))
  assert.deepEqual(await placesHolding(exported, secrets), [], 'decoded export')
  const scan = capture()
  assert.equal(await runCli(['scan', storeDir, ...FLAGS], scan.io), 0, scan.out.join('\n') + scan.err.join('\n'))
}

test('interceptor: repeated and escaped keys, plain and gzip, request and response, are redacted at every occurrence', async () => {
  const storeDir = join(work, 'interceptor-store')
  const store = await openStore(storeDir)
  const upstream = new Agent({ connect: { ca: pki.caPem } })
  const rec = await install({ mode: 'record', trace: 'login', store, config: false, redaction: { bodyPaths: PATHS }, upstream, global: false })
  assert.equal(await runApp(rec.dispatcher, REQUEST_SECRET, ESCAPED_SECRET), `200 ${RESPONSE_SECRET},200 ${RESPONSE_SECRET}`, 'the app gets the real answer')
  await rec.close()
  await upstream.close()
  assert.deepEqual(received.slice(-2), [REQUEST_SECRET, 'y'], 'the upstream got what the app sent')

  const rep = await install({ mode: 'replay', trace: 'login', store, config: false, redaction: { bodyPaths: PATHS }, global: false })
  assert.equal(await runApp(rep.dispatcher, 'another', 'other'), '200 [REDACTED],200 [REDACTED]', 'strict replay matches on the redacted request')
  rep.assertDone()
  await rep.close()
  await store.close()
  await assertClean(storeDir, 'login')
})

test('proxy: tr-proxy record --redact-body-path stores no occurrence of the secrets; strict replay matches', async () => {
  const storeDir = join(work, 'proxy-store')
  await writeFile(appFile, APP)
  const app = [process.execPath, appFile, origin]
  const rec = await cli([
    'record',
    '--store',
    storeDir,
    '--trace',
    'login',
    '--upstream-ca',
    pki.caPath,
    ...FLAGS,
    '--',
    ...app,
    REQUEST_SECRET,
    ESCAPED_SECRET,
  ])
  assert.equal(rec.code, 0, rec.stderr)
  assert.equal(rec.stdout, `200 ${RESPONSE_SECRET},200 ${RESPONSE_SECRET}`)
  assert.deepEqual(received.slice(-2), [REQUEST_SECRET, 'y'])
  const rep = await cli(['replay', '--strict', '--store', storeDir, '--trace', 'login', ...FLAGS, '--', ...app, 'another', 'other'])
  assert.equal(rep.code, 0, rep.stderr)
  assert.equal(rep.stdout, '200 [REDACTED],200 [REDACTED]')
  await assertClean(storeDir, 'login')
})

const enc = new TextEncoder()
const JSON_TYPE: HeaderPairs = [['content-type', 'application/json']]

/** A trace as an old recording or a foreign file could hold it: the secrets where body-path redaction must look. */
function leakyTrace(name: string): Trace {
  const bodies = new Map<string, Uint8Array>()
  const keep = (bytes: Uint8Array) => {
    const b = bodyFromBytes(bytes)
    bodies.set(b.ref.digest, b.bytes)
    return b.ref
  }
  const exchange = (seq: number, request: string, response: Uint8Array, headers: HeaderPairs): Exchange => ({
    seq,
    request: { method: 'POST', url: `https://api.test/login/${seq}`, headers: JSON_TYPE, body: keep(enc.encode(request)) },
    outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers, trailers: [], body: keep(response) } },
    timing: { startMs: seq, headersMs: 1 },
  })
  return {
    meta: { name, format: 1 },
    exchanges: [
      exchange(0, `{"password":"[REDACTED]","password":"${REQUEST_SECRET}"}`, enc.encode('{"ok":true}'), JSON_TYPE),
      exchange(1, '{"q":1}', gzipSync(String.raw`{"token":"[REDACTED]","t\u006fken":"${RESPONSE_SECRET}"}`), [...JSON_TYPE, ['content-encoding', 'gzip']]),
      exchange(2, `{"password":"${ESCAPED_SECRET}`, enc.encode('{}'), JSON_TYPE),
    ],
    bodies,
  }
}

test('scan finds what JSON.parse hides: a repeated key, an escaped key, a comment, a body cut short (exit 77)', async () => {
  const storeDir = join(work, 'leaky-store')
  const store = await openStore(storeDir)
  await store.putTrace(leakyTrace('leaky'))
  const commented = leakyTrace('commented')
  const body = bodyFromBytes(enc.encode(`{"token":"[REDACTED]" /* "token": "${RESPONSE_SECRET}" */}`))
  commented.bodies.set(body.ref.digest, body.bytes)
  commented.exchanges = [{ ...(commented.exchanges[0] as Exchange), request: { ...(commented.exchanges[0] as Exchange).request, body: body.ref } }]
  await store.putTrace(commented)
  await store.close()
  const out = capture()
  assert.equal(await runCli(['scan', storeDir, '--json', ...FLAGS], out.io), EXIT_CODES[ErrorCodes.SECRET_FOUND])
  const text = out.out.join('')
  const findings = JSON.parse(text).error.details.findings as Array<{ trace: string; seq: number; side: string; where: string; kind: string }>
  assert.deepEqual(findings.map((f) => `${f.trace} #${f.seq} ${f.side} ${f.where}: ${f.kind}`).sort(), [
    'commented #0 request body comment at offset 22: "token": unredacted-body-path',
    'leaky #0 request body $.password (repeated key, occurrence 2): unredacted-body-path',
    'leaky #1 response body $.token (repeated key, occurrence 2): unredacted-body-path',
    'leaky #2 request body $.password: unredacted-body-path',
  ])
  for (const s of SECRETS) assert.equal(text.includes(s), false, 'the report masks what it found')
})

test('import of a trace file, import-har and fork redact what they store, at every occurrence', async () => {
  const leakyDir = join(work, 'source-store')
  const leaky = await openStore(leakyDir)
  await leaky.putTrace(leakyTrace('leaky'))
  await leaky.close()
  const file = join(work, 'leaky.trace.json')
  const har = join(work, 'leaky.har')
  assert.equal(await runCli(['export', 'leaky', '--out', file, '--store', leakyDir], capture().io), 0)
  assert.equal(await runCli(['export-har', 'leaky', '--out', har, '--store', leakyDir], capture().io), 0)
  assert.notDeepEqual(await placesHolding(join(work), [REQUEST_SECRET]), [], 'the files hold the secrets (else this test proves nothing)')

  const storeDir = join(work, 'imports-store')
  const imported = capture()
  assert.equal(await runCli(['import', file, '--as', 'from-file', '--store', storeDir, ...FLAGS], imported.io), 0, imported.err.join('\n'))
  assert.match(imported.out.join('\n'), /Imported .* as trace "from-file" \(3 exchanges\)\.\nRedacted credentials in 3 exchanges before storing/)
  const fromHar = capture()
  assert.equal(await runCli(['import-har', har, '--as', 'from-har', '--store', storeDir, ...FLAGS], fromHar.io), 0, fromHar.err.join('\n'))
  const patch = join(work, 'patch.json')
  await writeFile(patch, `{"token":"ok","token":"${RESPONSE_SECRET}"}`)
  const fork = capture()
  assert.equal(
    await runCli(['fork', 'from-file', '--to', 'forked', '--patch', `#0 body=@${patch}`, '--store', storeDir, ...FLAGS], fork.io),
    0,
    fork.err.join('\n'),
  )
  assert.match(fork.out.join('\n'), /Redacted credentials in 1 exchange before storing/)
  for (const trace of ['from-file', 'from-har', 'forked']) await assertClean(storeDir, trace)
})
