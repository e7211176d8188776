/**
 * Secrets never reach the disk on the proxy path either: a client sends credentials through CONNECT + MITM,
 * and the store directory, the decoded trace (searched with the scanner `tr-proxy scan` uses) and an exported
 * file hold no secret.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { readFile } from 'node:fs/promises'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { test } from 'node:test'
import { ProxyAgent, request } from 'undici'
import { EXIT_CODES, runCli } from '../cli/index.ts'
import { scanTrace } from '../engine/index.ts'
import { openStore, writeTraceFile } from '../store/index.ts'
import { ErrorCodes, type Trace } from '../trace/index.ts'
import { filesUnder } from './support/files-under.ts'
import { startTestProxy, tempDir } from './support/proxy-harness.ts'
import { createTestPki, startUpstream } from './support/proxy-upstream.ts'

const SECRET = 'sk-proxy-planted-51c0e9d2a7b3'
/** An AWS-shaped value in a header nothing redacts: the scanner must find it (and only it), so it can see the trace. */
const CONTROL = 'AKIACONTROL7MARKER42'
const ONLY_CONTROL = ['#0 request header x-control: aws-access-key']

test('proxy recording: Authorization, x-api-key, cookie and api_key query secrets are not stored', async (t) => {
  const pki = await createTestPki(['api.test'])
  const upstream = await startUpstream(pki.certs['api.test'])
  t.after(() => upstream.close())
  const dir = tempDir('tr-proxy-redaction-')
  const storeDir = join(dir, 'store')
  const store = await openStore(storeDir)
  const proxy = await startTestProxy({
    store,
    storeDir,
    mode: 'record',
    trace: 'secrets',
    upstreamCaPem: pki.caPem,
    resolve: { 'api.test': { host: '127.0.0.1', port: upstream.port } },
  })
  const agent = new ProxyAgent({ uri: proxy.url, requestTls: { ca: proxy.ca.certPem } })
  const res = await request(`https://api.test/hello?api_key=${SECRET}`, {
    dispatcher: agent,
    headers: { authorization: `Bearer ${SECRET}`, 'x-api-key': SECRET, cookie: `sid=${SECRET}`, 'x-control': CONTROL },
  })
  await res.body.text()
  assert.equal(res.statusCode, 200)
  await agent.close()
  const summary = await proxy.close()
  assert.equal(summary.recorded, 1)

  const stored = await store.readTrace('secrets')
  assert.deepEqual(
    scanTrace(stored).map((f) => `#${f.seq} ${f.side} ${f.where}: ${f.kind}`),
    ONLY_CONTROL,
    'the decoded trace holds no secret',
  )
  await writeTraceFile(join(dir, 'export', 'secrets.trace.json'), stored as Trace)
  await store.close()
  const out: string[] = []
  assert.equal(await runCli(['scan', storeDir, '--json'], { out: (t) => out.push(t), err: () => {} }), EXIT_CODES[ErrorCodes.SECRET_FOUND])
  assert.deepEqual(
    (JSON.parse(out.join('')).error.details.findings as Array<{ seq: number; side: string; where: string; kind: string }>).map(
      (f) => `#${f.seq} ${f.side} ${f.where}: ${f.kind}`,
    ),
    ONLY_CONTROL,
    'tr-proxy scan reads the LevelDB values through the store API: the same single finding',
  )
  let files = 0
  for (const root of [storeDir, join(dir, 'export')]) {
    for await (const file of filesUnder(root)) {
      files++
      assert.equal((await readFile(file)).includes(SECRET), false, `${file} holds the secret`)
    }
  }
  assert.ok(files > 2, 'the store and the export wrote files')
})

test('tr-proxy record --max-body-bytes is the session limit too: a JSON response over it is not stored when a body path must be redacted', async (t) => {
  // 8 KiB of JSON: under the default 64 MiB, over the 4 KiB the flag asks for.
  const json = JSON.stringify({ token: SECRET, pad: 'x'.repeat(8 * 1024) })
  const upstream = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(json))
  upstream.listen(0, '127.0.0.1')
  await once(upstream, 'listening')
  t.after(() => upstream.close())
  const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/big.json`
  // Through the proxy the wrapper names (HTTP_PROXY), in absolute form, on an agent of its own (Node's global
  // agent may follow NODE_USE_ENV_PROXY itself): a plain forward-proxy request on every Node.
  const client = `const http = require('node:http'); const p = new URL(process.env.HTTP_PROXY); http.get({ host: p.hostname, port: p.port, path: ${JSON.stringify(url)}, agent: new http.Agent() }, (r) => r.resume().on('end', () => process.exit(r.statusCode === 200 ? 0 : 1)))`
  const storeDir = join(tempDir('tr-proxy-body-limit-'), 'store')
  const err: string[] = []
  const args = ['record', '--store', storeDir, '--trace', 'capped', '--max-body-bytes', '4096', '--redact-body-path', '$.token']
  assert.equal(await runCli([...args, '--', process.execPath, '-e', client], { out: () => {}, err: (l) => err.push(l) }), 0, err.join('\n'))
  const store = await openStore(storeDir)
  const stored = await store.readTrace('capped')
  await store.close()
  const outcome = stored.exchanges[0]?.outcome
  assert.equal(outcome?.kind, 'error', 'the body was stored: the session held it whole under its own 64 MiB limit, not the flag')
  assert.equal(outcome.kind === 'error' && outcome.error.code, 'TR_BODY_NOT_REDACTED')
  assert.match(outcome.kind === 'error' ? outcome.error.message : '', /over 4096 bytes/)
})
