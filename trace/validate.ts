/**
 * Valid by construction: the one set of rules an exchange meets before Tool Replay accepts, stores or
 * plays it back, so that no trace — imported, forked, recorded or read from an old store — can crash a
 * capture path or hang a client. Used by import (store/trace-file.ts), fork (trace/patch.ts), the stores
 * (putTrace, append) and the engine before it hands a playback to the interceptor or the proxy.
 *
 * The rules (RFC 9110 / 9112):
 * - a recorded response (or the head of a partial one) has a final status 200-599. 1xx are refused: both
 *   capture paths skip interim heads (100 Continue, 103 Early Hints) and record the final one, and 101 is
 *   an upgrade, recorded only as a WebSocket session (an exchange with `websocket`, which must have 101 and
 *   no body); any other 1xx in a trace can only come from an edit, and replaying it hangs proxy clients. 600-999 are refused too: fetch rejects them and no registered status lives there.
 * - the status text is a reason-phrase, and header and trailer fields are `token: field-value`: names are
 *   tokens, values hold HTAB, SP, visible ASCII and obs-text only (no CR, LF, NUL or other controls, nothing
 *   above U+00FF). Method is a token; the URL is absolute http(s), or mcp+stdio for MCP messages over stdio
 *   (trace/mcp-wire.ts: an MCP server's name as host, printable ASCII only).
 * - framing agrees with the body: at most one Content-Length, all digits; never together with
 *   Transfer-Encoding; equal to the body size for a whole response (at least the partial body's size for a
 *   failure mid-body). A HEAD request or a 204/304 response has an empty body (its Content-Length describes
 *   the representation, so any number is fine). Nothing is recomputed here: a disagreeing Content-Length is
 *   refused, and the places that change a body (fork's body and JSON patches, redaction) fix it themselves.
 * - a body's chunk sizes add up to its size (and to its bytes, when the caller has them); error codes are
 *   code-like tokens (ECONNRESET, UND_ERR_SOCKET, TR_REPLAY_MISS) and phases are known; a partial response
 *   belongs to a failure after the request was sent.
 */
import { type ErrorCode, ErrorCodes, ToolReplayError } from './errors.ts'
import { type AppRun, ERROR_PHASES, type Exchange, OUTPUT_TAIL_BYTES, WEBSOCKET_OPCODES } from './exchange.ts'
import { isSendableCloseCode, SWITCHING_PROTOCOLS } from './websocket.ts'

/** Lowest status a recorded response may have. */
export const RECORDED_STATUS_MIN = 200
/** Highest status a recorded response may have (599 is also the proxy's own refusal status). */
export const RECORDED_STATUS_MAX = 599

/** One thing wrong with an exchange: where (relative to the exchange) and what. */
export interface ExchangeProblem {
  /** e.g. "outcome.response.statusText". */
  path: string
  /** A sentence fragment after the path, e.g. "contains LF at index 2 ...". */
  problem: string
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/
const ERROR_CODE = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/
const DIGEST = /^[0-9a-f]{64}$/
const DIGITS = /^[0-9]{1,15}$/
const HTTP_SCHEME = /^\s*https?:/i
/** MCP over stdio (trace/mcp-wire.ts): `mcp+stdio://<server>/<path>`, ASCII without spaces or controls. */
const MCP_STDIO_URL = /^mcp\+stdio:\/\/[a-z0-9](?:[a-z0-9.-]{0,61}[a-z0-9])?\/[\x21-\x7e]*$/
const PHASES: ReadonlySet<string> = new Set(ERROR_PHASES)
const WS_OPCODES: ReadonlySet<string> = new Set(WEBSOCKET_OPCODES)
/** The longest wait a Node timer can make (about 24.8 days): recorded offsets beyond it cannot be paced. */
export const MAX_RECORDED_MS = 2 ** 31 - 1
const ORIGINS = new Set(['recorded', 'patched', 'live'])
const TRAILER_FORBIDDEN = /^(content-length|transfer-encoding|connection|keep-alive|proxy-connection|upgrade|te|trailer)$/i

/**
 * True when a response head's status text and fields follow the rules a recorded response is held to (field names
 * are tokens; status text and values HTAB, SP, visible ASCII and obs-text): what fetch's Response constructor
 * takes, for a head that did not come through the checks (one made by a fault, say).
 */
export function headFitsHttp(head: { statusText: string; headers: ReadonlyArray<readonly [string, string]> }): boolean {
  if (!FIELD_VALUE.test(head.statusText)) return false
  for (const [name, value] of head.headers) if (!TOKEN.test(name) || !FIELD_VALUE.test(value)) return false
  return true
}

/**
 * The first problem of an exchange, or undefined when it is valid. Never throws, whatever `value` is
 * (the engine and the stores pass data that may come from an older or damaged store).
 * `bodies`, when given, is checked for the size of every body it holds; a body it lacks is not a problem
 * here (stores already hold bodies an append does not repeat).
 */
export function exchangeProblem(value: unknown, bodies?: ReadonlyMap<string, Uint8Array>): ExchangeProblem | undefined {
  const p = new Problems(bodies)
  try {
    p.exchange(value)
  } catch (err) {
    if (err instanceof Found) return err.problem
    throw err
  }
  return undefined
}

/** Who is asking, for the message and the error code of `assertValidExchange`. */
export interface ValidationContext {
  /** Trace name, for the message. */
  trace: string
  /** Bodies to check sizes against (see exchangeProblem). */
  bodies?: ReadonlyMap<string, Uint8Array>
  /** Error code to throw. Default TR_TRACE_INVALID. */
  code?: ErrorCode
  /** What was being done, e.g. "Cannot replay" or "Cannot store". Default "Invalid". */
  action?: string
  /** The last sentence: how to fix it. */
  remedy?: string
}

/**
 * Throws a ToolReplayError (TR_TRACE_INVALID unless `context.code` says otherwise) naming the trace, the
 * exchange and the field, when the exchange breaks a rule; details carry { trace, seq, field }.
 */
export function assertValidExchange(x: Exchange, context: ValidationContext): void {
  const found = exchangeProblem(x, context.bodies)
  if (found === undefined) return
  throw invalidExchange(x, found, context)
}

/** Checks every exchange of a trace (bodies from the trace itself); see assertValidExchange. */
export function assertValidTrace(
  trace: { meta: { name: string }; exchanges: readonly Exchange[]; bodies?: ReadonlyMap<string, Uint8Array> },
  context: Omit<ValidationContext, 'trace' | 'bodies'> = {},
): void {
  const list: unknown = trace.exchanges
  if (!Array.isArray(list)) {
    throw new ToolReplayError(context.code ?? ErrorCodes.TRACE_INVALID, `Trace "${trace.meta.name}" has no exchange list. ${context.remedy ?? DEFAULT_REMEDY}`)
  }
  const seen = new Set<number>()
  for (const x of trace.exchanges) {
    assertValidExchange(x, { ...context, trace: trace.meta.name, ...(trace.bodies ? { bodies: trace.bodies } : {}) })
    if (seen.has(x.seq))
      throw invalidExchange(x, { path: 'seq', problem: `repeats seq ${x.seq}; every exchange of a trace has its own` }, { ...context, trace: trace.meta.name })
    seen.add(x.seq)
  }
}

/** The ToolReplayError for a problem found in an exchange. */
export function invalidExchange(x: Exchange, found: ExchangeProblem, context: ValidationContext): ToolReplayError {
  const seq = typeof x?.seq === 'number' ? x.seq : '?'
  const label = typeof x?.request?.method === 'string' && typeof x?.request?.url === 'string' ? ` (${x.request.method} ${x.request.url})` : ''
  return new ToolReplayError(
    context.code ?? ErrorCodes.TRACE_INVALID,
    `${context.action ?? 'Invalid'} exchange #${seq}${label} of trace "${context.trace}": ${found.path} ${found.problem}. ${context.remedy ?? DEFAULT_REMEDY}`,
    { details: { trace: context.trace, seq, field: found.path } },
  )
}

const DEFAULT_REMEDY = 'Re-record the trace, or make the change with `tr-proxy fork`, which keeps traces valid.'

/** Thrown inside the walk to stop at the first problem. */
class Found extends Error {
  readonly problem: ExchangeProblem
  constructor(problem: ExchangeProblem) {
    super(problem.problem)
    this.problem = problem
  }
}

type Obj = Record<string, unknown>

/** The walk over one exchange; each check throws Found at the first problem. */
class Problems {
  readonly #bodies: ReadonlyMap<string, Uint8Array> | undefined
  constructor(bodies: ReadonlyMap<string, Uint8Array> | undefined) {
    this.#bodies = bodies
  }

  fail(path: string, problem: string): never {
    throw new Found({ path, problem })
  }

  object(v: unknown, path: string): Obj {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) this.fail(path, 'must be an object')
    return v as Obj
  }

  exchange(value: unknown): void {
    const x = this.object(value, '(exchange)')
    if (!isCount(x.seq)) this.fail('seq', 'must be an integer >= 0')
    const req = this.object(x.request, 'request')
    if (typeof req.method !== 'string' || !TOKEN.test(req.method))
      this.fail('request.method', `is ${JSON.stringify(req.method)}; a method is an HTTP token (e.g. GET, POST)`)
    this.url(req.url, 'request.url')
    this.fields(req.headers, 'request.headers')
    if (req.body !== null) this.body(req.body, 'request.body')
    if (req.httpVersion !== undefined && req.httpVersion !== '2') this.fail('request.httpVersion', `is ${short(req.httpVersion)}; it is "2" or absent`)
    const timing = this.object(x.timing, 'timing')
    for (const k of ['startMs', 'headersMs']) if (!isTime(timing[k])) this.fail(`timing.${k}`, `must be a number of ms from 0 to ${MAX_RECORDED_MS}`)
    if (x.origin !== undefined && !ORIGINS.has(x.origin as string)) this.fail('origin', 'must be "recorded", "patched" or "live"')
    if (x.patchId !== undefined && typeof x.patchId !== 'string') this.fail('patchId', 'must be a string')
    const outcome = this.object(x.outcome, 'outcome')
    const head = req.method.toUpperCase() === 'HEAD'
    if (x.websocket !== undefined) {
      if (req.method !== 'GET') this.fail('request.method', `is ${req.method}; a WebSocket session is opened by a GET upgrade (RFC 6455 4.1)`)
      if (outcome.kind !== 'response') this.fail('outcome.kind', 'must be "response" for a WebSocket session (the 101 that opened it)')
      this.response(outcome.response, 'outcome.response', { head, partial: false, upgrade: true })
      this.websocket(x.websocket)
      return
    }
    if (outcome.kind === 'response') {
      this.response(outcome.response, 'outcome.response', { head, partial: false })
      return
    }
    if (outcome.kind !== 'error') this.fail('outcome.kind', 'must be "response" or "error"')
    const error = this.object(outcome.error, 'outcome.error')
    if (typeof error.code !== 'string' || !ERROR_CODE.test(error.code)) {
      this.fail(
        'outcome.error.code',
        `is ${short(error.code)}; an error code is a word like ECONNRESET or UND_ERR_SOCKET (letters, digits, _ . : -, at most 128)`,
      )
    }
    if (typeof error.message !== 'string') this.fail('outcome.error.message', 'must be a string')
    if (!PHASES.has(error.phase as string)) this.fail('outcome.error.phase', `must be one of ${[...PHASES].join(', ')}`)
    if (error.partial !== undefined) {
      if (error.phase === 'connect' || error.phase === 'request') {
        this.fail('outcome.error.partial', `is a response head, but the failure is in phase "${error.phase}", before any response could arrive`)
      }
      this.response(error.partial, 'outcome.error.partial', { head, partial: true })
      const status = (error.partial as Obj).status
      if (head || status === 204 || status === 304) {
        this.fail(
          'outcome.error.partial',
          `is a ${head ? 'response to HEAD' : `${status} response`}, which is complete at its head and cannot fail part-way; record it as a response`,
        )
      }
    }
  }

  url(v: unknown, path: string): void {
    if (typeof v !== 'string') this.fail(path, 'must be a string')
    // URL.canParse and a scheme test: half the cost of building a URL, on the replay path of every request.
    if (!URL.canParse(v)) this.fail(path, `is ${short(v)}, not an absolute URL`)
    if (v.startsWith('mcp+stdio:')) {
      if (!MCP_STDIO_URL.test(v)) this.fail(path, `is ${short(v)}, not an MCP stdio URL (mcp+stdio://SERVER/METHOD, SERVER in a-z 0-9 . -)`)
      return
    }
    if (!HTTP_SCHEME.test(v)) this.fail(path, `has scheme "${v.slice(0, v.indexOf(':') + 1)}"; recorded requests are http:, https: or mcp+stdio:`)
  }

  /** The messages of a WebSocket session: in time order, known opcodes, bodies valid, control payloads <= 125 bytes. */
  websocket(v: unknown): void {
    const ws = this.object(v, 'websocket')
    if (!Array.isArray(ws.messages)) this.fail('websocket.messages', 'must be an array')
    let last = 0
    ws.messages.forEach((m: unknown, i: number) => {
      const path = `websocket.messages[${i}]`
      const msg = this.object(m, path)
      if (msg.from !== 'client' && msg.from !== 'server') this.fail(`${path}.from`, 'must be "client" or "server"')
      if (!WS_OPCODES.has(msg.opcode as string)) this.fail(`${path}.opcode`, `must be one of ${[...WS_OPCODES].join(', ')}`)
      if (!isTime(msg.atMs)) this.fail(`${path}.atMs`, `must be a number of ms from 0 to ${MAX_RECORDED_MS}`)
      if (msg.atMs < last)
        this.fail(`${path}.atMs`, `is ${msg.atMs}, before the message ahead of it (${last}); messages are in the order they crossed the wire`)
      last = msg.atMs
      const size = this.body(msg.body, `${path}.body`)
      const control = msg.opcode === 'ping' || msg.opcode === 'pong' || msg.opcode === 'close'
      if (control && size > 125) this.fail(`${path}.body`, `has ${size} bytes; a ${msg.opcode} payload is at most 125 (RFC 6455 5.5)`)
      if (msg.close !== undefined) {
        const close = this.object(msg.close, `${path}.close`)
        if (msg.opcode !== 'close') this.fail(`${path}.close`, `is set on a ${msg.opcode} message; only a close message has a code and reason`)
        if (typeof close.code !== 'number' || !isSendableCloseCode(close.code))
          this.fail(`${path}.close.code`, `is ${short(close.code)}, not a close code an endpoint may send (1000-1014 less 1004-1006, or 3000-4999)`)
        if (typeof close.reason !== 'string') this.fail(`${path}.close.reason`, 'must be a string')
      }
    })
    if (ws.end !== undefined) {
      const end = this.object(ws.end, 'websocket.end')
      if (typeof end.code !== 'string' || !ERROR_CODE.test(end.code))
        this.fail('websocket.end.code', `is ${short(end.code)}; an error code is a word like ECONNRESET`)
      if (typeof end.message !== 'string') this.fail('websocket.end.message', 'must be a string')
      if (!isTime(end.atMs)) this.fail('websocket.end.atMs', `must be a number of ms from 0 to ${MAX_RECORDED_MS}`)
    }
  }

  response(v: unknown, path: string, o: { head: boolean; partial: boolean; upgrade?: boolean }): void {
    const r = this.object(v, path)
    const status = r.status
    if (o.upgrade) {
      if (status !== SWITCHING_PROTOCOLS) this.fail(`${path}.status`, `is ${short(status)}; a WebSocket session's response is the 101 that switched protocols`)
      this.text(r.statusText, `${path}.statusText`, 'a status text')
      this.fields(r.headers, `${path}.headers`)
      this.fields(r.trailers, `${path}.trailers`)
      if ((r.trailers as unknown[]).length > 0) this.fail(`${path}.trailers`, 'must be empty; a 101 response has no content and no trailers')
      if (this.body(r.body, `${path}.body`) > 0) this.fail(`${path}.body`, "must be empty; the bytes after a 101 are the session's messages")
      return
    }
    if (typeof status !== 'number' || !Number.isInteger(status) || status < RECORDED_STATUS_MIN || status > RECORDED_STATUS_MAX) {
      const why =
        typeof status === 'number' && status >= 100 && status < 200
          ? ' (1xx heads are interim: both capture paths record the final response after them; 101 is recorded only for a WebSocket session, an exchange with a `websocket` field)'
          : ''
      this.fail(`${path}.status`, `is ${short(status)}; a recorded response has a final status ${RECORDED_STATUS_MIN}-${RECORDED_STATUS_MAX}${why}`)
    }
    this.text(r.statusText, `${path}.statusText`, 'a status text')
    this.fields(r.headers, `${path}.headers`)
    this.fields(r.trailers, `${path}.trailers`)
    const trailers = r.trailers as Array<[string, string]>
    for (let i = 0; i < trailers.length; i++) {
      const name = (trailers[i] as [string, string])[0]
      // RFC 9110 6.5.1: framing and connection control are read before the content, so they cannot come after
      // it (clients reject a trailing Content-Length, and obey a trailing Connection: close the server ignores).
      if (TRAILER_FORBIDDEN.test(name)) this.fail(`${path}.trailers[${i}][0]`, `is ${name}, a framing or connection field, which cannot be sent as a trailer`)
    }
    const size = this.body(r.body, `${path}.body`)
    this.framing(r.headers as Array<[string, string]>, `${path}.headers`, size, { ...o, status })
  }

  /** Content-Length and Transfer-Encoding against the body size. */
  framing(headers: Array<[string, string]>, path: string, size: number, o: { head: boolean; partial: boolean; status: number }): void {
    let length: number | undefined
    let encoding = false
    for (let i = 0; i < headers.length; i++) {
      const [name, value] = headers[i] as [string, string]
      // Length first: most names are ruled out without a lowercase copy.
      if (name.length !== 14 && name.length !== 17) continue
      const lower = name.toLowerCase()
      if (lower === 'transfer-encoding') {
        encoding = true
        if (!value.split(',').every((c) => TOKEN.test(c.trim().split(';')[0]?.trim() ?? ''))) {
          this.fail(`${path}[${i}]`, `has Transfer-Encoding ${short(value)}, which is not a list of transfer codings`)
        }
      } else if (lower === 'content-length') {
        if (length !== undefined) this.fail(`${path}[${i}]`, 'is a second Content-Length field; a response has at most one')
        if (!DIGITS.test(value)) this.fail(`${path}[${i}]`, `has Content-Length ${short(value)}; it must be a decimal number of bytes`)
        length = Number(value)
      }
    }
    if (encoding && length !== undefined) {
      this.fail(path, 'have both Transfer-Encoding and Content-Length; a response carries one framing (RFC 9112 6.3), and clients disagree on which wins')
    }
    const bodiless = o.head || o.status === 204 || o.status === 304
    if (bodiless) {
      if (size > 0) {
        const why = o.head ? 'the request is HEAD' : `status ${o.status} has no content`
        this.fail(`${path.replace(/headers$/, 'body')}`, `has ${size} bytes, but ${why}, so a client would never read them; record or patch an empty body`)
      }
      return
    }
    if (length === undefined) return
    if (o.partial ? length < size : length !== size) {
      const rel = o.partial ? `is smaller than the ${size} bytes that arrived` : `disagrees with the body (${size} bytes)`
      this.fail(
        path,
        `say Content-Length ${length}, which ${rel}; a client would wait for bytes that never come or misread the next response. Remove the field or make it match the body`,
      )
    }
  }

  fields(v: unknown, path: string): void {
    if (!Array.isArray(v)) this.fail(path, 'must be an array of [name, value] pairs')
    for (let i = 0; i < v.length; i++) {
      const pair: unknown = v[i]
      if (!Array.isArray(pair) || pair.length !== 2) this.fail(`${path}[${i}]`, 'must be a [name, value] pair')
      const [name, value] = pair as [unknown, unknown]
      if (typeof name !== 'string' || !TOKEN.test(name))
        this.fail(`${path}[${i}][0]`, `is ${short(name)}; a field name is an HTTP token (letters, digits and !#$%&'*+.^_\`|~-)`)
      this.text(value, `${path}[${i}][1]`, 'a field value')
    }
  }

  /** A status text or field value: HTAB, SP, visible ASCII and obs-text (RFC 9110 5.5, RFC 9112 4). */
  text(v: unknown, path: string, what: string): void {
    if (typeof v !== 'string') this.fail(path, 'must be a string')
    if (FIELD_VALUE.test(v)) return
    const i = [...v].findIndex((ch) => !FIELD_VALUE.test(ch))
    const at = [...v][i] as string
    const code = at.codePointAt(0) as number
    const name =
      NAMES[code] ??
      (code > 0xff
        ? `U+${code.toString(16).toUpperCase().padStart(4, '0')} (above U+00FF, which HTTP/1.1 cannot carry)`
        : `control character U+${code.toString(16).toUpperCase().padStart(4, '0')}`)
    this.fail(path, `contains ${name} at index ${i}; ${what} may hold only tab, space, visible ASCII and Latin-1 (RFC 9110), never CR, LF or NUL`)
  }

  /** Checks a BodyRef; returns its size. */
  body(v: unknown, path: string): number {
    const b = this.object(v, path)
    if (typeof b.digest !== 'string' || !DIGEST.test(b.digest)) this.fail(`${path}.digest`, 'must be a lowercase hex sha256')
    if (!isCount(b.size)) this.fail(`${path}.size`, 'must be an integer >= 0')
    if (!Array.isArray(b.chunks)) this.fail(`${path}.chunks`, 'must be an array')
    let sum = 0
    b.chunks.forEach((c: unknown, i: number) => {
      const chunk = this.object(c, `${path}.chunks[${i}]`)
      if (!isCount(chunk.size)) this.fail(`${path}.chunks[${i}].size`, 'must be an integer >= 0')
      if (!isTime(chunk.atMs)) this.fail(`${path}.chunks[${i}].atMs`, `must be a number of ms from 0 to ${MAX_RECORDED_MS}`)
      sum += chunk.size
    })
    if (sum !== b.size) this.fail(`${path}.chunks`, `sizes add up to ${sum}, not the body size ${b.size}`)
    const bytes = this.#bodies?.get(b.digest)
    if (bytes !== undefined && bytes.byteLength !== b.size)
      this.fail(`${path}.size`, `is ${b.size}, but body ${b.digest.slice(0, 12)} has ${bytes.byteLength} bytes`)
    return b.size
  }
}

const NAMES: Record<number, string> = { 0: 'NUL', 10: 'LF (a line break)', 13: 'CR (a line break)', 127: 'DEL' }

function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
}

function isTime(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= MAX_RECORDED_MS
}

function short(v: unknown): string {
  const s = typeof v === 'string' ? JSON.stringify(v) : v === undefined ? 'missing' : (JSON.stringify(v) ?? String(v))
  return s.length > 60 ? `${s.slice(0, 57)}...` : s
}

/**
 * Checks a fork's output before it is stored: an exchange a patch made invalid is TR_INVALID_PATCH naming
 * the patch (e.g. `status=100`, or a `header:content-length` that disagrees with the body); an invalid
 * exchange no patch touched is the source's problem, and says so.
 */
export function assertValidBranch(
  branch: { meta: { name: string; lineage?: { sourceName?: string } }; exchanges: readonly Exchange[]; bodies: ReadonlyMap<string, Uint8Array> },
  patches: ReadonlyArray<{ seq: number; patch: { text: string } }>,
): void {
  for (const x of branch.exchanges) {
    const found = exchangeProblem(x, branch.bodies)
    if (found === undefined) continue
    const mine = patches.filter((p) => p.seq === x.seq).map((p) => `"${p.patch.text}"`)
    if (mine.length === 0) {
      throw invalidExchange(x, found, {
        trace: branch.meta.lineage?.sourceName ?? branch.meta.name,
        code: ErrorCodes.INVALID_PATCH,
        action: 'Cannot fork: the source has an invalid',
        remedy: 'Re-record the source trace (or re-import it) before forking it.',
      })
    }
    throw invalidExchange(x, found, {
      trace: branch.meta.name,
      code: ErrorCodes.INVALID_PATCH,
      action: `Patch ${mine.join(' + ')} would make an invalid`,
      remedy:
        'Tool Replay keeps traces replayable: a status is 200-599, header values hold no CR/LF/NUL, and Content-Length matches the body (body=@FILE and $.path patches fix it themselves; header:content-length removes it).',
    })
  }
}

/** Most argv entries a recorded command may have, and the longest one (bytes). */
const MAX_COMMAND_ARGS = 4096
const MAX_COMMAND_ARG_BYTES = 64 * 1024
const SIGNAL_NAME = /^SIG[A-Z0-9]{1,14}$/

/**
 * The first problem of a trace's `meta.app` (the command a run was made with and how it ended), or undefined
 * when it is valid. Never throws. The rules: `command` is a non-empty argv of strings; `cwd` a string;
 * `exit.code` 0-255 (128 + the signal number when a signal ended it), `exit.signal` a signal name; each tail
 * holds at most twice OUTPUT_TAIL_BYTES (a redaction marker may be longer than what it hides) and `bytes` counts
 * what the command wrote; no other fields.
 */
export function appRunProblem(value: unknown): ExchangeProblem | undefined {
  const at = (path: string, problem: string): ExchangeProblem => ({ path: `meta.app${path}`, problem })
  if (!isObj(value)) return at('', 'must be an object')
  const extra = Object.keys(value).find((k) => !['command', 'cwd', 'exit'].includes(k))
  if (extra !== undefined) return at(`.${extra}`, 'is not a field of meta.app (command, cwd, exit)')
  const { command, cwd, exit } = value
  if (!Array.isArray(command) || command.length === 0 || command.length > MAX_COMMAND_ARGS)
    return at('.command', `must be a non-empty array of at most ${MAX_COMMAND_ARGS} strings`)
  const bad = command.findIndex((a) => typeof a !== 'string' || Buffer.byteLength(a) > MAX_COMMAND_ARG_BYTES || a.includes('\0'))
  if (bad >= 0) return at(`.command[${bad}]`, `must be a string of at most ${MAX_COMMAND_ARG_BYTES} bytes without NUL`)
  if (cwd !== undefined && (typeof cwd !== 'string' || cwd === '' || cwd.includes('\0'))) return at('.cwd', 'must be a non-empty string without NUL')
  if (exit === undefined) return undefined
  if (!isObj(exit)) return at('.exit', 'must be an object')
  const extraExit = Object.keys(exit).find((k) => !['code', 'signal', 'stdout', 'stderr'].includes(k))
  if (extraExit !== undefined) return at(`.exit.${extraExit}`, 'is not a field of meta.app.exit (code, signal, stdout, stderr)')
  if (!Number.isInteger(exit.code) || (exit.code as number) < 0 || (exit.code as number) > 255)
    return at('.exit.code', `must be an integer 0-255, not ${short(exit.code)}`)
  if (exit.signal !== undefined && (typeof exit.signal !== 'string' || !SIGNAL_NAME.test(exit.signal)))
    return at('.exit.signal', `must be a signal name such as SIGTERM, not ${short(exit.signal)}`)
  for (const stream of ['stdout', 'stderr'] as const) {
    const tail = exit[stream]
    if (!isObj(tail)) return at(`.exit.${stream}`, 'must be an object { text, bytes }')
    const extraTail = Object.keys(tail).find((k) => k !== 'text' && k !== 'bytes')
    if (extraTail !== undefined) return at(`.exit.${stream}.${extraTail}`, 'is not a field of an output tail (text, bytes)')
    if (typeof tail.text !== 'string' || Buffer.byteLength(tail.text) > 2 * OUTPUT_TAIL_BYTES)
      return at(`.exit.${stream}.text`, `must be a string of at most ${2 * OUTPUT_TAIL_BYTES} bytes`)
    if (!Number.isSafeInteger(tail.bytes) || (tail.bytes as number) < 0) return at(`.exit.${stream}.bytes`, 'must be an integer >= 0')
  }
  return undefined
}

/** Throws TR_TRACE_INVALID (or `code`) naming the trace and the field when `app` breaks a rule of appRunProblem. */
export function assertValidAppRun(trace: string, app: unknown, context: Omit<ValidationContext, 'trace' | 'bodies'> = {}): asserts app is AppRun {
  const found = appRunProblem(app)
  if (found === undefined) return
  throw new ToolReplayError(
    context.code ?? ErrorCodes.TRACE_INVALID,
    `${context.action ?? 'Invalid'} trace "${trace}": ${found.path} ${found.problem}. ${context.remedy ?? 'Re-record the run with `tr-proxy record -- <command>`.'}`,
    { details: { trace, field: found.path } },
  )
}

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}
