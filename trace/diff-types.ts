/** The shapes of a trace diff (`diffTraces`' result, stable JSON) and the volatile fields it ignores by default. */
import type { FaultKind, FaultPhase } from './exchange.ts'
import type { OptionDeclaration, OptionValues } from './option-declaration.ts'
import type { IdentityOptions } from './request-identity.ts'
/** Version of the JSON diff output (`tr-proxy diff --format json`). Bumped on any breaking change. */
export const DIFF_FORMAT_VERSION = 1 as const

export type DifferenceKind =
  | 'request_changed'
  | 'response_changed'
  | 'status_changed'
  | 'error_changed'
  | 'exchange_missing'
  | 'exchange_added'
  | 'order_changed'

export const DIFFERENCE_KINDS: readonly DifferenceKind[] = [
  'request_changed',
  'response_changed',
  'status_changed',
  'error_changed',
  'exchange_missing',
  'exchange_added',
  'order_changed',
]

/** One fact inside a difference: where, and the value before (in A) and after (in B). */
export interface DiffDetail {
  side: 'request' | 'response'
  field: 'url' | 'header' | 'body' | 'events' | 'status' | 'outcome' | 'trailer' | 'position'
  /** Header name, or the JSON path inside the body / event list. */
  path?: string
  before?: unknown
  after?: unknown
}

/** A difference that touches an exchange a fork patch produced. Attribution, not a claim of root cause. */
export interface Attribution {
  trace: 'a' | 'b'
  seq: number
  patchId: string
  /** The canonical patch spec, when the trace's lineage lists it. */
  spec?: string
}

/** An injected fault on an exchange a difference touches: what the app was given is not what the upstream did. */
export interface FaultNote {
  trace: 'a' | 'b'
  seq: number
  rule: string
  fault: FaultKind
  phase: FaultPhase
  /** "upstream 201", "not forwarded". */
  upstream: string
}

export interface TraceDifference {
  kind: DifferenceKind
  /** "GET https://crm.test/customers/42 #0": method, URL and occurrence (in A; in B for added exchanges). */
  exchange: string
  /** Sequence numbers in A and B, when present there. */
  a?: number
  b?: number
  details: DiffDetail[]
  attribution?: Attribution[]
  /** Faults injected into the exchanges involved (a faulted run against a clean one, say). */
  faults?: FaultNote[]
  /** One line: the exchange and its first detail. */
  summary: string
}

/** How two exchanges were paired. */
export interface AlignedPair {
  a?: number
  b?: number
  by?: 'identity' | 'method-url'
}

/** The result of `diffTraces`. Stable JSON (see DIFF_FORMAT_VERSION). */
export interface TraceDiff {
  format: 'tool-replay-diff'
  version: typeof DIFF_FORMAT_VERSION
  a: { name: string; exchanges: number }
  b: { name: string; exchanges: number }
  equal: boolean
  /** The first observable divergence, in observation order; absent when equal. */
  first?: TraceDifference
  differences: TraceDifference[]
  counts: Record<DifferenceKind, number>
  alignment: AlignedPair[]
  /** What was ignored as volatile, so a reader knows what "equal" meant. */
  ignored: { keys: string[]; paths: string[]; headers: string[]; timestamps: boolean; generatedIds: boolean }
}

/** Options for `diffTraces`. Defaults ignore volatile fields; `volatile: false` compares everything. */
/** What `diffTraces` ignores, declared once: its options in code and the flags of `tr-proxy diff`. */
export const DIFF_OPTIONS = {
  /**
   * Ignore the default volatile fields (dates, request ids, generated ids, `created`) and compare the ids a model
   * made by their role (trace/model-ids.ts) rather than their value. Default true.
   */
  volatile: {
    flag: 'volatile',
    type: 'boolean',
    default: true,
    help: 'Ignore volatile fields (dates, request ids, generated ids, created) and compare model-made ids by role; --no-volatile compares all',
  },
  ignorePaths: {
    flag: 'ignore',
    type: 'strings',
    help: 'JSON path to ignore in every JSON body, request and response (wildcards allowed), repeatable (e.g. $.meta.trace_id)',
  },
  ignoreKeys: { flag: 'ignore-key', type: 'strings', help: 'Object key to ignore at any depth of JSON bodies, repeatable' },
  ignoreHeaders: { flag: 'ignore-header', type: 'strings', help: 'Header to ignore (request and response), repeatable' },
} as const satisfies Record<string, OptionDeclaration>

export interface DiffOptions extends OptionValues<typeof DIFF_OPTIONS> {
  /** Identity options used for alignment (same meaning as in replay). */
  identity?: IdentityOptions
  /** Details kept per difference. Default 20. */
  maxDetails?: number
}

/** Object keys treated as volatile at any depth, by default. */
export const DEFAULT_VOLATILE_KEYS: readonly string[] = [
  'created',
  'created_at',
  'createdAt',
  'updated_at',
  'updatedAt',
  'timestamp',
  'date',
  'request_id',
  'requestId',
  'system_fingerprint',
  // OpenAI stream padding: random per response, it hides token lengths and carries no meaning.
  'obfuscation',
  // Timings a provider reports in its body: Ollama's (ns) and Bedrock's metrics.
  'total_duration',
  'load_duration',
  'prompt_eval_duration',
  'eval_duration',
  'latencyMs',
]

/** Headers treated as volatile by default: per-request ids, clocks, transport framing. */
export const DEFAULT_VOLATILE_HEADERS: readonly string[] = [
  'date',
  'age',
  'expires',
  'last-modified',
  'etag',
  'x-request-id',
  'request-id',
  'x-amzn-requestid',
  'x-amz-request-id',
  'cf-ray',
  'server-timing',
  'x-runtime',
  'openai-processing-ms',
  'x-envoy-upstream-service-time',
  'x-amzn-bedrock-invocation-latency',
  'user-agent',
  // SDK and runtime versions, which differ between machines, not between runs of the app.
  'x-amz-user-agent',
  'x-goog-api-client',
  // AWS SigV4 and the AWS SDK's per-call headers: a clock, a session token, a body digest, an invocation id, the attempt.
  'x-amz-date',
  'x-amz-security-token',
  'x-amz-content-sha256',
  'amz-sdk-invocation-id',
  'amz-sdk-request',
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'traceparent',
  'tracestate',
  'idempotency-key',
  // MCP Streamable HTTP: the session id a server mints (and the client echoes on every request after).
  'mcp-session-id',
  // A WebSocket handshake's nonce and its answer (RFC 6455 4.1, 4.2.2): fresh on every connection.
  'sec-websocket-key',
  'sec-websocket-accept',
  'host',
  'connection',
  'keep-alive',
]
