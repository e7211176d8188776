/**
 * Sends a live request through an undici Dispatcher (an Agent) and reports it to the live tee as wire-neutral
 * events: raw header pairs and wire chunks as undici hands them, one error vocabulary. fetch's live requests
 * and the proxy's both go out this way; node:http's go out through Node's own client
 * (interceptor/node-http-forward.ts), which reports the same events.
 */
import type { Dispatcher } from 'undici'
import { headerPairsFromRaw } from '../trace/index.ts'
import type { LiveEvents } from './live-tee.ts'

/**
 * Raw header pairs from what an undici controller exposes: Buffers on HTTP/1.1, a record on HTTP/2 (then the
 * parsed form is all there is).
 */
export function rawHeaderList(raw: unknown, parsed: unknown): Buffer[] {
  if (Array.isArray(raw)) return raw.map((v) => (Buffer.isBuffer(v) ? v : Buffer.from(String(v), 'latin1')))
  const out: Buffer[] = []
  const source = (raw ?? parsed) as Record<string, string | string[] | undefined> | null | undefined
  for (const [name, value] of Object.entries(source ?? {})) {
    if (value === undefined) continue
    for (const v of Array.isArray(value) ? value : [value]) out.push(Buffer.from(name, 'latin1'), Buffer.from(String(v), 'latin1'))
  }
  return out
}

/** Dispatches `opts` on `dispatcher`, reporting to `events`; a dispatch that throws is reported as the request's failure. */
export function forwardThroughDispatcher(dispatcher: Dispatcher, opts: Dispatcher.DispatchOptions, events: LiveEvents): void {
  const handler: Dispatcher.DispatchHandler = {
    onRequestStart(controller) {
      events.control(controller)
      events.started()
    },
    onRequestSent() {
      events.sent()
    },
    onResponseStart(controller, status, parsed, statusText) {
      // 1xx heads are interim: the final head follows.
      if (status < 200) return
      const raw = rawHeaderList(controller.rawHeaders, parsed)
      events.head({ status, statusText: statusText ?? '', headers: headerPairsFromRaw(raw) }, { raw, parsed })
    },
    onResponseData(_controller, chunk) {
      events.data(chunk)
    },
    onResponseEnd(controller, trailers) {
      events.end(headerPairsFromRaw(rawHeaderList(controller.rawTrailers, trailers)))
    },
    onResponseError(_controller, err) {
      events.error(err)
    },
  }
  try {
    dispatcher.dispatch(opts, handler)
  } catch (err) {
    events.error(err as Error)
  }
}
