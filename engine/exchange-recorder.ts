/**
 * Recording one forwarded exchange: the response head, its body chunk by chunk, its end or failure, written
 * as one exchange. Bodies stream: up to one piece (1 MiB) is kept in memory; past that, bytes go to the store
 * piece by piece as they arrive, with back-pressure when the store falls behind. A body that JSON redaction
 * must see whole is kept whole up to `maxBodyBytes` and never written unredacted.
 */
import { performance } from 'node:perf_hooks'
import { type BodyManifest, type BodyWriter, PIECE_SIZE, type TraceRecording } from '../store/index.ts'
import {
  BodyAccumulator,
  type BodyChunk,
  type BodyRef,
  bodyChunk,
  bodyFromChunks,
  ErrorCodes,
  type Exchange,
  type HeaderPairs,
  headerValue,
  type RecordedError,
  type RecordedResponse,
  type ResponseHead,
  ToolReplayError,
} from '../trace/index.ts'
import { redactBody } from './body-redaction.ts'
import type { CapturedRequest, ExchangeRecorder } from './decision.ts'
import type { Redactor } from './redaction.ts'

/** How a recording ends that the run cut while it was still open: a response not finished, a WebSocket still open. */
export const RUN_ENDED_CODE = 'TR_SESSION_CLOSED'

/** A recorder that stores nothing (passthrough). */
export const PASSTHROUGH_RECORDER: ExchangeRecorder = {
  recording: false,
  responseStart() {},
  responseData: () => undefined,
  responseEnd: async () => {},
  fail: async () => {},
}

/** What a recorder needs from its session. */
export interface RecorderContext {
  recording: TraceRecording
  redactor: Redactor
  /** Largest body kept whole for JSON redaction. */
  maxBodyBytes: number
  /** Writes the exchange (tracked by the session: close() waits for it and reports its failure). */
  write(exchange: Exchange, bodies: ReadonlyMap<string, Uint8Array>, manifests: ReadonlyMap<string, BodyManifest>): Promise<void>
  /** A failure that loses this exchange: close() reports it and the recording stays partial. */
  lost(err: unknown): void
  /** The clock response timings are measured on (ms); default the wall clock. The lab passes its virtual one. */
  now?: () => number
}

/** A recorder, and what the session needs to close it when the response never ends. */
export interface OpenRecorder {
  recorder: ExchangeRecorder
  settled: Promise<void>
  /** Ends the recording with what arrived (the session is closing); settles once it is handed to the store. */
  cut(): Promise<void>
}

/** Starts recording the exchange for `request` (already redacted), numbered `seq`; `live` marks a live-tail exchange. */
export function createExchangeRecorder(ctx: RecorderContext, request: CapturedRequest, seq: number, startMs: number, live = false): OpenRecorder {
  const now = ctx.now ?? (() => performance.now())
  const t0 = now()
  let head: ResponseHead | undefined
  let headersMs = 0
  let body: ResponseBody | undefined
  let settle = () => {}
  const settled = new Promise<void>((resolve) => (settle = resolve))

  let finished: Promise<void> | undefined
  const finish = (build: (partial: RecordedResponse | undefined) => Exchange['outcome']): Promise<void> => {
    if (finished) return finished
    // Settled only once the exchange is handed to the store: close() waits for exactly that.
    finished = assemble(build)
      .catch((err: unknown) => ctx.lost(err))
      .finally(settle)
    return finished
  }
  const assemble = async (build: (partial: RecordedResponse | undefined) => Exchange['outcome']): Promise<void> => {
    const bodies = new Map<string, Uint8Array>()
    const manifests = new Map<string, BodyManifest>()
    const reqBody = request.body ? bodyFromChunks([{ bytes: request.body, atMs: 0 }]) : undefined
    if (reqBody) bodies.set(reqBody.ref.digest, reqBody.bytes)
    let outcome: Exchange['outcome']
    if (head) {
      const stored = await (body ?? new ResponseBody(ctx, head.headers)).finish(head.headers)
      if (stored.kind === 'unredactable') outcome = unredactableOutcome(ctx.maxBodyBytes)
      else {
        if (stored.bytes) bodies.set(stored.ref.digest, stored.bytes)
        if (stored.manifest) manifests.set(stored.ref.digest, stored.manifest)
        outcome = build({ status: head.status, statusText: head.statusText, headers: stored.headers, body: stored.ref, trailers: [] })
      }
    } else outcome = build(undefined)
    const exchange: Exchange = {
      seq,
      request: {
        method: request.method,
        url: request.url,
        headers: request.headers,
        body: reqBody?.ref ?? null,
        ...(request.httpVersion ? { httpVersion: request.httpVersion } : {}),
      },
      outcome,
      timing: { startMs: Math.round(startMs), headersMs: Math.round(headersMs) },
    }
    if (live) exchange.origin = 'live'
    return ctx.write(exchange, bodies, manifests)
  }

  const recorder: ExchangeRecorder = {
    recording: true,
    responseStart(h) {
      head = h
      headersMs = now() - t0
      body = new ResponseBody(ctx, h.headers)
    },
    responseData(chunk) {
      if (finished) return undefined
      body ??= new ResponseBody(ctx, [])
      return body.append(chunk, now() - t0)
    },
    responseEnd: (trailers = []) =>
      finish((partial) => {
        if (!partial) throw new ToolReplayError(ErrorCodes.INTERNAL, 'responseEnd called before responseStart')
        return { kind: 'response', response: { ...partial, trailers: ctx.redactor.headers(trailers) } }
      }),
    fail: (error, phase) =>
      finish((partial) => {
        const e: RecordedError = { code: error.code ?? 'UND_ERR', message: error.message, phase: phase ?? (partial ? 'response-body' : 'connect') }
        if (partial) e.partial = partial
        return { kind: 'error', error: e }
      }),
  }
  const cut = () => recorder.fail({ code: RUN_ENDED_CODE, message: 'The session closed before this response finished; the trace keeps what had arrived.' })
  return { recorder, settled, cut }
}

/** The outcome stored instead of a body redaction could not see whole: nothing of it reaches the store. */
function unredactableOutcome(max: number): Exchange['outcome'] {
  return {
    kind: 'error',
    error: {
      code: 'TR_BODY_NOT_REDACTED',
      message: `The response body was over ${max} bytes, so JSON body-path redaction could not read it whole; it was not stored. Raise maxBodyBytes (--max-body-bytes) to record it redacted.`,
      phase: 'response-body',
    },
  }
}

type StoredResponseBody = { kind: 'stored'; ref: BodyRef; headers: HeaderPairs; bytes?: Uint8Array; manifest?: BodyManifest } | { kind: 'unredactable' }

/**
 * One response body on its way to the store: in memory up to a piece, then streamed in pieces; or, when JSON
 * redaction needs it whole, in memory up to the limit and then dropped rather than stored unredacted.
 */
class ResponseBody {
  readonly #ctx: RecorderContext
  readonly #headers: HeaderPairs
  /** Kept whole for JSON redaction: decided from the head, or when the body first outgrows a piece. */
  #whole: boolean
  readonly #chunks: BodyChunk[] = []
  #memory: BodyAccumulator | undefined = new BodyAccumulator()
  #writer: BodyWriter | undefined
  #size = 0
  #overLimit = false
  #lastAtMs = 0
  #first: number | undefined

  constructor(ctx: RecorderContext, headers: HeaderPairs) {
    this.#ctx = ctx
    this.#headers = headers
    this.#whole = ctx.redactor.hasBodyPaths && mayBeJson(headers)
    const length = Number(headerValue(headers, 'content-length'))
    if (Number.isSafeInteger(length) && length > 0 && length <= PIECE_SIZE) this.#memory = new BodyAccumulator(length)
  }

  append(chunk: Uint8Array, atMs: number): undefined | Promise<void> {
    if (chunk.byteLength === 0) return undefined
    this.#first ??= chunk[0]
    this.#lastAtMs = atMs
    this.#size += chunk.byteLength
    this.#chunks.push(bodyChunk(chunk.byteLength, atMs))
    if (this.#overLimit) return undefined
    if (this.#whole) return this.#keepWhole(chunk, atMs)
    if (this.#writer === undefined && this.#size <= PIECE_SIZE) {
      ;(this.#memory as BodyAccumulator).append(chunk, atMs)
      return undefined
    }
    if (this.#writer === undefined) {
      if (this.#ctx.redactor.hasBodyPaths && (headerValue(this.#headers, 'content-encoding') !== undefined || this.#first === 0x7b || this.#first === 0x5b)) {
        // It may be JSON after all (compressed, or JSON under another type): redaction must see it whole.
        this.#whole = true
        return this.#keepWhole(chunk, atMs)
      }
      // Past one piece: from here on the body streams to the store.
      const head = (this.#memory as BodyAccumulator).finish().bytes
      this.#writer = this.#ctx.recording.bodyWriter()
      this.#memory = undefined
      this.#writer.write(head)
    }
    this.#writer.write(chunk)
    return this.#writer.backlogged ? this.#writer.whenDrained() : undefined
  }

  /** Keeps a chunk of a body redaction must see whole, up to the limit; past it nothing more is kept. */
  #keepWhole(chunk: Uint8Array, atMs: number): undefined {
    if (this.#size > this.#ctx.maxBodyBytes) {
      this.#overLimit = true
      this.#memory = undefined
      return undefined
    }
    ;(this.#memory as BodyAccumulator).append(chunk, atMs)
    return undefined
  }

  async finish(headers: HeaderPairs): Promise<StoredResponseBody> {
    const redacted = this.#ctx.redactor.headers(headers)
    if (this.#overLimit) return { kind: 'unredactable' }
    if (this.#writer) {
      const { digest, manifest } = await this.#writer.finish()
      return { kind: 'stored', ref: { digest, size: this.#size, chunks: this.#chunks }, headers: redacted, manifest }
    }
    const { ref, bytes } = (this.#memory as BodyAccumulator).finish()
    if (this.#whole) {
      const r = redactBody(this.#ctx.redactor, bytes, redacted, this.#ctx.maxBodyBytes)
      // Decoding it would pass the limit (a compression bomb, say): never stored unredacted.
      if (r === 'too-large') return { kind: 'unredactable' }
      // A redacted body no longer has its wire chunking (or encoding); it replays as one chunk.
      if (r !== 'unchanged') return { kind: 'stored', ...bodyFromChunks([{ bytes: r.bytes, atMs: this.#lastAtMs }]), headers: r.headers }
    }
    return { kind: 'stored', ref, bytes, headers: redacted }
  }
}

/** True when a response may carry JSON (so JSON body-path redaction must look at it whole). */
function mayBeJson(headers: HeaderPairs): boolean {
  const type = headerValue(headers, 'content-type')
  return type === undefined || /json/i.test(type)
}
