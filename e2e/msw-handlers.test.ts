/**
 * `tr-proxy export-msw` end to end: a workload records real traffic (a local server, a refused port, a
 * connection cut mid-body) through the interceptor into LevelDB; the trace is exported as MSW handlers;
 * with the server stopped, the same workload runs against msw's `setupServer` (msw 3, the devDependency,
 * and msw 2 through the `msw2` alias) and must observe exactly what it observed live.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { pathToFileURL } from 'node:url'
import { gzipSync } from 'node:zlib'
import { runCli } from 'tool-replay/cli'
import { Redactor } from 'tool-replay/engine'
import { install } from 'tool-replay/interceptor'
import { openStore } from 'tool-replay/store'
import type { Trace } from 'tool-replay/trace'

const ROOT = new URL('../', import.meta.url).pathname
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding'])
const GZIPPED = gzipSync(Buffer.from('{"compressed":true,"text":"✓ gzip"}'))
const BLOB = Buffer.from(Array.from({ length: 300 }, (_, i) => (i * 31) % 256))

/** The site the workload talks to; deterministic except `date` (recorded, so replayed as recorded). */
async function startSite(): Promise<{ url: string; refused: string; close(): Promise<void> }> {
  let counter = 0
  const server = http.createServer((req, res) => {
    const body: Buffer[] = []
    req.on('data', (c: Buffer) => body.push(c))
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x')
      const text = Buffer.concat(body).toString('latin1')
      if (url.pathname === '/v1/items') {
        res.setHeader('set-cookie', ['a=1; Path=/', 'b=2; HttpOnly'])
        res.writeHead(200, 'Fine', { 'content-type': 'application/json', 'x-query': url.search })
        res.end('{"items":[1,2]}')
      } else if (url.pathname === '/v1/chat') {
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ echo: JSON.parse(text).prompt }))
      } else if (url.pathname === '/counter') {
        res.writeHead(200, { 'content-type': 'text/plain' })
        res.end(`count ${++counter}`)
      } else if (url.pathname === '/gzip') {
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': GZIPPED.byteLength })
        res.end(GZIPPED)
      } else if (url.pathname === '/blob') {
        res.writeHead(200, { 'content-type': 'application/octet-stream' })
        res.end(BLOB)
      } else if (url.pathname === '/v1/models/gemini:generate') {
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end('{"path":"with a colon"}')
      } else if (url.pathname === '/upload') {
        const type = req.headers['content-type'] ?? ''
        res.writeHead(201, { 'content-type': 'text/plain' })
        res.end(`${type.split(';')[0]} ${text.includes('hello.txt') ? 'with file' : 'no file'}`)
      } else if (url.pathname === '/v1/items/1' && req.method === 'DELETE') {
        res.writeHead(204)
        res.end()
      } else if (url.pathname === '/cut') {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' })
        res.write('{"half":')
        setTimeout(() => res.socket?.destroy(), 20)
      } else {
        res.writeHead(404, { 'content-type': 'text/plain' })
        res.end('missing')
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const closed = http.createServer()
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
  const refusedPort = (closed.address() as AddressInfo).port
  await new Promise<void>((resolve) => closed.close(() => resolve()))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    refused: `http://127.0.0.1:${refusedPort}`,
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

type Observation = { status: number; statusText: string; headers: Array<[string, string]>; body: string } | { failed: true }

/** What an app sees: status, headers (hop-by-hop aside), body bytes (base64), or a failure at any stage. */
async function observe(input: string, init?: RequestInit): Promise<Observation> {
  try {
    const res = await fetch(input, init)
    const body = Buffer.from(await res.arrayBuffer()).toString('base64')
    const headers: Array<[string, string]> = []
    res.headers.forEach((value, name) => {
      if (!HOP_BY_HOP.has(name)) headers.push([name, value])
    })
    return { status: res.status, statusText: res.statusText, headers, body }
  } catch {
    return { failed: true }
  }
}

/** The app: every kind of exchange, in a fixed order. */
async function workload(site: { url: string; refused: string }): Promise<Observation[]> {
  const json = { 'content-type': 'application/json' }
  const form = new FormData()
  form.append('note', 'hi')
  form.append('file', new Blob(['hello']), 'hello.txt')
  return [
    await observe(`${site.url}/v1/items?b=2&a=1`),
    await observe(`${site.url}/v1/chat`, { method: 'POST', headers: json, body: '{"prompt":"one"}' }),
    await observe(`${site.url}/v1/chat`, { method: 'POST', headers: json, body: '{"prompt":"two"}' }),
    await observe(`${site.url}/counter`),
    await observe(`${site.url}/counter`),
    await observe(`${site.url}/gzip`),
    await observe(`${site.url}/blob`),
    await observe(`${site.url}/v1/models/gemini:generate`),
    await observe(`${site.url}/upload`, { method: 'POST', body: form }),
    await observe(`${site.url}/v1/items/1`, { method: 'DELETE' }),
    await observe(`${site.url}/nothing-here`),
    await observe(`${site.url}/cut`),
    await observe(`${site.refused}/down`),
  ]
}

/** The live observation as the trace holds it: credentials redacted (Set-Cookie values here). */
function asRecorded(o: Observation): Observation {
  return 'failed' in o ? o : { ...o, headers: new Redactor().headers(o.headers) }
}

let dir: string
let site: Awaited<ReturnType<typeof startSite>>
let live: Observation[]
let trace: Trace
let handlersFile: string

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tr-msw-'))
  const storeDir = join(dir, 'store')
  site = await startSite()
  const store = await openStore(storeDir)
  const tr = await install({ mode: 'record', trace: 'msw', store })
  try {
    live = await workload(site)
  } finally {
    await tr.close()
  }
  trace = await store.readTrace('msw')
  await store.close()
  await site.close() // from here on nothing answers on the site's port
  handlersFile = join(dir, 'handlers.ts')
  const out: string[] = []
  const err: string[] = []
  const code = await runCli(['export-msw', 'msw', '--out', handlersFile, '--store', storeDir], { out: (t) => out.push(t), err: (t) => err.push(t) })
  assert.equal(code, 0, err.join('\n'))
  assert.match(out.join('\n'), /Wrote MSW handlers for trace "msw" \(13 exchanges\)/)
})
after(() => rm(dir, { recursive: true, force: true }))

/** A folder where `msw` is the given installed package, holding the generated handlers and a server module. */
async function mswProject(pkg: 'msw' | 'msw2'): Promise<string> {
  const project = join(dir, pkg)
  await mkdir(join(project, 'node_modules'), { recursive: true })
  await symlink(join(ROOT, 'node_modules', pkg), join(project, 'node_modules', 'msw'), 'dir')
  await writeFile(join(project, 'handlers.ts'), await readFile(handlersFile))
  await writeFile(join(project, 'server.ts'), "export { setupServer } from 'msw/node'\n")
  await writeFile(join(project, 'package.json'), '{ "type": "module" }\n')
  return project
}

describe('export-msw: generated handlers reproduce the trace under msw setupServer', () => {
  test('the live run recorded what the test expects (sanity of the recording itself)', () => {
    assert.equal(trace.exchanges.length, 13)
    assert.deepEqual(live.at(-1), { failed: true })
    assert.deepEqual(live.at(-2), { failed: true }, 'the cut body fails the live read')
    assert.equal((live[3] as { body: string }).body, Buffer.from('count 1').toString('base64'))
  })

  for (const pkg of ['msw', 'msw2'] as const) {
    test(`${pkg}: the workload observes exactly what it observed live, with the site stopped`, async () => {
      const project = await mswProject(pkg)
      const version = JSON.parse(await readFile(join(project, 'node_modules', 'msw', 'package.json'), 'utf8')).version as string
      assert.match(version, pkg === 'msw' ? /^3\./ : /^2\./)
      const { createHandlers } = (await import(pathToFileURL(join(project, 'handlers.ts')).href)) as { createHandlers(): unknown[] }
      const { setupServer } = (await import(pathToFileURL(join(project, 'server.ts')).href)) as {
        setupServer(...h: unknown[]): { listen(o: object): void; close(): void; resetHandlers(...h: unknown[]): void }
      }
      const server = setupServer(...createHandlers())
      server.listen({ onUnhandledRequest: 'error' })
      try {
        const replayed = await workload(site)
        for (const [i, obs] of replayed.entries()) assert.deepEqual(obs, asRecorded(live[i] as Observation), `request #${i} under msw ${version}`)
        // The sequence is strict: a third counter call is not the second answer again.
        const third = await fetch(`${site.url}/counter`)
        // ... it gets the refusal the capture paths give (capture/refusal.ts), which SDKs do not retry.
        assert.equal(third.status, 403)
        assert.equal(third.statusText, 'Tool Replay Refused')
        assert.equal(third.headers.get('x-tool-replay-error'), 'TR_REPLAY_EXHAUSTED')
        assert.equal(third.headers.get('x-should-retry'), 'false')
        const refusal = (await third.json()) as { error: { code: string; message: string } }
        assert.equal(refusal.error.code, 'TR_REPLAY_EXHAUSTED')
        assert.match(
          refusal.error.message,
          /^TR_REPLAY_EXHAUSTED: Failed to replay "GET http:\/\/127\.0\.0\.1:\d+\/counter": trace "msw" recorded this request 2 time\(s\) \(#0 to #1\) and this is #2/,
        )
        // A body the trace never saw falls through to onUnhandledRequest ('error' fails the request).
        const other = await observe(`${site.url}/v1/chat`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"prompt":"three"}' })
        assert.deepEqual(other, { failed: true })
        // node:http clients get the wire bytes and decode them themselves.
        server.resetHandlers(...createHandlers())
        const raw = await new Promise<{ encoding: string | undefined; bytes: Buffer }>((resolve, reject) => {
          http
            .get(`${site.url}/gzip`, (res) => {
              const parts: Buffer[] = []
              res.on('data', (c: Buffer) => parts.push(c))
              res.on('end', () => resolve({ encoding: res.headers['content-encoding'], bytes: Buffer.concat(parts) }))
            })
            .on('error', reject)
        })
        assert.equal(raw.encoding, 'gzip')
        assert.ok(raw.bytes.equals(GZIPPED), 'node:http gets the recorded gzip bytes')
      } finally {
        server.close()
      }
    })
  }

  // Type checking does not depend on the Node version running it; once (on Node 22) keeps CI short.
  const typeCheck = process.versions.node.startsWith('22.') ? {} : { skip: 'type checking does not depend on the Node version: it runs on Node 22' }
  test('the generated module type-checks as strict, erasable TypeScript against msw 3 and msw 2', typeCheck, async () => {
    for (const pkg of ['msw', 'msw2'] as const) {
      const project = join(dir, pkg) // made by the tests above
      const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')
      const flags = [
        '--noEmit',
        '--strict',
        '--erasableSyntaxOnly',
        '--verbatimModuleSyntax',
        '--module',
        'nodenext',
        '--target',
        'es2023',
        '--lib',
        'es2023,dom',
      ]
      const r = spawnSync(
        process.execPath,
        [tsc, ...flags, '--skipLibCheck', '--types', 'node', '--typeRoots', join(ROOT, 'node_modules', '@types'), 'handlers.ts'],
        {
          cwd: project,
          encoding: 'utf8',
        },
      )
      assert.equal(r.status, 0, `${pkg}: ${r.stdout}${r.stderr}`)
    }
  })
})
