/**
 * The lab's own fault executor: an undici Dispatcher that carries out the engine's fault decisions for
 * requests made with undici's `fetch(url, { dispatcher })`, against a real upstream, on the lab's clock,
 * and records each exchange with its fault record (what the upstream really did next to what the app got).
 *
 * @note A stand-in until the capture paths carry faults out themselves: the interceptor and the proxy still
 * have to ask the planner in their Decision, carry out `FaultAction`s (streaming, with StreamCutter for
 * mid-body faults) and write `fault` into the exchanges they record. This executor buffers every response
 * (the lab's are small), ignores back-pressure, records without redaction (the lab has no secrets) and
 * speaks undici 8's handler API only.
 */
import { STATUS_CODES } from 'node:http'
import { Agent, Dispatcher } from 'undici'
import { applyAfterResponse, type BufferedResponse, type FaultDecision, type FaultFailure, type FaultPlanner, faultRecord } from '../engine/index.ts'
import {
  bodyFromBytes,
  bodyFromChunks,
  concatBytes,
  type ErrorPhase,
  type Exchange,
  type HeaderPairs,
  type Outcome,
  type RecordedResponse,
  type Trace,
} from '../trace/index.ts'
import type { LabClock } from './virtual-clock.ts'

/** Options of the lab's fault executor. */
export interface LabFaultDispatcherOptions {
  planner: FaultPlanner
  clock: LabClock
  /** Name of the trace it records. */
  trace: string
  /** Where forwarded requests go. Default: a new undici Agent, closed with this dispatcher. */
  upstream?: Dispatcher
}

/** What an exchange ended as, from the app's side and the upstream's. */
interface Result {
  app: Outcome
  headersMs: number
  upstream: Outcome | null
}

class Controller implements Dispatcher.DispatchController {
  readonly #abort = new AbortController()
  rawHeaders: Buffer[] | null = null
  get aborted(): boolean {
    return this.#abort.signal.aborted
  }
  get paused(): boolean {
    return false
  }
  get reason(): Error | null {
    return this.aborted ? (this.#abort.signal.reason as Error) : null
  }
  get signal(): AbortSignal {
    return this.#abort.signal
  }
  abort(reason: Error): void {
    this.#abort.abort(reason)
  }
  // Lab bodies are small and delivered whole: there is nothing to pause.
  pause(): void {}
  resume(): void {}
}

/**
 * @example
 * const dispatcher = new LabFaultDispatcher({ planner, clock, trace: 'lab' })
 * await fetch(url, { dispatcher }) // undici's fetch
 * dispatcher.trace // the exchanges, with fault records
 */
export class LabFaultDispatcher extends Dispatcher {
  readonly #planner: FaultPlanner
  readonly #clock: LabClock
  readonly #upstream: Dispatcher
  readonly #ownsUpstream: boolean
  readonly #trace: Trace

  constructor(options: LabFaultDispatcherOptions) {
    super()
    this.#planner = options.planner
    this.#clock = options.clock
    this.#ownsUpstream = options.upstream === undefined
    this.#upstream = options.upstream ?? new Agent()
    this.#trace = {
      meta: { name: options.trace, format: 1, labels: { recordedWith: 'lab', faultsSeed: options.planner.seed } },
      exchanges: [],
      bodies: new Map(),
    }
  }

  /** The exchanges so far, each with its fault record. */
  get trace(): Trace {
    return this.#trace
  }

  override dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const controller = new Controller()
    const seq = this.#trace.exchanges.length
    // Reserve the slot now: exchanges are in the order requests were sent, whatever order they finish in.
    this.#trace.exchanges.push(undefined as unknown as Exchange)
    queueMicrotask(() => {
      this.#run(seq, opts, handler, controller).catch((err: Error) => {
        // A request the executor could not even read still takes its place in the trace, as a failure.
        this.#trace.exchanges[seq] ??= {
          seq,
          request: { method: opts.method, url: `${String(opts.origin ?? '')}${opts.path}`, headers: [], body: null },
          outcome: errorOutcome(err, 'request'),
          timing: { startMs: this.#clock.now(), headersMs: 0 },
        }
        deliverError(handler, controller, err)
      })
    })
    return true
  }

  override async close(): Promise<void> {
    if (this.#ownsUpstream) await this.#upstream.close()
  }

  override async destroy(): Promise<void> {
    if (this.#ownsUpstream) await this.#upstream.destroy()
  }

  async #run(seq: number, opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler, controller: Controller): Promise<void> {
    handler.onRequestStart?.(controller, {})
    const startMs = this.#clock.now()
    const url = new URL(opts.path, String(opts.origin)).href
    const headers = headerPairs(opts.headers)
    const body = await collectBody(opts.body)
    const decision = this.#planner.decide({ method: opts.method, url, headers }, startMs)
    let result: Result
    try {
      result = decision
        ? await this.#faulted(decision, opts, url, headers, body, handler, controller, startMs)
        : await this.#plain(opts, url, headers, body, handler, controller, startMs)
    } catch (err) {
      // Only an abort by the app gets here: everything else was delivered as an outcome.
      result = { app: errorOutcome(err as Error, 'response-headers'), headersMs: this.#clock.now() - startMs, upstream: null }
      deliverError(handler, controller, err as Error)
    }
    this.#record(seq, { method: opts.method, url, headers, body }, result, startMs, decision)
  }

  async #plain(
    opts: Dispatcher.DispatchOptions,
    url: string,
    headers: HeaderPairs,
    body: Uint8Array | null,
    handler: Dispatcher.DispatchHandler,
    controller: Controller,
    startMs: number,
  ): Promise<Result> {
    const upstream = await this.#forward(opts, url, headers, body, controller.signal)
    if (upstream instanceof Error) {
      deliverError(handler, controller, upstream)
      return { app: errorOutcome(upstream, 'connect'), headersMs: this.#clock.now() - startMs, upstream: null }
    }
    await deliverResponse(handler, controller, upstream)
    const outcome = this.#responseOutcome(upstream)
    return { app: outcome, headersMs: this.#clock.now() - startMs, upstream: outcome }
  }

  async #faulted(
    decision: FaultDecision,
    opts: Dispatcher.DispatchOptions,
    url: string,
    headers: HeaderPairs,
    body: Uint8Array | null,
    handler: Dispatcher.DispatchHandler,
    controller: Controller,
    startMs: number,
  ): Promise<Result> {
    const action = decision.action
    const elapsed = () => this.#clock.now() - startMs
    if (action.do === 'respond' || action.do === 'fail') {
      this.#planner.settle(decision, true)
      await this.#clock.sleep(action.delayMs, controller.signal)
      if (action.do === 'fail') {
        deliverError(handler, controller, failure(action.error))
        return {
          app: { kind: 'error', error: { code: action.error.code, message: action.error.message, phase: action.error.phase } },
          headersMs: elapsed(),
          upstream: null,
        }
      }
      const response = { ...action.response, trailers: [] }
      await deliverResponse(handler, controller, response)
      return { app: this.#responseOutcome(response), headersMs: elapsed(), upstream: null }
    }
    if (action.do === 'delay') {
      this.#planner.settle(decision, true)
      await this.#clock.sleep(action.delayMs, controller.signal)
      return this.#plain(opts, url, headers, body, handler, controller, startMs)
    }
    const upstream = await this.#forward(opts, url, headers, body, controller.signal)
    if (upstream instanceof Error) {
      this.#planner.settle(decision, false, `the upstream failed first (${(upstream as { code?: string }).code ?? upstream.message})`)
      deliverError(handler, controller, upstream)
      return { app: errorOutcome(upstream, 'connect'), headersMs: elapsed(), upstream: null }
    }
    const real = this.#responseOutcome(upstream)
    const applied = applyAfterResponse(action, upstream)
    this.#planner.settle(decision, applied.applied, applied.note)
    const view = applied.view
    try {
      if (view.kind === 'response') await this.#clock.sleep(view.delayMs, controller.signal)
    } catch (err) {
      // The app gave up while the answer was held back: the upstream committed, the app got its abort.
      deliverError(handler, controller, err as Error)
      return { app: errorOutcome(err as Error, 'response-headers'), headersMs: elapsed(), upstream: real }
    }
    if (view.kind === 'response') {
      await deliverResponse(handler, controller, view.response)
      return { app: this.#responseOutcome(view.response), headersMs: elapsed(), upstream: real }
    }
    if (view.partial) await deliverResponse(handler, controller, view.partial, failure(view.error))
    else deliverError(handler, controller, failure(view.error))
    const partial = view.partial ? { partial: this.#recorded(view.partial) } : {}
    return {
      app: { kind: 'error', error: { code: view.error.code, message: view.error.message, phase: view.error.phase, ...partial } },
      headersMs: elapsed(),
      upstream: real,
    }
  }

  /** Sends the request to the real upstream and reads the whole answer; a network failure comes back as an Error. */
  async #forward(
    opts: Dispatcher.DispatchOptions,
    url: string,
    headers: HeaderPairs,
    body: Uint8Array | null,
    signal: AbortSignal,
  ): Promise<BufferedResponse | Error> {
    try {
      const u = new URL(url)
      const res = await this.#upstream.request({
        origin: u.origin,
        path: u.pathname + u.search,
        method: opts.method as Dispatcher.HttpMethod,
        headers: headers.flat(),
        body,
        signal,
      })
      const chunks: Uint8Array[] = []
      for await (const chunk of res.body) chunks.push(chunk as Uint8Array)
      return {
        status: res.statusCode,
        statusText: STATUS_CODES[res.statusCode] ?? '',
        headers: headerPairs(res.headers),
        body: concatBytes(chunks),
        trailers: headerPairs(res.trailers),
      }
    } catch (err) {
      if (signal.aborted) throw signal.reason
      return err as Error
    }
  }

  #responseOutcome(r: BufferedResponse): Outcome {
    return { kind: 'response', response: this.#recorded(r) }
  }

  #recorded(r: BufferedResponse): RecordedResponse {
    const body = bodyFromChunks([{ bytes: r.body, atMs: 0 }])
    this.#trace.bodies.set(body.ref.digest, body.bytes)
    return { status: r.status, statusText: r.statusText, headers: r.headers, trailers: r.trailers, body: body.ref }
  }

  #record(
    seq: number,
    request: { method: string; url: string; headers: HeaderPairs; body: Uint8Array | null },
    result: Result,
    startMs: number,
    decision: FaultDecision | undefined,
  ): void {
    let bodyRef = null
    if (request.body) {
      const b = bodyFromBytes(request.body)
      this.#trace.bodies.set(b.ref.digest, b.bytes)
      bodyRef = b.ref
    }
    this.#trace.exchanges[seq] = {
      seq,
      request: { method: request.method, url: request.url, headers: request.headers, body: bodyRef },
      outcome: result.app,
      timing: { startMs, headersMs: result.headersMs },
      ...(decision ? { fault: faultRecord(decision, result.upstream) } : {}),
    }
  }
}

/** The error a fault's failure reaches the app as: an Error with the code, as undici and Node report network errors. */
function failure(f: FaultFailure): Error {
  return Object.assign(new Error(f.message), { code: f.code })
}

function errorOutcome(err: Error, phase: ErrorPhase): Outcome {
  const code = (err as { code?: unknown }).code
  const name = err.name === 'TimeoutError' || err.name === 'AbortError' ? 'ABORT_ERR' : 'UND_ERR'
  return { kind: 'error', error: { code: typeof code === 'string' ? code : name, message: err.message, phase } }
}

async function deliverResponse(handler: Dispatcher.DispatchHandler, controller: Controller, r: BufferedResponse, thenFail?: Error): Promise<void> {
  if (controller.aborted) return
  controller.rawHeaders = r.headers.flatMap(([k, v]) => [Buffer.from(k, 'latin1'), Buffer.from(v, 'latin1')])
  handler.onResponseStart?.(controller, r.status, headerObject(r.headers), r.statusText)
  if (r.body.byteLength > 0 && !controller.aborted) handler.onResponseData?.(controller, Buffer.from(r.body.buffer, r.body.byteOffset, r.body.byteLength))
  if (controller.aborted) return
  if (!thenFail) {
    handler.onResponseEnd?.(controller, headerObject(r.trailers))
    return
  }
  // fetch's body stream drops what the app has not read yet when it errors, as on a real reset. Over a
  // network the reset arrives after the bytes before it; this gap lets the app read them first (its pending
  // read is served by microtasks, which all run before a timer fires).
  await new Promise((resolve) => setTimeout(resolve, RESET_GAP_MS))
  if (!controller.aborted) handler.onResponseError?.(controller, thenFail)
}

/** Wall-clock ms between the last bytes before a mid-body reset and the reset. */
const RESET_GAP_MS = 20

function deliverError(handler: Dispatcher.DispatchHandler, controller: Controller, err: Error): void {
  handler.onResponseError?.(controller, err)
}

function headerObject(pairs: HeaderPairs): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  for (const [k, v] of pairs) {
    const key = k.toLowerCase()
    const prev = out[key]
    out[key] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v]
  }
  return out
}

/** Header pairs from what undici hands over: an object, a flat [name, value, ...] list or a list of pairs. */
function headerPairs(h: unknown): HeaderPairs {
  if (h === null || h === undefined) return []
  if (Array.isArray(h)) {
    if (h.every((x) => Array.isArray(x))) return (h as Array<[unknown, unknown]>).map(([k, v]) => [String(k), String(v)])
    const out: HeaderPairs = []
    for (let i = 0; i + 1 < h.length; i += 2) out.push([String(h[i]), String(h[i + 1])])
    return out
  }
  return Object.entries(h as Record<string, unknown>).flatMap(([k, v]) =>
    Array.isArray(v) ? v.map((x): [string, string] => [k, String(x)]) : v === undefined ? [] : [[k, String(v)] as [string, string]],
  )
}

/** The whole request body, whatever form undici's fetch hands it over in. */
async function collectBody(body: unknown): Promise<Uint8Array | null> {
  if (body === null || body === undefined) return null
  if (typeof body === 'string') return new TextEncoder().encode(body)
  if (body instanceof Uint8Array) return body
  if (typeof (body as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function') {
    const parts: Uint8Array[] = []
    for await (const chunk of body as AsyncIterable<Uint8Array | string>) parts.push(typeof chunk === 'string' ? new TextEncoder().encode(chunk) : chunk)
    return concatBytes(parts)
  }
  throw new TypeError(`The lab's fault executor cannot read a request body of type ${Object.prototype.toString.call(body)}`)
}
