/**
 * Finds what looks like a credential in a trace, on decoded content: compressed bodies are decompressed,
 * JSON is read from its raw text token by token (trace/json-text.ts), so every occurrence of a repeated key,
 * every key and string decoded (an escaped secret or key), comments, and JSON cut short or broken half-way are
 * all searched — not only what JSON.parse would keep; event streams and other text are searched whole. Pure:
 * the caller reads traces (from the store API, trace files or case directories) and decides what a finding
 * means (`tr-proxy scan` exits non-zero). A finding names where the value is and shows only a
 * masked preview, so a scan report never leaks what it found.
 *
 * What counts: API keys of well-known shapes (`sk-...`, `sk-ant-...`, `AKIA...`/`ASIA...`, `ghp_...`,
 * `AIza...`), bearer tokens, JWTs and private-key PEM blocks anywhere; and, whatever their shape, values of
 * the headers, query parameters and JSON body paths that redaction covers (the defaults plus the configured
 * ones) that are not `[REDACTED]`, at every occurrence (a key named in a comment counts too).
 */
import {
  decodeContentEncoding,
  type Exchange,
  formatJsonPath,
  type HeaderPairs,
  headerValue,
  isEventStream,
  type JsonTextComment,
  type JsonTextValue,
  jsonPathMatches,
  type Outcome,
  type PathSegment,
  parseJsonPath,
  type RecordedResponse,
  readJsonText,
  type Trace,
} from '../trace/index.ts'
import { DEFAULT_REDACTED_HEADERS, DEFAULT_REDACTED_QUERY_PARAMS, REDACTED, type RedactionOptions, redactSubprotocols } from './redaction.ts'

/** Kinds of findings. */
export type SecretKind =
  | 'anthropic-key'
  | 'openai-key'
  | 'aws-access-key'
  | 'github-token'
  | 'google-api-key'
  | 'bearer-token'
  | 'jwt'
  | 'private-key'
  | 'unredacted-header'
  | 'unredacted-query'
  | 'unredacted-body-path'
  | 'url-password'

/** One value that looks like a credential, and where it is. */
export interface SecretFinding {
  trace: string
  /** The exchange, or undefined for the trace's own metadata. */
  seq?: number
  side: 'request' | 'response' | 'trace'
  /** e.g. "header authorization", "url query api_key", "body $.messages[0].content", "body at offset 120". */
  where: string
  kind: SecretKind
  /** First and last characters only, and the length: enough to recognise, never enough to use. */
  preview: string
}

/** Shapes searched for in every value, most specific first (an Anthropic key also starts with "sk-"). */
export const SECRET_SHAPES: ReadonlyArray<[SecretKind, RegExp]> = [
  ['private-key', /-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----/g],
  ['anthropic-key', /(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{16,}/g],
  ['openai-key', /(?<![A-Za-z0-9_-])sk-(?!ant-)[A-Za-z0-9_-]{16,}/g],
  ['aws-access-key', /(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])/g],
  ['github-token', /(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})/g],
  ['google-api-key', /(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])/g],
  ['jwt', /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*/g],
  ['bearer-token', /\bBearer\s+(?!\[REDACTED\])[A-Za-z0-9._~+/=-]{12,}/gi],
]

/** Decoded bodies are searched up to this size (a compression bomb is not expanded further). */
const MAX_DECODED_BYTES = 256 * 1024 * 1024

/** Names the scan checks for `[REDACTED]`: the defaults plus what `redaction` adds. */
export interface ScanOptions {
  redaction?: RedactionOptions
}

/** Every finding in a trace: its metadata and every exchange, request and response (and partial response). */
export function scanTrace(trace: Trace, options: ScanOptions = {}): SecretFinding[] {
  const s = new Scanner(trace, options.redaction ?? {})
  s.text(JSON.stringify(trace.meta), { side: 'trace', where: 'metadata' })
  for (const x of trace.exchanges) s.exchange(x)
  return s.findings
}

/** Findings in a JSON document or text that is not a trace (a case manifest, a generated test file). */
export function scanDocument(name: string, text: string, options: ScanOptions = {}): SecretFinding[] {
  const s = new Scanner({ meta: { name, format: 1 }, exchanges: [], bodies: new Map() }, options.redaction ?? {})
  if (!s.jsonText(text, { side: 'trace', where: '' })) s.text(text, { side: 'trace', where: 'text' })
  return s.findings
}

/** A masked preview: "sk-pla…0f (31 chars)". */
export function maskSecret(value: string): string {
  const v = value.replace(/\s+/g, ' ')
  const shown = v.length > 12 ? `${v.slice(0, 6)}…${v.slice(-2)}` : `${v.slice(0, 2)}…`
  return `${shown} (${value.length} chars)`
}

type Place = { seq?: number; side: SecretFinding['side']; where: string }

/** A `"key": value` pair in text that is not read as JSON (a comment, the rest of broken JSON). */
const KEY_VALUE = /"((?:[^"\\\n]|\\.)*)"\s*:\s*("(?:[^"\\\n]|\\.)*"?|[^\s,}\]/]+)/g

/** A JSON string literal decoded, or the raw text when it is not one. */
function decodeLiteral(raw: string): string {
  if (!raw.startsWith('"')) return raw
  try {
    return JSON.parse(raw.endsWith('"') && raw.length > 1 ? raw : `${raw}"`) as string
  } catch {
    return raw.slice(1)
  }
}

class Scanner {
  readonly findings: SecretFinding[] = []
  readonly #trace: Trace
  readonly #headers: Set<string>
  readonly #query: Set<string>
  readonly #bodyPaths: PathSegment[][]
  /** The last key of each configured body path: what a `"key": value` in a comment is checked against. */
  readonly #bodyKeys: Set<string>
  readonly #seen = new Set<string>()

  constructor(trace: Trace, redaction: RedactionOptions) {
    this.#trace = trace
    this.#headers = new Set([...DEFAULT_REDACTED_HEADERS, ...(redaction.headers ?? [])].map((h) => h.toLowerCase()))
    this.#query = new Set([...DEFAULT_REDACTED_QUERY_PARAMS, ...(redaction.queryParams ?? [])].map((q) => q.toLowerCase()))
    this.#bodyPaths = (redaction.bodyPaths ?? []).map((p) => parseJsonPath(p))
    this.#bodyKeys = new Set(this.#bodyPaths.map((p) => p.at(-1)).filter((k): k is string => typeof k === 'string' && k !== '*'))
  }

  add(place: Place, kind: SecretKind, value: string): void {
    const key = `${place.seq}|${place.side}|${place.where}|${kind}|${value}`
    if (this.#seen.has(key)) return
    this.#seen.add(key)
    this.findings.push({
      trace: this.#trace.meta.name,
      ...(place.seq === undefined ? {} : { seq: place.seq }),
      side: place.side,
      where: place.where,
      kind,
      preview: maskSecret(value),
    })
  }

  exchange(x: Exchange): void {
    const req = { seq: x.seq, side: 'request' as const }
    this.url(x.request.url, { ...req, where: 'url' })
    this.fields(x.request.headers, { ...req, where: 'header' })
    if (x.request.body) this.body(x.request.body, x.request.headers, { ...req, where: 'body' })
    const res = { seq: x.seq, side: 'response' as const }
    this.outcome(x.outcome, res, '')
    // A faulted exchange also keeps what the upstream really answered (the app got something else).
    if (x.fault?.upstream) this.outcome(x.fault.upstream, res, 'upstream ')
  }

  outcome(o: Outcome, place: { seq: number; side: 'response' }, prefix: string): void {
    if (o.kind === 'response') this.response(o.response, place, prefix)
    else {
      this.text(o.error.message, { ...place, where: `${prefix}error message` })
      if (o.error.partial) this.response(o.error.partial, place, prefix)
    }
  }

  response(r: RecordedResponse, place: { seq: number; side: 'response' }, prefix = ''): void {
    this.text(r.statusText, { ...place, where: `${prefix}status text` })
    this.fields(r.headers, { ...place, where: `${prefix}header` })
    this.fields(r.trailers, { ...place, where: `${prefix}trailer` })
    this.body(r.body, r.headers, { ...place, where: `${prefix}body` })
  }

  url(url: string, place: Place): void {
    this.text(url, place)
    let u: URL
    try {
      u = new URL(url)
    } catch {
      return
    }
    if (u.password && decodeURIComponent(u.password) !== REDACTED) this.add(place, 'url-password', decodeURIComponent(u.password))
    for (const [name, value] of u.searchParams) {
      if (this.#query.has(name.toLowerCase()) && value !== REDACTED && value !== '')
        this.add({ ...place, where: `url query ${name}` }, 'unredacted-query', value)
    }
  }

  fields(fields: HeaderPairs, place: Place): void {
    for (const [name, value] of fields) {
      const at = { ...place, where: `${place.where} ${name.toLowerCase()}` }
      const lower = name.toLowerCase()
      if (this.#headers.has(lower)) {
        // Set-Cookie keeps its cookie name and attributes when redacted; only the value is the secret.
        const secret = lower === 'set-cookie' ? (/^[^=]*=([^;]*)/.exec(value)?.[1] ?? value) : value
        if (secret !== REDACTED && secret !== '') this.add(at, 'unredacted-header', secret)
      }
      // A WebSocket credential in a subprotocol name, whatever its shape (redaction.ts redactSubprotocols).
      if (lower === 'sec-websocket-protocol') redactSubprotocols(value, (secret) => this.add(at, 'unredacted-header', secret))
      this.text(value, at)
    }
  }

  body(ref: { digest: string }, headers: HeaderPairs, place: Place): void {
    const raw = this.#trace.bodies.get(ref.digest)
    if (!raw || raw.byteLength === 0) return
    let bytes = raw
    const encoding = headerValue(headers, 'content-encoding')
    if (encoding && encoding.trim().toLowerCase() !== 'identity') {
      try {
        bytes = decodeContentEncoding(raw, encoding, { maxBytes: MAX_DECODED_BYTES })
      } catch {
        bytes = raw // not decodable as declared: search what is there
      }
    }
    const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8')
    const stream = isEventStream(headerValue(headers, 'content-type'))
    if (!stream && this.jsonText(text, place)) return
    this.text(text, place, (offset) => (stream ? `event #${(text.slice(0, offset).match(/\r?\n\r?\n/g) ?? []).length}` : `at offset ${offset}`))
  }

  /**
   * Searches JSON text from its raw form: every key and string decoded, every occurrence of a configured body
   * path (repeated keys too), comments; when the text breaks off or stops being JSON, the rest is searched as
   * text. False when nothing of it reads as JSON (search it as text instead).
   */
  jsonText(text: string, place: Place): boolean {
    const at = (path: ReadonlyArray<string | number>, document: number) => ({
      ...place,
      where: `${place.where}${document > 0 ? ` value #${document + 1}` : ''} ${formatJsonPath(path as PathSegment[])}`.trim(),
    })
    const occurrences = new Map<string, number>()
    const found = new Set<string>()
    const comments: JsonTextComment[] = []
    let read = false
    const reading = readJsonText(text, {
      key: (k) => this.text(k.text, at(k.path, k.document), undefined, found),
      value: (v) => {
        read = true
        if (v.kind === 'string') this.text(v.text as string, at(v.path, v.document), undefined, found)
        if (!this.#bodyPaths.some((p) => jsonPathMatches(p, v.path))) return
        const place = at(v.path, v.document)
        const n = (occurrences.get(place.where) ?? 0) + 1
        occurrences.set(place.where, n)
        const where = n > 1 ? `${place.where} (repeated key, occurrence ${n})` : place.where
        this.#unredacted({ ...place, where }, v, text)
      },
      comment: (c) => comments.push(c),
    })
    // Comments alone (a script's header) do not make text JSON.
    if (!read && reading.status === 'invalid') return false
    for (const c of comments) {
      const where = { ...place, where: `${place.where} comment at offset ${c.offset}` }
      this.text(c.text, where, undefined, found)
      this.#keysInText(c.text, where)
    }
    if (reading.status !== 'json') {
      // What is left after JSON broke off: searched as text, skipping what the JSON reading already reported.
      const rest = text.slice(reading.end)
      const where = { ...place, where: `${place.where} after offset ${reading.end}` }
      this.text(rest, place, (offset) => `at offset ${reading.end + offset}`, undefined, found)
      this.#keysInText(rest, where)
    }
    return true
  }

  /** A value at a configured body path that is not `[REDACTED]` (or null). */
  #unredacted(place: Place, v: JsonTextValue, text: string): void {
    if (v.kind === 'null' || (v.kind === 'string' && v.text === REDACTED && !v.cut)) return
    this.add(place, 'unredacted-body-path', v.kind === 'string' ? (v.text as string) : text.slice(v.offset, v.offset + v.length))
  }

  /** `"key": value` pairs in text that is not read as JSON, whose key is the last name of a configured body path. */
  #keysInText(text: string, place: Place): void {
    if (this.#bodyKeys.size === 0) return
    KEY_VALUE.lastIndex = 0
    for (let m = KEY_VALUE.exec(text); m !== null; m = KEY_VALUE.exec(text)) {
      const key = decodeLiteral(`"${m[1]}"`)
      const value = decodeLiteral(m[2] as string)
      if (this.#bodyKeys.has(key) && value !== REDACTED && value !== 'null' && value !== '')
        this.add({ ...place, where: `${place.where}: "${key}"` }, 'unredacted-body-path', value)
    }
  }

  /**
   * Pattern search; `locate` names the position of a match inside a long text. Matches go into `record`;
   * those already in `skip` are not reported again (text searched after its JSON reading).
   */
  text(text: string, place: Place, locate?: (offset: number) => string, record?: Set<string>, skip?: ReadonlySet<string>): void {
    const found = new Set<string>()
    for (const [kind, re] of SECRET_SHAPES) {
      re.lastIndex = 0
      for (let m = re.exec(text); m !== null; m = re.exec(text)) {
        // "Bearer sk-..." is one credential: reported once, by its more specific kind.
        if (kind === 'bearer-token' && found.has(m[0].replace(/^Bearer\s+/i, ''))) continue
        found.add(m[0])
        record?.add(m[0])
        if (skip?.has(m[0])) continue
        this.add(locate ? { ...place, where: `${place.where} ${locate(m.index)}` } : place, kind, m[0])
      }
    }
  }
}
