/**
 * Accepted traces never crash or hang replay (issue 8, "valid by construction"). Seeded mutations of real
 * trace files (e2e/fixtures/fuzz/, recorded through both capture paths), with every body hash and the
 * trace digest recomputed as an attacker would, and random `fork --patch` specs: each result is imported
 * (parse + LevelDB putTrace), then replayed through the interceptor (undici's request API, in-process) and
 * through the proxy (a real undici ProxyAgent client, CONNECT + MITM for https). Per case, bounded:
 * - import and fork either accept or throw a ToolReplayError; a fork's output always imports;
 * - replay answers every request with exactly the recorded status and bytes, or the recorded failure
 *   (code, or partial body then a cut), or a typed refusal; never an untyped error, a crash or a hang.
 *
 * Reproduce one case: TR_FUZZ_SEED=m123 (mutation 123) or TR_FUZZ_SEED=p45 (patch case 45), e.g.
 *   TR_FUZZ_SEED=m123 node --conditions=tool-replay-source --test e2e/trace-fuzz.test.ts
 * More cases: TR_FUZZ_CASES=5000 TR_FUZZ_PATCH_CASES=1000.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, before, test } from 'node:test'
import { ProxyAgent, request } from 'undici'
import { install } from '../interceptor/index.ts'
import { type CertificateAuthority, ERROR_HEADER, loadCertificateAuthority } from '../proxy/index.ts'
import { exportTrace, openStore, parseTraceFile, type TraceStore, traceDigest } from '../store/index.ts'
import {
  bodyBytes,
  computeIdentity,
  ErrorCodes,
  type Exchange,
  forkTrace,
  type HeaderPairs,
  headerValue,
  isToolReplayError,
  type PatchSpec,
  parsePatchSpec,
  resolvePatchFile,
  type Trace,
} from '../trace/index.ts'
import { startTestProxy, tempDir } from './support/proxy-harness.ts'
import { mutateTraceFile, pick, type Rand, rng } from './support/trace-mutations.ts'

const MUTATION_CASES = Number(process.env.TR_FUZZ_CASES ?? 1000)
const PATCH_CASES = Number(process.env.TR_FUZZ_PATCH_CASES ?? 200)
const ONLY = process.env.TR_FUZZ_SEED
/** Whole case (import + both replays); a case still running after this is a hang. */
const CASE_BOUND_MS = 20_000
/** One request, head to last byte. */
const REQUEST_BOUND_MS = 8_000
const CONCURRENCY = 4
const REFUSALS = new Set<string>([ErrorCodes.REPLAY_MISS, ErrorCodes.REPLAY_EXHAUSTED, ErrorCodes.PROXY_BAD_REQUEST])

interface Seed {
  text: string
  blobs: Map<string, Uint8Array>
  trace: Trace
}

const dir = tempDir('tr-fuzz-')
let store: TraceStore
let ca: CertificateAuthority
const seeds: Seed[] = []
const failures: string[] = []
const stats = { cases: 0, accepted: 0, rejected: {} as Record<string, number>, exact: 0, refused: 0, unsendable: 0 }
/** Cases in flight: an uncaught error is charged to each of them (they run a few at a time). */
const running = new Set<string>(['setup'])
const stray = (err: unknown) => failures.push(`${[...running].join(' ')}: uncaught ${(err as Error)?.stack ?? String(err)}`)

before(async () => {
  for (const name of ['seed-interceptor', 'seed-proxy']) {
    const url = new URL(`./fixtures/fuzz/${name}.trace.json`, import.meta.url)
    const text = readFileSync(url, 'utf8')
    const blobs = new Map<string, Uint8Array>()
    for (const m of text.matchAll(/"blob": "blobs\/([0-9a-f]{64})"/g)) {
      blobs.set(m[1] as string, new Uint8Array(readFileSync(new URL(`./fixtures/fuzz/blobs/${m[1]}`, import.meta.url))))
    }
    seeds.push({ text, blobs, trace: parseTraceFile(text, blobs) })
  }
  store = await openStore(`${dir}/store`)
  ca = await loadCertificateAuthority(dir)
  process.on('uncaughtException', stray)
  process.on('unhandledRejection', stray)
})

after(async () => {
  process.off('uncaughtException', stray)
  process.off('unhandledRejection', stray)
  await store?.close()
})

function hash(id: string): number {
  let h = 0x811c9dc5
  for (const ch of id) h = Math.imul(h ^ (ch.codePointAt(0) as number), 16777619)
  return h >>> 0
}

type Expect = ({ kind: 'response'; status: number; bytes: Buffer } | { kind: 'error'; code: string; partial?: { status: number; bytes: Buffer } }) & {
  /** Bytes of field names and values in the recorded head or trailers, whichever is larger, as undici counts them. */
  fieldBytes: number
}
type Seen =
  | { kind: 'response'; status: number; headers: Record<string, unknown>; bytes: Buffer }
  | { kind: 'cut'; status: number; headers: Record<string, unknown>; code: string }
  | { kind: 'error'; code: string; detail: string }

function expected(trace: Trace, x: Exchange): Expect {
  const head = x.request.method.toUpperCase() === 'HEAD'
  const bytes = (ref: Parameters<typeof bodyBytes>[1]) => (head ? Buffer.alloc(0) : Buffer.from(bodyBytes(trace, ref)))
  const size = (fields: HeaderPairs) => fields.reduce((n, [k, v]) => n + Buffer.byteLength(k, 'latin1') + Buffer.byteLength(v, 'latin1'), 0)
  const r = x.outcome.kind === 'response' ? x.outcome.response : x.outcome.error.partial
  const fieldBytes = r ? Math.max(size(r.headers), size(r.trailers)) : 0
  if (x.outcome.kind === 'response') return { kind: 'response', status: x.outcome.response.status, bytes: bytes(x.outcome.response.body), fieldBytes }
  const { code, partial } = x.outcome.error
  return { kind: 'error', code, fieldBytes, ...(partial ? { partial: { status: partial.status, bytes: bytes(partial.body) } } : {}) }
}

/**
 * undici refuses a head or trailer section of 16 KiB of names and values or more (http.maxHeaderSize), and
 * a server adds a few fields of its own (date, connection): a recorded section that close to the limit may
 * overflow the proxy's client. That is the client's documented limit, reported with its own error code.
 */
const CLIENT_FIELD_LIMIT = 16 * 1024 - 256

/** Sends the recorded request (identity headers and body) and reads the whole answer, within the bound. */
async function send(trace: Trace, x: Exchange, dispatcher: import('undici').Dispatcher): Promise<Seen> {
  const type = headerValue(x.request.headers, 'content-type')
  const signal = AbortSignal.timeout(REQUEST_BOUND_MS)
  let res: Awaited<ReturnType<typeof request>>
  try {
    res = await request(x.request.url, {
      dispatcher,
      signal,
      method: x.request.method as 'GET',
      headers: type === undefined ? {} : { 'content-type': type },
      body: x.request.body ? Buffer.from(bodyBytes(trace, x.request.body)) : null,
    })
  } catch (err) {
    if (signal.aborted) return { kind: 'error', code: 'HANG', detail: `no answer within ${REQUEST_BOUND_MS} ms` }
    return { kind: 'error', code: String((err as { code?: unknown }).code ?? ''), detail: `${(err as Error).name}: ${(err as Error).message}` }
  }
  try {
    return { kind: 'response', status: res.statusCode, headers: res.headers, bytes: Buffer.from(await res.body.arrayBuffer()) }
  } catch (err) {
    if (signal.aborted) return { kind: 'error', code: 'HANG', detail: `body not finished within ${REQUEST_BOUND_MS} ms` }
    return { kind: 'cut', status: res.statusCode, headers: res.headers, code: String((err as { code?: unknown }).code ?? (err as Error).name) }
  }
}

/** 'exact', 'refused' or 'unsendable' when the answer is acceptable; otherwise what is wrong. */
function judge(path: 'interceptor' | 'proxy', seen: Seen, want: Expect): string {
  if (seen.kind === 'error' && seen.code === 'UND_ERR_INVALID_ARG') return 'unsendable' // the client would not send it
  if (seen.kind === 'error' && REFUSALS.has(seen.code)) return 'refused'
  if (path === 'proxy' && want.fieldBytes >= CLIENT_FIELD_LIMIT && (seen.kind === 'error' || seen.kind === 'cut') && seen.code === 'UND_ERR_HEADERS_OVERFLOW') {
    return 'refused'
  }
  const trCode = seen.kind === 'error' ? undefined : (seen.headers[ERROR_HEADER] as string | undefined)
  if (seen.kind === 'response' && trCode && REFUSALS.has(trCode)) return 'refused'
  const same = (a: Buffer, b: Buffer) => a.equals(b)
  if (want.kind === 'response') {
    if (seen.kind === 'response' && !trCode && seen.status === want.status && same(seen.bytes, want.bytes)) return 'exact'
  } else if (!want.partial) {
    if (path === 'interceptor' && seen.kind === 'error' && seen.code === want.code) return 'exact'
    if (path === 'proxy' && seen.kind === 'response' && seen.status === 502 && seen.headers['x-tool-replay-upstream-error'] === want.code) return 'exact'
  } else {
    const p = want.partial
    // The recorded head and partial body, then the recorded failure (a cut connection through the proxy) ...
    if (seen.kind === 'cut' && seen.status === p.status && (path === 'proxy' || seen.code === want.code)) return 'exact'
    // ... or, when the head announced no more than arrived, a client that finished reading first.
    if (seen.kind === 'response' && !trCode && seen.status === p.status && same(seen.bytes, p.bytes)) return 'exact'
  }
  return `expected ${describe(want)}, got ${describe(seen)}`
}

function describe(v: Expect | Seen): string {
  if (v.kind === 'response')
    return `${v.status} with ${v.bytes.byteLength} bytes${'headers' in v && v.headers[ERROR_HEADER] ? ` (${v.headers[ERROR_HEADER]})` : ''}`
  if (v.kind === 'cut') return `${v.status} then cut (${v.code})`
  if ('detail' in v) return `error ${v.code} (${v.detail.slice(0, 200)})`
  return `error ${v.code}${v.partial ? ` after ${v.partial.status} + ${v.partial.bytes.byteLength} bytes` : ''}`
}

/** Replays `name` through one path and judges every answer. */
async function replay(path: 'interceptor' | 'proxy', trace: Trace, cleanup: Array<() => Promise<unknown>>): Promise<string[]> {
  const problems: string[] = []
  let dispatcher: import('undici').Dispatcher
  let finish: () => Promise<unknown>
  if (path === 'interceptor') {
    const tr = await install({ mode: 'replay', trace: trace.meta.name, store, global: false })
    dispatcher = tr.dispatcher
    finish = () => tr.close()
  } else {
    const proxy = await startTestProxy({ store, storeDir: dir, ca, mode: 'replay', trace: trace.meta.name, upstreamCaPem: '', resolve: {} })
    const agent = new ProxyAgent({ uri: proxy.url, requestTls: { ca: ca.certPem }, headersTimeout: REQUEST_BOUND_MS, bodyTimeout: REQUEST_BOUND_MS })
    dispatcher = agent
    finish = async () => {
      await agent.destroy()
      await proxy.close({ graceMs: 100 })
    }
  }
  cleanup.push(finish)
  // After a request that never reached the engine (refused by the proxy's HTTP parser, or not sent), later
  // requests of the same identity take the recordings one place earlier: any of them is then the right answer.
  let desynced = false
  const identity = (x: Exchange) => computeIdentity({ ...x.request, body: x.request.body ? bodyBytes(trace, x.request.body) : null }).key
  for (const x of trace.exchanges) {
    const seen = await send(trace, x, dispatcher)
    let verdict = judge(path, seen, expected(trace, x))
    if (verdict !== 'exact' && desynced) {
      const twins = trace.exchanges.filter((y) => y !== x && identity(y) === identity(x))
      if (twins.some((y) => judge(path, seen, expected(trace, y)) === 'exact')) verdict = 'exact'
    }
    if (verdict === 'refused' || verdict === 'unsendable') desynced = true
    if (verdict === 'exact') stats.exact++
    else if (verdict === 'refused') stats.refused++
    else if (verdict === 'unsendable') stats.unsendable++
    else problems.push(`${path} #${x.seq} ${x.request.method} ${x.request.url}: ${verdict}`)
  }
  await finish()
  cleanup.pop()
  return problems
}

/** Import (parse + store), then replay through both paths. `mustAccept`: the text came from a fork. */
async function importAndReplay(
  id: string,
  text: string,
  blobs: ReadonlyMap<string, Uint8Array>,
  mustAccept: boolean,
  cleanup: Array<() => Promise<unknown>>,
): Promise<string[]> {
  let trace: Trace
  try {
    trace = parseTraceFile(text, blobs, { file: `${id}.trace.json` })
  } catch (err) {
    if (!isToolReplayError(err)) return [`import threw an untyped ${(err as Error)?.stack ?? err}`]
    if (mustAccept) return [`a fork's output failed to import: ${err.message}`]
    stats.rejected[err.code] = (stats.rejected[err.code] ?? 0) + 1
    return []
  }
  trace.meta.name = `fuzz-${id}`
  try {
    await store.putTrace(trace, { overwrite: true })
    // Replay in the store's order (by seq), which is the order the session matches occurrences in.
    trace = await store.readTrace(trace.meta.name)
  } catch (err) {
    return [`import accepted the file but the store refused it: ${(err as Error)?.message ?? err}`]
  }
  stats.accepted++
  const problems = [...(await replay('interceptor', trace, cleanup)), ...(await replay('proxy', trace, cleanup))]
  await store.deleteTrace(trace.meta.name)
  return problems
}

/** A seed cut down to 1-4 of its exchanges (in order), so a case replays a few requests, not all of them. */
function slice(r: Rand): Trace {
  const source = pick(r, seeds).trace
  const keep = new Set(Array.from({ length: 1 + Math.floor(r() * 4) }, () => Math.floor(r() * source.exchanges.length)))
  return { ...source, exchanges: source.exchanges.filter((_, i) => keep.has(i)) }
}

function mutationCase(i: number) {
  return (cleanup: Array<() => Promise<unknown>>) => {
    const r = rng(hash(`m${i}`))
    const seed = exportTrace(slice(r))
    const { file, blobs } = mutateTraceFile(JSON.parse(seed.text), seed.blobs, r)
    return importAndReplay(`m${i}`, JSON.stringify(file), blobs, false, cleanup)
  }
}

const ACTIONS = [
  (r: Rand) => `status=${pick(r, [100, 101, 103, 199, 200, 204, 206, 304, 404, 418, 500, 599])}`,
  (r: Rand) => `response=${pick(r, [100, 200, 204, 304, 503])}`,
  (r: Rand) =>
    `header:${pick(r, ['content-length', 'transfer-encoding', 'x-test', 'content-type', 'connection', 'set-cookie'])}=${pick(r, ['0', '5', '99999', 'chunked', 'a b', 'caf\u00e9', 'snow \u2603', ''])}`,
  (r: Rand) => `header:${pick(r, ['content-length', 'content-encoding', 'content-type', 'x-none'])}`,
  (r: Rand) =>
    `${pick(r, ['$.id', '$.choices[0].message.content', '$.x', '$', '$.a.b', '$.status'])}=${pick(r, ['1', '"s"', 'null', '{"a":[1]}', '12345678901234567890', '"line\\nbreak"'])}`,
  (r: Rand) =>
    `error=${pick(r, ['ECONNRESET', 'ETIMEDOUT', 'ECONNREFUSED', 'UND_ERR_SOCKET', 'ENOTFOUND'])}@${pick(r, ['connect', 'request', 'response-headers', 'response-body'])}`,
  () => 'body=@fuzz.bin',
]

function patchCase(i: number) {
  return async (cleanup: Array<() => Promise<unknown>>) => {
    const r = rng(hash(`p${i}`))
    const source = slice(r)
    const specs: PatchSpec[] = []
    let branch: Trace
    try {
      for (let n = 1 + Math.floor(r() * 3); n > 0; n--) {
        const x = pick(r, source.exchanges)
        const selector = r() < 0.7 ? `#${r() < 0.9 ? x.seq : source.exchanges.length + 1}` : `${x.request.method} ${x.request.url}`
        const spec = parsePatchSpec(`${selector} ${pick(r, ACTIONS)(r)}`)
        specs.push(resolvePatchFile(spec, Buffer.from(pick(r, ['', '{"replaced":true}', '\u2603', 'x'.repeat(100000)]))))
      }
      branch = forkTrace(source, { name: `p${i}`, sourceDigest: traceDigest(source), patches: specs })
    } catch (err) {
      if (!isToolReplayError(err)) return [`fork threw an untyped ${(err as Error)?.stack ?? err} for ${specs.map((s) => s.text).join(' | ')}`]
      stats.rejected[err.code] = (stats.rejected[err.code] ?? 0) + 1
      return []
    }
    const out = exportTrace(branch)
    return importAndReplay(`p${i}`, out.text, out.blobs, true, cleanup)
  }
}

async function runCase(id: string, body: (cleanup: Array<() => Promise<unknown>>) => Promise<string[]>): Promise<void> {
  running.add(id)
  stats.cases++
  const cleanup: Array<() => Promise<unknown>> = []
  let timer: NodeJS.Timeout | undefined
  const bound = new Promise<string[]>((resolve) => {
    timer = setTimeout(() => resolve([`still running after ${CASE_BOUND_MS} ms (a hang)`]), CASE_BOUND_MS)
  })
  let problems: string[]
  try {
    problems = await Promise.race([body(cleanup), bound])
  } catch (err) {
    problems = [`threw ${(err as Error)?.stack ?? err}`]
  }
  clearTimeout(timer)
  for (const c of cleanup.reverse()) await c().catch(() => {})
  for (const p of problems) failures.push(`${id}: ${p}`)
  running.delete(id)
}

test(`fuzz: ${MUTATION_CASES} mutated trace files and ${PATCH_CASES} random fork patches import and replay on both paths with typed outcomes only`, async (t) => {
  const ids = ONLY ? [ONLY] : [...Array.from({ length: MUTATION_CASES }, (_, i) => `m${i}`), ...Array.from({ length: PATCH_CASES }, (_, i) => `p${i}`)]
  running.clear()
  const started = performance.now()
  // A few cases at a time: each waits mostly on sockets and timers. Every case has its own trace and proxy.
  const queue = [...ids]
  const worker = async () => {
    for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
      const n = Number(id.slice(1))
      await runCase(id, id.startsWith('m') ? mutationCase(n) : patchCase(n))
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  t.diagnostic(
    `${stats.cases} cases in ${Math.round(performance.now() - started)} ms: ${stats.accepted} imported and replayed (${stats.exact} exact answers, ${stats.refused} typed refusals, ${stats.unsendable} the client would not send); refused at import/fork: ${JSON.stringify(stats.rejected)}`,
  )
  const seedsToRerun = [...new Set(failures.map((f) => f.split(':')[0]))]
  assert.deepEqual(
    failures,
    [],
    `${failures.length} problem(s). Reproduce each with TR_FUZZ_SEED=<id> node --conditions=tool-replay-source --test e2e/trace-fuzz.test.ts; ids: ${seedsToRerun.join(' ')}`,
  )
  if (!ONLY) {
    // Not vacuous: most cases reach replay and most answers there are the recorded bytes.
    assert.ok(stats.accepted >= ids.length / 4, `only ${stats.accepted} of ${ids.length} cases were accepted`)
    assert.ok(stats.exact >= stats.accepted * 3, `only ${stats.exact} exact answers for ${stats.accepted} replayed traces`)
    assert.ok(stats.refused * 10 < stats.exact, `${stats.refused} refusals for ${stats.exact} exact answers`)
  }
})
