/**
 * The trace model: what one HTTP exchange looks like once captured, in memory and on disk.
 * Pure data: no I/O here. Bodies are referenced by SHA-256 digest and kept once per trace.
 */

/** Header fields as ordered raw pairs, so repeated fields (Set-Cookie) and their order survive. */
export type HeaderPairs = Array<[name: string, value: string]>

/** Where in its life an exchange failed. */
/** Where an exchange failed: before a connection, while sending, before the response's head, within its body. */
export const ERROR_PHASES = ['connect', 'request', 'response-headers', 'response-body'] as const
export type ErrorPhase = (typeof ERROR_PHASES)[number]

/** One chunk of a body as it arrived: its size and when, in ms since the exchange started. */
export interface BodyChunk {
  size: number
  atMs: number
}

/**
 * A body: the digest of all its bytes (content-addressed, deduplicated) plus the chunk boundaries
 * it arrived in. A body is stored as on the wire: compressed bodies stay compressed.
 */
export interface BodyRef {
  digest: string
  size: number
  chunks: BodyChunk[]
}

export interface RecordedRequest {
  method: string
  url: string
  /** Headers after redaction. */
  headers: HeaderPairs
  body: BodyRef | null
  /**
   * `'2'` when the app sent it over HTTP/2 (absent: HTTP/1.x). What the page labels; matching and diff leave it
   * out, so a recording made over one version replays over the other.
   */
  httpVersion?: '2'
}

export interface ResponseHead {
  status: number
  statusText: string
  headers: HeaderPairs
}

export interface RecordedResponse extends ResponseHead {
  body: BodyRef
  trailers: HeaderPairs
}

export interface RecordedError {
  /** Stable code as Node/undici report it: ECONNRESET, ECONNREFUSED, ETIMEDOUT, ENOTFOUND, UND_ERR_*. */
  code: string
  message: string
  phase: ErrorPhase
  /** For a failure after headers arrived: the response head and the body bytes received before it. */
  partial?: RecordedResponse
}

export type Outcome = { kind: 'response'; response: RecordedResponse } | { kind: 'error'; error: RecordedError }

/** Where an exchange came from: the wire, a fork's patch, or the live tail of a replay (it went to the real upstream). */
/** The message kinds of a WebSocket session (RFC 6455 5.2; continuation frames are part of their message). */
export const WEBSOCKET_OPCODES = ['text', 'binary', 'ping', 'pong', 'close'] as const
export type WebSocketOpcode = (typeof WEBSOCKET_OPCODES)[number]

/**
 * One WebSocket message as it crossed the wire. `body` holds the payload (unmasked, uncompressed: the proxy
 * negotiates permessage-deflate off) and its `chunks` are the message's frames as they came (one chunk per
 * frame, so a fragmented message replays fragmented, byte for byte).
 */
export interface WebSocketMessage {
  from: 'client' | 'server'
  opcode: WebSocketOpcode
  /** ms since the exchange started, when the message's last frame arrived. */
  atMs: number
  body: BodyRef
  /** A close message's status code and reason, read from its payload (absent when the payload is empty). */
  close?: { code: number; reason: string }
}

/** How a WebSocket session ended when it did not end with a close handshake (a reset, a drop, the session closing). */
export interface WebSocketEnd {
  /** Stable code: ECONNRESET, TR_SESSION_CLOSED, ... */
  code: string
  message: string
  atMs: number
}

/** The messages of one WebSocket session, in the order Tool Replay saw them. */
export interface WebSocketSession {
  messages: WebSocketMessage[]
  /** Set when the connection ended without a close handshake. */
  end?: WebSocketEnd
}

export type ExchangeOrigin = 'recorded' | 'patched' | 'live'

/**
 * The faults Tool Replay can inject at the HTTP boundary (and, `tool_error` and `server_crash`, into MCP stdio servers;
 * `ws_close`, `ws_drop` and `ws_delay` into a WebSocket session, live from a faults file or forked into a recorded one:
 * trace/websocket-fault-patch.ts).
 */
export const FAULT_KINDS = [
  'response_lost',
  'timeout',
  'rate_limit',
  'server_error',
  'latency',
  'schema_drift',
  'blackout',
  'stream_cut',
  'stream_error',
  'tool_error',
  'server_crash',
  'ws_close',
  'ws_drop',
  'ws_delay',
] as const
export type FaultKind = (typeof FAULT_KINDS)[number]

/**
 * When a fault acts: before the request is forwarded (nothing reaches the upstream), after the upstream
 * answered (the upstream committed; the app gets something else), or in the middle of the response body.
 */
export const FAULT_PHASES = ['before-forward', 'after-response', 'mid-body'] as const
export type FaultPhase = (typeof FAULT_PHASES)[number]

/**
 * The fault injected into one exchange. The exchange's `outcome` is what the app was given; `upstream` is
 * what the upstream really did (null when the request was never forwarded), so commit evidence and a
 * strict replay of the faulted run each read the side they need.
 */
export interface ExchangeFault {
  /** The id of the rule that fired. */
  rule: string
  kind: FaultKind
  phase: FaultPhase
  /** The seed of the run, so the schedule can be reproduced. */
  seed: string
  /** The rule's invocation number for this request (1-based; per key value when the rule keys by a header). */
  call: number
  /** The invocation key's header value, when the rule keys by a header. */
  key?: string
  upstream: Outcome | null
  /** A faulted WebSocket session: the session as the upstream had it (`websocket` is the app's). */
  websocket?: WebSocketUpstream
}

/**
 * A faulted WebSocket session as the upstream's side had it: every message both ways, each payload named by its
 * digest and size. The payloads the app got are the exchange's own; the ones it never got are not kept.
 */
export interface WebSocketUpstream {
  messages: Array<Pick<WebSocketMessage, 'from' | 'opcode' | 'atMs' | 'close'> & { digest: string; size: number }>
  end?: WebSocketEnd
}

export interface Exchange {
  /** Position in the trace, 0-based, in the order requests were sent. */
  seq: number
  request: RecordedRequest
  outcome: Outcome
  /** ms from the trace start to the request, and from the request to the response head. */
  timing: { startMs: number; headersMs: number }
  origin?: ExchangeOrigin
  /** The id of the patch that produced this exchange, for forks. */
  patchId?: string
  /** Set when a fault was injected into this exchange. */
  fault?: ExchangeFault
  /**
   * A WebSocket session (trace/websocket.ts): the request is its upgrade, the outcome its 101 response, and
   * this every message both ways in order. Only an exchange with this field may have status 101.
   */
  websocket?: WebSocketSession
}

export interface PatchRecord {
  id: string
  spec: string
}

/** Where a forked trace came from. */
export interface Lineage {
  sourceDigest: string
  sourceName?: string
  patches: PatchRecord[]
}

/** The end of what a command wrote to one stream: the last bytes as text, secrets redacted. */
export interface OutputTail {
  /** At most OUTPUT_TAIL_BYTES of the stream's end, decoded as UTF-8, secrets replaced by [REDACTED]. */
  text: string
  /** Bytes the command wrote to the stream in all (more than the tail holds when it was cut). */
  bytes: number
}

/** How a wrapped command ended. */
export interface AppExit {
  /** Exit code, or 128 + the signal's number when a signal ended it (shell convention). */
  code: number
  signal?: string
  stdout: OutputTail
  stderr: OutputTail
}

/**
 * The application a run was made with (`tr-proxy record|replay -- <command>`) and how it ended: the
 * evidence of what the app did with the exchanges of the trace.
 */
export interface AppRun {
  /** The command line, argv as run (secrets redacted). */
  command: string[]
  /** The directory it ran in; absent in a promoted case (its manifest keeps a portable one). */
  cwd?: string
  /** How it ended; absent on a fork (the branch has not been run: replay it with the command to find out). */
  exit?: AppExit
}

/** Bytes of each of stdout and stderr a trace keeps (the end of the stream). */
export const OUTPUT_TAIL_BYTES = 8 * 1024

/** The code recorded when the client (the app) gave up on a request before its response ended. */
export const CLIENT_ABORT_CODE = 'UND_ERR_ABORTED'

export interface TraceMeta {
  name: string
  /** Tool Replay trace format version. */
  format: 1
  lineage?: Lineage
  /** Free-form labels ("recordedWith": "interceptor"), never timestamps: exports must not churn. */
  labels?: Record<string, string>
  /** The command the run was made with and how it ended, for runs of `tr-proxy record|replay -- <command>`. */
  app?: AppRun
}

/** A whole trace in memory: exchanges in order and the bodies they reference, by digest. */
export interface Trace {
  meta: TraceMeta
  exchanges: Exchange[]
  bodies: Map<string, Uint8Array>
}

export const TRACE_FORMAT_VERSION = 1 as const
