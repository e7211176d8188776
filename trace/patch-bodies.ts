/**
 * What a fork patch writes into a response: a new body (its Content-Length kept true, a coding dropped when the
 * body is stored decoded), and an error outcome with the message Node or undici gives that failure, cut into a
 * recorded body when it breaks off mid-body.
 */
import { bodyBytes, bodyFromBytes, bodyFromChunks, splitChunks } from './body.ts'
import { decodeContentEncoding } from './content-encoding.ts'
import { ToolReplayError } from './errors.ts'
import type { ErrorPhase, Exchange, HeaderPairs, RecordedError, RecordedResponse, Trace } from './exchange.ts'
import { headerValue } from './header-pairs.ts'
import { editJson, parseJson } from './json-codec.ts'
import { parseJsonPath, setAtJsonPath } from './json-path.ts'

/** The error outcome of an `error=CODE[@PHASE[:BYTES]]` patch; at response-body, after BYTES of the recorded body (default: half). */
export function patchedError(
  trace: Pick<Trace, 'meta' | 'bodies'>,
  x: Exchange,
  a: { code: string; phase: ErrorPhase; bytes?: number },
  fail: (why: string) => never,
  note: (text: string) => void,
): RecordedError {
  const error: RecordedError = { code: a.code, message: nodeLikeMessage(a.code, a.phase, x.request.url), phase: a.phase }
  if (a.phase !== 'response-body') return error
  if (x.outcome.kind !== 'response')
    throw fail(`it has no response whose body could fail (it is a recorded ${x.outcome.error.code}); use error=${a.code} without @response-body`)
  const res = x.outcome.response
  const full = bodyBytes(trace, res.body)
  const n = a.bytes ?? Math.floor(full.byteLength / 2)
  if (n > full.byteLength) throw fail(`the recorded body has ${full.byteLength} bytes, fewer than the ${n} to deliver before the failure`)
  // The recorded chunks up to n bytes (the last one cut), with their timing: the client reads them, then the reset.
  const chunks: Array<{ bytes: Uint8Array; atMs: number }> = []
  let taken = 0
  for (const c of splitChunks(full, res.body)) {
    if (taken >= n) break
    const bytes = c.bytes.subarray(0, n - taken)
    chunks.push({ bytes, atMs: c.atMs })
    taken += bytes.byteLength
  }
  const partial = bodyFromChunks(chunks)
  trace.bodies.set(partial.ref.digest, partial.bytes)
  // A Content-Length would announce bytes that never come; without one, the cut shows only as the failure.
  error.partial = { ...res, headers: res.headers.filter(([k]) => k.toLowerCase() !== 'content-length'), body: partial.ref }
  note(`${a.code} after ${n} of ${full.byteLength} body bytes (${partial.ref.chunks.length} recorded chunk(s)); content-length removed`)
  return error
}

export function setBody(trace: Pick<Trace, 'bodies'>, res: RecordedResponse, bytes: Uint8Array, dropEncoding: boolean): void {
  const body = bodyFromBytes(bytes)
  trace.bodies.set(body.ref.digest, body.bytes)
  res.body = body.ref
  let headers: HeaderPairs = res.headers
  if (dropEncoding) headers = headers.filter(([k]) => k.toLowerCase() !== 'content-encoding')
  // A stale Content-Length would make clients wait for bytes that never come, or cut the body short.
  res.headers = headers.map(([k, v]) => (k.toLowerCase() === 'content-length' ? [k, String(bytes.byteLength)] : [k, v]))
}

/** Like setBody, keeping a chunking (an LLM patch re-encodes a stream in the recording's chunks). */
export function setBodyChunks(
  trace: Pick<Trace, 'bodies'>,
  res: RecordedResponse,
  chunks: Array<{ bytes: Uint8Array; atMs: number }>,
  dropEncoding: boolean,
): void {
  const body = bodyFromChunks(chunks)
  setBody(trace, res, body.bytes, dropEncoding)
  res.body = body.ref
}

/** A Content-Encoding other than identity, or undefined. */
export function contentEncoding(headers: HeaderPairs): string | undefined {
  const v = headerValue(headers, 'content-encoding')?.trim()
  return v && v.toLowerCase() !== 'identity' ? v : undefined
}

export function lengthNote(res: RecordedResponse, encoding: string | undefined, how: string): string {
  const length = headerValue(res.headers, 'content-length')
  const parts = [encoding ? `content-encoding ${encoding} dropped, body ${how} (${res.body.size} bytes)` : `body ${how} (${res.body.size} bytes)`]
  if (length !== undefined) parts.push(`content-length ${length}`)
  return parts.join('; ')
}

// undici's own errors, with the messages undici gives them (lib/core/errors.js; "other side closed" is the
// socket error of a connection the server closed).
const UNDICI_MESSAGES: Record<string, string> = {
  UND_ERR_SOCKET: 'other side closed',
  UND_ERR_CONNECT_TIMEOUT: 'Connect Timeout Error',
  UND_ERR_HEADERS_TIMEOUT: 'Headers Timeout Error',
  UND_ERR_BODY_TIMEOUT: 'Body Timeout Error',
  UND_ERR_ABORTED: 'Request aborted',
  UND_ERR_CLOSED: 'The client is closed',
  UND_ERR_DESTROYED: 'The client is destroyed',
}

/**
 * The message Node or undici gives a failure of this code in this phase: a system error names the syscall
 * that failed ("connect ECONNREFUSED" while connecting, "read ECONNRESET" / "read ETIMEDOUT" once
 * connected, "write EPIPE" while sending), a DNS failure is "getaddrinfo ENOTFOUND host".
 */
function nodeLikeMessage(code: string, phase: ErrorPhase, url: string): string {
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return `getaddrinfo ${code} ${safeHost(url)}`
  const undici = UNDICI_MESSAGES[code]
  if (undici !== undefined) return undici
  if (!/^E[A-Z0-9]+$/.test(code)) return code
  if (phase === 'connect') return `connect ${code}`
  if (code === 'EPIPE') return 'write EPIPE'
  return `read ${code}`
}

function safeHost(url: string): string {
  try {
    return new URL(url).hostname
  } catch {
    return ''
  }
}

/** A `$.path=value` patch: the value set in the response's JSON body (decoded first; stored decoded). */
export function patchJson(
  trace: Pick<Trace, 'meta' | 'bodies'>,
  res: RecordedResponse,
  a: { path: string; value: unknown },
  fail: (why: string) => never,
  note: (text: string) => void,
): void {
  const encoding = headerValue(res.headers, 'content-encoding')
  let bytes: Uint8Array
  try {
    bytes = decodeContentEncoding(bodyBytes(trace, res.body), encoding)
  } catch (err) {
    throw fail(`its body could not be decoded (${encoding}): ${(err as Error).message}`)
  }
  let text: string
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes)
    // Checks the path against the value first: its errors name the part of the path that is missing.
    setAtJsonPath(parseJson(text), a.path, a.value)
  } catch (err) {
    if (err instanceof ToolReplayError) throw err
    throw fail(`its response body is not JSON (content-type ${headerValue(res.headers, 'content-type') ?? 'none'}); replace it whole with body=@FILE`)
  }
  // Only the patched value's bytes change. Patched JSON is stored decoded: the branch carries no
  // re-compression choices of its own.
  const patched = editJson(text, [{ path: parseJsonPath(a.path) as Array<string | number>, value: a.value }])
  const coding = contentEncoding(res.headers)
  setBody(trace, res, new TextEncoder().encode(patched), coding !== undefined)
  if (coding !== undefined) note(lengthNote(res, coding, 'stored decoded'))
}
