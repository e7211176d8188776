import type { ServerResponse } from 'node:http'
import type { Agent, Dispatcher } from 'undici'
import type { ExchangeRecorder } from '../engine/index.ts'
import { type ErrorPhase, type HeaderPairs, headerPairsFromRaw } from '../trace/index.ts'
import { flatten, stripHopByHop } from './headers.ts'
import { trailersObject } from './playback.ts'
import { sendUpstreamError } from './responses.ts'

/** Codes that mean no connection to the upstream was made. */
const CONNECT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'CERT_HAS_EXPIRED',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'ERR_SSL_WRONG_VERSION_NUMBER',
])

/** What to forward: the request as received (body already buffered for identity). */
export interface ForwardRequest {
  url: URL
  method: string
  headers: HeaderPairs
  body: Buffer | null
}

/**
 * Forwards one request with undici's dispatch API and streams the response to the client with
 * back-pressure (the upstream read pauses while the client socket is full), feeding the recorder.
 * Bodies pass as on the wire: nothing is decompressed.
 */
export function forwardRequest(agent: Agent, request: ForwardRequest, res: ServerResponse, recorder: ExchangeRecorder): Promise<void> {
  return new Promise<void>((resolve) => {
    let controller: Dispatcher.DispatchController | undefined
    let requestSent = false
    let headSent = false
    let finished = false
    const settle = (p?: Promise<void>) => {
      if (finished) return
      finished = true
      res.off('close', onClientClose)
      // Recorder writes are tracked by the session (close() awaits them); their failure surfaces there.
      void p?.catch(() => {})
      resolve()
    }
    const phase = (code: string | undefined): ErrorPhase => {
      if (headSent) return 'response-body'
      if (!requestSent) return code && CONNECT_CODES.has(code) ? 'connect' : 'request'
      return 'response-headers'
    }
    const onClientClose = () => {
      if (finished || res.writableFinished) return
      // The client went away mid-exchange: stop reading upstream and keep what the app saw.
      const p = recorder.fail({ code: 'UND_ERR_ABORTED', message: 'The client closed the connection before the response ended' }, phase(undefined))
      controller?.abort(new Error('client closed the connection'))
      settle(p)
    }
    res.on('close', onClientClose)

    const headers = stripHopByHop(request.headers)
    const origin = `${request.url.protocol}//${request.url.host}`
    agent.dispatch(
      {
        origin,
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
        },
        onRequestSent() {
          requestSent = true
        },
        onResponseStart(c, status, _parsed, statusText) {
          if (finished) return
          const raw = headerPairsFromRaw(c.rawHeaders as Buffer[] | null)
          recorder.responseStart({ status, statusText: statusText ?? '', headers: raw })
          headSent = true
          res.writeHead(status, statusText || undefined, flatten(stripHopByHop(raw)))
        },
        onResponseData(c, chunk) {
          if (finished) return
          recorder.responseData(chunk)
          if (!res.write(chunk)) {
            c.pause()
            res.once('drain', () => c.resume())
          }
        },
        onResponseEnd(c) {
          if (finished) return
          const trailers = headerPairsFromRaw(c.rawTrailers as Buffer[] | null)
          if (trailers.length > 0 && !res.hasHeader('content-length')) res.addTrailers(trailersObject(trailers))
          res.end()
          settle(recorder.responseEnd(trailers))
        },
        onResponseError(_c, err) {
          if (finished) return
          const e = err as Error & { code?: string }
          const code = e.code ?? 'UND_ERR'
          const ph = phase(code)
          const p = recorder.fail({ code, message: e.message }, ph)
          if (headSent) {
            // Mid-body failure: the client sees the partial body and then the connection dies, as on replay.
            res.write('', () => res.socket?.destroy())
          } else {
            sendUpstreamError(res, code, ph, e.message)
          }
          settle(p)
        },
      },
    )
  })
}
