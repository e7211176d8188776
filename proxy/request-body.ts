/** Reading a client's request body, bounded: the proxy buffers it whole because identity needs every byte. */
import type { IncomingMessage } from 'node:http'
import type { HeaderPairs } from '../trace/index.ts'

/** What reading a body gave: its bytes (null: no body), or why there are none. */
export type BodyRead = Buffer | null | 'too-large' | 'aborted'

/** True when the request has a Content-Length or Transfer-Encoding field (one pass, few lowercase copies). */
export function announcesBody(pairs: HeaderPairs): boolean {
  for (const [name] of pairs) {
    if (name.length !== 14 && name.length !== 17) continue
    const lower = name.toLowerCase()
    if (lower === 'content-length' || lower === 'transfer-encoding') return true
  }
  return false
}

/**
 * Reads the request body up to `max` bytes. Returns null synchronously when the request has no body (no
 * Content-Length and no Transfer-Encoding: HTTP/1.1 says there is none, RFC 9112 6.3), else a promise.
 * Bytes past `max` are read and dropped (the client is answered 413 after its request ends).
 */
export function readBody(req: IncomingMessage, rawPairs: HeaderPairs, max: number): Promise<BodyRead> | null {
  // Read from the raw pairs: touching req.headers would build Node's header object for nothing.
  if (!announcesBody(rawPairs)) {
    req.resume()
    return null
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = []
    let size = 0
    let overflow = false
    req.on('data', (chunk: Buffer) => {
      size += chunk.byteLength
      if (size > max) {
        overflow = true
        chunks.length = 0
      } else chunks.push(chunk)
    })
    req.once('end', () => resolve(overflow ? 'too-large' : size === 0 ? null : Buffer.concat(chunks, size)))
    req.once('error', () => resolve('aborted'))
    req.once('close', () => {
      if (!req.complete) resolve('aborted')
    })
  })
}
