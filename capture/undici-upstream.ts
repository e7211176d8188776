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

/** The undici package's exports. */
export type Undici = typeof import('undici')

/**
 * The Agent a capture path forwards through, made at its first use: undici's HTTP client (~110 modules, ~100 ms
 * of a start) is imported only when a request goes out live, or when `warm()` asks early; a strict replay never
 * loads it. Imported with `import('undici')`, the specifier an app uses (one ESM module record; never `require`).
 * Closing while undici loads waits for the Agent, so a request already waiting for it is sent and finishes as on
 * an Agent closed with it in flight.
 */
export class LazyAgent {
  readonly #make: (undici: Undici) => Dispatcher
  readonly #load: () => Promise<Undici>
  #agent: Dispatcher | undefined
  #making: Promise<Dispatcher> | undefined

  /** `make` builds the Agent from the loaded package; `load` imports it (a path may wrap the import). */
  constructor(make: (undici: Undici) => Dispatcher, load: () => Promise<Undici> = () => import('undici')) {
    this.#make = make
    this.#load = load
  }

  /**
   * Runs `forward` with the Agent: at once (its result returned, its throw thrown) when the Agent exists, else
   * once undici has loaded, when a failure to load or a throw goes to `fail`.
   */
  use<T>(forward: (agent: Dispatcher) => T, fail: (err: Error) => void): T | undefined {
    if (this.#agent) return forward(this.#agent)
    this.#making ??= this.#load().then((undici) => (this.#agent = this.#make(undici)))
    this.#making.then((agent) => {
      try {
        forward(agent)
      } catch (err) {
        fail(err as Error)
      }
    }, fail)
    return undefined
  }

  /** Starts making the Agent now, without waiting for it. */
  warm(): void {
    this.use(
      () => {},
      () => {},
    )
  }

  close(): Promise<void> {
    return this.#settled().then((agent) => agent?.close())
  }

  destroy(err: Error | null): Promise<void> {
    return this.#settled().then((agent) => agent?.destroy(err))
  }

  /** The Agent once made; undefined if it never was (nothing went out live) or undici failed to load. */
  #settled(): Promise<Dispatcher | undefined> {
    return this.#agent ? Promise.resolve(this.#agent) : (this.#making?.catch(() => undefined) ?? Promise.resolve(undefined))
  }
}
