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
}

/** The request's fields as Node's client sends them, with a Content-Length that matches the body sent. */
function outgoingHeaders(headers: HeaderPairs, body: Uint8Array | null): string[] {
  const out: string[] = []
  for (const [k, v] of headers) if (k.toLowerCase() !== 'content-length') out.push(k, v)
  if (body !== null) out.push('content-length', String(body.byteLength))
  return out
}

/** Sends `live` and streams the answer into `ctx.target`. Settles nothing: the target and the recorder carry the outcome. */
export function forwardLive(live: LiveRequest, ctx: ForwardContext): void {
  const { recorder, target } = ctx
  const progress: ExchangeProgress = { started: false, sent: false, headers: false }
  let finished = false
  let appGone = false
  let drainTimer: NodeJS.Timeout | undefined
  let response: IncomingMessage | undefined

  const secure = live.url.protocol === 'https:'
  const request = (secure ? https : http).request({
    method: live.method,
    protocol: live.url.protocol,
    hostname: live.url.hostname.replace(/^\[|\]$/g, ''),
    ...(live.url.port ? { port: Number(live.url.port) } : {}),
    path: `${live.url.pathname}${live.url.search}`,
    // An array keeps repeated fields and their order, and Node adds no Host of its own (the app's is in it).
    headers: outgoingHeaders(live.headers, live.body),
    agent: secure ? ctx.agents.https : ctx.agents.http,
    ...(live.route.socketPath ? { socketPath: live.route.socketPath } : {}),
    ...(secure ? live.route.tls : {}),
  })
  ctx.created(request)

  const finish = () => {
    finished = true
    clearTimeout(drainTimer)
    ctx.signal.removeEventListener('abort', onAppAbort)
  }
  const fail = (err: Error & { code?: unknown }) => {
    if (finished) return
    finish()
    const code = appGone ? clientAbortError().code : typeof err.code === 'string' ? err.code : 'ECONNRESET'
    const recorded = appGone ? clientAbortError() : { code, message: err.message }
    // Engine write failures surface when the session closes; here they must not break the app's request.
    recorder.fail(recorded, errorPhase(progress, code)).catch(() => {})
    if (!appGone) target.failWith(err)
  }
  const abortLive = () => {
    if (finished) return
    fail(new Error(clientAbortError().message))
    request.destroy()
  }
  // As on the other paths: a response the app abandoned after its head keeps being recorded for a bounded
  // time, so the trace holds the whole response (SDKs abort on purpose once they have what they need).
  function onAppAbort(): void {
    if (finished) return
    appGone = true
    if (!recorder.recording || !progress.headers || ctx.drainAfterAbortMs <= 0) {
      abortLive()
      return
    }
    response?.resume()
    drainTimer = setTimeout(abortLive, ctx.drainAfterAbortMs)
    drainTimer.unref()
  }
  if (ctx.signal.aborted) {
    appGone = true
    abortLive()
    return
  }
  ctx.signal.addEventListener('abort', onAppAbort, { once: true })

  // "Started" means connected (a reused socket already is): a refused connection is a connect failure even
  // though Node accepted the whole request into the socket's buffer before it failed.
  request.on('socket', (socket) => {
    const connected = () => {
      progress.started = true
      if (request.writableFinished) progress.sent = true
    }
    if (!socket.connecting) connected()
    else socket.once(secure ? 'secureConnect' : 'connect', connected)
  })
  request.on('finish', () => {
    if (progress.started) progress.sent = true
  })
  request.on('error', fail)
  request.on('response', (res) => {
    response = res
    progress.headers = true
    const head = { status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', headers: headerPairsFromRaw(res.rawHeaders) }
    if (recorder.recording) recorder.responseStart(head)
    if (!appGone) target.head(head)
    res.on('data', (chunk: Buffer) => {
      if (finished) return
      const stored = recorder.recording ? recorder.responseData(chunk) : undefined
      const delivered = appGone ? undefined : target.chunk(chunk)
      if (!stored && !delivered) return
      // Back-pressure from the store and from the app: the upstream waits for both.
      res.pause()
      void Promise.all([stored, delivered]).then(() => {
        if (!finished) res.resume()
      })
    })
    res.on('end', () => {
      // A response cut mid-body ends too, after 'aborted': that one is reported by 'error' below.
      if (finished || !res.complete) return
      finish()
      const trailers = headerPairsFromRaw(res.rawTrailers)
      if (recorder.recording) recorder.responseEnd(trailers).catch(() => {})
      if (!appGone) target.end(trailers)
    })
    res.on('error', fail)
  })
  request.end(live.body === null ? undefined : Buffer.from(live.body.buffer, live.body.byteOffset, live.body.byteLength))
}
