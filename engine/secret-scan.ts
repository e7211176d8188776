/**
 * Finds what looks like a credential in a trace, on decoded content: compressed bodies are decompressed,
 * JSON is walked value by value (so an escaped secret is found too), event streams and text are searched
 * whole. Pure: the caller reads traces (from the store API, trace files or case directories) and decides
 * what a finding means (`tr-proxy scan` exits non-zero). A finding names where the value is and shows only a
 * masked preview, so a scan report never leaks what it found.
 *
 * What counts: API keys of well-known shapes (`sk-...`, `sk-ant-...`, `AKIA...`/`ASIA...`, `ghp_...`,
 * `AIza...`), bearer tokens, JWTs and private-key PEM blocks anywhere; and, whatever their shape, values of
 * the headers, query parameters and JSON body paths that redaction covers (the defaults plus the configured
 * ones) that are not `[REDACTED]`.
 */
import {
  decodeContentEncoding,
  type Exchange,
  formatJsonPath,
  type HeaderPairs,
  headerValue,
  isEventStream,
  isExactNumber,
  type PathSegment,
  type RecordedResponse,
  selectJsonPath,
  type Trace,
  tryParseJson,
} from '../trace/index.ts'
import { DEFAULT_REDACTED_HEADERS, DEFAULT_REDACTED_QUERY_PARAMS, REDACTED, type RedactionOptions } from './redaction.ts'

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
  const json = tryParseJson(text)
  if (json) s.json(json.value, { side: 'trace', where: '' }, [])
  else s.text(text, { side: 'trace', where: 'text' })
  return s.findings
}

/** A masked preview: "sk-pla…0f (31 chars)". */
export function maskSecret(value: string): string {
  const v = value.replace(/\s+/g, ' ')
  const shown = v.length > 12 ? `${v.slice(0, 6)}…${v.slice(-2)}` : `${v.slice(0, 2)}…`
  return `${shown} (${value.length} chars)`
}

type Place = { seq?: number; side: SecretFinding['side']; where: string }

class Scanner {
  readonly findings: SecretFinding[] = []
  readonly #trace: Trace
  readonly #headers: Set<string>
  readonly #query: Set<string>
  readonly #bodyPaths: string[]
  readonly #seen = new Set<string>()

  constructor(trace: Trace, redaction: RedactionOptions) {
    this.#trace = trace
    this.#headers = new Set([...DEFAULT_REDACTED_HEADERS, ...(redaction.headers ?? [])].map((h) => h.toLowerCase()))
    this.#query = new Set([...DEFAULT_REDACTED_QUERY_PARAMS, ...(redaction.queryParams ?? [])].map((q) => q.toLowerCase()))
    this.#bodyPaths = redaction.bodyPaths ?? []
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
    if (x.outcome.kind === 'response') this.response(x.outcome.response, res)
    else {
      this.text(x.outcome.error.message, { ...res, where: 'error message' })
      if (x.outcome.error.partial) this.response(x.outcome.error.partial, res)
    }
  }

  response(r: RecordedResponse, place: { seq: number; side: 'response' }): void {
    this.text(r.statusText, { ...place, where: 'status text' })
    this.fields(r.headers, { ...place, where: 'header' })
    this.fields(r.trailers, { ...place, where: 'trailer' })
    this.body(r.body, r.headers, { ...place, where: 'body' })
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
    const json = tryParseJson(bytes)
    if (json) {
      this.json(json.value, place, [])
      for (const p of this.#bodyPaths) {
        for (const hit of selectJsonPath(json.value, p)) {
          if (hit.value !== REDACTED && hit.value !== null && hit.value !== undefined) {
            this.add(
              { ...place, where: `${place.where} ${formatJsonPath(hit.path)}` },
              'unredacted-body-path',
              typeof hit.value === 'string' ? hit.value : JSON.stringify(hit.value),
            )
          }
        }
      }
      return
    }
    const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8')
    const stream = isEventStream(headerValue(headers, 'content-type'))
    this.text(text, place, (offset) => (stream ? `event #${(text.slice(0, offset).match(/\r?\n\r?\n/g) ?? []).length}` : `at offset ${offset}`))
  }

  json(value: unknown, place: Place, path: PathSegment[]): void {
    const at = () => ({ ...place, where: `${place.where} ${formatJsonPath(path)}`.trim() })
    if (typeof value === 'string') this.text(value, at())
    else if (Array.isArray(value)) {
      for (const [i, v] of value.entries()) this.json(v, place, [...path, i])
    } else if (value !== null && typeof value === 'object' && !isExactNumber(value)) {
      for (const [k, v] of Object.entries(value)) {
        this.text(k, at())
        this.json(v, place, [...path, k])
      }
    }
  }

  /** Pattern search; `locate` names the position of a match inside a long text. */
  text(text: string, place: Place, locate?: (offset: number) => string): void {
    const found = new Set<string>()
    for (const [kind, re] of SECRET_SHAPES) {
      re.lastIndex = 0
      for (let m = re.exec(text); m !== null; m = re.exec(text)) {
        // "Bearer sk-..." is one credential: reported once, by its more specific kind.
        if (kind === 'bearer-token' && found.has(m[0].replace(/^Bearer\s+/i, ''))) continue
        found.add(m[0])
        this.add(locate ? { ...place, where: `${place.where} ${locate(m.index)}` } : place, kind, m[0])
      }
    }
  }
}
