/**
 * Decides, request by request, which fault rule (if any) fires. Deterministic: every draw is a hash of
 * (seed, rule id, invocation key), where the invocation key is the rule's own call number for its target
 * (or a key header's value and its attempt number), so traffic to one target never shifts another's schedule.
 * The only state is per rule (call numbers, quota windows, triggers against `limit`).
 */
import { type HeaderPairs, headerValue } from '../trace/index.ts'
import { FaultCoverage, type RuleCoverage } from './fault-coverage.ts'
import { type FaultDecision, faultAction, isWebSocketRule, phaseOf } from './fault-decision.ts'
import type { FaultRule, FaultsConfig } from './fault-rules.ts'
import { seededUnit } from './seeded-random.ts'

/** What the planner needs of a request. */
export interface FaultRequest {
  method: string
  url: string
  headers: HeaderPairs
}

/** A rule's invocation of one request: its call number and the key its draws are made from. */
interface Invocation {
  call: number
  key?: string
  text: string
}

interface RuleState {
  calls: number
  /** Per key value: how many times it was seen. Bounded (MAX_KEYS); past that, new keys are not eligible. */
  keys: Map<string, number>
  quota: { window: number; count: number }
  /** Decisions handed out and not settled as not applied: what `limit` counts. */
  reserved: number
}

const MAX_KEYS = 100_000

/** What a rule's coverage says when its target matched a request of the other kind (it counts neither). */
const SESSION_UNDER_HTTP_RULE = (kind: string) =>
  `a WebSocket session matched its target, and ${kind} acts on HTTP responses only: use ws_close, ws_drop or ws_delay for a session`
const HTTP_UNDER_SESSION_RULE = (kind: string) => `an HTTP request matched its target, and ${kind} acts on WebSocket sessions only`

/**
 * @example
 * const planner = new FaultPlanner(config, { seed: '42' })
 * const decision = planner.decide({ method: 'POST', url, headers }, clock.now())
 * // ... carry it out, then:
 * planner.settle(decision, true)
 */
export class FaultPlanner {
  readonly seed: string
  readonly #rules: FaultRule[]
  readonly #state = new Map<string, RuleState>()
  readonly #coverage: FaultCoverage

  constructor(config: Pick<FaultsConfig, 'rules'>, options: { seed: string }) {
    this.seed = options.seed
    this.#rules = config.rules
    this.#coverage = new FaultCoverage(config.rules)
    for (const r of config.rules) this.#state.set(r.id, { calls: 0, keys: new Map(), quota: { window: -1, count: 0 }, reserved: 0 })
  }

  /** Every rule's counters so far. */
  get coverage(): RuleCoverage[] {
    return this.#coverage.snapshot()
  }

  /**
   * The fault for this request, or undefined. Rules are tried in file order; every rule whose target matches
   * counts the request (so its own schedule never depends on other rules), and the first selected one fires.
   * A WebSocket session (`websocket`) is counted by the ws_* rules only, and an HTTP request by the others.
   */
  decide(request: FaultRequest, atMs: number, websocket = false): FaultDecision | undefined {
    let chosen: FaultDecision | undefined
    for (const rule of this.#rules) {
      if (!rule.target.matches(request.method, request.url)) continue
      if (isWebSocketRule(rule) !== websocket) {
        this.#coverage.noted(rule.id, websocket ? SESSION_UNDER_HTTP_RULE(rule.fault) : HTTP_UNDER_SESSION_RULE(rule.fault))
        continue
      }
      const state = this.#state.get(rule.id) as RuleState
      const invocation = this.#invocation(rule, state, request)
      if (invocation === undefined) continue
      this.#coverage.eligible(rule.id)
      const quotaRetryAfterMs = this.#quota(rule, state, atMs)
      if (!this.#scheduled(rule, invocation, atMs, quotaRetryAfterMs)) continue
      this.#coverage.selected(rule.id)
      if (chosen) {
        this.#coverage.missed(rule.id, 'shadowed', `call ${invocation.call} was faulted by rule "${chosen.rule}", listed earlier`)
        continue
      }
      if (rule.limit !== undefined && state.reserved >= rule.limit) {
        this.#coverage.missed(rule.id, 'limit', `call ${invocation.call} is past limit ${rule.limit}`)
        continue
      }
      state.reserved++
      const action = faultAction(rule, {
        seed: this.seed,
        invocation: invocation.text,
        url: request.url,
        ...(quotaRetryAfterMs !== undefined ? { quotaRetryAfterMs } : {}),
      })
      chosen = {
        rule: rule.id,
        kind: rule.fault,
        phase: phaseOf(action),
        seed: this.seed,
        call: invocation.call,
        ...(invocation.key !== undefined ? { key: invocation.key } : {}),
        atMs,
        action,
      }
    }
    return chosen
  }

  /**
   * Reports whether a decision was carried out. Before-forward faults always apply; a drift on a body that is
   * not JSON or a cut past the end of a stream does not, and then it neither counts as triggered nor uses up
   * the rule's `limit`.
   */
  settle(decision: FaultDecision, applied: boolean, note = 'the fault could not apply to this response'): void {
    if (applied) {
      this.#coverage.triggered(decision.rule)
      return
    }
    const state = this.#state.get(decision.rule)
    if (state) state.reserved--
    this.#coverage.missed(decision.rule, 'not-applicable', `call ${decision.call}: ${note}`)
  }

  #invocation(rule: FaultRule, state: RuleState, request: FaultRequest): Invocation | undefined {
    if (rule.key === undefined) {
      const call = ++state.calls
      return { call, text: `call:${call}` }
    }
    const key = headerValue(request.headers, rule.key.header)
    if (key === undefined) return undefined
    const seen = state.keys.get(key)
    if (seen === undefined && state.keys.size >= MAX_KEYS) return undefined
    const call = (seen ?? 0) + 1
    state.keys.set(key, call)
    return { call, key, text: `key:${key}#${call}` }
  }

  /** Counts the request in its quota window; returns ms until the window ends when the quota is exceeded. */
  #quota(rule: FaultRule, state: RuleState, atMs: number): number | undefined {
    if (rule.quota === undefined) return undefined
    const window = Math.floor(atMs / rule.quota.windowMs)
    if (window !== state.quota.window) state.quota = { window, count: 0 }
    state.quota.count++
    if (state.quota.count <= rule.quota.limit) return undefined
    return Math.max(1, Math.ceil((window + 1) * rule.quota.windowMs - atMs))
  }

  #scheduled(rule: FaultRule, inv: Invocation, atMs: number, quotaRetryAfterMs: number | undefined): boolean {
    if (rule.window && !(atMs >= rule.window.fromMs && atMs < rule.window.toMs)) return false
    if (rule.calls && !rule.calls.includes(inv.call)) return false
    if (rule.first !== undefined && inv.call > rule.first) return false
    if (rule.quota && quotaRetryAfterMs === undefined) return false
    if (rule.probability !== undefined && seededUnit(this.seed, rule.id, inv.text, 'select') >= rule.probability) return false
    return true
  }
}
