/**
 * The model of a faults file: fault rules and their seed, effect rules (commit evidence) and behaviour
 * contracts. Reading and validating the file lives in faults-file.ts; this file only holds the types.
 */
import type { FaultKind, FaultPhase, ProviderShape, SERVER_ERROR_STATUSES, StreamPoint } from '../trace/index.ts'
import type { Target } from './fault-target.ts'

export type { ProviderShape, StreamPoint } from '../trace/index.ts'
export { PROVIDER_SHAPES } from '../trace/index.ts'

/** Network error codes a fault may fail a request with (as Node and undici name them). */
export const FAULT_ERROR_CODES = [
  'ECONNRESET',
  'ECONNREFUSED',
  'ETIMEDOUT',
  'EPIPE',
  'UND_ERR_SOCKET',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
] as const
export type FaultErrorCode = (typeof FAULT_ERROR_CODES)[number]

/** How a latency is drawn: fixed, or from a seeded distribution (uniform, or exponential capped at maxMs). */
export type LatencyDistribution =
  | { kind: 'fixed'; ms: number }
  | { kind: 'uniform'; minMs: number; maxMs: number }
  | { kind: 'exponential'; meanMs: number; maxMs: number }

/** One change `schema_drift` makes to a JSON body; paths may use wildcards (`$.items[*].id`). */
export type DriftChange =
  | { op: 'type'; path: string; to: 'string' | 'number' | 'boolean' | 'null' | 'array' | 'object' }
  | { op: 'remove'; path: string }
  | { op: 'add'; path: string; value: unknown }
  | { op: 'rename'; path: string; to: string }

/** The options of each fault kind, after defaults. */
export interface FaultOptionsByKind {
  /** Forwarded and committed upstream; the app gets a connection failure instead of the response. */
  response_lost: { code: FaultErrorCode }
  /** Nothing forwarded: the app waits `ms`, then the connection fails with `code`. */
  timeout: { ms: number; code: FaultErrorCode }
  /** Nothing forwarded: 429 with retry-after and retry-after-ms (default 1000 ms; a quota uses the time to its next window). */
  rate_limit: { retryAfterMs?: number; provider?: ProviderShape }
  /** A provider-shaped 5xx; nothing forwarded unless `forward` (then the upstream commits and the app gets the 5xx). */
  server_error: { status: (typeof SERVER_ERROR_STATUSES)[number]; provider?: ProviderShape; forward: boolean; retryAfterMs?: number }
  /** Added delay before forwarding (default) or after the upstream answered. */
  latency: { distribution: LatencyDistribution; phase: Extract<FaultPhase, 'before-forward' | 'after-response'> }
  /** The upstream's JSON response with fields changed. */
  schema_drift: { changes: DriftChange[] }
  /** Nothing forwarded: the connection is refused, or a provider-shaped 503. */
  blackout: { mode: 'refused' | '503'; provider?: ProviderShape }
  /** The body ends cleanly but early. */
  stream_cut: { after: StreamPoint }
  /** The body breaks off with a connection reset. */
  stream_error: { after: StreamPoint; code: FaultErrorCode }
  /** MCP: nothing forwarded; the tool call's answer is a tool error result (`isError: true`) with this text. */
  tool_error: { text: string }
  /** MCP: the server process is killed instead of getting the message; what it had not answered fails. */
  server_crash: Record<string, never>
  /** WebSocket: after the server's Nth text or binary message the app gets a close with `code`; the upstream's later messages never reach it. */
  ws_close: { afterMessages: number; code: number }
  /** WebSocket: these server messages (text or binary, counted from 1) never reach the app. */
  ws_drop: { messages: number[] }
  /** WebSocket: the server's Nth message and every server frame after it reach the app late (drawn like a latency). */
  ws_delay: { fromMessage: number; distribution: LatencyDistribution }
}

/** How a rule chooses among the requests its target matches. All given shapes must agree. */
export interface FaultSchedule {
  /** Call numbers (1-based) that fault. */
  calls?: number[]
  /** The first N calls fault. */
  first?: number
  /** Each call faults with this probability, drawn from (seed, rule id, invocation key). */
  probability?: number
  /** Calls whose start falls in [fromMs, toMs) of the run fault. */
  window?: { fromMs: number; toMs: number }
  /** A provider-style quota: in each `windowMs` window from the run's start, the first `limit` calls pass and the rest fault. */
  quota?: { limit: number; windowMs: number }
}

interface FaultRuleBase extends FaultSchedule {
  id: string
  target: Target
  /** The invocation key comes from this request header (e.g. idempotency-key) instead of the target's ordinal. */
  key?: { header: string }
  /** At most this many triggers. */
  limit?: number
  /** A rule that never fires does not fail the run. */
  optional: boolean
}

/** One fault rule, its options typed by its kind. */
export type FaultRule = { [K in RuleFaultKind]: FaultRuleBase & { fault: K; options: FaultOptionsByKind[K] } }[RuleFaultKind]

/** The kinds a faults file's rule takes: every kind (ws_* select WebSocket sessions, the others HTTP requests and MCP messages). */
export type RuleFaultKind = FaultKind

/** A value read from an exchange: a JSON path in a body, or a header. */
export type ValueRef = { from: 'json'; path: string } | { from: 'header'; name: string }

/** Names the effect a non-idempotent request commits, for commit evidence. */
export interface EffectRule {
  target: Target
  /** Where the effect's id is: a JSON path in the upstream's response, or a response header. Default: the request's idempotency-key. */
  id?: ValueRef
  /** What makes two requests one logical call: a JSON path in the request body or a request header. Default: the request identity. */
  group?: ValueRef
  /** The noun in reports ("shipment"). Default "effect". */
  name: string
}

/** A behaviour contract checked on a trace. */
export type ContractSpec =
  | { kind: 'no-duplicate-effects' }
  | { kind: 'max-calls'; limit: number; target?: Target }
  | { kind: 'honours-retry-after'; toleranceMs: number; scope: 'call' | 'host' }
  | { kind: 'bounded-retries'; retries: number; target?: Target }
  | { kind: 'all-rules-fired' }

export const CONTRACT_KINDS: ReadonlyArray<ContractSpec['kind']> = [
  'no-duplicate-effects',
  'max-calls',
  'honours-retry-after',
  'bounded-retries',
  'all-rules-fired',
]

/** A whole faults file. */
export interface FaultsConfig {
  /** Where it came from (a path or "<inline>"), for messages. */
  source: string
  /** The seed written in the file, if any (a CLI option or TOOL_REPLAY_FAULTS_SEED overrides it). */
  seed?: string
  rules: FaultRule[]
  effects: EffectRule[]
  contracts: ContractSpec[]
}
