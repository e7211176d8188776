import { tryUtf8 } from './body.ts'
import { sha256 } from './digest.ts'
import { ErrorCodes, ToolReplayError } from './errors.ts'
import { headerValue } from './header-pairs.ts'
import { canonicalJson, parseJson, stringifyJson } from './json-codec.ts'
import { diffJson, replaceAtJsonPath } from './json-path.ts'
import type { OptionDeclaration, OptionValues } from './option-declaration.ts'

/** The request facts identity is computed from (headers already redacted). */
export interface IdentityRequest {
  method: string
  url: string
  headers: ReadonlyArray<readonly [string, string]>
  body: Uint8Array | null
}

export type BodyFingerprint =
  | { kind: 'empty' }
  | { kind: 'json'; value: unknown }
  | { kind: 'form'; value: Array<[string, string]> }
  | { kind: 'multipart'; sha256: string; size: number }
  | { kind: 'bytes'; sha256: string; size: number }

/** What makes two requests "the same request": compared field by field to explain a miss. */
export interface IdentityParts {
  method: string
  /** Normalized: lowercase scheme and host, default port dropped, query sorted, no fragment. */
  url: string
  headers: Array<[string, string]>
  body: BodyFingerprint
}

/**
 * How requests are matched, declared once: `install({ identity })`/`openSession({ identity })` in code, the
 * `--match-*` flags of `record`, `replay` and `serve`. Applied when a trace is replayed (the recorded requests'
 * identities are computed again with them), so a replay may take other rules than its recording did.
 */
export const IDENTITY_OPTIONS = {
  includeHeaders: {
    flag: 'match-header',
    type: 'strings',
    help: 'Request header that takes part in matching (repeatable); replaces the default, content-type (name it too to keep it)',
  },
  ignoreHeaders: { flag: 'match-ignore-header', type: 'strings', help: 'Request header left out of matching even if included (repeatable)' },
  ignoreQueryParams: {
    flag: 'match-ignore-query',
    type: 'strings',
    help: 'Query parameter left out of matching (repeatable), e.g. a cache-buster',
  },
  ignoreBodyPaths: {
    flag: 'match-ignore-body-path',
    type: 'strings',
    help: 'JSON path removed from JSON request bodies before matching (repeatable), e.g. $.metadata.request_id',
  },
} as const satisfies Record<string, OptionDeclaration>

/** How requests are matched. Defaults suit SDKs that add per-run headers (openai's X-Stainless-*). */
export interface IdentityOptions extends OptionValues<typeof IDENTITY_OPTIONS> {
  /** Last word: return new parts, or a string that is the identity itself. */
  custom?: (request: IdentityRequest, parts: IdentityParts) => IdentityParts | string
}

/**
 * Headers never part of identity even when listed in includeHeaders by accident:
 * they change on every run or carry secrets.
 */
export const ALWAYS_IGNORED_HEADERS: readonly string[] = [
  'user-agent',
  'date',
  'authorization',
  'proxy-authorization',
  'cookie',
  'traceparent',
  'tracestate',
  'x-request-id',
  'idempotency-key',
  'content-length',
  // MCP Streamable HTTP: the session id the server minted for this run, echoed on every request after.
  'mcp-session-id',
  // AWS SigV4 and the AWS SDK's per-call headers: a clock, a session token, an invocation id, the attempt.
  'x-amz-date',
  'x-amz-security-token',
  'amz-sdk-invocation-id',
  'amz-sdk-request',
]
const ALWAYS_IGNORED_PREFIXES = ['x-stainless-']
/** `x-amz-content-sha256` is the body's digest when it is 64 hex digits (or redacted): the body is matched itself. */
const FOLLOWS_BODY = /^(?:[0-9a-f]{64}|\[REDACTED\])$/i

export interface RequestIdentity {
  /** SHA-256 of the canonical JSON of the parts (or of the custom string). */
  key: string
  parts: IdentityParts
}

/**
 * The version of the identity rules: bump it whenever computeIdentity's key (default options) changes for any
 * request. A store keeps it with each trace it indexes, and replay takes a trace's stored keys instead of
 * computing them only when they were made by these rules.
 */
export const IDENTITY_RULES = 1

/** Computes a request's identity. Pure and deterministic. */
export function computeIdentity(request: IdentityRequest, options: IdentityOptions = {}): RequestIdentity {
  const include = new Set((options.includeHeaders ?? ['content-type']).map((h) => h.toLowerCase()))
  for (const h of options.ignoreHeaders ?? []) include.delete(h.toLowerCase())
  const contentType = headerValue(request.headers, 'content-type')
  const boundary = contentType ? multipartBoundary(contentType) : undefined

  const headers: Array<[string, string]> = []
  const grouped = new Map<string, string[]>()
  for (const [rawName, value] of request.headers) {
    const name = rawName.toLowerCase()
    if (!include.has(name) || isAlwaysIgnored(name)) continue
    if (name === 'x-amz-content-sha256' && FOLLOWS_BODY.test(value.trim())) continue
    const list = grouped.get(name) ?? []
    list.push(name === 'content-type' && boundary ? value.replace(boundary, 'BOUNDARY') : value.trim())
    grouped.set(name, list)
  }
  for (const name of [...grouped.keys()].sort()) headers.push([name, (grouped.get(name) as string[]).join(', ')])

  const parts: IdentityParts = {
    method: request.method.toUpperCase(),
    url: normalizeUrl(request.url, options.ignoreQueryParams),
    headers,
    body: fingerprintBody(request.body, contentType, boundary, options.ignoreBodyPaths),
  }
  if (options.custom) {
    const custom = options.custom(request, parts)
    if (typeof custom === 'string') return { key: sha256(`custom:${custom}`), parts }
    return { key: sha256(canonicalJson(custom)), parts: custom }
  }
  return { key: sha256(partsJson(parts)), parts }
}

/**
 * canonicalJson(parts), written member by member in key order: only the body's fingerprint can need the
 * canonical walk (a JSON body's own keys); the header pairs, method and URL are strings JSON.stringify writes
 * canonically. Every recorded, imported and (non-exact) replayed request comes through here.
 */
function partsJson(parts: IdentityParts): string {
  return `{"body":${canonicalJson(parts.body)},"headers":${JSON.stringify(parts.headers)},"method":${JSON.stringify(parts.method)},"url":${JSON.stringify(parts.url)}}`
}

function isAlwaysIgnored(name: string): boolean {
  return ALWAYS_IGNORED_HEADERS.includes(name) || ALWAYS_IGNORED_PREFIXES.some((p) => name.startsWith(p))
}

/** Lowercase scheme and host, default port dropped, query sorted (stable), fragment dropped. */
export function normalizeUrl(url: string, ignoreQueryParams: readonly string[] = []): string {
  let u: URL
  try {
    u = new URL(url)
  } catch (cause) {
    throw new ToolReplayError(ErrorCodes.TRACE_INVALID, `Request URL "${url}" is not an absolute URL. Tool Replay needs absolute URLs.`, { cause })
  }
  // Without a query or a fragment the parsed URL is the normal form (emptying them would change nothing).
  if (!url.includes('?') && !url.includes('#')) return u.href
  // A query already in its normal form (keys in order, each pair of characters the form encoding writes as
  // they are) and no fragment: the parsed URL is the normal form too. Most recorded API URLs.
  if (ignoreQueryParams.length === 0 && !url.includes('#') && NORMAL_QUERY.test(u.search) && keysInOrder(u.search)) return u.href
  u.hash = ''
  const ignored = new Set(ignoreQueryParams)
  const params = [...u.searchParams].filter(([k]) => !ignored.has(k))
  params.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
  u.search = new URLSearchParams(params).toString()
  return u.toString()
}

/** `?k=v&k=v...` of the characters application/x-www-form-urlencoded leaves as they are (linear: `=` and `&` are not among them). */
const NORMAL_QUERY = /^\?[A-Za-z0-9*\-._]+=[A-Za-z0-9*\-._]*(?:&[A-Za-z0-9*\-._]+=[A-Za-z0-9*\-._]*)*$/

/** Whether the keys of a NORMAL_QUERY search come in the order normalizeUrl's sort gives (equal keys as they are). */
function keysInOrder(search: string): boolean {
  let previous = ''
  for (let at = 1; at < search.length; ) {
    const eq = search.indexOf('=', at)
    const key = search.slice(at, eq)
    if (key < previous) return false
    previous = key
    const amp = search.indexOf('&', eq)
    if (amp === -1) break
    at = amp + 1
  }
  return true
}

/** A multipart content type's boundary parameter (quoted or not); a boundary is random per request. */
export const MULTIPART_BOUNDARY = /boundary=(?:"([^"]+)"|([^;\s]+))/i

/** The boundary of a `multipart/*` content type; undefined for any other type or none given. */
export function multipartBoundary(contentType: string): string | undefined {
  if (!/^multipart\//i.test(contentType)) return undefined
  const m = MULTIPART_BOUNDARY.exec(contentType)
  return m?.[1] ?? m?.[2]
}

function fingerprintBody(
  body: Uint8Array | null,
  contentType: string | undefined,
  boundary: string | undefined,
  ignorePaths: readonly string[] = [],
): BodyFingerprint {
  if (!body || body.byteLength === 0) return { kind: 'empty' }
  const type = (contentType ?? '').toLowerCase()
  if (boundary) {
    // The boundary is random per request; replace it so equal forms fingerprint equal.
    const normalized = Buffer.from(body).toString('latin1').split(boundary).join('BOUNDARY')
    return { kind: 'multipart', sha256: sha256(Buffer.from(normalized, 'latin1')), size: body.byteLength }
  }
  if (type.startsWith('application/x-www-form-urlencoded')) {
    const text = tryUtf8(body)
    if (text !== undefined) {
      const pairs = [...new URLSearchParams(text)].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      return { kind: 'form', value: pairs }
    }
  }
  if (type.includes('json') || type === '' || type.startsWith('text/plain')) {
    const first = body[0]
    // Only try JSON when it can be JSON: '{' '[' or '"' (skipping leading whitespace is rare in practice).
    if (type.includes('json') || first === 0x7b || first === 0x5b) {
      const text = tryUtf8(body)
      if (text !== undefined) {
        try {
          let value: unknown = parseJson(text)
          for (const p of ignorePaths) value = replaceAtJsonPath(value, p)
          return { kind: 'json', value }
        } catch {
          // not JSON after all: fall through to bytes
        }
      }
    }
  }
  return { kind: 'bytes', sha256: sha256(body), size: body.byteLength }
}

/** Human-readable differences between two identities, most significant first. */
export function describeIdentityDifferences(a: IdentityParts, b: IdentityParts, limit = 5): string[] {
  const out: string[] = []
  if (a.method !== b.method) out.push(`method ${a.method} → ${b.method}`)
  const ua = new URL(a.url)
  const ub = new URL(b.url)
  if (ua.origin !== ub.origin) out.push(`origin ${ua.origin} → ${ub.origin}`)
  if (ua.pathname !== ub.pathname) out.push(`path ${ua.pathname} → ${ub.pathname}`)
  const keys = [...new Set([...ua.searchParams.keys(), ...ub.searchParams.keys()])].sort()
  for (const k of keys) {
    const va = ua.searchParams.getAll(k).join(',')
    const vb = ub.searchParams.getAll(k).join(',')
    if (!ua.searchParams.has(k)) out.push(`query key "${k}" added (${vb})`)
    else if (!ub.searchParams.has(k)) out.push(`query key "${k}" missing (was ${va})`)
    else if (va !== vb) out.push(`query key "${k}": ${va} → ${vb}`)
  }
  const ha = new Map(a.headers)
  const hb = new Map(b.headers)
  for (const name of [...new Set([...ha.keys(), ...hb.keys()])].sort()) {
    if (ha.get(name) !== hb.get(name)) out.push(`header ${name}: ${ha.get(name) ?? '(none)'} → ${hb.get(name) ?? '(none)'}`)
  }
  if (a.body.kind === 'json' && b.body.kind === 'json') {
    for (const d of diffJson(a.body.value, b.body.value, limit)) {
      const [before, after] = shortPair(d.before, d.after)
      out.push(`body ${d.path}: ${before} → ${after}`)
    }
  } else if (canonicalJson(a.body) !== canonicalJson(b.body)) {
    out.push(`body ${a.body.kind}${sizeOf(a.body)} → ${b.body.kind}${sizeOf(b.body)}`)
  }
  return out.slice(0, limit)
}

/** A distance for ranking near misses: lower is closer. */
export function identityDistance(a: IdentityParts, b: IdentityParts): number {
  let d = 0
  if (a.method !== b.method) d += 8
  const ua = new URL(a.url)
  const ub = new URL(b.url)
  if (ua.origin !== ub.origin) d += 16
  if (ua.pathname !== ub.pathname) d += 4
  if (ua.search !== ub.search) d += 2
  if (canonicalJson(a.headers) !== canonicalJson(b.headers)) d += 1
  if (a.body.kind !== b.body.kind) d += 2
  else if (a.body.kind === 'json' && b.body.kind === 'json') d += Math.min(4, diffJson(a.body.value, b.body.value, 4).length)
  else if (canonicalJson(a.body) !== canonicalJson(b.body)) d += 2
  return d
}

const SHORT_MAX = 60
/** Characters of shared text kept before the first difference when a long value is cut. */
const SHORT_CONTEXT = 20

function short(v: unknown, from = 0): string {
  if (v === undefined) return '(absent)'
  const s = stringifyJson(v)
  const head = from > 0 ? '...' : ''
  const rest = s.slice(from)
  return rest.length + head.length > SHORT_MAX ? `${head}${rest.slice(0, SHORT_MAX - 3 - head.length)}...` : `${head}${rest}`
}

/**
 * Both sides of a difference, shortened. Two long values that share a beginning (an LLM prompt with a
 * changed ending, say) are shown from a little before their first difference, so the change is visible.
 */
function shortPair(before: unknown, after: unknown): [string, string] {
  if (before === undefined || after === undefined) return [short(before), short(after)]
  const a = stringifyJson(before)
  const b = stringifyJson(after)
  let common = 0
  while (common < a.length && common < b.length && a[common] === b[common]) common++
  const from = Math.max(a.length, b.length) > SHORT_MAX && common > SHORT_MAX - 3 - SHORT_CONTEXT ? common - SHORT_CONTEXT : 0
  return [short(before, from), short(after, from)]
}

function sizeOf(b: BodyFingerprint): string {
  return 'size' in b ? ` (${b.size} B)` : ''
}
