/**
 * Secrets never reach the disk: record requests carrying a planted secret in every credential header
 * into a LevelDB store, then search it decoded with the scanner `tr-proxy scan` uses (LevelDB may compress
 * blocks, so a byte search alone can miss what is there) and, as well, every byte the store directory holds.
 */
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { EXIT_CODES, runCli } from 'tool-replay/cli'
import { scanTrace } from 'tool-replay/engine'
import { install } from 'tool-replay/interceptor'
import { openStore, writeTraceFile } from 'tool-replay/store'
import { ErrorCodes, type Trace } from 'tool-replay/trace'
import { filesUnder } from './support/files-under.ts'

const SECRET = 'sk-planted-7f3c9a1e5b2d4c6e8a0f'
/**
 * Sent in a request body, which is not redacted by default, and shaped like an AWS access key: proves the
 * byte search and the scanner both see stored data (the scanner must report it, and nothing else).
 */
const CONTROL = 'AKIACONTROL7MARKER93'
/** The one finding a clean store has: the control. */
const ONLY_CONTROL = ['#2 request body at offset 0: aws-access-key']

test('Authorization, x-api-key, cookie and set-cookie secrets are not stored anywhere in the store directory', async (t) => {
  const server = http.createServer((req, res) => {
    // Echo what arrived (without the secret) so the test can check the secret did reach the server live.
    const gotSecret = [req.headers.authorization, req.headers['x-api-key'], req.headers.cookie].every((v) => String(v).includes(SECRET))
    res.setHeader('set-cookie', [`session=${SECRET}; Path=/; HttpOnly`, `refresh=${SECRET}-r; Path=/`])
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify({ gotSecret }))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => server.close())
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/things`
  const dir = await mkdtemp(join(tmpdir(), 'tr-redaction-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const storeDir = join(dir, 'store')
  const headers = { authorization: `Bearer ${SECRET}`, 'x-api-key': SECRET, cookie: `session=${SECRET}; other=1`, 'content-type': 'application/json' }

  let store = await openStore(storeDir)
  const rec = await install({ mode: 'record', trace: 'secrets', store })
  const live = await fetch(url, { method: 'POST', headers, body: '{"q":1}' })
  assert.deepEqual(await live.json(), { gotSecret: true })
  assert.ok(
    live.headers.getSetCookie().every((c) => c.includes(SECRET)),
    'the app itself sees the real cookies',
  )
  const get = await fetch(url, { headers })
  await get.text()
  await (await fetch(url, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: CONTROL })).text()
  await rec.close()
  await store.close()

  const hits: string[] = []
  let controlHits = 0
  let files = 0
  for await (const file of filesUnder(storeDir)) {
    files++
    const bytes = await readFile(file)
    if (bytes.includes(SECRET)) hits.push(file)
    if (bytes.includes(CONTROL)) controlHits++
  }
  assert.ok(files > 0, 'the store wrote files')
  assert.ok(controlHits > 0, 'the search finds an unredacted value, so it would find the secret too')
  assert.deepEqual(hits, [], 'no file in the store contains the secret')

  // LevelDB may compress blocks, so a raw byte search alone could miss a repeated value: search the decoded
  // trace (headers, URL, bodies decompressed, JSON walked) with the scanner, and an export with `tr-proxy scan`.
  store = await openStore(storeDir)
  const findings = (trace: Trace) => scanTrace(trace).map((f) => `#${f.seq} ${f.side} ${f.where}: ${f.kind}`)
  const stored = await store.readTrace('secrets')
  assert.deepEqual(findings(stored), ONLY_CONTROL, 'the decoded trace holds no secret; the scanner sees stored data')
  const exported = join(dir, 'exported', 'secrets.trace.json')
  await writeTraceFile(exported, stored)
  for await (const file of filesUnder(join(dir, 'exported'))) assert.equal((await readFile(file)).includes(SECRET), false, file)
  const out: string[] = []
  assert.equal(await runCli(['scan', exported, '--json'], { out: (t) => out.push(t), err: () => {} }), EXIT_CODES[ErrorCodes.SECRET_FOUND])
  const reported = JSON.parse(out.join('')).error.details.findings as Array<{ seq: number; side: string; where: string; kind: string }>
  assert.deepEqual(
    reported.map((f) => `#${f.seq} ${f.side} ${f.where}: ${f.kind}`),
    ONLY_CONTROL,
  )

  // The redacted recording still replays, and what the app did during replay (recordAs) holds no secret either.
  const rep = await install({ mode: 'replay', trace: 'secrets', store, recordAs: 'secrets-observed' })
  const replayed = await fetch(url, { method: 'POST', headers, body: '{"q":1}' })
  assert.deepEqual(await replayed.json(), { gotSecret: true })
  assert.deepEqual(replayed.headers.getSetCookie(), ['session=[REDACTED]; Path=/; HttpOnly', 'refresh=[REDACTED]; Path=/'])
  await (await fetch(url, { headers })).text()
  await (await fetch(url, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: CONTROL })).text()
  rep.assertDone()
  await rep.close()
  assert.deepEqual(findings(await store.readTrace('secrets-observed')), ONLY_CONTROL, 'the record-as trace holds no secret')
  await store.close()
})
