/**
 * WebSocket upgrades dispatched to the interceptor (undici's WebSocket, and so Node's global one): the engine
 * decides (Session.handleWebSocket). Live: the upgrade goes to the real dispatcher and, once it switched, the
 * socket handed to the app is tapped — bytes the app writes and bytes that arrive are read frame by frame into
 * the recorder, the socket itself untouched. Replay: the app gets one end of an in-memory duplex pair as its
 * socket, with the recorded 101 (an accept for its key), and the recorded session is played on the other end.
 *
 * @note Node's bundled undici (v6/v7 in Node 22/24) hands dispatchers the legacy handler (onConnect, onUpgrade,
 * ...); undici 8's Agent accepts only the new one (onRequestStart, onRequestUpgrade, ...), which is why Node's
 * global WebSocket could not connect at all under install(): live upgrades are given the handler API the
 * upstream dispatcher speaks (`asRequestHandler`).
 */

import type { Duplex } from 'node:stream'
import { duplexPair } from 'node:stream'
import type { Dispatcher } from 'undici'
import { type Pace, playWebSocket, switchedHeaders, tapWebSocket } from '../capture/index.ts'
import { type Session, WebSocketConversation, type WebSocketDecision, type WebSocketRecorder } from '../engine/index.ts'
import { type HeaderPairs, headerValue, type ResponseHead } from '../trace/index.ts'
import type { AnyDispatchHandler } from './response-sink.ts'

/** Legacy (undici v1 handler API) methods this file calls. */
interface LegacyHandler {
  onConnect?(abort: (reason?: Error) => void, context?: unknown): void
  onUpgrade?(statusCode: number, rawHeaders: Buffer[], socket: Duplex): void
  onHeaders?(statusCode: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean | undefined
  onData?(chunk: Buffer): boolean | undefined
  onComplete?(trailers: Buffer[] | null): void
  onError?(err: Error): void
}

/** New (undici 7+) handler API methods this file calls. */
interface RequestHandler {
  onRequestStart?(controller: unknown, context: unknown): void
  onRequestUpgrade?(controller: unknown, statusCode: number, headers: Record<string, string | string[]>, socket: Duplex): void
  onResponseStart?(controller: unknown, statusCode: number, headers: Record<string, string | string[]>, statusMessage?: string): void
  onResponseData?(controller: unknown, chunk: Buffer): void
  onResponseEnd?(controller: unknown, trailers: unknown): void
  onResponseError?(controller: unknown, err: Error): void
}

/** What carrying out an upgrade needs. */
export interface WebSocketUpgradeContext {
  session: Session
  pace: Pace
  maxBodyBytes: number
  /** Sends the (wrapped) upgrade to the live dispatcher. */
  forward(handler: Dispatcher.DispatchHandler): void
  /** Fails the app's upgrade with `error`. */
  fail(error: Error): void
}

/** Carries out the engine's decision on one WebSocket upgrade. */
export function carryOutWebSocket(
  decision: WebSocketDecision,
  url: string,
  requestHeaders: HeaderPairs,
  handler: AnyDispatchHandler,
  ctx: WebSocketUpgradeContext,
): void {
  if (decision.kind === 'fail') {
    ctx.fail(decision.error)
    return
  }
  if (decision.kind === 'forward') {
    ctx.forward(tapped(handler, decision.recorder, ctx.maxBodyBytes))
    return
  }
  const ws = decision.websocket
  if (!ws) {
    // The upstream had refused the upgrade: undici's upgrade handlers take only a 101, so the app gets the failure.
    const status = decision.exchange.outcome.kind === 'response' ? decision.exchange.outcome.response.status : 'an error'
    ctx.fail(
      Object.assign(new Error(`Unexpected server response: ${status} (replayed: the recorded upgrade of ${url} was not switched)`), { code: 'UND_ERR_SOCKET' }),
    )
    return
  }
  const key = headerValue(requestHeaders, 'sec-websocket-key') ?? ''
  const head = switchedHeaders(ws.head, key)
  const [app, ours] = duplexPair()
  const conversation = new WebSocketConversation(ws, `GET ${url}`, ctx.session.trace)
  queueMicrotask(() => {
    const legacy = handler as LegacyHandler
    const modern = handler as RequestHandler
    if (typeof modern.onRequestUpgrade === 'function') {
      modern.onRequestStart?.({ abort: () => ours.destroy(), pause() {}, resume() {} }, {})
      modern.onRequestUpgrade({ rawHeaders: rawHeaders(head) }, 101, headerObject(head), app)
    } else {
      legacy.onConnect?.(() => ours.destroy(), {})
      legacy.onUpgrade?.(101, rawHeaders(head), app)
    }
    // The session over, the app's socket closes as a TCP connection would.
    void playWebSocket(ours, conversation, {
      pace: ctx.pace,
      maxPayload: ctx.maxBodyBytes,
      onMiss: (error) => ctx.session.refuse({ method: 'GET', url }, error),
    }).then(() => app.destroy())
  })
}

/**
 * The app's handler in the API undici 8 speaks, with its upgrade tapped into `recorder`: a 101 opens the recording
 * and taps the socket; any other answer is recorded as the upgrade's failure.
 */
function tapped(handler: AnyDispatchHandler, recorder: WebSocketRecorder, maxPayload: number): Dispatcher.DispatchHandler {
  const inner = asRequestHandler(handler)
  const wrapped: RequestHandler = {
    onRequestStart: (c, ctx) => inner.onRequestStart?.(c, ctx),
    onRequestUpgrade: (c, status, headers, socket) => {
      recorder.opened(responseHead(status, headers))
      tapWebSocket(socket, recorder, maxPayload)
      inner.onRequestUpgrade?.(c, status, headers, socket)
    },
    onResponseStart: (c, status, headers, message) => {
      void recorder.end({ code: 'TR_UPGRADE_REFUSED', message: `The upstream answered the upgrade with ${status}${message ? ` ${message}` : ''}, not 101.` })
      inner.onResponseStart?.(c, status, headers, message)
    },
    onResponseData: (c, chunk) => inner.onResponseData?.(c, chunk),
    onResponseEnd: (c, trailers) => inner.onResponseEnd?.(c, trailers),
    onResponseError: (c, err) => {
      void recorder.end({ code: (err as { code?: string }).code ?? 'UND_ERR_SOCKET', message: err.message })
      inner.onResponseError?.(c, err)
    },
  }
  return wrapped as Dispatcher.DispatchHandler
}

/** A legacy handler adapted to the new API (as undici 8's Dispatcher1Wrapper does); a new one as it is. */
function asRequestHandler(handler: AnyDispatchHandler): RequestHandler {
  if (typeof (handler as RequestHandler).onRequestStart === 'function') return handler as RequestHandler
  const h = handler as LegacyHandler
  const raw = (c: unknown, headers: Record<string, string | string[]>) => {
    const given = (c as { rawHeaders?: unknown } | undefined)?.rawHeaders
    return Array.isArray(given)
      ? (given as Buffer[])
      : rawHeaders(Object.entries(headers).flatMap(([k, v]) => (Array.isArray(v) ? v.map((x): [string, string] => [k, x]) : [[k, v] as [string, string]])))
  }
  return {
    onRequestStart: (c, ctx) => h.onConnect?.((reason) => (c as { abort(r?: Error): void }).abort(reason), ctx),
    onRequestUpgrade: (c, status, headers, socket) => h.onUpgrade?.(status, raw(c, headers), socket),
    onResponseStart: (c, status, headers, message) => {
      if (h.onHeaders?.(status, raw(c, headers), () => (c as { resume(): void }).resume(), message ?? '') === false) (c as { pause(): void }).pause()
    },
    onResponseData: (c, chunk) => {
      if (h.onData?.(chunk) === false) (c as { pause(): void }).pause()
    },
    onResponseEnd: () => h.onComplete?.([]),
    onResponseError: (_c, err) => h.onError?.(err),
  }
}

function responseHead(status: number, headers: Record<string, string | string[]>): ResponseHead {
  const pairs: HeaderPairs = []
  for (const [k, v] of Object.entries(headers)) for (const x of Array.isArray(v) ? v : [v]) pairs.push([k, x])
  return { status, statusText: 'Switching Protocols', headers: pairs }
}

function rawHeaders(pairs: ReadonlyArray<readonly [string, string]>): Buffer[] {
  return pairs.flatMap(([k, v]) => [Buffer.from(k, 'latin1'), Buffer.from(v, 'latin1')])
}

function headerObject(pairs: ReadonlyArray<readonly [string, string]>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of pairs) out[k.toLowerCase()] = v
  return out
}
