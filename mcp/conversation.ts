/**
 * One MCP conversation between a client and a stdio server, as exchanges (the format: trace/mcp-wire.ts).
 * Both MCP capture paths (the `tr-proxy mcp` wrapper and the in-process Transport wrapper) feed it the
 * client's messages and, while a real server runs, the server's output; it asks the session about each
 * client message and carries out the decision:
 * - forward: the message goes to the server; what the server does next is recorded into that message's
 *   transcript (an answer into its own request's; anything else into the latest client message's);
 * - replay: no server; the recorded transcript is played to the client with the JSON-RPC id of the answer
 *   (and progress tokens) mapped to the client's, server-to-client requests as recorded, waiting where the
 *   recording waited for the client (its reply, the end of its input), and the server's exit played as an exit;
 * - refusal: a request gets a JSON-RPC error naming the code (TR_REPLAY_MISS) at once; the session's ledger
 *   already counts it.
 * Messages are decided one at a time, in the order the client sent them.
 */
import type { CapturedRequest, ExchangeRecorder } from '../engine/index.ts'
import {
  editJson,
  eventLine,
  type HeaderPairs,
  headerValue,
  isJsonRpcResponse,
  MCP_COMMAND_HEADER,
  MCP_ID_HEADER,
  MCP_MESSAGE_HEADER,
  MCP_PROGRESS_TOKEN_HEADER,
  MCP_SERVER_EXITED,
  MCP_TRANSCRIPT_TYPE,
  type McpEvent,
  maskedCommandLine,
  mcpStdioUrl,
  PROGRESS_TOKEN,
  readTranscriptLine,
} from '../trace/index.ts'
import { decideMessage, type MessageDecision, type PlayedAnswer, type SessionPort } from './lifecycle.ts'

/** JSON-RPC error code of Tool Replay's refusals (implementation-defined server error range; the SDK uses none of it). */
export const MCP_REFUSAL_CODE = -32099
/** JSON-RPC error code of a timeout (the MCP SDK's own RequestTimeout). */
export const MCP_TIMEOUT_CODE = -32001

/** Where the conversation sends what the client must see. */
export interface ClientEnd {
  /** One line for the client (a JSON-RPC message, or a server's non-JSON output), without newline. */
  send(line: string): void
  /** Text the server wrote on stderr. */
  stderr(text: string): void
  /** The server ended (code and signal as recorded; null when unknown): the client's end closes too. */
  exit(code: number | null, signal: string | null): void
  /**
   * Replay: the next line was recorded in a later chunk, `gapMs` after the previous one; resolves when the client
   * may read it as a read of its own (the SDK handles a notification a turn later than an answer, so a progress
   * note and the answer merged into one read would lose the note).
   */
  between?(gapMs: number): Promise<void>
}

/** A running server, as the conversation drives it. */
export interface ServerEnd {
  /** Writes one line (no newline) to the server's input. */
  write(line: string): void
  /** Closes the server's input (the client is done). */
  closeInput(): void
  /** Kills the server at once (a server_crash fault). */
  kill(): void
}

/** Options for `McpConversation`. */
export interface ConversationOptions {
  port: SessionPort
  /** The server's name: the host of its URLs. */
  server: string
  /** The server's command line, for the launch exchange (secret-looking values are masked). */
  command: readonly string[]
  client: ClientEnd
  /** Starts the real server (record, passthrough). It reports through serverLine, serverStderr and serverExit. */
  start(): Promise<ServerEnd>
  /** Warnings (a refused notification). */
  log(line: string): void
}

/** An exchange being recorded: the transcript of one client message. */
interface Open {
  recorder: ExchangeRecorder
  /** For a request: its id (as a map key) while it waits for the server's answer. */
  requestKey?: string
  /** Server requests this transcript holds (keys), so a reply can be marked in it. */
  serverRequests: Set<string>
  /** A fault decides what the client gets: nothing is passed on live; `client` is played once the exchange ends. */
  client?: Promise<PlayedAnswer>
  clientId?: unknown
  closed: boolean
}

/** A client message, read. */
interface ClientMessage {
  kind: 'request' | 'notification' | 'reply'
  text: string
  id?: unknown
  method: string
  params?: unknown
  captured: CapturedRequest
  /** The progress token the client asked for (requests). */
  progressToken?: unknown
}

const encoder = new TextEncoder()
const idKey = (id: unknown): string => JSON.stringify(id) ?? 'null'

/** A promise with its resolve, settled once. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = () => {}
  const promise = new Promise<void>((r) => (resolve = r))
  return { promise, resolve }
}

/**
 * @example
 * const c = new McpConversation({ port: localPort(session), server: 'filesystem', command, client, start, log })
 * await c.launch(); c.fromClient(line); ...; c.clientClosed(); await c.done
 */
export class McpConversation {
  readonly #o: ConversationOptions
  #queue: Promise<void> = Promise.resolve()
  #server: ServerEnd | undefined
  #latest: Open | undefined
  /** Lines the server wrote while no exchange was open to take them: they go to the next one. */
  #limbo: string[] = []
  readonly #pending = new Map<string, Open>()
  readonly #opens = new Set<Open>()
  readonly #writes = new Set<Promise<unknown>>()
  /** Server-to-client requests seen (id key → method), for the URL of the client's reply. */
  readonly #serverRequests = new Map<string, string>()
  /** Replay: the client's replies so far, and waits for ones still to come. */
  readonly #replied = new Map<string, { promise: Promise<void>; resolve: () => void }>()
  readonly #inputClosed = deferred()
  /** Requests waiting on a fault (id key → abort), so a cancellation ends the wait. */
  readonly #aborts = new Map<string, AbortController>()
  /** Plays of replayed transcripts still running. */
  readonly #plays = new Set<Promise<void>>()
  #exited = false
  /** The client closed its end. */
  #closed = false
  readonly #ended = deferred()

  constructor(options: ConversationOptions) {
    this.#o = options
  }

  /** Resolves once the conversation is over (the server exited, or the client closed and every transcript ended). */
  get done(): Promise<void> {
    return this.#ended.promise
  }

  /** True once the server exited (or a replayed exit was played). */
  get exited(): boolean {
    return this.#exited
  }

  /** The launch exchange: starts the server when the session forwards, plays what it printed when it replays. */
  launch(): Promise<void> {
    const captured: CapturedRequest = {
      method: 'POST',
      url: mcpStdioUrl(this.#o.server, { kind: 'launch', method: '' }),
      headers: [
        [MCP_MESSAGE_HEADER, 'launch'],
        [MCP_COMMAND_HEADER, maskedCommandLine(this.#o.command)],
      ],
      body: null,
    }
    return this.#enqueue(async () => {
      const d = await decideMessage(this.#o.port, captured)
      if (d.kind === 'fail') {
        this.#o.log(`${d.code}: ${d.message}`)
        return
      }
      if (d.kind === 'replay') {
        this.#play(d, undefined)
        return
      }
      this.#latest = this.#open(d)
      try {
        this.#server = await this.#o.start()
      } catch (err) {
        this.#append(this.#latest, eventLine({ kind: 'stderr', text: `${(err as Error).message}\n` }))
        this.serverExit(null, null)
        throw err
      }
    })
  }

  /** One line the client wrote (a JSON-RPC message). */
  fromClient(text: string): void {
    const m = this.#read(text)
    if (!m) {
      this.#o.log(`ignored a client line that is not a JSON-RPC message: ${text.slice(0, 200)}`)
      return
    }
    // A cancellation ends a fault's wait on the request it names at once (it would otherwise queue behind it).
    if (m.kind === 'notification' && m.method === 'notifications/cancelled') {
      const id = (m.params as { requestId?: unknown } | undefined)?.requestId
      this.#aborts.get(idKey(id))?.abort()
    }
    if (m.kind === 'reply') this.#replyArrived(idKey(m.id))
    void this.#enqueue(() => this.#handle(m))
  }

  /** The client closed its end (stdin EOF, transport close). */
  clientClosed(): void {
    this.#inputClosed.resolve()
    // No reply can come any more: a replayed transcript waiting for one plays on.
    for (const w of this.#replied.values()) w.resolve()
    this.#closed = true
    void this.#enqueue(async () => {
      if (this.#server && !this.#exited) {
        this.#append(this.#latest, eventLine({ kind: 'stdin-closed' }))
        this.#server.closeInput()
        return
      }
      // Replay: the transcripts play out (one may hold the recorded exit), then the conversation ends.
      await Promise.allSettled([...this.#plays])
      if (!this.#server) this.#end()
    })
  }

  /** A line the live server wrote on stdout. */
  serverLine(text: string): void {
    const line = readTranscriptLine(text)
    if (line.kind === 'event') {
      this.#append(this.#latest, eventLine({ kind: 'stdout', text }))
      this.#o.client.send(text)
      return
    }
    const m = line.message
    if (isJsonRpcResponse(m)) {
      const open = this.#pending.get(idKey(m.id))
      if (open) {
        this.#pending.delete(idKey(m.id))
        this.#append(open, text)
        if (!open.client) this.#o.client.send(text)
        // A relayed (faulted) answer is final now; any other stays open while it is the latest message.
        if (open !== this.#latest || open.client) this.#finish(open)
        if (open === this.#latest && open.client) this.#latest = undefined
        return
      }
    }
    if (typeof m.method === 'string' && m.id !== undefined) {
      this.#serverRequests.set(idKey(m.id), m.method)
      this.#latest?.serverRequests.add(idKey(m.id))
    }
    this.#append(this.#latest, text)
    this.#o.client.send(text)
  }

  /** Text the live server wrote on stderr. */
  serverStderr(text: string): void {
    this.#append(this.#latest, eventLine({ kind: 'stderr', text }))
    this.#o.client.stderr(text)
  }

  /** The live server exited: recorded in the latest transcript; unanswered requests fail with MCP_SERVER_EXITED. */
  serverExit(code: number | null, signal: string | null): void {
    if (this.#exited) return
    this.#exited = true
    this.#append(this.#latest, eventLine({ kind: 'exit', code, signal }))
    const how = signal ? `signal ${signal}` : `code ${code}`
    for (const open of this.#pending.values()) {
      open.closed = true
      this.#track(open.recorder.fail({ code: MCP_SERVER_EXITED, message: `The MCP server exited (${how}) before it answered.` }, 'response-body'))
    }
    this.#pending.clear()
    for (const open of this.#opens) this.#finish(open)
    this.#o.client.exit(code, signal)
    this.#end()
  }

  #end(): void {
    void Promise.allSettled([...this.#writes, ...this.#plays]).then(() => this.#ended.resolve())
  }

  #enqueue(step: () => Promise<void>): Promise<void> {
    const run = this.#queue.then(step)
    this.#queue = run.catch((err: unknown) => this.#o.log(`MCP conversation: ${(err as Error)?.message ?? String(err)}`))
    return run
  }

  #read(text: string): ClientMessage | undefined {
    let v: unknown
    try {
      v = JSON.parse(text)
    } catch {
      return undefined
    }
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined
    const o = v as Record<string, unknown>
    if (typeof o.method === 'string') {
      const kind = o.id === undefined ? 'notification' : 'request'
      const tool = o.method === 'tools/call' ? (o.params as { name?: unknown } | undefined)?.name : undefined
      const headers: HeaderPairs = [[MCP_MESSAGE_HEADER, kind]]
      if (kind === 'request') headers.push([MCP_ID_HEADER, idKey(o.id)])
      let params = o.params
      const token = (params as { _meta?: { progressToken?: unknown } } | undefined)?._meta?.progressToken
      if (token !== undefined) {
        headers.push([MCP_PROGRESS_TOKEN_HEADER, idKey(token)])
        const p = params as { _meta: Record<string, unknown> }
        params = { ...p, _meta: { ...p._meta, progressToken: PROGRESS_TOKEN } }
      }
      const url = mcpStdioUrl(this.#o.server, { kind: 'message', method: o.method, ...(typeof tool === 'string' ? { tool } : {}) })
      const m: ClientMessage = { kind, text, method: o.method, params: o.params, captured: this.#captured(url, headers, params) }
      if (kind === 'request') m.id = o.id
      if (token !== undefined) m.progressToken = token
      return m
    }
    if (o.id === undefined || (o.result === undefined && o.error === undefined)) return undefined
    const method = this.#serverRequests.get(idKey(o.id)) ?? 'unknown'
    const url = mcpStdioUrl(this.#o.server, { kind: 'reply', method })
    const body = o.error !== undefined ? { error: o.error } : { result: o.result }
    return { kind: 'reply', text, id: o.id, method, captured: this.#captured(url, [[MCP_MESSAGE_HEADER, 'reply']], body) }
  }

  #captured(url: string, headers: HeaderPairs, body: unknown): CapturedRequest {
    if (body === undefined) return { method: 'POST', url, headers, body: null }
    return { method: 'POST', url, headers: [['content-type', 'application/json'], ...headers], body: encoder.encode(JSON.stringify(body)) }
  }

  async #handle(m: ClientMessage): Promise<void> {
    const abort = m.kind === 'request' ? new AbortController() : undefined
    if (abort) this.#aborts.set(idKey(m.id), abort)
    let d: MessageDecision
    try {
      d = await decideMessage(this.#o.port, abort ? { ...m.captured, signal: abort.signal } : m.captured)
    } finally {
      if (abort) this.#aborts.delete(idKey(m.id))
    }
    if (d.kind === 'fail') {
      this.#refuse(m, d.code, d.message)
      return
    }
    if (d.kind === 'replay') {
      // A cancelled request (the client gave up while a fault held it) gets nothing, as the client expects.
      if (abort?.signal.aborted) return
      this.#play(d, m)
      return
    }
    if (!this.#server || this.#exited) {
      const why = this.#exited ? 'the server has exited' : 'the server was not started (its launch was replayed)'
      void d.recorder.fail({ code: MCP_SERVER_EXITED, message: `Not forwarded: ${why}.` }, 'connect')
      this.#refuse(
        m,
        'TR_REPLAY_MISS',
        `Failed to forward MCP "${m.method}" to server "${this.#o.server}": ${why}. Record the whole conversation again (mode "record").`,
      )
      return
    }
    // The previous latest message's transcript ends here unless it still waits for its answer.
    const previous = this.#latest
    if (previous && !(previous.requestKey !== undefined && this.#pending.get(previous.requestKey) === previous)) this.#finish(previous)
    if (m.kind === 'reply') this.#markReplied(idKey(m.id))
    const open = this.#open(d, m)
    this.#latest = open
    if (m.kind === 'request') {
      open.requestKey = idKey(m.id)
      this.#pending.set(open.requestKey, open)
    }
    if (d.fault === 'server_crash') this.#server.kill()
    else this.#server.write(m.text)
  }

  /** A refused message: a request gets a JSON-RPC error at once; anything else is only reported (the ledger has it). */
  #refuse(m: ClientMessage, code: string, message: string): void {
    if (m.kind !== 'request') {
      this.#o.log(`${code}: ${message}`)
      return
    }
    const error = { code: MCP_REFUSAL_CODE, message: `${code}: ${message}`, data: { toolReplayError: code } }
    this.#o.client.send(JSON.stringify({ jsonrpc: '2.0', id: m.id, error }))
  }

  #open(d: Extract<MessageDecision, { kind: 'forward' }>, m?: ClientMessage): Open {
    const open: Open = { recorder: d.recorder, serverRequests: new Set(), closed: false }
    if (d.client) {
      open.client = d.client
      if (m?.kind === 'request') open.clientId = m.id
    }
    this.#opens.add(open)
    open.recorder.responseStart({ status: 200, statusText: 'OK', headers: [['content-type', MCP_TRANSCRIPT_TYPE]] })
    const limbo = this.#limbo
    this.#limbo = []
    for (const text of limbo) this.#append(open, text)
    return open
  }

  #append(open: Open | undefined, text: string): void {
    if (!open || open.closed) {
      this.#limbo.push(text)
      return
    }
    const p = open.recorder.responseData(encoder.encode(`${text}\n`))
    if (p) this.#track(p)
  }

  #finish(open: Open): void {
    if (open.closed) return
    open.closed = true
    this.#opens.delete(open)
    this.#track(open.recorder.responseEnd())
    if (open.client) {
      const client = open.client
      this.#trackPlay(client.then((answer) => this.#playLines(answer, open.clientId === undefined ? undefined : { id: open.clientId }, false)))
    }
  }

  #track(p: Promise<unknown>): void {
    const q = p.catch((err: unknown) => this.#o.log(`MCP recording: ${(err as Error)?.message ?? String(err)}`))
    this.#writes.add(q)
    void q.finally(() => this.#writes.delete(q))
  }

  #trackPlay(p: Promise<void>): void {
    const q = p.catch((err: unknown) => this.#o.log(`MCP replay: ${(err as Error)?.message ?? String(err)}`))
    this.#plays.add(q)
    void q.finally(() => this.#plays.delete(q))
  }

  /** Marks the client's reply to server request `key` in every open transcript that holds that request. */
  #markReplied(key: string): void {
    const id = JSON.parse(key) as string | number
    for (const open of this.#opens) if (open.serverRequests.has(key)) this.#append(open, eventLine({ kind: 'replied', id }))
  }

  #replyArrived(key: string): void {
    const w = this.#replied.get(key)
    if (w) w.resolve()
    else {
      const d = deferred()
      d.resolve()
      this.#replied.set(key, d)
    }
  }

  #waitReply(key: string): Promise<void> {
    let w = this.#replied.get(key)
    if (this.#closed) return Promise.resolve()
    if (!w) {
      w = deferred()
      this.#replied.set(key, w)
    }
    return w.promise
  }

  /** Plays a replayed (or made-up) answer to the client. */
  #play(d: Extract<MessageDecision, { kind: 'replay' }>, m: ClientMessage | undefined): void {
    const recordedToken = headerValue(d.exchange.request.headers, MCP_PROGRESS_TOKEN_HEADER)
    const map: Mapping = {}
    if (m?.kind === 'request') map.id = m.id
    if (recordedToken !== undefined && m?.progressToken !== undefined) map.token = { recorded: recordedToken, current: m.progressToken }
    this.#trackPlay(d.answer.then((answer) => this.#playLines(answer, map, m?.kind === 'request')))
  }

  async #playLines(answer: PlayedAnswer, map: Mapping | undefined, request: boolean): Promise<void> {
    let answered = false
    let previous: { chunk: number; atMs: number } | undefined
    for (const { text, chunk, atMs } of answer.lines) {
      if (previous && chunk !== previous.chunk && this.#o.client.between) await this.#o.client.between(Math.max(0, atMs - previous.atMs))
      previous = { chunk, atMs }
      const line = readTranscriptLine(text)
      if (line.kind === 'event') {
        if (await this.#playEvent(line.event)) return
        continue
      }
      const msg = line.message
      if (isJsonRpcResponse(msg) && map?.id !== undefined) {
        answered = true
        this.#o.client.send(editJson(text, [{ path: ['id'], value: map.id }]))
        continue
      }
      if (typeof msg.method === 'string' && msg.id !== undefined) this.#serverRequests.set(idKey(msg.id), msg.method)
      const token = (msg.params as { progressToken?: unknown } | undefined)?.progressToken
      if (msg.method === 'notifications/progress' && map?.token && idKey(token) === map.token.recorded) {
        this.#o.client.send(editJson(text, [{ path: ['params', 'progressToken'], value: map.token.current }]))
        continue
      }
      this.#o.client.send(text)
    }
    // A fault's failure reaches the client as MCP would show it: a timeout as the SDK's timeout error; a lost
    // answer (or a crash) as no answer at all.
    const e = answer.error
    if (request && !answered && e && answer.injected && map?.id !== undefined && /TIMEDOUT|TIMEOUT/.test(e.code)) {
      const error = { code: MCP_TIMEOUT_CODE, message: `Request timed out: ${e.message}` }
      this.#o.client.send(JSON.stringify({ jsonrpc: '2.0', id: map.id, error }))
    }
  }

  /** Plays one event; true when the transcript ends here (the server exited). */
  async #playEvent(e: McpEvent): Promise<boolean> {
    switch (e.kind) {
      case 'stderr':
        this.#o.client.stderr(e.text)
        return false
      case 'stdout':
        this.#o.client.send(e.text)
        return false
      case 'replied':
        await this.#waitReply(idKey(e.id))
        return false
      case 'stdin-closed':
        await this.#inputClosed.promise
        return false
      case 'exit':
        if (this.#exited) return true
        this.#exited = true
        this.#o.client.exit(e.code, e.signal)
        this.#end()
        return true
    }
  }
}

/** How a replayed transcript is mapped to this run: the answer's id, and the progress token. */
interface Mapping {
  id?: unknown
  token?: { recorded: string; current: unknown }
}
