/**
 * What a capture path and the engine hand each other, and nothing else: the request as the path saw it, and
 * the engine's decision (replay with a playback, forward and feed a recorder, fail with a typed error). The
 * files of the engine that build or carry out a decision import these from here, below session.ts, so no
 * file needs session.ts for its types.
 */

import type { FaultDecision } from '../faults/index.ts'
import type { ErrorPhase, Exchange, HeaderPairs, RecordedError, ResponseHead, ToolReplayError } from '../trace/index.ts'

/** A request as a capture path saw it, before redaction. Body fully buffered (or null). */
export interface CapturedRequest {
  method: string
  url: string
  headers: HeaderPairs
  body: Uint8Array | null
  /** `'2'` when the app sent it over HTTP/2 (RecordedRequest.httpVersion). */
  httpVersion?: '2'
  /** Aborts when the app gives up on the request; lets a fault's wait end early. */
  signal?: AbortSignal
}

/**
 * A connection a capture path cannot read as HTTP (a sealed run's raw TCP or UDP): where it went and what it
 * spoke, as far as the path could tell, and what the user can do about it (the path knows its own flags).
 */
export interface ConnectionRequest {
  transport: 'tcp' | 'udp'
  /** The name the client resolved, else the address it used. */
  host: string
  port: number
  /** What it spoke: "PostgreSQL's port; not HTTP or TLS (first bytes 00 00 00 08)", "sent nothing for 2 s", ... */
  protocol: string
  /** One sentence: how to make such a connection work in the run. */
  remedy: string
}

/** Chunks to play back, with their recorded time offsets (ms since the exchange started). */
export type PlaybackChunk = { bytes: Uint8Array; atMs: number }

/** A body to play back: its chunks in memory, or read (verified) from the store as they are played. */
export type PlaybackChunks = PlaybackChunk[] | AsyncIterable<PlaybackChunk>

/** A recorded response or failure, ready for a capture path to play back. */
export type Playback =
  | { kind: 'response'; head: ResponseHead; headersMs: number; chunks: PlaybackChunks; trailers: HeaderPairs }
  | {
      kind: 'error'
      error: RecordedError
      headersMs: number
      head?: ResponseHead
      chunks: PlaybackChunks
      /** A fault made this failure: the app's own connection fails (the proxy resets it instead of answering 502). */
      injected?: boolean
    }

/**
 * Collects the outcome of one forwarded request and writes it as one exchange.
 * Call `responseStart`, then `responseData` per chunk, then `responseEnd`; or `fail` at any point.
 */
export interface ExchangeRecorder {
  /** False for passthrough: nothing is written, calls are cheap no-ops. */
  readonly recording: boolean
  responseStart(head: ResponseHead): void
  /** Takes one chunk (copied). Returns a promise when the store is behind: pause the source until it settles. */
  responseData(chunk: Uint8Array): undefined | Promise<void>
  responseEnd(trailers?: HeaderPairs): Promise<void>
  fail(error: { code?: string; message: string }, phase?: ErrorPhase): Promise<void>
}

/** What a capture path must do with one request. */
export type Decision =
  /** `fault`: a fault made this answer (before forwarding); the exchange carries its record. */
  | { kind: 'replay'; exchange: Exchange; playback: Playback; fault?: FaultDecision }
  /** `client`, when set (a fault after the upstream answered): forward and feed `recorder`, but play `client` to the app. */
  | { kind: 'forward'; recorder: ExchangeRecorder; client?: Promise<Playback>; fault?: FaultDecision }
  | { kind: 'fail'; error: ToolReplayError }
