/**
 * The strict reader of one parsed trace file's parts (meta, each exchange, each body): every failure names
 * the file and the field. Body bytes go through a BodyLedger, so the same checks serve a file read whole
 * (parseTraceFile) and one read an exchange at a time (trace-file-read.ts).
 */
import {
  type AppRun,
  appRunProblem,
  type BodyRef,
  ErrorCodes,
  type Exchange,
  type ExchangeFault,
  FAULT_KINDS,
  FAULT_PHASES,
  type HeaderPairs,
  type RecordedResponse,
  sha256,
  sortKeysDeep,
  ToolReplayError,
  TRACE_FORMAT_VERSION,
  type TraceMeta,
  WEBSOCKET_OPCODES,
  type WebSocketMessage,
  type WebSocketSession,
  type WebSocketUpstream,
} from '../trace/index.ts'
import { REF_VERSION, TRACE_FILE_FORMAT, TRACE_FILE_VERSIONS } from './trace-file-format.ts'

/** Where the validator gets and keeps body bytes. */
export interface BodyLedger {
  /** A blob's bytes (`blobs/<digest>` beside the file), or 'later' when the caller fetches and checks it after the exchange. */
  blob(digest: string, size: number, path: string): Uint8Array | undefined | 'later'
  /** The size of the body with this digest an earlier body of the file held, else undefined. */
  earlier(digest: string): number | undefined
  /** A body's bytes, checked against its digest: its first occurrence in the file. */
  add(digest: string, bytes: Uint8Array): void
}

/** Checks a file's top-level fields but its exchanges (format, version, digest, meta); returns the digest and meta. */
export function checkHeader(v: Validator, top: Record<string, unknown>): { digest: string; meta: TraceMeta } {
  if (top.format !== TRACE_FILE_FORMAT) v.fail('format', `must be "${TRACE_FILE_FORMAT}"`)
  if (!TRACE_FILE_VERSIONS.includes(top.version as number)) {
    v.fail(
      'version',
      `is ${JSON.stringify(top.version)}; this Tool Replay reads versions ${TRACE_FILE_VERSIONS.join(' and ')} (a newer Tool Replay wrote this file?)`,
    )
  }
  v.refsAllowed = top.version === REF_VERSION
  return { digest: v.digestString(top.digest, 'digest'), meta: v.meta(top.meta) }
}

/** TR_TRACE_DIGEST_MISMATCH for a file whose content does not hash to the digest it records. */
export function digestMismatch(file: string, expected: string, actual: string): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.TRACE_DIGEST_MISMATCH,
    `Trace file ${file} was changed after export: its content hashes to ${actual}, not the recorded digest ${expected}. Re-export it with \`tr-proxy export\`, or, for a deliberate edit, use \`tr-proxy fork\`.`,
    { details: { file, expected, actual } },
  )
}

/** A ledger over maps: blobs read before, every body kept (a file parsed whole). */
export function mapLedger(blobs: ReadonlyMap<string, Uint8Array>, bodies: Map<string, Uint8Array>): BodyLedger {
  return {
    blob: (digest) => blobs.get(digest),
    earlier: (digest) => bodies.get(digest)?.byteLength,
    add: (digest, bytes) => {
      bodies.set(digest, bytes)
    },
  }
}

const DIGEST = /^[0-9a-f]{64}$/
const PHASES = new Set(['connect', 'request', 'response-headers', 'response-body'])
const ORIGINS = new Set(['recorded', 'patched', 'live'])

/** Strict reader of a parsed trace file; every failure names the file and the field. */
export class Validator {
  readonly #file: string
  /** Version 2 files may hold `ref` bodies. */
  refsAllowed = true
  constructor(file: string) {
    this.#file = file
  }

  fail(path: string, problem: string): never {
    throw new ToolReplayError(
      ErrorCodes.TRACE_FILE_INVALID,
      `Trace file ${this.#file} is invalid: ${path || '(top level)'} ${problem}. Re-export it with \`tr-proxy export\`, or fix that field.`,
      { details: { file: this.#file, field: path } },
    )
  }

  object(v: unknown, path: string, required: string[], optional: string[] = []): Record<string, unknown> {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) this.fail(path, 'must be an object')
    const o = v as Record<string, unknown>
    for (const k of required) if (!(k in o)) this.fail(join2(path, k), 'is missing')
    for (const k of Object.keys(o)) if (!required.includes(k) && !optional.includes(k)) this.fail(join2(path, k), 'is not a known field')
    return o
  }

  array(v: unknown, path: string): unknown[] {
    if (!Array.isArray(v)) this.fail(path, 'must be an array')
    return v
  }

  string(v: unknown, path: string): string {
    if (typeof v !== 'string') this.fail(path, 'must be a string')
    return v
  }

  digestString(v: unknown, path: string): string {
    const s = this.string(v, path)
    if (!DIGEST.test(s)) this.fail(path, 'must be a lowercase hex sha256')
    return s
  }

  int(v: unknown, path: string): number {
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) this.fail(path, 'must be an integer >= 0')
    return v
  }

  number(v: unknown, path: string): number {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) this.fail(path, 'must be a number >= 0')
    return v
  }

  headers(v: unknown, path: string): HeaderPairs {
    return this.array(v, path).map((pair, i) => {
      const p = this.array(pair, `${path}[${i}]`)
      if (p.length !== 2) this.fail(`${path}[${i}]`, 'must be a [name, value] pair')
      return [this.string(p[0], `${path}[${i}][0]`), this.string(p[1], `${path}[${i}][1]`)]
    })
  }

  meta(v: unknown): TraceMeta {
    const o = this.object(v, 'meta', ['name', 'format'], ['lineage', 'labels', 'app'])
    const meta: TraceMeta = { name: this.string(o.name, 'meta.name'), format: TRACE_FORMAT_VERSION }
    if (o.format !== TRACE_FORMAT_VERSION) this.fail('meta.format', `must be ${TRACE_FORMAT_VERSION}`)
    if (o.labels !== undefined) {
      const labels = this.object(o.labels, 'meta.labels', [], Object.keys(typeof o.labels === 'object' && o.labels !== null ? o.labels : {}))
      meta.labels = Object.fromEntries(Object.entries(labels).map(([k, val]) => [k, this.string(val, `meta.labels.${k}`)]))
    }
    if (o.lineage !== undefined) {
      const l = this.object(o.lineage, 'meta.lineage', ['sourceDigest', 'patches'], ['sourceName'])
      meta.lineage = {
        sourceDigest: this.string(l.sourceDigest, 'meta.lineage.sourceDigest'),
        ...(l.sourceName !== undefined ? { sourceName: this.string(l.sourceName, 'meta.lineage.sourceName') } : {}),
        patches: this.array(l.patches, 'meta.lineage.patches').map((p, i) => {
          const po = this.object(p, `meta.lineage.patches[${i}]`, ['id', 'spec'])
          return { id: this.string(po.id, `meta.lineage.patches[${i}].id`), spec: this.string(po.spec, `meta.lineage.patches[${i}].spec`) }
        }),
      }
    }
    if (o.app !== undefined) {
      const found = appRunProblem(o.app)
      if (found) this.fail(found.path, found.problem)
      meta.app = o.app as AppRun
    }
    return sortKeysDeep(meta) as TraceMeta
  }

  /**
   * With `ledger` undefined only the refs are read (export's digest); otherwise bytes are decoded and verified.
   * Every object is built with its keys in sorted order (checks run in field order first), so the trace digest
   * takes the exchange's canonical JSON in one JSON.stringify (canonicalJson's fast path).
   */
  exchange(v: unknown, path: string, ledger: BodyLedger | undefined): Exchange {
    const o = this.object(v, path, ['seq', 'request', 'outcome', 'timing'], ['origin', 'patchId', 'fault', 'websocket'])
    const req = this.object(o.request, `${path}.request`, ['method', 'url', 'headers', 'body'], ['httpVersion'])
    const body = (b: unknown, p: string) => this.body(b, p, ledger)
    const seq = this.int(o.seq, `${path}.seq`)
    const method = this.string(req.method, `${path}.request.method`)
    const url = this.string(req.url, `${path}.request.url`)
    const headers = this.headers(req.headers, `${path}.request.headers`)
    const requestBody = req.body === null ? null : body(req.body, `${path}.request.body`)
    const outcome = this.outcome(o.outcome, `${path}.outcome`, body)
    const t = this.object(o.timing, `${path}.timing`, ['startMs', 'headersMs'])
    const startMs = this.number(t.startMs, `${path}.timing.startMs`)
    const timing = { headersMs: this.number(t.headersMs, `${path}.timing.headersMs`), startMs }
    if (req.httpVersion !== undefined && req.httpVersion !== '2') this.fail(`${path}.request.httpVersion`, 'must be "2" or absent')
    const request: Exchange['request'] =
      req.httpVersion === undefined ? { body: requestBody, headers, method, url } : { body: requestBody, headers, httpVersion: '2', method, url }
    if (o.origin !== undefined && !ORIGINS.has(o.origin as string)) this.fail(`${path}.origin`, 'must be "recorded", "patched" or "live"')
    const patchId = o.patchId === undefined ? undefined : this.string(o.patchId, `${path}.patchId`)
    const fault = o.fault === undefined ? undefined : this.fault(o.fault, `${path}.fault`, body)
    const websocket = o.websocket === undefined ? undefined : this.websocket(o.websocket, `${path}.websocket`, body)
    if (fault === undefined && o.origin === undefined && patchId === undefined && websocket === undefined) return { outcome, request, seq, timing }
    return {
      ...(fault !== undefined ? { fault } : {}),
      ...(o.origin !== undefined ? { origin: o.origin as Exchange['origin'] & string } : {}),
      outcome,
      ...(patchId !== undefined ? { patchId } : {}),
      request,
      seq,
      timing,
      ...(websocket !== undefined ? { websocket } : {}),
    }
  }

  /** A WebSocket session's shape; its rules (order, opcodes, close codes) are trace/validate.ts's, checked after. */
  websocket(v: unknown, path: string, body: (b: unknown, p: string) => BodyRef): WebSocketSession {
    const o = this.object(v, path, ['messages'], ['end'])
    const messages = this.array(o.messages, `${path}.messages`).map((m, i): WebSocketMessage => {
      const p = `${path}.messages[${i}]`
      const f = this.object(m, p, ['from', 'opcode', 'atMs', 'body'], ['close'])
      const from = this.string(f.from, `${p}.from`) as WebSocketMessage['from']
      const opcode = this.string(f.opcode, `${p}.opcode`) as WebSocketMessage['opcode']
      const atMs = this.number(f.atMs, `${p}.atMs`)
      const b = body(f.body, `${p}.body`)
      if (f.close === undefined) return { atMs, body: b, from, opcode }
      return { atMs, body: b, close: this.close(f.close, `${p}.close`), from, opcode }
    })
    return o.end === undefined ? { messages } : { end: this.end(o.end, `${path}.end`), messages }
  }

  /** A close frame's code and reason. */
  close(v: unknown, path: string): { code: number; reason: string } {
    const c = this.object(v, path, ['code', 'reason'])
    return { code: this.int(c.code, `${path}.code`), reason: this.string(c.reason, `${path}.reason`) }
  }

  /** How a WebSocket session ended. */
  end(v: unknown, path: string): { atMs: number; code: string; message: string } {
    const e = this.object(v, path, ['code', 'message', 'atMs'])
    const code = this.string(e.code, `${path}.code`)
    const message = this.string(e.message, `${path}.message`)
    return { atMs: this.number(e.atMs, `${path}.atMs`), code, message }
  }

  fault(v: unknown, path: string, body: (b: unknown, p: string) => BodyRef): ExchangeFault {
    const o = this.object(v, path, ['rule', 'kind', 'phase', 'seed', 'call', 'upstream'], ['key', 'websocket'])
    if (!(FAULT_KINDS as readonly unknown[]).includes(o.kind)) this.fail(`${path}.kind`, `must be one of ${FAULT_KINDS.join(', ')}`)
    if (!(FAULT_PHASES as readonly unknown[]).includes(o.phase)) this.fail(`${path}.phase`, `must be one of ${FAULT_PHASES.join(', ')}`)
    const call = this.int(o.call, `${path}.call`)
    if (call < 1) this.fail(`${path}.call`, 'must be >= 1')
    const rule = this.string(o.rule, `${path}.rule`)
    const seed = this.string(o.seed, `${path}.seed`)
    const key = o.key === undefined ? undefined : this.string(o.key, `${path}.key`)
    const upstream = o.upstream === null ? null : this.outcome(o.upstream, `${path}.upstream`, body)
    const websocket = o.websocket === undefined ? undefined : this.upstreamWebSocket(o.websocket, `${path}.websocket`)
    return {
      call,
      ...(key !== undefined ? { key } : {}),
      kind: o.kind as ExchangeFault['kind'],
      phase: o.phase as ExchangeFault['phase'],
      rule,
      seed,
      upstream,
      ...(websocket !== undefined ? { websocket } : {}),
    }
  }

  /** A faulted session as the upstream had it: each message's head with the digest and size of its payload. */
  upstreamWebSocket(v: unknown, path: string): WebSocketUpstream {
    const o = this.object(v, path, ['messages'], ['end'])
    const messages = this.array(o.messages, `${path}.messages`).map((m, i) => {
      const p = `${path}.messages[${i}]`
      const f = this.object(m, p, ['from', 'opcode', 'atMs', 'digest', 'size'], ['close'])
      if (f.from !== 'client' && f.from !== 'server') this.fail(`${p}.from`, 'must be "client" or "server"')
      if (!(WEBSOCKET_OPCODES as readonly unknown[]).includes(f.opcode)) this.fail(`${p}.opcode`, `must be one of ${WEBSOCKET_OPCODES.join(', ')}`)
      const digest = this.string(f.digest, `${p}.digest`)
      if (!/^[0-9a-f]{64}$/.test(digest)) this.fail(`${p}.digest`, 'must be a SHA-256 in hex')
      // Kept in the order the file has them: the writer copies fault.websocket as it is.
      const message: WebSocketUpstream['messages'][number] = {
        from: f.from as 'client' | 'server',
        opcode: f.opcode as WebSocketMessage['opcode'],
        atMs: this.number(f.atMs, `${p}.atMs`),
        digest,
        size: this.int(f.size, `${p}.size`),
      }
      if (f.close !== undefined) message.close = this.close(f.close, `${p}.close`)
      return message
    })
    if (o.end === undefined) return { messages }
    const e = this.object(o.end, `${path}.end`, ['code', 'message', 'atMs'])
    return {
      messages,
      end: {
        code: this.string(e.code, `${path}.end.code`),
        message: this.string(e.message, `${path}.end.message`),
        atMs: this.number(e.atMs, `${path}.end.atMs`),
      },
    }
  }

  outcome(v: unknown, path: string, body: (b: unknown, p: string) => BodyRef): Exchange['outcome'] {
    const kind = (v as { kind?: unknown } | null)?.kind
    if (kind === 'response') {
      const o = this.object(v, path, ['kind', 'response'])
      return { kind: 'response', response: this.response(o.response, `${path}.response`, body) }
    }
    if (kind !== 'error') this.fail(`${path}.kind`, 'must be "response" or "error"')
    const o = this.object(v, path, ['kind', 'error'])
    const e = this.object(o.error, `${path}.error`, ['code', 'message', 'phase'], ['partial'])
    if (!PHASES.has(e.phase as string)) this.fail(`${path}.error.phase`, `must be one of ${[...PHASES].join(', ')}`)
    const code = this.string(e.code, `${path}.error.code`)
    const message = this.string(e.message, `${path}.error.message`)
    const phase = e.phase as 'connect'
    if (e.partial === undefined) return { error: { code, message, phase }, kind: 'error' }
    return { error: { code, message, partial: this.response(e.partial, `${path}.error.partial`, body), phase }, kind: 'error' }
  }

  response(v: unknown, path: string, body: (b: unknown, p: string) => BodyRef): RecordedResponse {
    const o = this.object(v, path, ['status', 'statusText', 'headers', 'trailers', 'body'])
    const status = this.int(o.status, `${path}.status`)
    if (status < 100 || status > 999) this.fail(`${path}.status`, 'must be an HTTP status (100-999)')
    const statusText = this.string(o.statusText, `${path}.statusText`)
    const headers = this.headers(o.headers, `${path}.headers`)
    const trailers = this.headers(o.trailers, `${path}.trailers`)
    return { body: body(o.body, `${path}.body`), headers, status, statusText, trailers }
  }

  body(v: unknown, path: string, ledger: BodyLedger | undefined): BodyRef {
    const forms = ['text', 'events', 'base64', 'blob', 'ref']
    const raw = v as Record<string, unknown> | null
    const form = forms.filter((f) => raw !== null && typeof raw === 'object' && f in raw)
    if (form.length !== 1) this.fail(path, `must have exactly one of ${forms.map((f) => `"${f}"`).join(', ')}`)
    const kind = form[0] as string
    if (kind === 'ref' && !this.refsAllowed) this.fail(`${path}.ref`, `is a version ${REF_VERSION} form, but the file says version 1`)
    const o = this.object(v, path, kind === 'events' ? ['digest', 'size', 'events'] : ['digest', 'size', 'chunks', kind])
    const digest = this.digestString(o.digest, `${path}.digest`)
    const size = this.int(o.size, `${path}.size`)
    let chunks: BodyRef['chunks']
    let bytes: Uint8Array | undefined
    if (kind === 'events') {
      const parts = this.array(o.events, `${path}.events`).map((e, i) => {
        const eo = this.object(e, `${path}.events[${i}]`, ['atMs', 'text'])
        const bytes = Buffer.from(this.string(eo.text, `${path}.events[${i}].text`), 'utf8')
        if (bytes.byteLength === 0) this.fail(`${path}.events[${i}].text`, 'must not be empty')
        return { atMs: this.number(eo.atMs, `${path}.events[${i}].atMs`), bytes }
      })
      chunks = parts.map((p) => ({ atMs: p.atMs, size: p.bytes.byteLength }))
      if (ledger) bytes = new Uint8Array(Buffer.concat(parts.map((p) => p.bytes)))
    } else {
      chunks = this.array(o.chunks, `${path}.chunks`).map((c, i) => {
        const co = this.object(c, `${path}.chunks[${i}]`, ['size', 'atMs'])
        const size = this.int(co.size, `${path}.chunks[${i}].size`)
        return { atMs: this.number(co.atMs, `${path}.chunks[${i}].atMs`), size }
      })
      if (ledger) bytes = this.#bytes(o, kind, path, digest, size, ledger)
    }
    if (chunks.reduce((n, c) => n + c.size, 0) !== size) this.fail(`${path}.chunks`, `sizes do not add up to size ${size}`)
    if (bytes !== undefined && ledger !== undefined) {
      this.checkBytes(bytes, path, digest, size)
      ledger.add(digest, bytes)
    }
    return { chunks, digest, size }
  }

  /** The bytes a body of this form holds; undefined for a ref (hashed where its bytes were) and a blob read later. */
  #bytes(o: Record<string, unknown>, kind: string, path: string, digest: string, size: number, ledger: BodyLedger): Uint8Array | undefined {
    if (kind === 'text') return new Uint8Array(Buffer.from(this.string(o.text, `${path}.text`), 'utf8'))
    if (kind === 'base64') {
      const b64 = this.string(o.base64, `${path}.base64`)
      const bytes = new Uint8Array(Buffer.from(b64, 'base64'))
      // Buffer.from skips junk silently; insisting on the canonical form keeps re-export byte-identical.
      if (Buffer.from(bytes).toString('base64') !== b64) this.fail(`${path}.base64`, 'is not canonical base64')
      return bytes
    }
    if (kind === 'ref') {
      if (this.string(o.ref, `${path}.ref`) !== `sha256:${digest}`) this.fail(`${path}.ref`, `must be "sha256:${digest}"`)
      const earlier = ledger.earlier(digest)
      if (earlier === undefined) this.fail(`${path}.ref`, `refers to body sha256:${digest}, which no earlier body in this file holds`)
      if (earlier !== size) this.fail(`${path}.size`, `is ${size}, but the earlier body sha256:${digest} has ${earlier} bytes`)
      return undefined
    }
    const ref = this.string(o.blob, `${path}.blob`)
    if (ref !== `blobs/${digest}`) this.fail(`${path}.blob`, `must be "blobs/${digest}"`)
    const bytes = ledger.blob(digest, size, path)
    if (bytes === undefined) this.fail(`${path}.blob`, `names ${ref}, which is missing beside the trace file; copy the blobs/ folder along with it`)
    return bytes === 'later' ? undefined : bytes
  }

  /** Throws TR_TRACE_DIGEST_MISMATCH unless `bytes` are `size` bytes hashing to `digest`. */
  checkBytes(bytes: Uint8Array, path: string, digest: string, size: number): void {
    if (bytes.byteLength === size && sha256(bytes) === digest) return
    throw new ToolReplayError(
      ErrorCodes.TRACE_DIGEST_MISMATCH,
      `Trace file ${this.#file} was changed after export: ${path} does not match its sha256 ${digest}${bytes.byteLength !== size ? ` (it has ${bytes.byteLength} bytes, not ${size})` : ''}. Re-export the trace, or use \`tr-proxy fork\` to change a body.`,
      { details: { file: this.#file, field: path, digest } },
    )
  }
}

function join2(path: string, key: string): string {
  return path ? `${path}.${key}` : key
}
