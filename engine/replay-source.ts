/**
 * What replay serves from, and what it plays: a trace held in memory when it is small, else the store's index with
 * bodies read as they are played; the playback of one recorded exchange (its answer, its WebSocket messages).
 */
import { INLINE_BODY_MAX, type TraceReader, type TraceStore } from '../store/index.ts'
import {
  type BodyRef,
  bodyBytes,
  type Exchange,
  IDENTITY_RULES,
  type IdentityOptions,
  type ResponseHead,
  splitChunks,
  type ToolReplayError,
  type Trace,
} from '../trace/index.ts'
import type { Playback, PlaybackChunk, PlaybackChunks } from './decision.ts'
import { assertPlayable } from './playable.ts'
import { MemoryReplayIndex, type ReplayIndex, StoreReplayIndex } from './replay-index.ts'
import { playedMessage, type WebSocketPlayback } from './websocket-replay.ts'

/** A trace up to this many exchanges is replayed from memory; a bigger one through the store's index. */
const MEMORY_MAX_EXCHANGES = 50_000
/** Bodies are loaded up front while the trace's bodies add up to at most this; else read when played. */
const MEMORY_MAX_BODY_BYTES = 64 * 1024 * 1024
/** Played bodies are cut into reads of at most this size, whatever chunk a body was recorded (or imported) as. */
const MAX_PLAYED_CHUNK = 1024 * 1024

/** What replay serves from. */
export interface ReplaySource {
  index: ReplayIndex
  /** Bodies in memory (all of them, or the request bodies only). */
  bodies: Map<string, Uint8Array>
  /**
   * Set when every exchange was checked against the trace rules as the source was opened (a trace held in
   * memory): the ones that broke them, with why. Playback then checks nothing more; without it (a trace read
   * through the store as it is played) each exchange is checked when it is played.
   */
  invalid?: Map<Exchange, ToolReplayError>
  /** The store, for bodies not in memory. */
  reader?: TraceReader
  /** The trace's labels (a faulted recording names its seed there). */
  labels?: Record<string, string>
}

/**
 * Opens what replay serves from: the trace in memory when it is small; its exchanges in memory with the bodies
 * that fit when only its bodies are big; else the store's index, exchanges and bodies read as they are played.
 */
export async function openReplaySource(store: TraceStore, name: string, identity: IdentityOptions, preload: 'auto' | 'none'): Promise<ReplaySource> {
  const reader = await store.openTrace(name)
  const { count, bodyBytes: total, indexed } = reader.info
  const storeIndexed = indexed && isDefaultIdentity(identity)
  // The keys the store holds are taken as they are only when today's identity rules made them.
  const keysOf = async () => (storeIndexed && reader.info.identityRules === IDENTITY_RULES ? await storedKeys(reader) : undefined)
  if (preload === 'auto' && count <= MEMORY_MAX_EXCHANGES && total <= MEMORY_MAX_BODY_BYTES) {
    const trace = await reader.readAll()
    return { index: new MemoryReplayIndex(trace, identity, await keysOf()), bodies: trace.bodies, invalid: invalidExchanges(trace), ...labelsOf(trace.meta) }
  }
  const few = preload === 'auto' && count <= MEMORY_MAX_EXCHANGES
  const throughStore = (): ReplaySource => ({ index: new StoreReplayIndex(reader), bodies: new Map(), reader, ...labelsOf(reader.info.meta) })
  if (!few && storeIndexed) return throughStore()
  // The exchanges in memory and identities computed here, from them and the request bodies (custom identity
  // rules, a trace from before the index, or a trace whose bodies alone are too big to hold: a store read
  // per request would cost it several times over). Small response bodies are held too; all within the
  // bodies' budget, the rest stay in the store until played. Request bodies over the budget send a trace the
  // store indexes back to its index (custom identity rules need them all, as before).
  let budget = few ? MEMORY_MAX_BODY_BYTES : 0
  let over = false
  const trace = await reader.readAll((ref, _use, x) => {
    const request = x.request.body?.digest === ref.digest
    if (request && !storeIndexed) return true
    if (ref.size > budget || (!request && ref.size > INLINE_BODY_MAX)) {
      over ||= request
      return false
    }
    budget -= ref.size
    return true
  })
  if (over) return throughStore()
  return { index: new MemoryReplayIndex(trace, identity, await keysOf()), bodies: trace.bodies, reader, ...labelsOf(reader.info.meta) }
}

/** Each exchange's identity key by seq, from the store's index (what recording computed, read back). */
async function storedKeys(reader: TraceReader): Promise<Map<number, string>> {
  const keys = new Map<number, string>()
  for await (const [key, seqs] of reader.identityKeys()) for (const seq of seqs) keys.set(seq, key)
  return keys
}

/**
 * Checks every exchange of a trace held in memory once, as it is opened, instead of each time one is played:
 * the ones that break the trace rules, with their error (they are refused when requested, as before).
 */
function invalidExchanges(trace: Trace): Map<Exchange, ToolReplayError> {
  const invalid = new Map<Exchange, ToolReplayError>()
  for (const x of trace.exchanges) {
    try {
      assertPlayable(x, trace.meta.name, trace.bodies)
    } catch (err) {
      invalid.set(x, err as ToolReplayError)
    }
  }
  return invalid
}

function labelsOf(meta: Trace['meta']): { labels?: Record<string, string> } {
  return meta.labels ? { labels: meta.labels } : {}
}

function isDefaultIdentity(identity: IdentityOptions | undefined): boolean {
  return !identity || Object.values(identity).every((v) => v === undefined || (Array.isArray(v) && v.length === 0))
}

/**
 * What replay plays for a recorded exchange of `source` (trace `trace`): its answer or failure, bodies from
 * memory or streamed from the store. `onDamage` hears of a stored piece that fails verification as it is played.
 */
export function playbackOf(source: ReplaySource, trace: string, exchange: Exchange, onDamage: (err: unknown, use: string) => void): Playback {
  if (!source.invalid) assertPlayable(exchange, trace, source.bodies)
  else {
    const invalid = source.invalid.get(exchange)
    if (invalid) throw invalid
  }
  const { outcome } = exchange
  if (outcome.kind === 'response') {
    const r = outcome.response
    return {
      kind: 'response',
      head: { status: r.status, statusText: r.statusText, headers: r.headers },
      headersMs: exchange.timing.headersMs,
      chunks: chunksOf(source, trace, r.body, `exchange #${exchange.seq} response`, onDamage),
      trailers: r.trailers,
    }
  }
  const p = outcome.error.partial
  // A failure a fault made was the app's own connection failing: replayed as such on both paths.
  const injected = exchange.fault ? { injected: true } : {}
  if (!p) return { kind: 'error', error: outcome.error, headersMs: exchange.timing.headersMs, chunks: [], ...injected }
  return {
    kind: 'error',
    error: outcome.error,
    headersMs: exchange.timing.headersMs,
    head: { status: p.status, statusText: p.statusText, headers: p.headers },
    chunks: chunksOf(source, trace, p.body, `exchange #${exchange.seq} partial response`, onDamage),
    ...injected,
  }
}

/** A body's recorded chunks: from memory, or streamed from the store (each piece verified before it is played). */
function chunksOf(source: ReplaySource, trace: string, ref: BodyRef, use: string, onDamage: (err: unknown, use: string) => void): PlaybackChunks {
  const bytes = source.bodies.get(ref.digest)
  if (bytes !== undefined || !source.reader) return splitChunks(bodyBytes({ bodies: source.bodies, meta: { name: trace, format: 1 } }, ref), ref)
  const reader = source.reader
  return streamChunks(reader.bodyPieces(ref, use), ref, (err) => onDamage(err, use))
}

/**
 * The recorded WebSocket session of `exchange` (it has one), played after `head`: its messages' bytes from memory,
 * or read from the store when the trace is played through it.
 */
export function websocketPlaybackOf(
  source: ReplaySource,
  trace: string,
  exchange: Exchange,
  head: ResponseHead,
): WebSocketPlayback | Promise<WebSocketPlayback> {
  const ws = exchange.websocket as NonNullable<Exchange['websocket']>
  const build = (bytes: Uint8Array[]): WebSocketPlayback => ({
    head,
    headersMs: exchange.timing.headersMs,
    messages: ws.messages.map((m, i) => playedMessage(m, bytes[i] as Uint8Array)),
    ...(ws.end ? { end: ws.end } : {}),
  })
  const inMemory = ws.messages.map((m) => source.bodies.get(m.body.digest))
  if (inMemory.every((b) => b !== undefined) || !source.reader) {
    return build(ws.messages.map((m) => bodyBytes({ bodies: source.bodies, meta: { name: trace, format: 1 } }, m.body)))
  }
  const reader = source.reader
  return Promise.all(ws.messages.map((m, i) => inMemory[i] ?? reader.bodyBytes(m.body, `exchange #${exchange.seq} websocket message #${i}`))).then(build)
}

/**
 * A stored body's recorded chunks, read piece by piece as they are played: memory holds one piece and one
 * chunk, whatever the body's size. A piece that fails verification ends the stream with its error.
 */
async function* streamChunks(pieces: AsyncIterable<Uint8Array>, ref: BodyRef, onDamage: (err: unknown) => void): AsyncGenerator<PlaybackChunk> {
  const chunks = ref.chunks.length > 0 ? ref.chunks : [{ size: ref.size, atMs: 0 }]
  let c = 0
  let need = chunks[0]?.size ?? 0
  let parts: Uint8Array[] = []
  try {
    for await (const piece of pieces) {
      let offset = 0
      while (offset < piece.byteLength && c < chunks.length) {
        const take = Math.min(need, piece.byteLength - offset, MAX_PLAYED_CHUNK)
        parts.push(piece.subarray(offset, offset + take))
        offset += take
        need -= take
        const atMs = (chunks[c] as { atMs: number }).atMs
        const partSize = parts.reduce((n, p) => n + p.byteLength, 0)
        if (need === 0 || partSize >= MAX_PLAYED_CHUNK) {
          yield { bytes: parts.length === 1 ? (parts[0] as Uint8Array) : Buffer.concat(parts), atMs }
          parts = []
          if (need === 0) need = chunks[++c]?.size ?? 0
        }
      }
    }
  } catch (err) {
    onDamage(err)
    throw err
  }
}
