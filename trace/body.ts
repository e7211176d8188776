import { sha256 } from './digest.ts'
import { ErrorCodes, ToolReplayError } from './errors.ts'
import type { BodyChunk, BodyRef, Trace } from './exchange.ts'

/** Builds a BodyRef from chunks as they arrived, and the full bytes for the body map. */
export function bodyFromChunks(chunks: Array<{ bytes: Uint8Array; atMs: number }>): { ref: BodyRef; bytes: Uint8Array } {
  const bytes = concatBytes(chunks.map((c) => c.bytes))
  const list: BodyChunk[] = []
  for (const c of chunks) if (c.bytes.byteLength > 0) list.push({ size: c.bytes.byteLength, atMs: Math.max(0, Math.round(c.atMs)) })
  return { ref: { digest: sha256(bytes), size: bytes.byteLength, chunks: list }, bytes }
}

/** A BodyRef of one chunk at time 0 for bytes that were not streamed (patches, imports). */
export function bodyFromBytes(bytes: Uint8Array): { ref: BodyRef; bytes: Uint8Array } {
  return bodyFromChunks([{ bytes, atMs: 0 }])
}

/** The full bytes of a body; fails closed when the trace lacks them. */
export function bodyBytes(trace: Pick<Trace, 'bodies' | 'meta'>, ref: BodyRef): Uint8Array {
  const bytes = trace.bodies.get(ref.digest)
  if (bytes === undefined) {
    throw new ToolReplayError(
      ErrorCodes.BODY_MISSING,
      `Trace "${trace.meta.name}" references body ${ref.digest} but does not contain it. Re-import or re-record the trace.`,
    )
  }
  return bytes
}

/** Splits full body bytes along the recorded chunk boundaries. Views, not copies. */
export function splitChunks(bytes: Uint8Array, ref: BodyRef): Array<{ bytes: Uint8Array; atMs: number }> {
  const out: Array<{ bytes: Uint8Array; atMs: number }> = []
  let offset = 0
  for (const c of ref.chunks) {
    out.push({ bytes: bytes.subarray(offset, offset + c.size), atMs: c.atMs })
    offset += c.size
  }
  // A ref whose chunk sizes do not add up is a damaged trace; keep every byte rather than drop some.
  if (offset < bytes.byteLength) out.push({ bytes: bytes.subarray(offset), atMs: ref.chunks.at(-1)?.atMs ?? 0 })
  return out
}

export function concatBytes(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0] as Uint8Array
  let size = 0
  for (const p of parts) size += p.byteLength
  const out = new Uint8Array(size)
  let offset = 0
  for (const p of parts) {
    out.set(p, offset)
    offset += p.byteLength
  }
  return out
}

const utf8 = new TextDecoder('utf-8', { fatal: true })

/** Decodes bytes as UTF-8 text, or returns undefined when they are not valid UTF-8. */
export function tryUtf8(bytes: Uint8Array): string | undefined {
  try {
    return utf8.decode(bytes)
  } catch {
    return undefined
  }
}

/** Case-insensitive lookup of the first header value. */
export function headerValue(headers: ReadonlyArray<readonly [string, string]>, name: string): string | undefined {
  const lower = name.toLowerCase()
  for (const [k, v] of headers) if (k.toLowerCase() === lower) return v
  return undefined
}
