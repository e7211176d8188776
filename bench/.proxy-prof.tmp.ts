import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { openSession } from '../engine/index.ts'
import { loadCertificateAuthority, startProxy } from '../proxy/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { bodyFromBytes, type Exchange, TRACE_FORMAT_VERSION } from '../trace/index.ts'
const N = Number(process.env.N ?? 40000)
const BODY = Buffer.alloc(1024, 'x')
const body = bodyFromBytes(BODY)
const exchanges: Exchange[] = []
for (let i = 0; i < N; i++) exchanges.push({ seq: i, request: { method: 'GET', url: 'http://bench.test/kb', headers: [], body: null }, outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: [['content-type', 'application/octet-stream'], ['content-length', '1024']], body: body.ref, trailers: [] } }, timing: { startMs: 0, headersMs: 0 } })
const store = createMemoryStore()
await store.putTrace({ meta: { name: 't', format: TRACE_FORMAT_VERSION }, exchanges, bodies: new Map([[body.ref.digest, body.bytes]]) })
const session = await openSession({ mode: 'replay', trace: 't', store })
const proxy = await startProxy({ session, ca: await loadCertificateAuthority(mkdtempSync(join(tmpdir(), 'pp-'))) })
const child = spawn(process.execPath, [join(import.meta.dirname, 'proxy-bench.ts'), '--autocannon-child', JSON.stringify({ url: proxy.url, path: 'http://bench.test/kb', host: 'bench.test', amount: N })], { stdio: ['ignore', 'pipe', 'inherit'], execArgv: [] })
let out = ''
child.stdout.on('data', (c) => (out += c))
await once(child, 'exit')
console.log(out)
const s = await proxy.close()
console.log(s.ok)
