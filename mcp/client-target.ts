/**
 * What one client message gets back, as the capture lifecycle's `ClientTarget` (capture/): the MCP side of an
 * exchange. The lifecycle hands it the lines of that message's transcript (trace/mcp-wire.ts) from wherever
 * they come, and this speaks them to the client in MCP's terms:
 * - live (a forward): the live tee hands over each line the server wrote, once recorded, and the
 *   durability rule holds for them (an answer that closes its transcript waits for the commit); event lines
 *   that only mark the recording (`replied`, `stdin-closed`, `exit`) are not for the client;
 * - played (a replay, a fault's answer): the playback driver hands over each recorded chunk (a promise while
 *   the recording waited for the client: its reply to a server request, the end of its input), each chunk a
 *   read of its own; the answer's JSON-RPC id and the progress token are mapped to this run's, the recorded
 *   stderr and exit are played;
 * - refused: the refusal response (capture/refusal.ts) becomes the JSON-RPC error naming the code at once (a
 *   notification or a reply has no answer: it is only reported).
 * A request whose client gives up (cancels it, or goes away) before its answer is `gone`, as an aborted HTTP
 * request is: the lifecycle and the tee then record it as the client abort.
 */
import { type ClientTarget, ERROR_HEADER } from '../capture/index.ts'
import type { Decision } from '../engine/index.ts'
import {
  EVENT_KEY,
  editJson,
  eventLine,
  type HeaderPairs,
  headerValue,
  isJsonRpcResponse,
  isToolReplayError,
  type LineReader,
  MCP_ID_HEADER,
  MCP_PROGRESS_TOKEN_HEADER,
  type McpEvent,
  type RecordedError,
  type ResponseHead,
  readTranscriptLine,
} from '../trace/index.ts'
import { longLineId, mcpLineReader, tooLongError } from './framing.ts'

/** JSON-RPC error code of Tool Replay's refusals (implementation-defined server error range; the SDK uses none of it). */
export const MCP_REFUSAL_CODE = -32099
/** JSON-RPC error code of a timeout (the MCP SDK's own RequestTimeout). */
export const MCP_TIMEOUT_CODE = -32001

/** Where the conversation sends what the client must see. */
export interface ClientEnd {
  /**
   * One line for the client (a JSON-RPC message, or a server's non-JSON output), without newline. A promise
   * while the client is not reading (the server is then held back).
   */
  send(line: string): void | Promise<void>
  /**
   * The same for a line the live server wrote, as the bytes it wrote (newline included), for a client end that
   * takes bytes (a pipe): a big message is then not decoded and encoded again on its way through.
   */
  sendBytes?(line: Uint8Array): void | Promise<void>
  /** Text the server wrote on stderr. */
  stderr(text: string): void
  /** The server ended (code and signal as recorded; null when unknown): the client's end closes too. */
  exit(code: number | null, signal: string | null): void
  /**
   * Replay: the next recorded chunk came `gapMs` after the one just sent; resolves when the client may read it
   * as a read of its own (the SDK handles a notification a turn later than an answer, so a progress note and
   * the answer merged into one read would lose the note).
   */
  separate?(gapMs: number): Promise<void>
}

/** What a message's target needs of its conversation. */
export interface ConversationHost {
  readonly client: ClientEnd
  log(line: string): void
  /** A server-to-client request a played transcript holds (id key, method), for the URL of the client's reply. */
  serverRequest(key: string, method: string): void
  /** Resolves once the client answered server request `key` (or closed its end). */
  reply(key: string): Promise<void>
  /** Resolves once the client closed its input. */
  readonly inputClosed: Promise<void>
  /** Plays a recorded exit (once per conversation). */
  exit(code: number | null, signal: string | null): void
  /** The longest transcript line played (bytes): the conversation's message limit. */
  readonly maxLineBytes: number
  /** Replay: request `current` of this run was recorded with id `recordedKey` (an id key). */
  sentAs(recordedKey: string, current: unknown): void
  /** Replay: this run's id of the request recorded with id `recordedKey`; undefined when the client never sent it. */
  clientId(recordedKey: string): { id: unknown } | undefined
}

/** The client message a target answers: its kind, and for a request its id and progress token. */
export interface MessageInfo {
  kind: 'launch' | 'request' | 'notification' | 'reply'
  id?: unknown
  progressToken?: unknown
}

/** How an id is a map key (and how `replied` events name server requests). */
export const idKey = (id: unknown): string => JSON.stringify(id) ?? 'null'

const decoder = new TextDecoder()
/** How every event line starts (eventLine in trace/mcp-wire.ts); a server line that would is kept as a `stdout` event. */
const EVENT_PREFIX = `{"${EVENT_KEY}":`
const EVENT_PREFIX_BYTES = new TextEncoder().encode(EVENT_PREFIX)

/** True when `bytes` start as an event line does. */
function isEventLine(bytes: Uint8Array): boolean {
  return bytes.length >= EVENT_PREFIX_BYTES.length && EVENT_PREFIX_BYTES.every((b, i) => bytes[i] === b)
}

/** The JSON-RPC error answering request `id` with a Tool Replay refusal (`message`: "CODE: why"). */
export function refusalLine(id: unknown, code: string, text: string): string {
  return JSON.stringify({ jsonrpc: '2.0', id, error: { code: MCP_REFUSAL_CODE, message: text, data: { toolReplayError: code } } })
}

/** A server line over the limit reaches the client as TR_LINE_TOO_LONG: on stderr, and as the answer to `id` when it was one. */
function tooLong(client: ClientEnd, e: Extract<McpEvent, { kind: 'too-long' }>, id: { id: unknown } | undefined): void | Promise<void> {
  const err = tooLongError(e)
  client.stderr(`${err.code}: ${err.message}\n`)
  if (id) return client.send(refusalLine(id.id, err.code, `${err.code}: ${err.message}`))
}

/**
 * Passes one line the live server wrote (as its transcript holds it) to the client: messages as they are,
 * stderr as stderr, a line over the limit as its error; the recording's own marks are not for the client.
 */
export function liveLine(client: ClientEnd, text: string): void | Promise<void> {
  if (!text.startsWith(EVENT_PREFIX)) return client.send(text)
  const line = readTranscriptLine(text)
  if (line.kind === 'message') return client.send(text)
  if (line.event.kind === 'stdout') return client.send(line.event.text)
  if (line.event.kind === 'stderr') client.stderr(line.event.text)
  if (line.event.kind === 'too-long') return tooLong(client, line.event, line.event.id !== undefined ? { id: line.event.id } : undefined)
}

/**
 * @example
 * const target = new MessageTarget(host, { kind: 'request', id: 7 })
 * captureRequest({ ...options, onDecision: (d) => target.decided(d) }, { ..., client: target, forward }, session.arrival())
 */
export class MessageTarget implements ClientTarget {
  readonly #host: ConversationHost
  readonly #m: MessageInfo
  /** Lines come from the live tee (a forward the client follows), not from a playback. */
  #live = false
  /** A fault's playback of a forwarded message (a lost answer, a latency after it): the client's own timeout decides. */
  #relayed = false
  #token: { recorded: string; current: unknown } | undefined
  /** Replay: the id (key) this request was recorded with; its answer is mapped to the client's id. */
  #recordedKey: string | undefined
  /** Lines the client already got before the exchange opened (they came while none was open). */
  #skip = 0
  #reader: LineReader | undefined
  #lines: string[] = []
  #refusal: { code: string; parts: Uint8Array[] } | undefined
  #answered = false
  /** A played transcript reached the recorded exit: nothing after it plays. */
  #over = false
  #gaveUp = false
  #goneFns: Array<() => void> = []
  #settled = false
  #settledFns: Array<() => void> = []

  constructor(host: ConversationHost, message: MessageInfo) {
    this.#host = host
    this.#m = message
  }

  /** True once the client gave up on this request's answer (cancelled it, or went away). */
  get gone(): boolean {
    return this.#gaveUp
  }

  /** True once the client has all it gets for this message (or gave up). */
  get settled(): boolean {
    return this.#settled
  }

  onGone(fn: () => void): void {
    this.#goneFns.push(fn)
  }

  /** Calls `fn` once, when the client has all it gets for this message (or gave up). */
  onSettled(fn: () => void): void {
    if (this.#settled) fn()
    else this.#settledFns.push(fn)
  }

  /** The session's decision, before it is carried out: where lines come from, and the recorded progress token. */
  decided(decision: Decision): void {
    this.#live = decision.kind === 'forward' && decision.client === undefined
    this.#relayed = decision.kind === 'forward' && decision.client !== undefined
    // A fault's playback of a forward holds this run's own lines.
    if (this.#relayed && this.#m.kind === 'request') this.#recordedKey = idKey(this.#m.id)
    if (decision.kind !== 'replay') return
    const recordedId = headerValue(decision.exchange.request.headers, MCP_ID_HEADER)
    if (recordedId !== undefined && this.#m.kind === 'request') {
      this.#recordedKey = recordedId
      this.#host.sentAs(recordedId, this.#m.id)
    }
    if (this.#m.progressToken === undefined) return
    const recorded = headerValue(decision.exchange.request.headers, MCP_PROGRESS_TOKEN_HEADER)
    if (recorded !== undefined) this.#token = { recorded, current: this.#m.progressToken }
  }

  /** Live: the server answered this request, so the client no longer waits for it (and cannot give it up). */
  answered(): void {
    this.#answered = true
  }

  /** Live: the first `n` lines of the transcript reached the client before the exchange opened. */
  skip(n: number): void {
    this.#skip += n
  }

  /** The client gave up on this request before its answer (a cancellation, or it went away). */
  giveUp(): void {
    if (this.#gaveUp || this.#answered || this.#settled || this.#m.kind !== 'request') return
    this.#gaveUp = true
    for (const fn of this.#goneFns.splice(0)) fn()
    this.#settle()
  }

  head(head: ResponseHead): void {
    const code = this.#live ? undefined : headerValue(head.headers, ERROR_HEADER)
    if (code !== undefined) this.#refusal = { code, parts: [] }
  }

  chunk(bytes: Uint8Array): void | Promise<void> {
    if (this.#refusal) {
      this.#refusal.parts.push(bytes)
      return undefined
    }
    if (this.#live) {
      if (this.#skip > 0) {
        this.#skip--
        return undefined
      }
      const client = this.#host.client
      if (client.sendBytes && !isEventLine(bytes) && bytes[bytes.length - 1] === 0x0a) return client.sendBytes(bytes)
      const text = decoder.decode(bytes)
      return liveLine(client, text.endsWith('\n') ? text.slice(0, -1) : text)
    }
    this.#reader ??= mcpLineReader(
      (line) => this.#lines.push(line),
      // Recorded with a higher limit than this run's: played as the line the server wrote over it.
      (long) => {
        const id = longLineId(long, 'answer')
        this.#lines.push(eventLine({ kind: 'too-long', bytes: long.bytes, limit: this.#host.maxLineBytes, ...(id !== undefined ? { id } : {}) }))
      },
      this.#host.maxLineBytes,
    )
    this.#reader.push(bytes)
    return this.#play(this.#lines.splice(0))
  }

  separate(gapMs: number): Promise<void> {
    return this.#host.client.separate?.(gapMs) ?? Promise.resolve()
  }

  end(_trailers: HeaderPairs): void {
    if (this.#refusal) this.#refuseWith(this.#refusal)
    else if (this.#reader) {
      // A last line without newline (a hand-made transcript).
      this.#reader.end()
      void this.#play(this.#lines.splice(0))
    }
    this.#settle()
  }

  /** A recorded or injected failure: a fault's timeout reaches the client as the SDK's own timeout error. */
  fail(error: RecordedError, _afterHead: boolean, injected: boolean): void {
    if (this.#m.kind === 'request' && !this.#answered && !this.#relayed && injected && /TIMEDOUT|TIMEOUT/.test(error.code)) {
      const e = { code: MCP_TIMEOUT_CODE, message: `Request timed out: ${error.message}` }
      void this.#host.client.send(JSON.stringify({ jsonrpc: '2.0', id: this.#m.id, error: e }))
    }
    // A lost answer (or a crash) is no answer at all: the client's own timeout, or the exit, decides.
    this.#settle()
  }

  /** A live failure: the server exited before it answered (its exit reaches the client), or the message could not go to it. */
  failLive(err: Error): void {
    if (isToolReplayError(err)) this.#refuse(err.code, `${err.code}: ${err.message}`)
    this.#settle()
  }

  failWith(err: Error): void {
    const code = (err as { code?: unknown }).code
    const c = typeof code === 'string' ? code : 'TR_INTERNAL'
    this.#refuse(c, `${c}: ${err.message}`)
    this.#settle()
  }

  #settle(): void {
    if (this.#settled) return
    this.#settled = true
    for (const fn of this.#settledFns.splice(0)) fn()
  }

  /** The refusal response's JSON body names the code and says why (`message`: "CODE: why"). */
  #refuseWith(refusal: { code: string; parts: Uint8Array[] }): void {
    let text = refusal.code
    try {
      const body = JSON.parse(Buffer.concat(refusal.parts).toString('utf8')) as { message?: unknown }
      if (typeof body.message === 'string') text = body.message
    } catch {
      // Not ours after all: the code alone still says what happened.
    }
    this.#refuse(refusal.code, text)
  }

  /** A request gets a JSON-RPC error at once; anything else is only reported (the ledger has it). */
  #refuse(code: string, text: string): void {
    if (this.#m.kind !== 'request') {
      this.#host.log(text)
      return
    }
    void this.#host.client.send(refusalLine(this.#m.id, code, text))
  }

  /** Plays transcript lines in order; a promise while one waits (the client's reply, its input's end, a slow client). */
  #play(lines: string[], from = 0): void | Promise<void> {
    for (let i = from; i < lines.length && !this.#over; i++) {
      const waiting = this.#playLine(lines[i] as string)
      if (waiting) return waiting.then(() => this.#play(lines, i + 1))
    }
    return undefined
  }

  #playLine(text: string): void | Promise<void> {
    const line = readTranscriptLine(text)
    if (line.kind === 'event') return this.#playEvent(line.event)
    const client = this.#host.client
    const msg = line.message
    if (isJsonRpcResponse(msg)) {
      // The id the client knows: this request's answer and the answers to its other requests are mapped; an
      // answer to an id the client never sent (a stale one, a server answering twice) goes as it was written.
      const id = this.#clientIdOf(msg.id)
      if (id === undefined || idKey(id.id) === idKey(msg.id)) return client.send(text)
      return client.send(editJson(text, [{ path: ['id'], value: id.id }]))
    }
    if (typeof msg.method === 'string' && msg.id !== undefined) this.#host.serverRequest(idKey(msg.id), msg.method)
    const token = this.#token
    if (token && msg.method === 'notifications/progress' && idKey((msg.params as { progressToken?: unknown } | undefined)?.progressToken) === token.recorded) {
      return client.send(editJson(text, [{ path: ['params', 'progressToken'], value: token.current }]))
    }
    return client.send(text)
  }

  #playEvent(e: McpEvent): void | Promise<void> {
    switch (e.kind) {
      case 'stderr':
        this.#host.client.stderr(e.text)
        return undefined
      case 'stdout':
        return this.#host.client.send(e.text)
      case 'replied':
        return this.#host.reply(idKey(e.id))
      case 'stdin-closed':
        return this.#host.inputClosed
      case 'exit':
        // The transcript ends here (the server exited), whether or not an exit was played already.
        this.#over = true
        this.#host.exit(e.code, e.signal)
        return undefined
      case 'too-long':
        return tooLong(this.#host.client, e, e.id !== undefined ? this.#clientIdOf(e.id) : undefined)
    }
  }

  /**
   * This run's id for a recorded answer's id: this request's own (marking it answered), another request's the
   * client sent, or undefined for one it never sent. A made-up answer (a fault's, id null) and a transcript
   * whose request has no recorded id answer this request.
   */
  #clientIdOf(recorded: unknown): { id: unknown } | undefined {
    const key = idKey(recorded)
    if (this.#m.kind === 'request' && (recorded === null || this.#recordedKey === undefined || key === this.#recordedKey)) {
      this.#answered = true
      return { id: this.#m.id }
    }
    return this.#host.clientId(key)
  }
}
