/**
 * The lab's agent: ships an order through the shipping API (read the streamed rates, pick the cheapest,
 * create the shipment) under one of three recovery policies. Its HTTP is undici's real fetch; all its waiting
 * (timeouts, backoff, Retry-After) is on the lab clock.
 */
import { type Dispatcher, fetch } from 'undici'
import { ErrorCodes, parseJson, parseSse, ToolReplayError } from '../trace/index.ts'
import type { Rate } from './shipping-api.ts'
import type { LabClock } from './virtual-clock.ts'

/** How the agent recovers from failures. */
export type RecoveryPolicy = 'none' | 'unchecked' | 'idempotent'
export const RECOVERY_POLICIES: readonly RecoveryPolicy[] = ['none', 'unchecked', 'idempotent']

/** Recovery policies from a comma-separated list, or `all`; an unknown name is TR_INVALID_OPTION. */
export function parsePolicies(text: string): RecoveryPolicy[] {
  if (text === 'all') return [...RECOVERY_POLICIES]
  const list = text.split(',').map((p) => p.trim())
  for (const p of list) {
    if (!(RECOVERY_POLICIES as readonly string[]).includes(p)) {
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Unknown recovery policy "${p}". Policies: ${RECOVERY_POLICIES.join(', ')}, or all.`)
    }
  }
  return list as RecoveryPolicy[]
}

/** What a policy does, spelled out. */
export interface PolicySpec {
  label: string
  maxAttempts: number
  /** Per-attempt timeout on the lab clock. */
  timeoutMs: number
  /** Wait before attempt n + 1 when the server did not say. */
  backoffMs: (attempt: number) => number
  honoursRetryAfter: boolean
  /** Sends one idempotency-key per logical operation, the same on every attempt. */
  idempotencyKey: boolean
  /** Checks answers (a complete event stream, the fields it reads) and retries an invalid one. */
  validates: boolean
}

export const POLICIES: Readonly<Record<RecoveryPolicy, PolicySpec>> = {
  none: { label: 'no retries', maxAttempts: 1, timeoutMs: 10_000, backoffMs: () => 0, honoursRetryAfter: false, idempotencyKey: false, validates: false },
  unchecked: {
    label: 'unchecked retries',
    maxAttempts: 3,
    timeoutMs: 1_000,
    backoffMs: () => 100,
    honoursRetryAfter: false,
    idempotencyKey: false,
    validates: false,
  },
  idempotent: {
    label: 'idempotent retries',
    maxAttempts: 3,
    timeoutMs: 5_000,
    backoffMs: (attempt) => 1_000 * 2 ** (attempt - 1),
    honoursRetryAfter: true,
    idempotencyKey: true,
    validates: true,
  },
}

/** What the agent reports back. */
export interface AgentResult {
  /** The shipment id the agent confirmed (whatever it read), when it confirmed one. */
  shipmentId?: unknown
  rateId?: string
  /** How many rates the agent chose from. */
  ratesSeen: number
  /** Why it gave up, when it did. */
  error?: string
  /** Problems a validating agent caught and recovered from. */
  detected: string[]
}

class HttpError extends Error {
  readonly status: number
  readonly retryAfterMs: number | undefined
  constructor(status: number, headers: Headers) {
    super(`HTTP ${status}`)
    this.status = status
    const ms = Number.parseFloat(headers.get('retry-after-ms') ?? '')
    const s = Number.parseFloat(headers.get('retry-after') ?? '')
    this.retryAfterMs = Number.isFinite(ms) ? ms : Number.isFinite(s) ? s * 1000 : undefined
  }
}

class InvalidAnswer extends Error {}

/** Ships `orderId`. Never throws: a failure is reported in `error`. */
export async function shipOrder(options: {
  baseUrl: string
  orderId: string
  policy: RecoveryPolicy
  dispatcher: Dispatcher
  clock: LabClock
}): Promise<AgentResult> {
  const { baseUrl, orderId, dispatcher, clock } = options
  const policy = POLICIES[options.policy]
  const result: AgentResult = { ratesSeen: 0, detected: [] }
  const attempt = <T>(what: string, fn: (signal: AbortSignal) => Promise<T>) => withRetries(what, policy, clock, result, fn)
  try {
    const rates = await attempt('GET /rates', async (signal) => {
      const res = await fetch(`${baseUrl}/rates?orderId=${encodeURIComponent(orderId)}`, { dispatcher, signal })
      if (!res.ok) throw new HttpError(res.status, res.headers)
      const events = parseSse(await res.text())
      if (policy.validates && !events.some((e) => e.event === 'done')) throw new InvalidAnswer('the rates stream ended without its done event')
      return events.filter((e) => e.event === 'rate').map((e) => parseJson(e.data) as Rate)
    })
    result.ratesSeen = rates.length
    const cheapest = [...rates].sort((a, b) => Number(a.price) - Number(b.price))[0]
    if (!cheapest) throw new Error('no rates offered')
    result.rateId = cheapest.id
    const body = JSON.stringify({ orderId, rateId: cheapest.id })
    const headers: Record<string, string> = { 'content-type': 'application/json' }
    if (policy.idempotencyKey) headers['idempotency-key'] = `ship-${orderId}`
    const shipment = await attempt('POST /shipments', async (signal) => {
      const res = await fetch(`${baseUrl}/shipments`, { method: 'POST', headers, body, dispatcher, signal })
      if (!res.ok) throw new HttpError(res.status, res.headers)
      const json = (await res.json()) as { shipment?: { id?: unknown } }
      if (policy.validates && typeof json.shipment?.id !== 'string') throw new InvalidAnswer('the shipment answer has no string $.shipment.id')
      return json.shipment
    })
    result.shipmentId = shipment?.id
  } catch (err) {
    result.error = (err as Error).message
  }
  return result
}

/** Runs `fn` up to the policy's attempts, with its timeout, backoff and Retry-After handling. */
async function withRetries<T>(what: string, policy: PolicySpec, clock: LabClock, result: AgentResult, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  for (let n = 1; ; n++) {
    const timeout = clock.timeout(policy.timeoutMs)
    try {
      return await fn(timeout.signal)
    } catch (err) {
      const retryable = err instanceof InvalidAnswer || (err instanceof HttpError ? err.status === 408 || err.status === 429 || err.status >= 500 : true)
      if (err instanceof InvalidAnswer) result.detected.push(err.message)
      if (!retryable || n >= policy.maxAttempts) throw new Error(`${what} failed after ${n} attempt(s): ${describe(err)}`)
      const asked = err instanceof HttpError && policy.honoursRetryAfter ? err.retryAfterMs : undefined
      await clock.sleep(asked ?? policy.backoffMs(n))
    } finally {
      timeout.clear()
    }
  }
}

function describe(err: unknown): string {
  const e = err as Error & { cause?: { code?: string } }
  if (e.name === 'TimeoutError') return 'timed out'
  return e.cause?.code ? `${e.message} (${e.cause.code})` : e.message
}
