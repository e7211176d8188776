/**
 * Forwards a captured node:http request live (record, update, passthrough) and answers the app with what
 * the upstream sends, teeing it into the engine's recorder. The live request goes out through Node's own
 * http/https client on agents that msw does not intercept (internal-connection.ts), with the app's TLS
 * options, so it reaches the upstream as the app's request would and is never captured a second time.
 * Failure phases and client aborts follow the engine's transport rules, as on the other paths.
 */
import http, { type IncomingMessage } from 'node:http'
import https from 'node:https'
import { clientAbortError, type ExchangeProgress, type ExchangeRecorder, errorPhase } from '../engine/index.ts'
import { type HeaderPairs, headerPairsFromRaw } from '../trace/index.ts'
import type { ForwardAgents } from './internal-connection.ts'
import type { UpstreamRoute } from './node-http-request.ts'
import type { ControllerTarget } from './node-http-response.ts'

/** One request to send live: the app's request as captured (not redacted), body buffered. */
export interface LiveRequest {
  method: string
  url: URL
  /** Without hop-by-hop fields. */
  headers: HeaderPairs
  body: Uint8Array | null
  route: UpstreamRoute
}

/** What a forward needs besides the request. */
export interface ForwardContext {
  agents: ForwardAgents
  recorder: ExchangeRecorder
  target: ControllerTarget
  /** The app's side of the exchange: aborts when the app destroys its request. */
  signal: AbortSignal
  /** Keep recording a response the app abandoned after its head for up to this many ms (0: record the abort). */
  drainAfterAbortMs: number
  /** Called with the live ClientRequest as soon as it exists (so the capture can recognise it). */
  created(request: http.ClientRequest): void
  /**
   * A fault decides what the app gets: the upstream's answer only feeds the recorder, read to its end
   * whatever the app does (its aborts and pauses do not reach the live request), and `target` gets nothing.
   */
  detached?: boolean
}

/** The request's fields as Node's client sends them, with a Content-Length that matches the body sent. */
export function outgoingHeaders(headers: HeaderPairs, body: Uint8Array | null): string[] {
  const out: string[] = []
  for (const [k, v] of headers) if (k.toLowerCase() !== 'content-length') out.push(k, v)
  if (body !== null) out.push('content-length', String(body.byteLength))
  return out
}

/** Sends `live` and streams the answer into `ctx.target`. Settles nothing: the target and the recorder carry the outcome. */
export function forwardLive(live: LiveRequest, ctx: ForwardContext): void {
  new LiveExchange(live, ctx).start()
}

/** One live request: the upstream's answer teed into the recorder and the app, each with its back-pressure. */
class LiveExchange {
  readonly #live: LiveRequest
  readonly #ctx: ForwardContext
  readonly #secure: boolean
  readonly #progress: ExchangeProgress = { started: false, sent: false, headers: false }
  #request: http.ClientRequest | undefined
  #response: IncomingMessage | undefined
  #finished = false
  #appGone = false
  #drainTimer: NodeJS.Timeout | undefined

  constructor(live: LiveRequest, ctx: ForwardContext) {
    this.#live = live
    this.#ctx = ctx
    this.#secure = live.url.protocol === 'https:'
  }

  start(): void {
    const { url, route } = this.#live
    const request = (this.#secure ? https : http).request({
      method: this.#live.method,
      protocol: url.protocol,
      hostname: url.hostname.replace(/^\[|\]$/g, ''),
      ...(url.port ? { port: Number(url.port) } : {}),
      path: `${url.pathname}${url.search}`,
      // An array keeps repeated fields and their order, and Node adds no Host of its own (the app's is in it).
      headers: outgoingHeaders(this.#live.headers, this.#live.body),
      agent: this.#secure ? this.#ctx.agents.https : this.#ctx.agents.http,
      ...(route.socketPath ? { socketPath: route.socketPath } : {}),
      ...(this.#secure ? route.tls : {}),
    })
    this.#request = request
    this.#ctx.created(request)
    // Detached, the app's abort does not reach the live request: the upstream is read to its end for the trace.
    if (!this.#ctx.detached) {
      if (this.#ctx.signal.aborted) {
        this.#appGone = true
        this.#abortLive()
        return
      }
      this.#ctx.signal.addEventListener('abort', this.#onAppAbort, { once: true })
    }
    this.#trackProgress(request)
    request.on('error', this.#fail)
    request.on('response', (res) => this.#relay(res))
    const body = this.#live.body
    request.end(body === null ? undefined : Buffer.from(body.buffer, body.byteOffset, body.byteLength))
  }

  /**
   * "Started" means connected (a reused socket already is): a refused connection is a connect failure even
   * though Node accepted the whole request into the socket's buffer before it failed.
   */
  #trackProgress(request: http.ClientRequest): void {
    const progress = this.#progress
    request.on('socket', (socket) => {
      const connected = () => {
        progress.started = true
        if (request.writableFinished) progress.sent = true
      }
      if (!socket.connecting) connected()
      else socket.once(this.#secure ? 'secureConnect' : 'connect', connected)
    })
    request.on('finish', () => {
      if (progress.started) progress.sent = true
    })
  }

  #relay(res: IncomingMessage): void {
    const { recorder, target } = this.#ctx
    this.#response = res
    this.#progress.headers = true
    const head = { status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', headers: headerPairsFromRaw(res.rawHeaders) }
    if (recorder.recording) recorder.responseStart(head)
    if (this.#toApp) target.head(head)
    res.on('data', (chunk: Buffer) => {
      if (this.#finished) return
      const stored = recorder.recording ? recorder.responseData(chunk) : undefined
      const delivered = this.#toApp ? target.chunk(chunk) : undefined
      if (!stored && !delivered) return
      // Back-pressure from the store and from the app: the upstream waits for both.
      res.pause()
      void Promise.all([stored, delivered]).then(() => {
        if (!this.#finished) res.resume()
      })
    })
    res.on('end', () => {
      // A response cut mid-body is reported by 'error' below, never as an end.
      if (this.#finished || !res.complete) return
      this.#finish()
      const trailers = headerPairsFromRaw(res.rawTrailers)
      if (recorder.recording) recorder.responseEnd(trailers).catch(() => {})
      if (this.#toApp) target.end(trailers)
    })
    res.on('error', this.#fail)
  }

  /** True while the upstream's answer goes to the app too. */
  get #toApp(): boolean {
    return !this.#appGone && this.#ctx.detached !== true
  }

  #finish(): void {
    this.#finished = true
    clearTimeout(this.#drainTimer)
    this.#ctx.signal.removeEventListener('abort', this.#onAppAbort)
  }

  readonly #fail = (err: Error & { code?: unknown }): void => {
    if (this.#finished) return
    this.#finish()
    // An abort the app asked for is recorded the same way on every path, whatever ended the live request.
    // Node's client gives connection failures a code; ECONNRESET stands for any that comes without.
    const recorded = this.#appGone ? clientAbortError() : { code: typeof err.code === 'string' ? err.code : 'ECONNRESET', message: err.message }
    // Engine write failures surface when the session closes; here they must not break the app's request.
    this.#ctx.recorder.fail(recorded, errorPhase(this.#progress, recorded.code)).catch(() => {})
    if (this.#toApp) this.#ctx.target.failWith(err)
  }

  #abortLive(): void {
    if (this.#finished) return
    this.#fail(new Error(clientAbortError().message))
    this.#request?.destroy()
  }

  /**
   * As on the other paths: a response the app abandoned after its head keeps being recorded for a bounded
   * time, so the trace holds the whole response (SDKs abort on purpose once they have what they need).
   */
  readonly #onAppAbort = (): void => {
    if (this.#finished) return
    this.#appGone = true
    if (!this.#ctx.recorder.recording || !this.#progress.headers || this.#ctx.drainAfterAbortMs <= 0) {
      this.#abortLive()
      return
    }
    this.#response?.resume()
    this.#drainTimer = setTimeout(() => this.#abortLive(), this.#ctx.drainAfterAbortMs)
    this.#drainTimer.unref()
  }
}
