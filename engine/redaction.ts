import {
  type Exchange,
  editJson,
  type HeaderPairs,
  headerValue,
  type JsonEdit,
  type RecordedResponse,
  selectJsonPath,
  tryParseJson,
  tryUtf8,
} from '../trace/index.ts'

/** What is scrubbed before anything reaches the store. Secrets never persist. */
export interface RedactionOptions {
  /** Extra header names to redact, on top of DEFAULT_REDACTED_HEADERS. */
  headers?: string[]
  /** JSON paths redacted in JSON request and response bodies (e.g. '$.api_key'). */
  bodyPaths?: string[]
  /** Extra query parameter names to redact (case-insensitive), on top of DEFAULT_REDACTED_QUERY_PARAMS. */
  queryParams?: string[]
}

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

/** A compiled redaction policy; `redact*` return new values and never mutate their input. */
export class Redactor {
  readonly #headers: Set<string>
  /** Lengths of the redacted names: most header names are ruled out without a lowercase copy. */
  readonly #headerLengths: Set<number>
  readonly #bodyPaths: string[]
  readonly #queryParams: Set<string>

  constructor(options: RedactionOptions = {}) {
    this.#headers = new Set([...DEFAULT_REDACTED_HEADERS, ...(options.headers ?? [])].map((h) => h.toLowerCase()))
    this.#headerLengths = new Set([...this.#headers].map((h) => h.length))
    this.#bodyPaths = options.bodyPaths ?? []
    this.#queryParams = new Set([...DEFAULT_REDACTED_QUERY_PARAMS, ...(options.queryParams ?? [])].map((q) => q.toLowerCase()))
  }

  /** Redacts credential headers; returns `pairs` itself when none is present (the common case: no copy). */
  headers(pairs: HeaderPairs): HeaderPairs {
    let out: HeaderPairs | undefined
    for (let i = 0; i < pairs.length; i++) {
      const [k, v] = pairs[i] as [string, string]
      if (!this.#headerLengths.has(k.length)) continue
      const lower = k.toLowerCase()
      if (!this.#headers.has(lower)) continue
      if (lower === 'x-amz-content-sha256' && !BODY_DIGEST.test(v)) continue
      out ??= pairs.map(([name, value]) => [name, value])
      // Keep Set-Cookie's cookie name and attributes: they matter to behaviour, the value is the secret.
      out[i] = [k, lower === 'set-cookie' ? redactSetCookie(v) : REDACTED]
    }
    return out ?? pairs
  }

  url(url: string): string {
    // Cheap exit for the common case: no query and no userinfo (`user:pass@host`).
    if (!url.includes('?') && !url.includes('@')) return url
    let u: URL
    try {
      u = new URL(url)
    } catch {
      return url
    }
    let changed = false
    if (u.password) {
      u.password = REDACTED
      changed = true
    }
    for (const name of [...u.searchParams.keys()]) {
      if (this.#queryParams.has(name.toLowerCase())) {
        u.searchParams.set(name, REDACTED)
        changed = true
      }
    }
    return changed ? u.toString() : url
  }

  /**
   * An exchange from outside a capture path (a HAR import) with URL, headers and trailers redacted, as a
   * recording would have stored them. Bodies are left as they are: JSON-path redaction of stored bodies
   * happens while recording, where the decoded body is at hand.
   */
  exchange(x: Exchange): Exchange {
    const response = (r: RecordedResponse): RecordedResponse => ({ ...r, headers: this.headers(r.headers), trailers: this.headers(r.trailers) })
    const o = x.outcome
    return {
      ...x,
      request: { ...x.request, url: this.url(x.request.url), headers: this.headers(x.request.headers) },
      outcome:
        o.kind === 'response'
          ? { kind: 'response', response: response(o.response) }
          : { kind: 'error', error: o.error.partial ? { ...o.error, partial: response(o.error.partial) } : o.error },
    }
  }

  /** True when bodies need a look (some JSON paths are configured). */
  get hasBodyPaths(): boolean {
    return this.#bodyPaths.length > 0
  }

  /** Redacts configured JSON paths in a JSON body; other bodies come back unchanged (same object). */
  body(bytes: Uint8Array, headers: HeaderPairs): Uint8Array {
    if (this.#bodyPaths.length === 0 || bytes.byteLength === 0) return bytes
    const type = headerValue(headers, 'content-type') ?? ''
    const encoding = headerValue(headers, 'content-encoding')
    if (encoding && encoding !== 'identity') return bytes
    if (!type.includes('json') && bytes[0] !== 0x7b && bytes[0] !== 0x5b) return bytes
    const text = tryUtf8(bytes)
    if (text === undefined) return bytes
    const parsed = tryParseJson(text)
    if (parsed === undefined) return bytes
    // Surgical: only the redacted values' bytes change (big numbers, spacing and key order elsewhere stay).
    const edits: JsonEdit[] = []
    for (const p of this.#bodyPaths) {
      for (const hit of selectJsonPath(parsed.value, p)) {
        if (hit.value !== REDACTED) edits.push({ path: hit.path as Array<string | number>, value: REDACTED })
      }
    }
    if (edits.length === 0) return bytes
    return new TextEncoder().encode(editJson(text, edits))
  }
}

function redactSetCookie(value: string): string {
  const eq = value.indexOf('=')
  if (eq < 0) return REDACTED
  const semi = value.indexOf(';', eq)
  return `${value.slice(0, eq + 1)}${REDACTED}${semi >= 0 ? value.slice(semi) : ''}`
}
