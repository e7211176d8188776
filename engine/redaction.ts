import {
  type HeaderPairs,
  headerValue,
  jsonPathMatches,
  type OptionDeclaration,
  type OptionValues,
  type PathSegment,
  parseJsonPath,
  readJsonText,
  tryUtf8,
} from '../trace/index.ts'

/**
 * What is scrubbed before anything reaches the store, beyond the defaults (secrets never persist): declared once,
 * for the flags of every command that stores or checks traces and for `install({ redaction })`.
 */
export const REDACTION_OPTIONS = {
  headers: { flag: 'redact-header', type: 'strings', help: 'Also redact this header (repeatable; authorization, cookie, x-api-key, ... always are)' },
  queryParams: { flag: 'redact-query', type: 'strings', help: 'Also redact this query parameter (repeatable; api_key, token, key, ... always are)' },
  bodyPaths: {
    flag: 'redact-body-path',
    type: 'strings',
    help: 'Redact this JSON path in request and response bodies, compressed ones too (repeatable), e.g. $.api_key',
  },
} as const satisfies Record<string, OptionDeclaration>

/** Extra headers, query parameters (case-insensitive) and JSON body paths to redact, on top of the defaults. */
export type RedactionOptions = OptionValues<typeof REDACTION_OPTIONS>

/**
 * Headers that carry credentials. Matched case-insensitively. AWS SigV4 requests carry the signature in
 * `authorization`, the session token in `x-amz-security-token`, and what was signed in `x-amz-date` and
 * `x-amz-content-sha256`; the last is redacted only where it is the body's digest (it follows the body, which
 * is stored anyway), not where it names a mode (`UNSIGNED-PAYLOAD`, `STREAMING-...`).
 */
export const DEFAULT_REDACTED_HEADERS: readonly string[] = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'x-api-key',
  'api-key',
  'x-goog-api-key',
  'openai-organization',
  'openai-project',
  'x-amz-security-token',
  'x-amz-date',
  'x-amz-content-sha256',
]

const BODY_DIGEST = /^[0-9a-f]{64}$/i

/** Query parameters that carry credentials in some APIs. */
/** `key` is Google's (Gemini, Maps) API-key parameter. */
export const DEFAULT_REDACTED_QUERY_PARAMS: readonly string[] = ['api_key', 'apikey', 'api-key', 'access_token', 'key', 'token', 'client_secret']

export const REDACTED = '[REDACTED]'

/** A query of characters the URL parser and the form decoding both keep as they are (no `%`, `+`, space, tab or newline). */
const PLAIN_QUERY = /^[A-Za-z0-9\-._~*=&]*$/

/** A compiled redaction policy; `redact*` return new values and never mutate their input. */
export class Redactor {
  readonly #headers: Set<string>
  /** Lengths of the redacted names: most header names are ruled out without a lowercase copy. */
  readonly #headerLengths: Set<number>
  readonly #bodyPaths: PathSegment[][]
  readonly #queryParams: Set<string>
  /** The values replaced so far (bounded), so free text stored with a trace can be scrubbed of them too. */
  readonly #replaced = new Set<string>()

  constructor(options: RedactionOptions = {}) {
    this.#headers = new Set([...DEFAULT_REDACTED_HEADERS, ...(options.headers ?? [])].map((h) => h.toLowerCase()))
    this.#headerLengths = new Set([...this.#headers].map((h) => h.length))
    this.#bodyPaths = (options.bodyPaths ?? []).map((p) => parseJsonPath(p))
    this.#queryParams = new Set([...DEFAULT_REDACTED_QUERY_PARAMS, ...(options.queryParams ?? [])].map((q) => q.toLowerCase()))
  }

  /** Redacts credential headers; returns `pairs` itself when none is present (the common case: no copy). */
  headers(pairs: HeaderPairs): HeaderPairs {
    let out: HeaderPairs | undefined
    for (let i = 0; i < pairs.length; i++) {
      const [k, v] = pairs[i] as [string, string]
      if (k.length === SUBPROTOCOLS.length && k.toLowerCase() === SUBPROTOCOLS) {
        const kept = redactSubprotocols(v, (secret) => this.#remember(secret))
        if (kept === v) continue
        out ??= pairs.map(([name, value]) => [name, value])
        out[i] = [k, kept]
        continue
      }
      if (!this.#headerLengths.has(k.length)) continue
      const lower = k.toLowerCase()
      if (!this.#headers.has(lower)) continue
      if (lower === 'x-amz-content-sha256' && !BODY_DIGEST.test(v)) continue
      // Keep Set-Cookie's cookie name and attributes: they matter to behaviour, the value is the secret.
      const redacted = lower === 'set-cookie' ? redactSetCookie(v) : REDACTED
      if (redacted === v) continue // already redacted (an import, a fork of a recording)
      this.#remember(lower === 'set-cookie' ? cookieValue(v) : v)
      out ??= pairs.map(([name, value]) => [name, value])
      out[i] = [k, redacted]
    }
    return out ?? pairs
  }

  /**
   * False only when the query certainly names no redacted parameter: it holds only characters the URL parser and
   * the form decoding keep as they are, and none of its keys is one. Parsing the URL costs more than the rest of
   * redacting an exchange, and most recorded queries are like that.
   */
  #mayNameRedacted(url: string): boolean {
    const hash = url.indexOf('#')
    const query = url.slice(url.indexOf('?') + 1, hash === -1 ? undefined : hash)
    if (!PLAIN_QUERY.test(query)) return true
    for (const pair of query.split('&')) {
      const eq = pair.indexOf('=')
      if (this.#queryParams.has((eq === -1 ? pair : pair.slice(0, eq)).toLowerCase())) return true
    }
    return false
  }

  url(url: string): string {
    // Cheap exit for the common case: no userinfo (`user:pass@host`), and no query or none that can name a redacted key.
    if (!url.includes('@') && (!url.includes('?') || !this.#mayNameRedacted(url))) return url
    let u: URL
    try {
      u = new URL(url)
    } catch {
      return url
    }
    let changed = false
    if (u.password && decodeURIComponent(u.password) !== REDACTED) {
      this.#remember(decodeURIComponent(u.password))
      u.password = REDACTED
      changed = true
    }
    for (const [name, value] of [...u.searchParams]) {
      if (this.#queryParams.has(name.toLowerCase()) && value !== REDACTED) {
        this.#remember(value)
        u.searchParams.set(name, REDACTED)
        changed = true
      }
    }
    return changed ? u.toString() : url
  }

  /** True when bodies need a look (some JSON paths are configured). */
  get hasBodyPaths(): boolean {
    return this.#bodyPaths.length > 0
  }

  /**
   * Redacts configured JSON paths in a JSON body; other bodies come back unchanged (same object).
   * Every occurrence is redacted, as a server could read any of them: a repeated key
   * (`{"password":"x","password":"SECRET"}`: JSON.parse keeps the last, some parsers the first), an escaped
   * key (`"pa\u0073sword"`), JSONC (comments, trailing commas), each value of JSON Lines, and what a body
   * cut short holds before its end.
   */
  body(bytes: Uint8Array, headers: HeaderPairs): Uint8Array {
    if (this.#bodyPaths.length === 0 || bytes.byteLength === 0) return bytes
    const type = headerValue(headers, 'content-type') ?? ''
    const encoding = headerValue(headers, 'content-encoding')
    if (encoding && encoding !== 'identity') return bytes
    if (!type.includes('json') && !startsLikeJson(bytes)) return bytes
    const text = tryUtf8(bytes)
    if (text === undefined) return bytes
    const redacted = redactJsonText(text, this.#bodyPaths, (value) => this.#remember(value))
    return redacted === text ? bytes : new TextEncoder().encode(redacted)
  }

  /**
   * The distinct values this redactor replaced so far (at most REMEMBERED_VALUES, each 4 to 4096 characters):
   * what must not reach free text stored with a trace either (a wrapped command's output, its command line).
   */
  replacedValues(): string[] {
    return [...this.#replaced]
  }

  #remember(value: string): void {
    if (value.length < 4 || value.length > 4096 || this.#replaced.size >= REMEMBERED_VALUES) return
    this.#replaced.add(value)
  }
}

/** How many replaced values a redactor keeps for scrubbing free text. */
const REMEMBERED_VALUES = 10_000

const SUBPROTOCOLS = 'sec-websocket-protocol'

/**
 * Subprotocol names that carry a credential, where a WebSocket client cannot set `Authorization` (browsers): the
 * OpenAI Realtime API's `openai-insecure-api-key.KEY` and Kubernetes' `base64url.bearer.authorization.k8s.io.TOKEN`
 * keep their prefix; the name after a bare `token` or `bearer` (Deepgram's `['token', KEY]`) is the secret whole.
 */
const CREDENTIAL_SUBPROTOCOL = /^(openai-insecure-api-key\.|base64url\.bearer\.authorization\.k8s\.io\.)(.+)$/i
const CREDENTIAL_NEXT = /^(token|bearer)$/i

/**
 * A `Sec-WebSocket-Protocol` value with the credentials in its names replaced by "[REDACTED]" (the other names and
 * the separators stay: a replayed 101 still names the subprotocol the server chose); `replaced` hears each secret.
 * Returns `value` itself when it holds none.
 */
export function redactSubprotocols(value: string, replaced: (secret: string) => void = () => {}): string {
  const names = value.split(',')
  let changed = false
  for (let i = 0; i < names.length; i++) {
    const name = (names[i] as string).trim()
    const prefixed = CREDENTIAL_SUBPROTOCOL.exec(name)
    const secret = prefixed ? (prefixed[2] as string) : i > 0 && CREDENTIAL_NEXT.test((names[i - 1] as string).trim()) ? name : undefined
    if (secret === undefined || secret === REDACTED || secret === '') continue
    replaced(secret)
    names[i] = (names[i] as string).replace(name, prefixed ? `${prefixed[1]}${REDACTED}` : REDACTED)
    changed = true
  }
  return changed ? names.join(',') : value
}

/** The value of a Set-Cookie field (between the first `=` and the first `;`). */
function cookieValue(field: string): string {
  const eq = field.indexOf('=')
  const semi = field.indexOf(';')
  return field.slice(eq + 1, semi < 0 ? undefined : semi)
}

/**
 * `text` with every value at `paths` replaced by "[REDACTED]"; surgical: only those values' bytes change
 * (big numbers, spacing, key order and escapes elsewhere stay). Returns `text` itself when nothing changed.
 */
function redactJsonText(text: string, paths: ReadonlyArray<ReadonlyArray<PathSegment>>, replaced: (value: string) => void): string {
  const spans: Array<{ offset: number; length: number }> = []
  readJsonText(text, {
    value: (v) => {
      if (v.kind === 'string' && v.text === REDACTED && !v.cut) return
      if (!paths.some((p) => jsonPathMatches(p, v.path))) return
      spans.push({ offset: v.offset, length: v.length })
      if (v.kind === 'string') replaced(v.text ?? '')
      else if (v.kind === 'number') replaced(text.slice(v.offset, v.offset + v.length))
    },
  })
  if (spans.length === 0) return text
  // Values arrive innermost first; a redacted container swallows what was redacted inside it.
  spans.sort((a, b) => a.offset - b.offset || b.length - a.length)
  const parts: string[] = []
  let at = 0
  for (const span of spans) {
    if (span.offset < at) continue
    parts.push(text.slice(at, span.offset), JSON.stringify(REDACTED))
    at = span.offset + span.length
  }
  parts.push(text.slice(at))
  return parts.join('')
}

/** True when the first byte after ASCII whitespace opens an object or an array. */
function startsLikeJson(bytes: Uint8Array): boolean {
  for (const b of bytes) {
    if (b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d) continue
    return b === 0x7b || b === 0x5b
  }
  return false
}

function redactSetCookie(value: string): string {
  const eq = value.indexOf('=')
  if (eq < 0) return REDACTED
  const semi = value.indexOf(';', eq)
  return `${value.slice(0, eq + 1)}${REDACTED}${semi >= 0 ? value.slice(semi) : ''}`
}
