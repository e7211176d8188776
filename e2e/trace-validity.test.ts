/**
 * Accepted traces never crash or hang replay (issue 8, "Why" 3). Each defect once seen, as a user meets it:
 * - a status text with a line break (digest recomputed, as anyone can) passed `import`, then killed the
 *   proxy with an uncaught ERR_INVALID_CHAR;
 * - `fork --patch "#0 status=100"` hung proxy clients and threw "Cannot read properties of null" in fetch;
 * - a patched Content-Length that disagrees with the body hung the proxy client.
 * Now import and fork refuse them with typed errors, and a store that already holds one (written before
 * the check: planted here through the LevelDB backend, as an older Tool Replay wrote it) replays a typed
 * refusal on both paths, promptly, while the proxy keeps serving the next request.
 */
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { before, test } from 'node:test'
import { ProxyAgent, request } from 'undici'
import { EXIT_CODES, runCli } from '../cli/index.ts'
import { install } from '../interceptor/index.ts'
import { ERROR_HEADER, REFUSED_STATUS } from '../proxy/index.ts'
import { openStore, writeTraceFile } from '../store/index.ts'
import { LevelBackend } from '../store/level-backend.ts'
import { ErrorCodes, type Exchange, type Trace } from '../trace/index.ts'
import { startTestProxy, tempDir } from './support/proxy-harness.ts'

const work = tempDir('tr-validity-')
const BODY = '{"ok":true}'
let base: Trace
let url: string

function capture() {
  const out: string[] = []
  const err: string[] = []
  return { io: { out: (t: string) => out.push(t), err: (t: string) => err.push(t) }, text: () => [...out, ...err].join('\n') }
}

before(async () => {
  // A real recording: two GETs through the interceptor against a server that is gone before any replay.
  const server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json')
    res.end(req.url === '/x' ? BODY : '{"next":true}')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const store = await openStore(join(work, 'rec'))
  const tr = await install({ mode: 'record', trace: 'base', store, global: false })
  for (const path of ['/x', '/y']) await (await fetch(`${url}${path}`, { dispatcher: tr.dispatcher } as RequestInit)).text()
  await tr.close()
  base = await store.readTrace('base')
  await store.close()
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
})

/** `base` with exchange #0 edited, as a new trace. */
function edited(name: string, edit: (x: Exchange) => void): Trace {
  const trace = structuredClone(base)
  trace.meta.name = name
  edit(trace.exchanges[0] as Exchange)
  return trace
}

const response = (x: Exchange) => (x.outcome as Extract<Exchange['outcome'], { kind: 'response' }>).response

/** A store that already holds `trace`, written through the backend the way a Tool Replay without the checks did. */
async function storeHolding(trace: Trace): Promise<string> {
  const dir = join(work, `store-${trace.meta.name}`)
  const backend = await LevelBackend.open(dir)
  await backend.putTrace(trace, 'planted', new Date().toISOString(), false)
  await backend.close()
  return dir
}

/**
 * Replays `name` through the interceptor (fetch, as apps use it) and through the proxy (undici ProxyAgent),
 * asking for /x then /y, each with a 5 s bound; returns what each client saw.
 */
async function replayBothPaths(storeDir: string, name: string): Promise<{ interceptor: string[]; proxy: string[] }> {
  const store = await openStore(storeDir)
  const seen = { interceptor: [] as string[], proxy: [] as string[] }
  const tr = await install({ mode: 'replay', trace: name, store, global: false })
  for (const path of ['/x', '/y']) {
    try {
      const res = await fetch(`${url}${path}`, { dispatcher: tr.dispatcher, signal: AbortSignal.timeout(5000) } as RequestInit)
      seen.interceptor.push(`${res.status} ${res.headers.get(ERROR_HEADER) ?? (await res.text())}`)
    } catch (err) {
      const cause = (err as Error).cause as { code?: string; name?: string; message?: string }
      seen.interceptor.push(`${(err as Error).name}: ${cause?.code ?? cause?.name}`)
    }
  }
  await tr.close()
  const proxy = await startTestProxy({ store, storeDir, mode: 'replay', trace: name, upstreamCaPem: '', resolve: {} })
  const agent = new ProxyAgent({ uri: proxy.url, headersTimeout: 5000, bodyTimeout: 5000 })
  for (const path of ['/x', '/y']) {
    try {
      const res = await request(`${url}${path}`, { dispatcher: agent, signal: AbortSignal.timeout(5000) })
      seen.proxy.push(`${res.statusCode} ${res.headers[ERROR_HEADER] ?? (await res.body.text())}`)
      await res.body.dump()
    } catch (err) {
      seen.proxy.push(`error ${(err as { code?: string }).code ?? (err as Error).name}`)
    }
  }
  await agent.destroy()
  await proxy.close({ graceMs: 100 })
  await store.close()
  return seen
}

/** The refusal response both paths answer with (403, x-tool-replay-error), promptly, instead of a crash or hang. */
const REFUSED = `${REFUSED_STATUS} ${ErrorCodes.TRACE_INVALID}`

test('a status text with a line break: import refuses it; a stored one replays as a typed refusal and the proxy keeps serving', async () => {
  const bad = edited('crlf', (x) => (response(x).statusText = 'OK\r\nX-Injected: yes'))
  const file = join(work, 'crlf.trace.json')
  await writeTraceFile(file, bad)
  const imp = capture()
  assert.equal(await runCli(['import', file, '--store', join(work, 'import-crlf')], imp.io), EXIT_CODES[ErrorCodes.TRACE_FILE_INVALID])
  assert.match(imp.text(), /TR_TRACE_FILE_INVALID: Trace file .*crlf\.trace\.json is invalid: exchanges\[0\]\.outcome\.response\.statusText contains CR/)

  const seen = await replayBothPaths(await storeHolding(bad), 'crlf')
  assert.deepEqual(seen.interceptor, [REFUSED, '200 {"next":true}'])
  assert.deepEqual(seen.proxy, [REFUSED, '200 {"next":true}'])
})

test('fork --patch "#0 status=100" is refused; a stored 100 replays as a typed refusal, with no hang and no TypeError', async () => {
  const storeDir = join(work, 'fork-100')
  const s = await openStore(storeDir)
  await s.putTrace(base)
  await s.close()
  const fork = capture()
  assert.equal(await runCli(['fork', 'base', '--to', 'b100', '--patch', '#0 status=100', '--store', storeDir], fork.io), EXIT_CODES[ErrorCodes.INVALID_PATCH])
  assert.match(
    fork.text(),
    /TR_INVALID_PATCH: Patch "#0 status=100" would make an invalid exchange #0 .* outcome\.response\.status is 100; .*1xx heads are interim/,
  )
  const ls = capture()
  await runCli(['ls', '--store', storeDir, '--json'], ls.io)
  assert.deepEqual(
    JSON.parse(ls.text()).traces.map((t: { name: string }) => t.name),
    ['base'],
    'nothing was written',
  )

  const seen = await replayBothPaths(await storeHolding(edited('s100', (x) => (response(x).status = 100))), 's100')
  assert.deepEqual(seen.interceptor, [REFUSED, '200 {"next":true}'])
  assert.deepEqual(seen.proxy, [REFUSED, '200 {"next":true}'])
})

test('a Content-Length that disagrees with the body: fork refuses it; a stored one is refused instead of hanging the client', async () => {
  const storeDir = join(work, 'fork-cl')
  const s = await openStore(storeDir)
  await s.putTrace(base)
  await s.close()
  for (const length of ['50', '2']) {
    const fork = capture()
    assert.equal(
      await runCli(['fork', 'base', '--to', 'bcl', '--patch', `#0 header:content-length=${length}`, '--store', storeDir], fork.io),
      EXIT_CODES[ErrorCodes.INVALID_PATCH],
    )
    assert.match(
      fork.text(),
      new RegExp(
        `TR_INVALID_PATCH: Patch "#0 header:content-length=${length}" would make .*Content-Length ${length}, which disagrees with the body \\(11 bytes\\)`,
      ),
    )
  }
  // Body patches keep Content-Length right by themselves, so a branch can still change the body.
  const ok = capture()
  assert.equal(
    await runCli(
      ['fork', 'base', '--to', 'bbody', '--patch', '#0 header:content-length=11', '--patch', '#0 $.ok="a longer value"', '--store', storeDir],
      ok.io,
    ),
    0,
    ok.text(),
  )

  const planted = edited('cl', (x) => {
    const r = response(x)
    r.headers = [...r.headers.filter(([k]) => k.toLowerCase() !== 'content-length'), ['content-length', '50']]
  })
  const seen = await replayBothPaths(await storeHolding(planted), 'cl')
  assert.deepEqual(seen.interceptor, [REFUSED, '200 {"next":true}'])
  assert.deepEqual(seen.proxy, [REFUSED, '200 {"next":true}'])
})
