import type { ServerResponse } from 'node:http'
import type { Agent, Dispatcher } from 'undici'
import { clientAbortError, type ExchangeProgress, type ExchangeRecorder, errorPhase } from '../engine/index.ts'
import { type HeaderPairs, headerPairsFromRaw } from '../trace/index.ts'
import { flatten, stripHopByHop } from './headers.ts'
import { trailersObject } from './playback.ts'
import { sendUpstreamError } from './responses.ts'

/** What to forward: the request as received (body already buffered for identity). */
export interface ForwardRequest {
  url: URL
  method: string
  headers: HeaderPairs
  body: Buffer | null
}

/** How forwarding treats a client that goes away mid-response. */
export interface ForwardOptions {
  /** Keep recording a response the client abandoned after its head for up to this many ms (0: record the abort). */
  drainAfterAbortMs: number
}

/**
 * Forwards one request with undici's dispatch API and streams the response to the client with
 * back-pressure (the upstream read pauses while the client socket is full), feeding the recorder.
 * Bodies pass as on the wire: nothing is decompressed. Failure phases and client aborts are classified by
 * the engine's transport rules, exactly as the interceptor does. With `res` null (a fault decides what the
 * client gets) the response only feeds the recorder, read to its end, paced by the recorder.
 */
export function forwardRequest(
  agent: Agent,
  request: ForwardRequest,
  res: ServerResponse | null,
  recorder: ExchangeRecorder,
  options: ForwardOptions,
): Promise<void> {
  return new Promise<void>((resolve) => {
    let controller: Dispatcher.DispatchController | undefined
    const progress: ExchangeProgress = { started: false, sent: false, headers: false }
    /** The client is gone (or not ours to write to): keep recording but write nothing to it. */
    let clientGone = res === null
    let finished = false
    let drainTimer: NodeJS.Timeout | undefined
    const settle = (p?: Promise<void>) => {
      if (finished) return
      finished = true
      clearTimeout(drainTimer)
      res?.off('close', onClientClose)
      // Recorder writes are tracked by the session (close() awaits them); their failure surfaces there.
      void p?.catch(() => {})
      resolve()
    }
    const abortRecording = () => {
      if (finished) return
      const error = clientAbortError()
      const p = recorder.fail(error, errorPhase(progress, error.code))
      controller?.abort(new Error(error.message))
      settle(p)
    }
    const onClientClose = () => {
      if (finished || res?.writableFinished) return
      clientGone = true
      // As in-process: a response abandoned after its head keeps being recorded for a bounded time, so the
      // trace holds the whole response rather than a cut that depends on timing.
      if (!recorder.recording || !progress.headers || options.drainAfterAbortMs <= 0) {
        abortRecording()
        return
      }
      if (controller?.paused) controller.resume()
      drainTimer = setTimeout(abortRecording, options.drainAfterAbortMs)
      drainTimer.unref()
    }
    res?.on('close', onClientClose)
    let holds = 0
    const hold = (c: Dispatcher.DispatchController, until: Promise<void>) => {
      holds++
      c.pause()
      void until.finally(() => {
        if (--holds === 0 && !finished) c.resume()
      })
    }

    const headers = stripHopByHop(request.headers)
    agent.dispatch(
      {
        origin: `${request.url.protocol}//${request.url.host}`,
        path: `${request.url.pathname}${request.url.search}`,
        method: request.method,
        headers: flatten(headers),
        body: request.body,
        // Never retried or rewritten: the app's retries are part of what is recorded.
        idempotent: false,
      },
      {
        onRequestStart(c) {
          controller = c
          progress.started = true
        },
        onRequestSent() {
          progress.sent = true
        },
        onResponseStart(c, status, _parsed, statusText) {
          // 1xx heads are interim: the final head follows.
          if (finished || status < 200) return
          const raw = headerPairsFromRaw(c.rawHeaders as Buffer[] | null)
          recorder.responseStart({ status, statusText: statusText ?? '', headers: raw })
          progress.headers = true
          if (!clientGone) res?.writeHead(status, statusText || undefined, flatten(stripHopByHop(raw)))
        },
        onResponseData(c, chunk) {
          if (finished) return
          // Two reasons to hold the upstream: the client is not reading, or the store (or, detached, a
          // fault's client side) is behind with the recording. It resumes when neither holds.
          const waiting = recorder.responseData(chunk)
          if (waiting) hold(c, waiting)
          if (clientGone || !res) return
          if (!res.write(chunk)) {
            hold(
              c,
              new Promise<void>((resolve) => {
                // A client that goes away stops holding the upstream too (the recording drains on).
                res.once('drain', () => resolve())
                res.once('close', () => resolve())
              }),
            )
          }
        },
        onResponseEnd(c) {
          if (finished) return
          const trailers = headerPairsFromRaw(c.rawTrailers as Buffer[] | null)
          if (!clientGone && res) {
            if (trailers.length > 0 && !res.hasHeader('content-length')) res.addTrailers(trailersObject(trailers))
            res.end()
          }
          settle(recorder.responseEnd(trailers))
        },
        onResponseError(_c, err) {
          if (finished) return
          const e = err as Error & { code?: string }
          const code = e.code ?? 'UND_ERR'
          const phase = errorPhase(progress, code)
          const p = recorder.fail({ code, message: e.message }, phase)
          // Mid-body failure: the client sees the partial body and then the connection dies, as on replay.
          // A client that is gone has nobody to tell.
          if (clientGone || !res) {
            /* nothing to write */
          } else if (progress.headers) res.write('', () => res.socket?.destroy())
          else sendUpstreamError(res, code, phase, e.message)
          settle(p)
        },
      },
    )
  })
}
