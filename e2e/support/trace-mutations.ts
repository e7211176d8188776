/**
 * Seeded mutations of trace files for the fuzz test, done the way an attacker (or a careless editor) would:
 * change anything in the JSON, then recompute every body's sha256 and size and the trace digest, so the
 * integrity checks pass and only the rules of trace/validate.ts stand between the file and a replay.
 * Deterministic: the same seed and seed file give the same mutated file.
 */
import { canonicalJson, sha256, TRACE_FORMAT_VERSION } from '../../trace/index.ts'

/** A small, fast, seedable PRNG (mulberry32). */
export function rng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export type Rand = () => number
export const pick = <T>(r: Rand, list: readonly T[]): T => list[Math.floor(r() * list.length)] as T
const int = (r: Rand, max: number) => Math.floor(r() * max)

// biome-ignore lint/suspicious/noExplicitAny: mutations work on arbitrary JSON on purpose.
type J = any

export const STATUSES = [100, 101, 103, 199, 200, 201, 204, 206, 302, 304, 404, 418, 500, 599, 600, 999, 0, -1, 1000, 200.5, '200', null]
const TEXTS = ['', 'OK', 'OK\r\nX-Injected: 1', 'OK\n', 'O\0K', 'caf\u00e9', 'check \u2713', 'a'.repeat(5000), '\t', ' OK ', '\u0007', 'x'.repeat(20000)]
const NAMES = [
  'x-a',
  'X-Fuzz',
  'bad name',
  '',
  'x:y',
  'caf\u00e9',
  'x\r\ny',
  'content-length',
  'transfer-encoding',
  'connection',
  'set-cookie',
  '\u2713',
  'expect',
  'upgrade',
  'te',
]
const VALUES = [
  'v',
  '',
  ' padded ',
  'a\r\nx-injected: 1',
  'a\nb',
  'nul\0',
  'caf\u00e9',
  'snow \u2603',
  '\u0001',
  'x'.repeat(20000),
  'chunked',
  '0',
  '5, 5',
  'close',
]
const LENGTHS = (size: number) => [
  String(size),
  String(size + 1),
  String(Math.max(0, size - 1)),
  '0',
  '999999',
  '-1',
  ` ${size}`,
  `${size}, ${size}`,
  'abc',
  `00${size}`,
  '1e3',
]
const CODINGS = ['chunked', 'gzip, chunked', 'identity', '', 'chunked, ', 'gzip']
const ERROR_CODES = [
  'ECONNRESET',
  'ETIMEDOUT',
  'UND_ERR_SOCKET',
  'TR_REPLAY_MISS',
  'ABORT_ERR',
  'EVIL\r\nx-injected: 1',
  '',
  'x'.repeat(200),
  '123',
  'ERR_SSL_WRONG_VERSION_NUMBER',
  'with space',
]
const PHASES = ['connect', 'request', 'response-headers', 'response-body', 'later', '']
const METHODS = ['GET', 'POST', 'HEAD', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'get', 'FOO', 'CONNECT', 'G T', '', 'TRACE']
const URL_EDITS = [
  (u: string) => u.replace('https:', 'http:'),
  (u: string) => `${u}?api_key=abc&b=2`,
  (u: string) => u.replace(/\/[^/]*$/, '/p%C3%A9 th'),
  () => '/relative/path',
  () => 'ftp://127.0.0.1/x',
  (u: string) => `${u}#fragment`,
  () => 'http://[::1]:1/x',
  (u: string) => u.replace('//', '//user:pass@'),
  () => 'not a url',
]
const BODY_TEXTS = ['', '{}', '{"a":1}', 'plain text', 'line\r\nbreak', '\u2603 snow', '{"id":12345678901234567890}', 'x'.repeat(70000), 'data: {"x":1}\n\n']

/** Everything that can hold a response head in an exchange: the response, or an error's partial. */
function heads(x: J): J[] {
  const o = x?.outcome
  return [o?.response, o?.error?.partial].filter((h) => h && typeof h === 'object')
}

function bodies(x: J): J[] {
  return [x?.request?.body, ...heads(x).map((h) => h.body)].filter((b) => b && typeof b === 'object')
}

function fieldLists(x: J): J[][] {
  const lists = [x?.request?.headers, ...heads(x).flatMap((h) => [h.headers, h.trailers])]
  return lists.filter((l) => Array.isArray(l))
}

type Mutation = (file: J, x: J, r: Rand) => void

/** The mutations; each touches one exchange `x` (or the file), and may find nothing to change. */
const MUTATIONS: Mutation[] = [
  (_, x, r) => {
    for (const h of heads(x)) h.status = pick(r, STATUSES)
  },
  (_, x, r) => {
    for (const h of heads(x)) h.statusText = pick(r, TEXTS)
  },
  (_, x, r) => {
    const list = pick(r, fieldLists(x) ?? [])
    if (!list) return
    if (list.length === 0 || r() < 0.5) list.push([pick(r, NAMES), pick(r, VALUES)])
    else (list[int(r, list.length)] as J)[int(r, 2)] = pick(r, r() < 0.5 ? NAMES : VALUES)
  },
  (_, x, r) => {
    const h = pick(r, heads(x))
    if (!h || !Array.isArray(h.headers)) return
    const value = pick(r, LENGTHS(h.body?.size ?? 0))
    if (r() < 0.3) h.headers.push(['Content-Length', value])
    else h.headers = [...h.headers.filter((p: J) => String(p?.[0]).toLowerCase() !== 'content-length'), ['content-length', value]]
  },
  (_, x, r) => pick(r, heads(x))?.headers?.push(['transfer-encoding', pick(r, CODINGS)]),
  (_, x) => {
    for (const h of heads(x)) {
      if (Array.isArray(h.headers)) h.headers = h.headers.filter((p: J) => !/^(content-length|transfer-encoding)$/i.test(String(p?.[0])))
    }
  },
  (_, x, r) => setBodyText(pick(r, bodies(x)), pick(r, BODY_TEXTS)),
  (_, x, r) => {
    const b = pick(r, bodies(x))
    if (!b) return
    const chunks = b.events ?? b.chunks
    const c = Array.isArray(chunks) ? chunks[int(r, chunks.length)] : undefined
    if (c) c[pick(r, ['size', 'atMs'])] = pick(r, [-1, 0, 1, 1e20, 0.5, 'x', null, 2 ** 31])
  },
  (_, x, r) => {
    // Another form for the same bytes, or a ref to a body elsewhere in the file.
    const b = pick(r, bodies(x))
    if (b && typeof b.text === 'string' && r() < 0.5) {
      b.base64 = Buffer.from(b.text).toString('base64')
      delete b.text
    } else if (b) b.ref = `sha256:${b.digest}`
  },
  (_, x, r) => {
    const e = x?.outcome?.error
    if (!e) return
    const key = pick(r, ['code', 'phase', 'message', 'partial'])
    if (key === 'code') e.code = pick(r, ERROR_CODES)
    else if (key === 'phase') e.phase = pick(r, PHASES)
    else if (key === 'message') e.message = pick(r, ['', '\r\n', 'x'.repeat(10000), 42, null])
    else delete e.partial
  },
  (_, x, r) => {
    // Outcome kind flips: a response becomes a failure (keeping its head as the partial) and back.
    const o = x?.outcome
    if (o?.kind === 'response')
      x.outcome = {
        kind: 'error',
        error: { code: pick(r, ERROR_CODES), message: 'fuzz', phase: pick(r, PHASES), ...(r() < 0.6 ? { partial: o.response } : {}) },
      }
    else if (o?.kind === 'error') {
      const partial = o.error?.partial ?? { status: 200, statusText: 'OK', headers: [], trailers: [], body: emptyBody() }
      x.outcome = { kind: 'response', response: partial }
    }
  },
  (_, x, r) => x?.request && (x.request.method = pick(r, METHODS)),
  (_, x, r) => x?.request && (x.request.url = pick(r, URL_EDITS)(String(x.request.url))),
  (_, x, r) => x?.timing && (x.timing[pick(r, ['startMs', 'headersMs'])] = pick(r, [-5, 1e15, 0.25, 'soon', null])),
  (file, x, r) => x && (x.seq = pick(r, [0, -1, 1.5, '0', file.exchanges.length + 3])),
  (_, x, r) => {
    const targets = [x, x?.request, x?.outcome, x?.timing, ...heads(x), ...bodies(x)].filter(Boolean)
    const t = pick(r, targets)
    const keys = Object.keys(t ?? {})
    if (keys.length > 0) delete t[pick(r, keys)]
  },
  (_, x, r) => {
    const t = pick(r, [x, x?.request, ...heads(x)].filter(Boolean))
    if (t) t.fuzz = 1
  },
  (file, x) => x && file.exchanges.push({ ...structuredClone(x), seq: file.exchanges.length }),
  (file, _, r) => file.exchanges.length > 1 && file.exchanges.splice(int(r, file.exchanges.length), 1),
  (file, _, r) => (file.meta.name = pick(r, ['', '../escape', 'nul\0', 'n'.repeat(300), 'ok-name', 42])),
  (file, _, r) => (file.meta.labels = pick(r, [{ a: 1 }, { a: 'b' }, null, 'x'])),
  (file, _, r) => (file[pick(r, ['version', 'format'])] = pick(r, [1, 2, 3, 'tool-replay-trace', null])),
  (_, x) => {
    if (!x?.request) return
    x.request.method = 'HEAD'
  },
  (_, x, r) => {
    for (const h of heads(x)) h.status = pick(r, [204, 304])
  },
]

function emptyBody(): J {
  return { digest: sha256(''), size: 0, chunks: [], text: '' }
}

function setBodyText(b: J, text: string): void {
  if (!b) return
  for (const k of ['text', 'events', 'base64', 'blob', 'ref']) delete b[k]
  b.text = text
}

/**
 * Mutates a parsed trace file in place with 1-3 seeded mutations, then fixes every hash as an attacker
 * would (see fixHashes). Returns the blobs the file needs (new bytes for edited blob bodies included).
 */
export function mutateTraceFile(file: J, blobs: ReadonlyMap<string, Uint8Array>, r: Rand): { file: J; blobs: Map<string, Uint8Array>; applied: number[] } {
  const applied: number[] = []
  const n = 1 + int(r, 3)
  for (let i = 0; i < n; i++) {
    const m = int(r, MUTATIONS.length)
    applied.push(m)
    const list = Array.isArray(file?.exchanges) ? file.exchanges : []
    ;(MUTATIONS[m] as Mutation)(file, list[int(r, list.length)], r)
  }
  const out = new Map(blobs)
  fixHashes(file, out, r)
  return { file, blobs: out, applied }
}

/**
 * Recomputes each body's sha256 and size from its bytes (and, mostly, a chunk list that adds up), points
 * refs at the new digests, and sets the trace digest over the model the reader will build.
 */
export function fixHashes(file: J, blobs: Map<string, Uint8Array>, r: Rand = Math.random): void {
  const renamed = new Map<string, { digest: string; size: number }>()
  const list = Array.isArray(file?.exchanges) ? file.exchanges : []
  for (const x of list) {
    for (const b of bodies(x)) {
      let bytes: Buffer | undefined
      if (typeof b.text === 'string') bytes = Buffer.from(b.text)
      else if (typeof b.base64 === 'string') bytes = Buffer.from(b.base64, 'base64')
      else if (Array.isArray(b.events)) bytes = Buffer.concat(b.events.map((e: J) => Buffer.from(String(e?.text ?? ''))))
      else if (typeof b.blob === 'string' && blobs.has(b.digest)) bytes = Buffer.from(blobs.get(b.digest) as Uint8Array)
      if (bytes === undefined) {
        const to = renamed.get(b.digest)
        if (typeof b.ref === 'string' && to) Object.assign(b, to, { ref: `sha256:${to.digest}`, chunks: [{ size: to.size, atMs: 0 }] })
        continue
      }
      const digest = sha256(bytes)
      if (digest !== b.digest) renamed.set(b.digest, { digest, size: bytes.byteLength })
      b.digest = digest
      b.size = bytes.byteLength
      if (typeof b.blob === 'string') {
        b.blob = `blobs/${digest}`
        blobs.set(digest, bytes)
      }
      const sum = Array.isArray(b.chunks) ? b.chunks.reduce((n: number, c: J) => n + (typeof c?.size === 'number' ? c.size : 0), 0) : -1
      if (!b.events && sum !== bytes.byteLength && r() < 0.9) b.chunks = bytes.byteLength === 0 ? [] : [{ size: bytes.byteLength, atMs: 0 }]
    }
  }
  try {
    file.digest = sha256(canonicalJson({ format: TRACE_FORMAT_VERSION, meta: file.meta, exchanges: list.map(modelExchange) }))
  } catch {
    // Too broken to hash the reader's way (it will not get that far either).
  }
}

/** The exchange a reader builds from a file exchange: bodies reduced to digest, size and chunks. */
function modelExchange(x: J): J {
  const copy = structuredClone(x)
  for (const b of bodies(copy)) {
    if (Array.isArray(b.events)) b.chunks = b.events.map((e: J) => ({ size: Buffer.byteLength(String(e?.text ?? '')), atMs: e?.atMs }))
    for (const k of ['text', 'events', 'base64', 'blob', 'ref']) delete b[k]
  }
  return copy
}
