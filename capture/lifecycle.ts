/**
 * The life of one captured request, the same for every capture path (as `handleRequest` is for the
 * interceptors of @mswjs/interceptors, and the adapter base class for Polly.js's adapters). A path builds a
 * `CapturedExchange` (its wire translated: method, URL, header pairs, how to read the body, the client side,
 * how to send it live) and takes its arrival ticket when it first learns of the request; from there this
 * decides and carries out, once:
 * 1. the body is read under the limit; one over it is refused with the same response on every path (413,
 *    TR_REQUEST_TOO_LARGE, counted by strict replay) and gives its place in the order up;
 * 2. on its turn in the arrival order the session decides (replay, forward, fail);
 * 3. the abort race: a client that gave up while its request waited (its turn, the store, a fault's wait)
 *    still has its turn, so numbering is the same in every run; a replay is then not played, a refusal not
 *    sent, and a forward goes nowhere and is recorded as the client abort it was — never a request left
 *    open for the session's close to cut;
 * 4. a replay or a refusal is played by the playback driver at the session's pace; a forward goes live
 *    through the path's transport into the live tee; a fault that acts on the answer plays its own playback.
 */
import { type CapturedRequest, clientAbortError, type Decision, type Ticket } from '../engine/index.ts'
import { ErrorCodes, type HeaderPairs, isToolReplayError, type ToolReplayError } from '../trace/index.ts'
import { type ClientTarget, type LiveEvents, LiveTee } from './live-tee.ts'
import type { Pace } from './pacing.ts'
import { drivePlayback } from './playback-driver.ts'
import { refusalPlayback } from './refusal.ts'
import { bodyTooLarge } from './transport-rules.ts'

/** A request body as a path read it: its bytes (null: none), and the content type serializing it chose. */
export type ReadBody = { bytes: Uint8Array | null; contentType?: string } | 'gone'

/** One request as its capture path received it: the path's wire, translated, and nothing else. */
export interface CapturedExchange {
  method: string
  url: string
  /** The request's fields, hop-by-hop ones left out. A content type chosen while reading the body is added. */
  headers: HeaderPairs
  /** `'2'` for a stream of an HTTP/2 connection (recorded for reading; never matched on). */
  httpVersion?: '2'
  /**
   * Reads the whole body, at most `max` bytes (else throws `tooLarge()`); a value when it is at hand, else a
   * promise. 'gone': the client went away before its body arrived.
   */
  readBody(max: number, tooLarge: () => ToolReplayError): ReadBody | Promise<ReadBody>
  client: ClientTarget
  /** Sends the request live (with `body`, the bytes read), reporting what happens to `events`. */
  forward(body: Uint8Array | null, events: LiveEvents): void
}

/**
 * What the lifecycle asks of a session: the engine's `Session` is one; so is a session another process owns
 * (engine/session-share.ts: its owner takes the arrival ticket and decides).
 */
export interface CaptureSession {
  /** A place in the order requests reach the engine. */
  arrival(): Ticket
  /** The decision on one request (called on its turn). */
  handle(captured: CapturedRequest): Decision | Promise<Decision>
  /** Counts a request the path could not hand over (a body over the limit) against strict replay. */
  refuse(captured: Pick<CapturedRequest, 'method' | 'url'>, error: ToolReplayError): void
  /** Set when faults may make a request wait: the decision then gets a signal that aborts when the client gives up. */
  readonly faults?: object | undefined
}

/** How a path's requests are handled (one per capture: a dispatcher, the node:http capture, a proxy session, an MCP conversation). */
export interface CaptureOptions {
  session: CaptureSession
  pace: Pace
  maxBodyBytes: number
  drainAfterAbortMs: number
  /** Sees each decision before it is carried out (the proxy counts them). */
  onDecision?(decision: Decision): void
}

/**
 * Carries one request through its life. Returns undefined when it was over within the call (a bodiless
 * one-chunk replay: the hot path stays synchronous), else a promise that settles when the client has its
 * answer and the recording its exchange. Never rejects.
 */
export function captureRequest(options: CaptureOptions, exchange: CapturedExchange, ticket: Ticket): Promise<void> | undefined {
  const tooLarge = () => bodyTooLarge(exchange.method, exchange.url, options.maxBodyBytes)
  let body: ReadBody | Promise<ReadBody>
  try {
    body = exchange.readBody(options.maxBodyBytes, tooLarge)
  } catch (err) {
    return bodyFailed(options, exchange, ticket, err)
  }
  if (!(body instanceof Promise)) return decide(options, exchange, ticket, body)
  return body.then(
    (b) => decide(options, exchange, ticket, b),
    (err: unknown) => bodyFailed(options, exchange, ticket, err),
  )
}

/** The body could not be read whole: over the limit (refused, counted), or unreadable (the client fails). */
function bodyFailed(options: CaptureOptions, exchange: CapturedExchange, ticket: Ticket, err: unknown): Promise<void> | undefined {
  ticket.release()
  if (!isToolReplayError(err, ErrorCodes.REQUEST_TOO_LARGE)) {
    if (!exchange.client.gone) exchange.client.failWith(err as Error)
    return undefined
  }
  // Strict replay counts it: the run fails at the end even if the app swallows the refusal.
  options.session.refuse({ method: exchange.method, url: exchange.url }, err)
  return exchange.client.gone ? undefined : play(refusalPlayback(err, exchange.headers), { kind: 'none' }, exchange.client)
}

function decide(options: CaptureOptions, exchange: CapturedExchange, ticket: Ticket, body: ReadBody): Promise<void> | undefined {
  // Gone while sending its body: there is no whole request to decide on or to record.
  if (body === 'gone') {
    ticket.release()
    return undefined
  }
  const { method, url, headers, httpVersion } = exchange
  if (body.contentType && !headers.some(([k]) => k.toLowerCase() === 'content-type')) headers.push(['content-type', body.contentType])
  // With faults, a fault's wait (a timeout, a latency) ends when the client gives up.
  const signal = options.session.faults ? goneSignal(exchange.client) : undefined
  // A promise when an earlier request holds its place, when the store must be asked (big traces), or while a
  // fault makes the client wait.
  const decision: Decision | Promise<Decision> = ticket.turn(() =>
    options.session.handle({ method, url, headers, body: body.bytes, ...(httpVersion ? { httpVersion } : {}), ...(signal ? { signal } : {}) }),
  ) as Decision | Promise<Decision>
  if (!(decision instanceof Promise)) return carryOut(options, exchange, decision, body.bytes)
  return decision.then(
    (d) => carryOut(options, exchange, d, body.bytes),
    (err: unknown) => {
      if (!exchange.client.gone) exchange.client.failWith(err as Error)
    },
  )
}

function carryOut(options: CaptureOptions, exchange: CapturedExchange, decision: Decision, body: Uint8Array | null): Promise<void> | undefined {
  options.onDecision?.(decision)
  const { client } = exchange
  if (decision.kind === 'replay') return client.gone ? undefined : play(decision.playback, options.pace, client)
  // One chunk, nothing recorded to wait for: no pacing applies to a refusal.
  if (decision.kind === 'fail') return client.gone ? undefined : play(refusalPlayback(decision.error, exchange.headers), { kind: 'none' }, client)
  if (client.gone) {
    // The client gave up while its request waited: nothing goes live, and the recording says so.
    const recorded = decision.recorder.fail(clientAbortError(), 'connect')
    return recorded.catch(() => {})
  }
  const tee = new LiveTee({
    recorder: decision.recorder,
    client,
    method: exchange.method,
    detached: decision.client !== undefined,
    drainMs: options.drainAfterAbortMs,
  })
  try {
    exchange.forward(body, tee)
  } catch (err) {
    tee.error(err as Error)
  }
  if (!decision.client) return tee.done
  // A fault acts on the answer: the upstream's response feeds the recorder, the client gets the engine's playback.
  const playing = decision.client.then(
    (playback) => (client.gone ? undefined : play(playback, options.pace, client)),
    (err: unknown) => client.failWith(err as Error),
  )
  return Promise.all([tee.done, playing]).then(() => undefined)
}

/** Plays into the client; a target that throws (a bug, a broken store stream) fails the client instead. */
function play(playback: Parameters<typeof drivePlayback>[0], pace: Pace, client: ClientTarget): Promise<void> | undefined {
  try {
    return drivePlayback(playback, pace, client)?.catch((err: unknown) => client.failWith(err as Error))
  } catch (err) {
    client.failWith(err as Error)
    return undefined
  }
}

/** An AbortSignal that aborts when the client gives up. */
function goneSignal(client: ClientTarget): AbortSignal {
  const controller = new AbortController()
  if (client.gone) controller.abort()
  else client.onGone(() => controller.abort())
  return controller.signal
}
