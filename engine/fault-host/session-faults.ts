/**
 * Faults inside a session: the engine asks the FaultPlanner about every request that goes live and turns
 * its decision into what both capture paths already carry out, so neither path holds fault logic:
 * - before forwarding (`rate_limit`, `server_error`, `blackout`, `timeout`): a made-up response or
 *   failure, as a `replay` decision, after the fault's wait; nothing is forwarded;
 * - `latency` before forwarding: the `forward` decision, handed over after the delay;
 * - after the upstream answered or mid-body: a `forward` decision whose `client` playback the path plays
 *   instead of the upstream's answer (see FaultRelay).
 * Every faulted exchange is recorded with its fault record. Strict replay injects nothing new: a faulted
 * trace replays what the app was given, and a faults file is then checked against the faults it holds.
 */
import { setTimeout as sleepFor } from 'node:timers/promises'
import {
  assertAllRulesFired,
  type FaultDecision,
  FaultPlanner,
  type FaultsConfig,
  faultRecord,
  faultsFromObject,
  isWebSocketRule,
  type RuleCoverage,
  readFaultsFile,
  resolveSeed,
  type SeedSource,
  seedLine,
} from '../../faults/index.ts'
import {
  bodyFromBytes,
  bodyFromChunks,
  type Exchange,
  type HeaderPairs,
  headerValue,
  liveWebSocketView,
  type Outcome,
  type RecordedError,
  type RecordedRequest,
  type WebSocketFaultPlan,
  websocketUpstream,
} from '../../trace/index.ts'
import { redactBody } from '../body-redaction.ts'
import type { CapturedRequest, Decision, ExchangeRecorder, Playback } from '../decision.ts'
import type { Redactor } from '../redaction.ts'
import { clientAbortError } from '../transport-rules.ts'
import type { WebSocketRecorder, WebSocketRecorderHooks } from '../websocket-recorder.ts'
import { FaultRelay } from './fault-relay.ts'

/** The clock a faulted run follows: schedules (`window`, `quota`) and fault waits. */
export interface FaultClock {
  /** ms since the run started. */
  now(): number
  /** Resolves after `ms`; rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>
}

/** `SessionOptions.faults`: the rules, the seed in use and where it came from. */
export interface SessionFaultsOptions {
  config: FaultsConfig
  seed: string
  seedSource: SeedSource
  /** Default: the wall clock from the session's start. The lab passes its virtual clock. */
  clock?: FaultClock
}

/** Faults as install() and the CLI take them: a faults file (JSON or YAML), a parsed config, or the rules as an object. */
export type FaultsInput = string | FaultsConfig | Record<string, unknown>

/**
 * Reads and validates faults (TR_INVALID_FAULTS on any problem) and resolves the seed: `seed`, then
 * TOOL_REPLAY_FAULTS_SEED in `env`, then the file's seed, then a random one.
 * @example
 * const faults = await loadSessionFaults('faults.yaml', { env: process.env })
 * const session = await openSession({ mode: 'record', trace, store, faults })
 */
export async function loadSessionFaults(
  input: FaultsInput,
  options: { seed?: string | number; env?: Record<string, string | undefined>; clock?: FaultClock } = {},
): Promise<SessionFaultsOptions> {
  const config = typeof input === 'string' ? await readFaultsFile(input) : isFaultsConfig(input) ? input : faultsFromObject(input)
  const { seed, source } = resolveSeed({
    ...(options.seed !== undefined ? { option: options.seed } : {}),
    ...(options.env ? { env: options.env } : {}),
    ...(config.seed !== undefined ? { file: config.seed } : {}),
  })
  return { config, seed, seedSource: source, ...(options.clock ? { clock: options.clock } : {}) }
}

/** True for a config parseFaults already validated (its targets are compiled). */
function isFaultsConfig(v: FaultsInput): v is FaultsConfig {
  const c = v as Partial<FaultsConfig>
  return typeof c.source === 'string' && Array.isArray(c.rules) && c.rules.every((r) => typeof r?.target?.matches === 'function')
}

/** A decision of a ws_* rule. */
type WebSocketFaultDecision = FaultDecision & { action: { do: 'websocket'; plan: WebSocketFaultPlan } }

/** Makes a live session's WebSocket recorder, with what its owner hears from it. */
export type WebSocketRecorderFactory = (hooks?: WebSocketRecorderHooks) => WebSocketRecorder

/** What a session lends the fault injector for one request. */
export interface FaultHost {
  /** The request, redacted. */
  request: CapturedRequest
  seq: number
  startMs: number
  /** Aborts when the app gives up on the request (a fault's wait then ends early). */
  signal: AbortSignal | undefined
  /** A recorder for the forwarded request; `finalize` rewrites the exchange before it is written. */
  recorder(finalize?: (exchange: Exchange, bodies: Map<string, Uint8Array>) => Exchange): ExchangeRecorder
  /** Writes an exchange no upstream took part in (nothing happens when the session does not record). */
  write(exchange: Exchange, bodies: Map<string, Uint8Array>): void
  redactor: Redactor
  maxBodyBytes: number
}

/** Per rule, what strict replay served from a faulted trace. */
interface ReplayCount {
  eligible: number
  triggered: number
}

/**
 * @example
 * const faults = new SessionFaults(options.faults, { now, replaying: mode === 'replay' })
 * const decision = faults.decide(request, startMs) // then faults.carryOut(decision, host)
 */
export class SessionFaults {
  readonly config: FaultsConfig
  readonly seedSource: SeedSource
  readonly #planner: FaultPlanner
  readonly #now: () => number
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>
  /** Aborted when the session closes: no fault wait outlives it. */
  readonly #closing = new AbortController()
  /** Decisions still waiting (a timeout, a latency): close() lets them finish and record before the recording ends. */
  readonly #waiting = new Set<Promise<unknown>>()
  readonly #replayed = new Map<string, ReplayCount>()
  /** The seed the faulted exchanges strict replay served were recorded with. */
  #recordedSeed: string | undefined
  /** In strict replay: the seed the replayed trace names (its recording's). */
  readonly #traceSeed: string | undefined

  /** `traceSeed`: strict replay of a trace recorded with faults; its seed is the one in use. */
  constructor(options: SessionFaultsOptions, run: { now: () => number; traceSeed?: string }) {
    this.config = options.config
    this.seedSource = options.seedSource
    this.#planner = new FaultPlanner(options.config, { seed: options.seed })
    this.#now = options.clock ? () => (options.clock as FaultClock).now() : run.now
    this.#sleep = options.clock ? (ms, signal) => (options.clock as FaultClock).sleep(ms, signal) : (ms, signal) => sleepFor(ms, undefined, { signal })
    this.#traceSeed = run.traceSeed
    for (const r of options.config.rules) this.#replayed.set(r.id, { eligible: 0, triggered: 0 })
  }

  /** The seed in use: the configured one, or the one a replayed faulted trace was recorded with. */
  get seed(): string {
    return this.#recordedSeed ?? this.#traceSeed ?? this.#planner.seed
  }

  /** "faults seed 42 (from the faults file); rerun: ...": printed at the start of a run and on every failure. */
  seedLine(rerun?: string): string {
    const recorded = this.#recordedSeed ?? this.#traceSeed
    if (recorded === undefined) return seedLine(this.#planner.seed, this.seedSource, rerun)
    const note = recorded === this.#planner.seed ? '' : `; the configured seed ${this.#planner.seed} injects nothing in strict replay`
    return `faults seed ${recorded} (recorded in the replayed trace${note})`
  }

  /** The fault for a request that goes live, if any rule selects it. */
  decide(request: CapturedRequest, atMs: number): FaultDecision | undefined {
    return this.#planner.decide(request, atMs)
  }

  /**
   * The recorder of a WebSocket session that goes live: when a ws_* rule selects it, its fault goes on the recorder
   * (the capture path carries it out) and the exchange is finalized as the app got it (finalizeWebSocket).
   */
  websocketRecorder(request: CapturedRequest, atMs: number, make: WebSocketRecorderFactory): WebSocketRecorder {
    const decision = this.#planner.decide(request, atMs, true)
    if (decision?.action.do !== 'websocket') return make()
    const faulted = decision as WebSocketFaultDecision
    const recorder = make({
      finalize: (x, bodies) => this.finalizeWebSocket(faulted, x, bodies),
      // An upgrade the upstream refused (401, say) or never answered is an HTTP exchange: no session, no fault.
      unswitched: () => this.#planner.settle(faulted, false, 'the upstream did not switch protocols: there was no session to fault'),
    })
    recorder.fault = faulted.action.plan
    return recorder
  }

  /**
   * A faulted WebSocket session's exchange as it is written: the session the app got, with the fault record keeping
   * the 101 and the session as the upstream had it. A session that ended before the fault's message was not
   * faulted: written as it was, and the rule's coverage says why.
   */
  finalizeWebSocket(
    decision: FaultDecision & { action: { do: 'websocket'; plan: WebSocketFaultPlan } },
    x: Exchange,
    bodies: Map<string, Uint8Array>,
  ): Exchange {
    const upstream = x.websocket
    const app = upstream && liveWebSocketView(upstream, decision.action.plan, bodies)
    if (!upstream || !app) {
      this.#planner.settle(decision, false, 'the session ended before the message the fault acts on')
      return x
    }
    this.#planner.settle(decision, true)
    return { ...x, websocket: app, fault: { ...faultRecord(decision, x.outcome), websocket: websocketUpstream(upstream) } }
  }

  /** Counts a request strict replay served: the rules whose target it matches, and the fault it was recorded with. */
  replayed(request: CapturedRequest, exchange: Exchange): void {
    for (const r of this.config.rules) {
      if (isWebSocketRule(r) !== (exchange.websocket !== undefined) || !r.target.matches(request.method, request.url)) continue
      if (r.key && headerValue(request.headers, r.key.header) === undefined) continue
      ;(this.#replayed.get(r.id) as ReplayCount).eligible++
    }
    const f = exchange.fault
    if (!f) return
    this.#recordedSeed ??= f.seed
    const count = this.#replayed.get(f.rule)
    if (count) count.triggered++
  }

  /** Turns a decision into what the capture path carries out, and arranges for the exchange's fault record. */
  carryOut(decision: FaultDecision, host: FaultHost): Decision | Promise<Decision> {
    const action = decision.action
    if (action.do === 'respond' || action.do === 'fail') {
      this.#planner.settle(decision, true)
      if (action.delayMs <= 0) return this.#madeUp(decision, host, false)
      return this.#track(this.#wait(action.delayMs, host.signal).then((aborted) => this.#madeUp(decision, host, aborted)))
    }
    if (action.do === 'crash') {
      // The MCP path kills the server instead of handing it the message: recorded as never forwarded.
      this.#planner.settle(decision, true)
      return { kind: 'forward', recorder: host.recorder((x) => ({ ...x, fault: faultRecord(decision, null) })), fault: decision }
    }
    if (action.do === 'delay') {
      this.#planner.settle(decision, true)
      let forwarded = false
      // Made before the wait, so the recorded head time includes the added latency.
      const recorder = host.recorder((x) => ({ ...x, fault: faultRecord(decision, forwarded ? x.outcome : null) }))
      return this.#track(
        this.#wait(action.delayMs, host.signal).then((aborted): Decision => {
          if (!aborted) {
            forwarded = true
            return { kind: 'forward', recorder, fault: decision }
          }
          const error = { ...clientAbortError(), phase: 'response-headers' as const }
          // The recorder writes it (with its fault record): the app gave up while the latency held it back.
          void recorder.fail(error, error.phase).catch(() => {})
          return {
            kind: 'replay',
            exchange: this.#exchange(decision, host, { kind: 'error', error }, new Map(), false),
            playback: abortPlayback(error),
            fault: decision,
          }
        }),
      )
    }
    const relay = new FaultRelay({
      decision,
      settle: (applied, note) => this.#planner.settle(decision, applied, note),
      sleep: (ms, signal) => this.#wait(ms, signal),
      ...(host.signal ? { signal: host.signal } : {}),
      now: this.#now,
      maxBodyBytes: host.maxBodyBytes,
      redact: (headers, body) => redactView(host.redactor, headers, body, host.maxBodyBytes),
    })
    const recorder = host.recorder((x, bodies) => relay.finalize(x, bodies))
    return { kind: 'forward', recorder: relay.recorder(recorder), client: relay.client, fault: decision }
  }

  /** A before-forward fault's response or failure: recorded (upstream: null) and played to the app. */
  #madeUp(decision: FaultDecision, host: FaultHost, aborted: boolean): Decision {
    const action = decision.action as Extract<FaultDecision['action'], { do: 'respond' | 'fail' }>
    const bodies = new Map<string, Uint8Array>()
    if (aborted) {
      // The app gave up while the fault made it wait: that is what it got.
      const error = { ...clientAbortError(), phase: 'response-headers' as const }
      return { kind: 'replay', exchange: this.#exchange(decision, host, { kind: 'error', error }, bodies), playback: abortPlayback(error), fault: decision }
    }
    if (action.do === 'fail') {
      const error: RecordedError = { code: action.error.code, message: action.error.message, phase: action.error.phase }
      const exchange = this.#exchange(decision, host, { kind: 'error', error }, bodies)
      return { kind: 'replay', exchange, playback: { kind: 'error', error, headersMs: 0, chunks: [], injected: true }, fault: decision }
    }
    const r = action.response
    const body = bodyFromBytes(r.body)
    bodies.set(body.ref.digest, body.bytes)
    const outcome: Outcome = { kind: 'response', response: { status: r.status, statusText: r.statusText, headers: r.headers, body: body.ref, trailers: [] } }
    const exchange = this.#exchange(decision, host, outcome, bodies)
    const head = { status: r.status, statusText: r.statusText, headers: r.headers }
    return { kind: 'replay', exchange, playback: { kind: 'response', head, headersMs: 0, chunks: [{ bytes: r.body, atMs: 0 }], trailers: [] }, fault: decision }
  }

  /** The exchange of a fault no upstream took part in, written when the session records. */
  #exchange(decision: FaultDecision, host: FaultHost, outcome: Outcome, bodies: Map<string, Uint8Array>, write = true): Exchange {
    const { request } = host
    let body: RecordedRequest['body'] = null
    if (request.body) {
      const b = bodyFromChunks([{ bytes: request.body, atMs: 0 }])
      bodies.set(b.ref.digest, b.bytes)
      body = b.ref
    }
    const exchange: Exchange = {
      seq: host.seq,
      request: { method: request.method, url: request.url, headers: request.headers, body },
      outcome,
      timing: { startMs: Math.round(host.startMs), headersMs: Math.max(0, Math.round(this.#now() - host.startMs)) },
      fault: faultRecord(decision, null),
    }
    if (write) host.write(exchange, bodies)
    return exchange
  }

  #track<T>(p: Promise<T>): Promise<T> {
    this.#waiting.add(p)
    void p.finally(() => this.#waiting.delete(p)).catch(() => {})
    return p
  }

  /** Waits `ms` on the run's clock; true when the app gave up first. Ends early (false) when the session closes. */
  async #wait(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
    if (signal?.aborted) return true
    const both = signal ? AbortSignal.any([signal, this.#closing.signal]) : this.#closing.signal
    try {
      await this.#sleep(ms, both)
      return false
    } catch {
      return signal?.aborted === true
    }
  }

  /**
   * Coverage per rule: what the planner saw for requests that went live, plus what strict replay served
   * from a faulted trace (its recorded faults count as triggered).
   */
  coverage(): RuleCoverage[] {
    return this.#planner.coverage.map((c) => {
      const r = this.#replayed.get(c.rule) as ReplayCount
      if (r.eligible === 0) return c
      const planned = c.eligible > 0
      const out: RuleCoverage = {
        ...c,
        eligible: c.eligible + r.eligible,
        triggered: c.triggered + r.triggered,
        selected: planned ? (c.selected ?? 0) + r.triggered : null,
      }
      if (out.triggered === 0 && !planned) {
        out.notes = [
          'strict replay serves what the trace recorded and injects no new faults, and the trace holds none from this rule: record the run with these faults (--faults, install({ faults })), or fork one in (--patch "#N fault=KIND")',
        ]
      }
      return out
    })
  }

  /** Throws TR_FAULT_NOT_FIRED naming every non-optional rule that never triggered, with the seed. */
  assertAllFired(rerun?: string): void {
    assertAllRulesFired(this.coverage(), { seed: this.seed, ...(rerun !== undefined ? { rerun } : {}) })
  }

  /** Ends every fault wait still running (the session is closing) and settles once their exchanges are handed over. */
  async close(): Promise<void> {
    this.#closing.abort()
    await Promise.allSettled([...this.#waiting])
  }
}

function abortPlayback(error: RecordedError): Playback {
  return { kind: 'error', error, headersMs: 0, chunks: [] }
}

/** Redacts the app's view of a response the way the recorder redacts the upstream's. */
function redactView(
  redactor: Redactor,
  headers: HeaderPairs,
  body: Uint8Array,
  maxBytes: number,
): { headers: HeaderPairs; body: Uint8Array; changed: boolean } {
  const redacted = redactor.headers(headers)
  const r = redactBody(redactor, body, redacted, maxBytes)
  if (r === 'unchanged') return { headers: redacted, body, changed: false }
  // Too big to decode and redact: nothing of it is stored (the upstream's side says the same, TR_BODY_NOT_REDACTED).
  if (r === 'too-large') return { headers: redacted.filter(([k]) => k.toLowerCase() !== 'content-length'), body: new Uint8Array(0), changed: true }
  return { headers: r.headers, body: r.bytes, changed: true }
}
