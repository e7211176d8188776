/**
 * What stays installed in a test process once a strict replay has been judged (the node:test setup): every
 * later request — from an `after()` hook of the test file, which node:test runs after the setup's, or a timer
 * that outlived the tests — is answered with the refusal response instead of reaching the network, and marks
 * the run failed (capture's lateRequestRefusal). Restoring the dispatcher that was there before would let those
 * requests go out live.
 */
import { ClientRequestInterceptor } from '@mswjs/interceptors/ClientRequest'
import type { Dispatcher } from 'undici'
import { drivePlayback, lateRequestRefusal, refusalPlayback, refusalResponse } from '../capture/index.ts'
import { DispatcherShell } from './dispatcher-shell.ts'
import { installGlobalDispatcher } from './global-dispatcher.ts'
import { fetchClient } from './playback.ts'
import { type AnyDispatchHandler, createResponseSink } from './response-sink.ts'

/** A dispatcher that refuses every request as one that came after trace `trace` was judged. */
export class LateRequestDispatcher extends DispatcherShell {
  readonly #trace: string

  constructor(trace: string) {
    super()
    this.#trace = trace
  }

  override dispatch(opts: Dispatcher.DispatchOptions, handler: AnyDispatchHandler): boolean {
    const sink = createResponseSink(handler)
    const url = new URL(opts.path, opts.origin ?? 'http://localhost').href
    const error = lateRequestRefusal(this.#trace, opts.method, url)
    // Deferred so handlers are never called re-entrantly from inside dispatch().
    queueMicrotask(() => {
      sink.start()
      // One chunk, nothing recorded to wait for: no pacing applies.
      void drivePlayback(refusalPlayback(error), { kind: 'none' }, fetchClient(sink, false))
    })
    return true
  }

  // Nothing to free: it holds no connection.
  protected override closing(): Promise<void> {
    return Promise.resolve()
  }

  protected override destroying(): Promise<void> {
    return Promise.resolve()
  }
}

/**
 * Refuses fetch and node:http requests for the rest of the process, as requests that came after trace `trace`
 * was judged. Call it after the interceptor is closed (its node:http capture disposed).
 */
export function refuseLateRequests(trace: string): void {
  installGlobalDispatcher(new LateRequestDispatcher(trace))
  const nodeHttp = new ClientRequestInterceptor()
  nodeHttp.on('request', ({ request, controller }) => {
    const r = refusalResponse(lateRequestRefusal(trace, request.method, request.url))
    controller.respondWith(new Response(Buffer.from(r.body), { status: r.status, statusText: r.statusText, headers: r.headers }))
  })
  nodeHttp.apply()
}
