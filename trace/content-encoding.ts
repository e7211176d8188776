import * as zlib from 'node:zlib'
import { ErrorCodes, ToolReplayError } from './errors.ts'

/**
 * Decodes a body as declared by Content-Encoding (gzip, deflate, br, zstd; a list is undone in reverse).
 * Throws when the bytes do not decode, the coding is unknown, or a step would exceed `maxBytes` (a
 * compression bomb: zlib stops at the limit with ERR_BUFFER_TOO_LARGE instead of allocating it all).
 * @note zstd needs `zlib.zstdDecompressSync` (Node >= 22.15 / 23.8).
 */
export function decodeContentEncoding(bytes: Uint8Array, encoding: string | undefined, options: { maxBytes?: number } = {}): Uint8Array {
  if (!encoding) return bytes
  const limit = options.maxBytes === undefined ? {} : { maxOutputLength: options.maxBytes }
  const codings = encoding
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity')
  let out = bytes
  for (const coding of codings.reverse()) {
    if (coding === 'gzip' || coding === 'x-gzip') out = zlib.gunzipSync(out, limit)
    else if (coding === 'br') out = zlib.brotliDecompressSync(out, limit)
    else if (coding === 'deflate') {
      // Servers disagree on whether "deflate" means zlib-wrapped or raw; accept both.
      try {
        out = zlib.inflateSync(out, limit)
      } catch (err) {
        // A bomb stays a bomb: only a header mismatch is worth a second try as raw deflate.
        if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw err
        out = zlib.inflateRawSync(out, limit)
      }
    } else if (coding === 'zstd') {
      const zstd = (zlib as unknown as { zstdDecompressSync?: (b: Uint8Array, o: object) => Uint8Array }).zstdDecompressSync
      if (!zstd)
        throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Cannot decode a zstd body on Node ${process.version}: zlib has no zstd here. Use Node >= 22.15.`)
      out = zstd(out, limit)
    } else {
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Unknown Content-Encoding "${coding}".`)
    }
    out = new Uint8Array(out.buffer, out.byteOffset, out.byteLength)
  }
  return out
}
