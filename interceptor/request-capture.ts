/**
 * Turns undici dispatch options into the engine's CapturedRequest: absolute URL, header pairs and the
 * request body buffered whole (identity needs every byte; forwarding then sends the same bytes).
 */
import type { Dispatcher } from 'undici'
import { type HeaderPairs, multipartBoundary } from '../trace/index.ts'

/** The absolute URL of a dispatch: `origin` + `path`, or `path` itself when it is absolute (proxy style). */
export function requestUrl(opts: Pick<Dispatcher.DispatchOptions, 'origin' | 'path'>): string {
  const { path } = opts
  if (path.startsWith('http://') || path.startsWith('https://')) return path
  const origin = opts.origin
  if (origin === undefined) throw new TypeError(`Cannot build a URL for "${path}": the dispatch has no origin.`)
  const base = typeof origin === 'string' ? (origin.endsWith('/') ? origin.slice(0, -1) : origin) : origin.origin
  return `${base}${path}`
}

type HeaderValue = string | number | string[] | null | undefined

/** Header pairs from any shape undici accepts: a record, a flat [k, v, k, v] array, or an iterable of [k, v]. */
export function headerPairs(headers: unknown): HeaderPairs {
  const out: HeaderPairs = []
  if (headers == null) return out
  const push = (name: unknown, value: HeaderValue) => {
    if (value == null) return
    if (Array.isArray(value)) for (const v of value) out.push([String(name), String(v)])
    else out.push([String(name), String(value)])
  }
  if (Array.isArray(headers)) {
    if (headers.length > 0 && Array.isArray(headers[0])) {
      for (const pair of headers as Array<[unknown, HeaderValue]>) push(pair[0], pair[1])
    } else {
      for (let i = 0; i + 1 < headers.length; i += 2) push(headers[i], headers[i + 1] as HeaderValue)
    }
    return out
  }
  if (typeof (headers as Iterable<unknown>)[Symbol.iterator] === 'function') {
    for (const pair of headers as Iterable<[unknown, HeaderValue]>) push(pair[0], pair[1])
    return out
  }
  for (const [name, value] of Object.entries(headers as Record<string, HeaderValue>)) push(name, value)
  return out
}

/** A body buffered for capture; `contentType` is set when serializing it chose one (FormData, Blob). */
export interface BufferedBody {
  bytes: Uint8Array | null
  contentType?: string
}

const encoder = new TextEncoder()

/**
 * Buffers a request body of any kind fetch or undici.request can hand a dispatcher. Returns a value
 * (not a promise) for in-memory bodies so the replay hot path stays synchronous. A body over `max` bytes
 * fails with `tooLarge()` (streams stop being read at the limit).
 */
export function bufferBody(
  body: unknown,
  contentType?: string,
  max = Number.POSITIVE_INFINITY,
  tooLarge: () => Error = defaultTooLarge,
): BufferedBody | Promise<BufferedBody> {
  const sized = (b: BufferedBody): BufferedBody => {
    if (b.bytes && b.bytes.byteLength > max) throw tooLarge()
    return b
  }
  if (body == null) return { bytes: null }
  if (typeof body === 'string') return sized({ bytes: encoder.encode(body) })
  if (body instanceof Uint8Array) return sized({ bytes: body })
  if (body instanceof ArrayBuffer) return sized({ bytes: new Uint8Array(body) })
  if (ArrayBuffer.isView(body)) return sized({ bytes: new Uint8Array(body.buffer, body.byteOffset, body.byteLength) })
  if (body instanceof URLSearchParams) return sized({ bytes: encoder.encode(body.toString()), contentType: 'application/x-www-form-urlencoded;charset=UTF-8' })
  if (typeof FormData !== 'undefined' && body instanceof FormData) return serializeWithResponse(body, contentType).then(sized)
  if (typeof Blob !== 'undefined' && body instanceof Blob) {
    if (body.size > max) throw tooLarge()
    return serializeWithResponse(body, contentType).then(sized)
  }
  if (typeof ReadableStream !== 'undefined' && body instanceof ReadableStream) return readWebStream(body, max, tooLarge)
  if (typeof (body as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function') return readAsyncIterable(body as AsyncIterable<unknown>, max, tooLarge)
  if (typeof (body as Iterable<unknown>)[Symbol.iterator] === 'function') return sized({ bytes: concat([...(body as Iterable<unknown>)].map(toBytes)) })
  throw new TypeError(`Tool Replay cannot capture a request body of type ${Object.prototype.toString.call(body)}.`)
}

function defaultTooLarge(): Error {
  return new RangeError('request body too large')
}

async function serializeWithResponse(body: Blob | FormData, declaredType: string | undefined): Promise<BufferedBody> {
  // Response does the multipart encoding exactly as fetch would, but with a boundary of its own.
  const response = new Response(body)
  let bytes = new Uint8Array(await response.arrayBuffer())
  const contentType = response.headers.get('content-type') ?? undefined
  const ours = contentType && multipartBoundary(contentType)
  const theirs = declaredType && multipartBoundary(declaredType)
  if (ours && theirs && ours !== theirs) {
    // fetch already announced its boundary in the request headers (it hands us the FormData as its
    // body source): the bytes must use that one. latin1 maps bytes 1:1, so the rest is untouched.
    bytes = Buffer.from(Buffer.from(bytes).toString('latin1').split(ours).join(theirs), 'latin1')
    return { bytes }
  }
  return contentType ? { bytes, contentType } : { bytes }
}

async function readWebStream(stream: ReadableStream<unknown>, max: number, tooLarge: () => Error): Promise<BufferedBody> {
  const parts: Uint8Array[] = []
  let size = 0
  const reader = stream.getReader()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    const bytes = toBytes(value)
    size += bytes.byteLength
    if (size > max) {
      await reader.cancel().catch(() => {})
      throw tooLarge()
    }
    parts.push(bytes)
  }
  return { bytes: concat(parts) }
}

async function readAsyncIterable(iterable: AsyncIterable<unknown>, max: number, tooLarge: () => Error): Promise<BufferedBody> {
  const parts: Uint8Array[] = []
  let size = 0
  for await (const chunk of iterable) {
    const bytes = toBytes(chunk)
    size += bytes.byteLength
    // Leaving the loop early returns the iterator, which stops the producer.
    if (size > max) throw tooLarge()
    parts.push(bytes)
  }
  return { bytes: concat(parts) }
}

function toBytes(chunk: unknown): Uint8Array {
  if (typeof chunk === 'string') return encoder.encode(chunk)
  if (chunk instanceof Uint8Array) return chunk
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk)
  if (ArrayBuffer.isView(chunk)) return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength)
  throw new TypeError(`Tool Replay cannot capture a request body chunk of type ${Object.prototype.toString.call(chunk)}.`)
}

function concat(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0] as Uint8Array
  return Buffer.concat(parts)
}
