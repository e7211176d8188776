/**
 * Issue 31 item 7, `--durability fsync`: through `tr-proxy record`, each answer's end waits for its exchange's
 * synced group commit. A power cut cannot be staged here, so the syncs themselves are counted: strace attached to
 * the recording proxy counts fsync/fdatasync while a client sends requests one at a time (each its own group):
 * with fsync, at least one sync per request (small bodies and piece-sized ones); with the default, none while
 * requests flow (a recording's close syncs after). Both traces then read back whole.
 *
 * Needs strace and ptrace (Linux); skipped, saying so, where either is missing.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { ProxyAgent, request } from 'undici'
import { openStore } from '../store/index.ts'
import { tempDir } from './support/proxy-harness.ts'

const REQUESTS = 40
const root = fileURLToPath(new URL('..', import.meta.url))
const straceMissing = spawnSync('strace', ['-V']).status === 0 ? undefined : 'strace is not installed'

let upstream: string
let server: ReturnType<typeof createServer>

before(async () => {
  server = createServer((req, res) => {
    const n = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('n'))
    // Every fifth answer is piece-sized (stored as a piece file beside the database).
    const body = Buffer.alloc(n % 5 === 4 ? 40 * 1024 : 300, String(n % 10))
    req.resume()
    res.writeHead(200, { 'content-length': String(body.byteLength) })
    res.end(body)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  upstream = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
after(() => new Promise<void>((resolve) => server.close(() => resolve())))

function output(child: ChildProcess): () => string {
  let text = ''
  child.stdout?.on('data', (t: Buffer) => (text += t.toString()))
  child.stderr?.on('data', (t: Buffer) => (text += t.toString()))
  return () => text
}

async function until(what: string, check: () => boolean, text: () => string): Promise<void> {
  const deadline = Date.now() + 60_000
  while (!check()) {
    assert.ok(Date.now() < deadline, `${what} within 60 s: ${text().slice(-1500)}`)
    await delay(20)
  }
}

/** Records REQUESTS requests at `durability` with strace attached meanwhile; returns the syncs it counted. */
async function syncsWhileRecording(durability: 'write' | 'fsync'): Promise<{ syncs: number; stored: number }> {
  const dir = join(tempDir('tr-durability-'), 'store')
  const proxy = spawn(process.execPath, [join(root, 'bin/tr-proxy.js'), 'record', '--store', dir, '--trace', 't', '--port', '0', '--durability', durability], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const proxyText = output(proxy)
  after(() => proxy.kill('SIGKILL'))
  await until('tr-proxy record listening', () => /listening on http:\/\/\S+/.test(proxyText()), proxyText)
  const url = (/listening on (http:\/\/\S+)/.exec(proxyText()) as RegExpExecArray)[1] as string
  const log = join(dir, '..', 'strace.log')
  const strace = spawn('strace', ['-f', '-e', 'trace=fsync,fdatasync', '-o', log, '-p', String(proxy.pid)], { stdio: ['ignore', 'ignore', 'pipe'] })
  const straceText = output(strace)
  after(() => strace.kill('SIGKILL'))
  await until('strace attached', () => /attached/.test(straceText()) || strace.exitCode !== null, straceText)
  assert.equal(strace.exitCode, null, `strace could not attach: ${straceText()}`)
  await delay(200)
  const agent = new ProxyAgent({ uri: url })
  for (let n = 0; n < REQUESTS; n++) {
    const res = await request(`${upstream}/item?n=${n}`, { dispatcher: agent })
    assert.equal(res.statusCode, 200)
    await res.body.arrayBuffer()
  }
  await agent.close()
  strace.kill('SIGINT')
  await once(strace, 'exit')
  proxy.kill('SIGINT')
  const [code] = await once(proxy, 'exit')
  assert.equal(code, 0, proxyText())
  const syncs = readFileSync(log, 'utf8')
    .split('\n')
    .filter((l) => /\b(fsync|fdatasync)\(/.test(l)).length
  const store = await openStore(dir, { readOnly: true })
  const stored = (await store.readTrace('t')).exchanges.length
  await store.close()
  return { syncs, stored }
}

test('--durability fsync syncs before each answer ends; the default does not sync while requests flow', { skip: straceMissing }, async (t) => {
  const fsync = await syncsWhileRecording('fsync')
  const plain = await syncsWhileRecording('write')
  t.diagnostic(`${REQUESTS} sequential requests: ${fsync.syncs} syncs with --durability fsync, ${plain.syncs} with the default`)
  assert.equal(fsync.stored, REQUESTS)
  assert.equal(plain.stored, REQUESTS)
  assert.ok(fsync.syncs >= REQUESTS, `${fsync.syncs} syncs for ${REQUESTS} requests answered one at a time`)
  assert.ok(plain.syncs <= 2, `${plain.syncs} syncs while the default recorded`)
})

test('--durability refuses a level it does not know before anything opens', async () => {
  const dir = join(tempDir('tr-durability-'), 'store')
  const r = spawnSync(process.execPath, [join(root, 'bin/tr-proxy.js'), 'record', '--store', dir, '--durability', 'sync', '--', 'true'], {
    cwd: root,
    encoding: 'utf8',
  })
  assert.notEqual(r.status, 0)
  assert.match(r.stderr, /durability/)
  assert.match(r.stderr, /fsync/)
})
