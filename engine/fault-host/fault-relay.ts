/**
 * Carries out a fault that acts after the request was forwarded (`response_lost`, `server_error` with
 * `forward`, `latency` after the response, `schema_drift`) or in the middle of the body (`stream_cut`,
 * `stream_error`), the same for both capture paths. The path forwards as usual and feeds the upstream's
 * response into `recorder(inner)`; the upstream's answer is recorded in full, and the app gets `client`, a
 * playback the path plays like any other:
 * - mid-body faults stream: each chunk passes through a StreamCutter as it arrives, and the body ends
 *   cleanly (stream_cut) or breaks off (stream_error) at the cut point, while the upstream is still read
 *   to its end for the trace;
 * - after-response faults hold the upstream's whole response (up to maxBodyBytes), then hand the app what
 *   `applyAfterResponse` makes of it, after the fault's delay.
 * `finalize` turns the recorded exchange into the faulted one: `outcome` is what the app was given, and
 * `fault.upstream` what the upstream really did.
 */

import { applyAfterResponse, type BufferedResponse, type FaultDecision, type FaultFailure, faultRecord, StreamCutter } from '../../faults/index.ts'
import {
  bodyFromChunks,
  concatBytes,
  type ErrorPhase,
  type Exchange,
  type HeaderPairs,
  headerValue,
  isEventStream,
  type Outcome,
  type RecordedError,
  type ResponseHead,
} from '../../trace/index.ts'
import { ChunkChannel } from '../chunk-channel.ts'
import type { ExchangeRecorder, Playback, PlaybackChunk } from '../decision.ts'
import { clientAbortError } from '../transport-rules.ts'

/** What a relay needs from its session. */
export interface FaultRelayContext {
  decision: FaultDecision
  /** Reports whether the fault applied (coverage and the rule's `limit`). */
  settle(applied: boolean, note: string): void
  /** Waits on the run's clock; settles early (never rejects) when the session closes or `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<unknown>
  /** Aborts when the app gives up on the request: what it was given is then its own abort. */
  signal?: AbortSignal
  /** ms on the run's clock. */
  now(): number
  /** Largest response held whole to apply an after-response fault; a larger one passes unchanged. */
  maxBodyBytes: number
  /** Redacts a response the app was given before it is stored next to the upstream's. */
  redact(headers: HeaderPairs, body: Uint8Array): { headers: HeaderPairs; body: Uint8Array; changed: boolean }
}

/** What the trace keeps as the app's view once the fault applied. */
type StoredView =
  | { kind: 'upstream' }
  | { kind: 'response'; head: ResponseHead; chunks: PlaybackChunk[]; trailers: HeaderPairs }
  | { kind: 'error'; error: FaultFailure; partial?: { head: ResponseHead; chunks: PlaybackChunk[] } }

/** An error a playback's chunk stream throws: the driver fails the client with its code. */
function streamError(code: string, message: string, injected: boolean): Error {
  return Object.assign(new Error(message), { code, injected })
}

/**
 * @example
 * const relay = new FaultRelay(ctx)
 * const recorder = relay.recorder(session recorder whose write goes through relay.finalize)
 * return { kind: 'forward', recorder, client: relay.client }
 */
export class FaultRelay {
  /** What the app gets; resolves once its head (or its failure) is known. */
  readonly client: Promise<Playback>
  readonly #ctx: FaultRelayContext
  readonly #t0: number
  #resolve: (p: Playback) => void = () => {}
  #resolved = false
  #mode: 'buffer' | 'cut' | 'pass' = 'buffer'
  #head: ResponseHead | undefined
  #parts: Uint8Array[] = []
  #size = 0
  #channel: ChunkChannel | undefined
  #cutter: StreamCutter | undefined
  /** The cut was carried out: the client's side is over, the upstream is still being read. */
  #cutDone = false
  /** What the client got of a cut stream, for the trace. */
  readonly #kept: PlaybackChunk[] = []
  #settled = false
  #view: StoredView | undefined
  /** When the app got its head or failure, ms after the request (run clock). */
  #clientMs: number | undefined
  /** The app gave up before it got anything (while the relay held the answer back). */
  #gaveUp = false

  constructor(ctx: FaultRelayContext) {
    this.#ctx = ctx
    this.#t0 = ctx.now()
    this.client = new Promise((resolve) => (this.#resolve = resolve))
    ctx.signal?.addEventListener(
      'abort',
      () => {
        if (this.#resolved) return
        this.#gaveUp = true
        this.#clientMs = this.#elapsed()
      },
      { once: true },
    )
  }

  /** Wraps the session's recorder: every upstream event is recorded, and drives what the app gets. */
  recorder(inner: ExchangeRecorder): ExchangeRecorder {
    return {
      recording: true,
      responseStart: (head) => {
        inner.responseStart(head)
        this.#start(head)
      },
      responseData: (chunk) => {
        const a = inner.responseData(chunk)
        const b = this.#data(chunk)
        return a && b ? Promise.all([a, b]).then(() => undefined) : (a ?? b)
      },
      responseEnd: (trailers = []) => {
        this.#end(trailers)
        return inner.responseEnd(trailers)
      },
      fail: (error, phase) => {
        this.#fail(error, phase)
        return inner.fail(error, phase)
      },
    }
  }

  /**
   * The exchange as the trace keeps it: what the app was given as `outcome`, the upstream's recorded outcome
   * under `fault.upstream`. Unchanged (and without a fault record) when the fault did not apply.
   */
  finalize(exchange: Exchange, bodies: Map<string, Uint8Array>): Exchange {
    const view = this.#view
    if (!view) return exchange
    const upstream = exchange.outcome
    let outcome: Outcome = upstream
    if (this.#gaveUp) {
      // The fault held the answer back and the app gave up waiting: its abort is what it got.
      outcome = { kind: 'error', error: { ...clientAbortError(), phase: 'response-headers' } }
    } else if (view.kind === 'response') {
      const r = this.#stored(view.head, view.chunks, bodies)
      outcome = { kind: 'response', response: { ...r, trailers: view.trailers.length ? this.#ctx.redact(view.trailers, new Uint8Array(0)).headers : [] } }
    } else if (view.kind === 'error') {
      const error: RecordedError = { code: view.error.code, message: view.error.message, phase: view.error.phase }
      if (view.partial) error.partial = { ...this.#stored(view.partial.head, view.partial.chunks, bodies), trailers: [] }
      outcome = { kind: 'error', error }
    }
    const timing = this.#clientMs === undefined ? exchange.timing : { ...exchange.timing, headersMs: Math.max(0, Math.round(this.#clientMs)) }
    return { ...exchange, outcome, timing, fault: faultRecord(this.#ctx.decision, upstream) }
  }

  #stored(head: ResponseHead, chunks: PlaybackChunk[], bodies: Map<string, Uint8Array>) {
    const plain = concatBytes(chunks.map((c) => c.bytes))
    const r = this.#ctx.redact(head.headers, plain)
    // A redacted body lost its chunking: it is stored as one chunk.
    const body = bodyFromChunks(r.changed ? [{ bytes: r.body, atMs: chunks.at(-1)?.atMs ?? 0 }] : chunks)
    bodies.set(body.ref.digest, body.bytes)
    return { status: head.status, statusText: head.statusText, headers: r.headers, body: body.ref }
  }

  #elapsed(): number {
    return this.#ctx.now() - this.#t0
  }

  #settle(applied: boolean, note: string): void {
    if (this.#settled) return
    this.#settled = true
    this.#ctx.settle(applied, note)
  }

  #deliver(playback: Playback): void {
    if (this.#resolved) return
    this.#resolved = true
    this.#resolve(playback)
  }

  /** Starts streaming to the app: head now, chunks as they come. */
  #openStream(head: ResponseHead): void {
    this.#channel = new ChunkChannel()
    this.#clientMs ??= this.#elapsed()
    this.#deliver({ kind: 'response', head, headersMs: 0, chunks: this.#channel, trailers: [] })
  }

  #start(head: ResponseHead): void {
    this.#head = head
    const action = this.#ctx.decision.action
    if (action.do !== 'forward-then-cut') return
    const why = 'events' in action.after ? notCuttable(head.headers) : undefined
    if (why) {
      this.#settle(false, why)
      this.#mode = 'pass'
      this.#openStream(head)
      return
    }
    this.#mode = 'cut'
    this.#cutter = new StreamCutter(action.after)
    // The declared length no longer holds: the cut body ends as a chunked body (or breaks off).
    this.#openStream({ ...head, headers: head.headers.filter(([k]) => k.toLowerCase() !== 'content-length') })
  }

  #data(chunk: Uint8Array): undefined | Promise<void> {
    if (chunk.byteLength === 0) return undefined
    // Copied: the source may reuse its buffer once this returns.
    const bytes = Uint8Array.from(chunk)
    if (this.#mode === 'pass') return this.#channel?.push({ bytes, atMs: 0 })
    if (this.#mode === 'buffer') {
      this.#parts.push(bytes)
      this.#size += bytes.byteLength
      if (this.#size <= this.#ctx.maxBodyBytes || !this.#head) return undefined
      // Too big to hold: the fault cannot apply; the app gets the response as it comes.
      this.#settle(false, `the response is over ${this.#ctx.maxBodyBytes} bytes, too big to hold for an after-response fault`)
      this.#mode = 'pass'
      this.#openStream(this.#head)
      for (const p of this.#parts) void this.#channel?.push({ bytes: p, atMs: 0 })
      this.#parts = []
      return undefined
    }
    if (this.#cutDone) return undefined
    const cutter = this.#cutter as StreamCutter
    const { keep, done } = cutter.push(bytes)
    const wait = keep.byteLength > 0 ? this.#channel?.push({ bytes: keep, atMs: 0 }) : undefined
    if (keep.byteLength > 0) this.#kept.push({ bytes: keep, atMs: Math.round(this.#elapsed()) })
    const action = this.#ctx.decision.action as Extract<FaultDecision['action'], { do: 'forward-then-cut' }>
    // A reset applies once the cut point is reached; a clean end only once something is really left out.
    if (done && (action.error || keep.byteLength < bytes.byteLength)) this.#cut()
    return wait
  }

  /** Carries out the cut: the app's body ends here (cleanly, or with a reset). */
  #cut(): void {
    const action = this.#ctx.decision.action as Extract<FaultDecision['action'], { do: 'forward-then-cut' }>
    const cutter = this.#cutter as StreamCutter
    this.#cutDone = true
    const at = 'events' in action.after ? `${cutter.events} event(s)` : `${cutter.bytes} byte(s)`
    const head = { ...(this.#head as ResponseHead), headers: (this.#head as ResponseHead).headers.filter(([k]) => k.toLowerCase() !== 'content-length') }
    if (action.error) {
      this.#settle(true, `reset after ${at}`)
      this.#view = { kind: 'error', error: action.error, partial: { head, chunks: this.#kept } }
      this.#channel?.fail(streamError(action.error.code, action.error.message, true))
      return
    }
    this.#settle(true, `ended cleanly after ${at}`)
    this.#view = { kind: 'response', head, chunks: this.#kept, trailers: [] }
    this.#channel?.end()
  }

  #end(trailers: HeaderPairs): void {
    if (this.#mode === 'pass') {
      this.#channel?.end()
      return
    }
    if (this.#mode === 'cut') {
      if (this.#cutDone) return
      const action = this.#ctx.decision.action as Extract<FaultDecision['action'], { do: 'forward-then-cut' }>
      if (action.error && this.#cutter?.done) {
        this.#cut()
        return
      }
      this.#settle(false, 'the body ended before the cut point')
      this.#channel?.end()
      return
    }
    const head = this.#head as ResponseHead
    const upstream: BufferedResponse = { ...head, body: concatBytes(this.#parts), trailers }
    const applied = applyAfterResponse(this.#ctx.decision.action, upstream)
    this.#settle(applied.applied, applied.note)
    const view = applied.view
    if (view.kind === 'error') {
      if (applied.applied) this.#view = { kind: 'error', error: view.error }
      if (!this.#gaveUp) this.#clientMs = this.#elapsed()
      this.#deliver({
        kind: 'error',
        error: { code: view.error.code, message: view.error.message, phase: view.error.phase },
        headersMs: 0,
        chunks: [],
        injected: true,
      })
      return
    }
    const r = view.response
    // The upstream's own body keeps its chunking; a body the fault made is one chunk.
    const chunks = r.body === upstream.body ? this.#parts.map((bytes) => ({ bytes, atMs: 0 })) : [{ bytes: r.body, atMs: 0 }]
    if (applied.applied) {
      this.#view =
        r === upstream
          ? { kind: 'upstream' }
          : { kind: 'response', head: { status: r.status, statusText: r.statusText, headers: r.headers }, chunks, trailers: r.trailers }
    }
    if (!this.#gaveUp) this.#clientMs = this.#elapsed() + view.delayMs
    const playback: Playback = {
      kind: 'response',
      head: { status: r.status, statusText: r.statusText, headers: r.headers },
      headersMs: 0,
      chunks,
      trailers: r.trailers,
    }
    if (view.delayMs <= 0) this.#deliver(playback)
    else void this.#ctx.sleep(view.delayMs, this.#ctx.signal).then(() => this.#deliver(playback))
  }

  #fail(error: { code?: string; message: string }, phase: ErrorPhase | undefined): void {
    const code = error.code ?? 'UND_ERR'
    if (this.#mode === 'cut' && this.#cutDone) return
    this.#settle(false, `the upstream failed first (${code})`)
    if (this.#channel) {
      this.#channel.fail(streamError(code, error.message, false))
      return
    }
    // Held back so far: the app gets the upstream's failure as it happened (head and body first, if any).
    const recorded: RecordedError = { code, message: error.message, phase: phase ?? (this.#head ? 'response-body' : 'connect') }
    if (!this.#gaveUp) this.#clientMs = this.#elapsed()
    this.#deliver(
      this.#head
        ? { kind: 'error', error: recorded, headersMs: 0, head: this.#head, chunks: this.#parts.map((bytes) => ({ bytes, atMs: 0 })) }
        : { kind: 'error', error: recorded, headersMs: 0, chunks: [] },
    )
  }
}

/** Why a cut by events cannot apply to a response with these headers, or undefined when it can. */
function notCuttable(headers: HeaderPairs): string | undefined {
  if (!isEventStream(headerValue(headers, 'content-type'))) return 'the response is not an event stream (text/event-stream)'
  const coding = headerValue(headers, 'content-encoding')
  if (coding !== undefined && coding.trim().toLowerCase() !== 'identity') return `the event stream is ${coding}-encoded; cut it with afterBytes`
  return undefined
}
