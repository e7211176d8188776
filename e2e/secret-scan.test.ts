/**
 * Secrets in compressed bodies never reach the disk, on either capture path, and `tr-proxy scan` proves it on
 * decoded content (issue 8, "Why" 5): an app POSTs a gzip-compressed JSON body holding an API key at
 * `$.api_key` and gets a gzip-compressed JSON answer holding a token at `$.access_token`.
 * - Recorded through the interceptor (settings file) and the proxy (CLI flags, then the settings file via
 *   --config), the store and the exports scan clean, and the recordings still replay a request with a
 *   different key, compressed again (identity is computed on the decoded, redacted body).
 * - Recorded without body-path redaction, the secret is in the store, compressed twice (gzip inside a
 *   LevelDB block): a byte search of the store directory misses it, `tr-proxy scan` finds it in the store,
 *   in an exported file and in an emitted case, and exits 77 (TR_SECRET_FOUND) naming the trace, exchange and JSON path.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { createServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { gunzipSync, gzipSync } from 'node:zlib'
import { Agent } from 'undici'
import { EXIT_CODES, runCli } from '../cli/index.ts'
import { scanTrace } from '../engine/index.ts'
import { install } from '../interceptor/index.ts'
import { jsonExchange } from '../store/fixtures/exchanges.ts'
import { openStore, writeTraceFile } from '../store/index.ts'
import { bodyBytes, ErrorCodes, type Exchange } from '../trace/index.ts'
import { filesUnder } from './support/files-under.ts'
import { tempDir } from './support/proxy-harness.ts'
import { createTestPki } from './support/proxy-upstream.ts'

const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
const KEY = 'sk-gzip-planted-request-9d8c7b6a5f4e3d2c'
const OTHER_KEY = 'sk-gzip-another-request-1f2e3d4c5b6a7980'
const TOKEN = 'sk-gzip-planted-response-0a1b2c3d4e5f6a7b'
const PATHS = ['$.api_key', '$.access_token']
const work = tempDir('tr-secret-scan-')
let pki: Awaited<ReturnType<typeof createTestPki>>
let url: string
let close: () => Promise<void>
const seen: boolean[] = []

before(async () => {
  pki = await createTestPki(['127.0.0.1'])
  const server = createServer(pki.certs['127.0.0.1'] as { cert: string; key: string }, async (req, res) => {
    const parts: Buffer[] = []
    for await (const c of req) parts.push(c as Buffer)
    const raw = Buffer.concat(parts)
    const json = JSON.parse((req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw).toString()) as { api_key?: string }
    // What the upstream really got: the app's key, whatever is stored.
    seen.push(json.api_key === KEY || json.api_key === OTHER_KEY)
    res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' })
    res.end(gzipSync(JSON.stringify({ access_token: TOKEN, token_type: 'bearer', id: 1 })))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/v1/token`
  close = async () => {
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
})
after(() => close?.())

/** The app: POST a gzip JSON body with `key`, print what the (gzip) answer says. */
const APP = `const [url, key] = process.argv.slice(1)
const { gzipSync } = await import('node:zlib')
const body = gzipSync(JSON.stringify({ model: 'm', api_key: key, q: 'hello' }))
const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body, ...(globalThis.dispatcher ? { dispatcher: globalThis.dispatcher } : {}) })
const j = await res.json()
process.stdout.write(res.status + ' token=' + j.access_token)`

async function appInProcess(dispatcher: unknown, key: string): Promise<string> {
  const body = gzipSync(JSON.stringify({ model: 'm', api_key: key, q: 'hello' }))
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body, dispatcher } as RequestInit)
  const j = (await res.json()) as { access_token: string }
  return `${res.status} token=${j.access_token}`
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

const requestBody = (trace: Awaited<ReturnType<Awaited<ReturnType<typeof openStore>>['readTrace']>>, x: Exchange) =>
  new TextDecoder().decode(bodyBytes(trace, x.request.body as NonNullable<Exchange['request']['body']>))

test('interceptor: a gzip request and response with secrets at redacted paths are stored decoded and redacted; scan finds nothing; replay still matches', async () => {
  const config = join(work, 'config.json')
  await writeFile(config, JSON.stringify({ redaction: { bodyPaths: PATHS } }))
  const storeDir = join(work, 'interceptor-store')
  const store = await openStore(storeDir)
  const upstream = new Agent({ connect: { ca: pki.caPem } })
  const rec = await install({ mode: 'record', trace: 'gz', store, config, upstream, global: false })
  assert.equal(await appInProcess(rec.dispatcher, KEY), `200 token=${TOKEN}`, 'the app itself sees the real token')
  await rec.close()
  assert.equal(seen.at(-1), true, 'the upstream got the real key')

  const trace = await store.readTrace('gz')
  const x = trace.exchanges[0] as Exchange
  assert.match(requestBody(trace, x), /^\{"model":"m","api_key":"\[REDACTED\]","q":"hello"\}$/, 'stored decoded, redacted only at the path')
  assert.equal(
    x.request.headers.some(([k]) => k === 'content-encoding'),
    false,
  )
  assert.deepEqual(scanTrace(trace, { redaction: { bodyPaths: PATHS } }), [])
  const scan = capture()
  assert.equal(await runCli(['scan', storeDir, '--config', config], scan.io), 0, scan.err.join('\n'))
  assert.match(scan.out.join('\n'), /Scanned 1 trace \(1 exchange\) in store .*: no values that look like credentials/)
  const exported = join(work, 'interceptor-export')
  await writeTraceFile(join(exported, 'gz.trace.json'), trace)
  assert.equal(await runCli(['scan', exported, '--config', config], capture().io), 0)

  const rep = await install({ mode: 'replay', trace: 'gz', store, config, global: false })
  assert.equal(await appInProcess(rep.dispatcher, OTHER_KEY), '200 token=[REDACTED]')
  rep.assertDone()
  await rep.close()
  await upstream.close()
  await store.close()
})

test('proxy: --redact-body-path (and the same settings through --config) keep both secrets out; scan finds nothing; strict replay matches', async () => {
  const storeDir = join(work, 'proxy-store')
  const flags = PATHS.flatMap((p) => ['--redact-body-path', p])
  const app = [process.execPath, '--input-type=module', '-e', APP, url]
  const rec = await cli(['record', '--store', storeDir, '--trace', 'gz', '--upstream-ca', pki.caPath, ...flags, '--', ...app, KEY])
  assert.equal(rec.code, 0, rec.stderr)
  assert.equal(rec.stdout, `200 token=${TOKEN}`)
  assert.equal(seen.at(-1), true, 'the upstream got the real key')

  const scan = await cli(['scan', storeDir, ...flags])
  assert.equal(scan.code, 0, scan.stdout + scan.stderr)
  assert.match(scan.stdout, /Scanned 1 trace \(1 exchange\)/)
  const store = await openStore(storeDir, { create: false })
  const trace = await store.readTrace('gz')
  await store.close()
  assert.match(requestBody(trace, trace.exchanges[0] as Exchange), /"api_key":"\[REDACTED\]"/)

  const config = join(work, 'proxy-config.json')
  await writeFile(config, JSON.stringify({ redaction: { bodyPaths: PATHS } }))
  const rep = await cli(['replay', '--strict', '--store', storeDir, '--trace', 'gz', '--config', config, '--', ...app, OTHER_KEY])
  assert.equal(rep.code, 0, rep.stderr)
  assert.equal(rep.stdout, '200 token=[REDACTED]')
})

test('a planted secret: grep over the store misses it (gzip inside LevelDB), scan finds it in the store, an export and a case, exit 77', async () => {
  const storeDir = join(work, 'planted-store')
  const store = await openStore(storeDir)
  const upstream = new Agent({ connect: { ca: pki.caPem } })
  // No body-path redaction: the key goes into the store inside the compressed body, as it did before.
  const rec = await install({ mode: 'record', trace: 'leak', store, config: false, upstream, global: false })
  await appInProcess(rec.dispatcher, KEY)
  await rec.close()
  await upstream.close()
  await store.close()

  let files = 0
  for await (const file of filesUnder(storeDir)) {
    files++
    assert.equal((await readFile(file)).includes(KEY), false, `${file}: a byte search would have found it`)
  }
  assert.ok(files > 0)

  const expectFindings = (text: string, trace = 'leak') => {
    const error = JSON.parse(text).error as {
      code: string
      details: { findings: Array<{ trace: string; seq: number; side: string; where: string; kind: string; preview: string }> }
    }
    assert.equal(error.code, ErrorCodes.SECRET_FOUND)
    const findings = error.details.findings.map((f) => `${f.trace} #${f.seq} ${f.side} ${f.where}: ${f.kind}`)
    assert.deepEqual(findings, [`${trace} #0 request body $.api_key: openai-key`, `${trace} #0 response body $.access_token: openai-key`])
    assert.equal(text.includes(KEY) || text.includes(TOKEN), false, 'the report masks what it found')
  }
  const inStore = capture()
  assert.equal(await runCli(['scan', storeDir, '--json'], inStore.io), EXIT_CODES[ErrorCodes.SECRET_FOUND])
  expectFindings(inStore.out.join(''))
  const text = capture()
  assert.equal(await runCli(['scan', '--store', storeDir], text.io), EXIT_CODES[ErrorCodes.SECRET_FOUND])
  assert.match(text.out.join('\n'), /: trace "leak" #0 request body \$\.api_key: openai-key sk-gzi…2c \(40 chars\)/)
  assert.match(text.err.join('\n'), /error TR_SECRET_FOUND: Found 2 values that look like credentials in /)

  const exported = join(work, 'planted-export', 'leak.trace.json')
  assert.equal(await runCli(['export', 'leak', '--out', exported, '--store', storeDir], capture().io), 0)
  const inFile = capture()
  assert.equal(await runCli(['scan', exported, '--json'], inFile.io), EXIT_CODES[ErrorCodes.SECRET_FOUND])
  expectFindings(inFile.out.join(''))

  const caseRoot = join(work, 'cases')
  await mkdir(caseRoot, { recursive: true })
  await writeFile(join(work, 'app.mjs'), 'export async function run() { return "ok" }\n')
  const emit = capture()
  const args = [
    'emit-test',
    'leak',
    '--store',
    storeDir,
    '--out',
    caseRoot,
    '--name',
    'leak-case',
    '--runner',
    join(work, 'app.mjs#run'),
    '--expect-json',
    '"ok"',
    '--no-verify',
  ]
  assert.equal(await runCli(args, emit.io), 0, emit.err.join('\n'))
  const inCase = capture()
  assert.equal(await runCli(['scan', join(caseRoot, 'leak-case'), '--json'], inCase.io), EXIT_CODES[ErrorCodes.SECRET_FOUND])
  expectFindings(inCase.out.join(''), 'leak-case')
})

test('a recording that never completed is scanned too (the newest of its name)', async () => {
  const storeDir = join(work, 'unfinished-store')
  const store = await openStore(storeDir)
  const rec = await store.beginTrace({ name: 'unfinished', format: 1 })
  const { exchange, bodies } = jsonExchange(0, 1, KEY)
  await rec.append(exchange, bodies)
  // Never closed: listed as recording (this process is alive) or partial (after it dies).
  const out = capture()
  assert.equal(await runCli(['scan', storeDir, '--json'], out.io), EXIT_CODES[ErrorCodes.SECRET_FOUND])
  const findings = JSON.parse(out.out.join('')).error.details.findings as Array<{ trace: string; where: string; kind: string }>
  assert.deepEqual(
    findings.map((f) => `${f.trace} ${f.where} ${f.kind}`),
    ['unfinished body $.tag openai-key'],
  )
  await store.close()
})
