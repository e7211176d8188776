/**
 * One MCP conversation between a client and a stdio server, as exchanges (the format: trace/mcp-wire.ts): the
 * MCP capture path, one adapter over the capture lifecycle (capture/). Both MCP entry points (the `tr-proxy
 * mcp` wrapper and the in-process Transport wrapper) feed it the client's messages and, while a real server
 * runs, the server's output. Each client message is one request through `captureRequest` (its arrival turn,
 * the session's decision, the abort race, replay / refusal / forward), answered through its MessageTarget
 * (client-target.ts). What this file holds is MCP's part, the protocol:
 * - messages are decided one at a time, in the order the client sent them (they share one pipe: a fault's
 *   wait on one holds the later ones);
 * - forward: the message goes to the server's input, and what the server writes next is reported to that
 *   message's live tee as its transcript (a synthetic head, a line per piece, the end when the transcript
 *   closes): an answer into its own request's transcript, anything else into the latest client message's. An
 *   answer ends its transcript unless it is the latest message's (what the server does next belongs there);
 *   the tee then holds it until the exchange is committed;
 * - order: the server's output and the messages forwarded to it pass one at a time, in the order they
 *   happened (server-inbox.ts), so the client reads the server's lines in the server's order;
 * - replay: no server; the target plays the recorded transcript, the recorded exit included;
 * - refusal: a request gets a JSON-RPC error naming the code at once; the session's ledger already counts it.
 */
import { type CapturedExchange, type CaptureOptions, captureRequest, DEFAULT_DRAIN_AFTER_ABORT_MS, DEFAULT_PACE, type LiveEvents } from '../capture/index.ts'
import { type CapturedRequest, type Decision, parseMaxBodyBytes } from '../engine/index.ts'
import {
  ErrorCodes,
  eventLine,
  isJsonRpcResponse,
  type LongLine,
  lineTooLong,
  MCP_COMMAND_HEADER,
  MCP_MESSAGE_HEADER,
  MCP_SERVER_EXITED,
  MCP_TRANSCRIPT_TYPE,
  maskedCommandLine,
  mcpStdioUrl,
  readTranscriptLine,
  ToolReplayError,
} from '../trace/index.ts'
import { type ClientMessage, readClientMessage } from './client-message.ts'
import { type ConversationHost, idKey, liveLine, MessageTarget } from './client-target.ts'
import type { ConversationOptions, ServerEnd } from './conversation-options.ts'
import { longLineId, MCP_WIRES } from './framing.ts'
import { ClientReplies, deferred, ServerInbox } from './server-inbox.ts'

export type { ConversationOptions, ServerEnd } from './conversation-options.ts'

/** An exchange being recorded: the transcript of one forwarded client message, fed to its live tee. */
interface Open {
  events: LiveEvents
  target: MessageTarget
  /** For a request: its id (as a map key) while it waits for the server's answer. */
  requestKey?: string
  /** Server requests this transcript holds (keys), so a reply can be marked in it. */
  serverRequests: Set<string>
  /** A fault decides what the client gets: the tee only records, and the client gets the fault's playback. */
  relayed: boolean
  closed: boolean
}

type Forward = Extract<Decision, { kind: 'forward' }>

const encoder = new TextEncoder()

/**
 * @example
 * const c = new McpConversation({ session, server: 'filesystem', command, client, start, log })
 * await c.launch(); c.fromClient(line); ...; c.clientClosed(); await c.done
 */
export class McpConversation {
  readonly #o: ConversationOptions
  readonly #capture: CaptureOptions
  readonly #host: ConversationHost
  #queue: Promise<void> = Promise.resolve()
  #server: ServerEnd | undefined
  #latest: Open | undefined
  /** Lines the server wrote while no exchange was open to take them: they go to the next one. */
  #limbo: string[] = []
  readonly #pending = new Map<string, Open>()
  readonly #opens = new Set<Open>()
  /** Requests the client still waits on (id key → target): a cancellation or a client that goes away gives them up. */
  readonly #waiting = new Map<string, MessageTarget>()
  /** Server-to-client requests seen (id key → method), for the URL of the client's reply. */
  readonly #serverRequests = new Map<string, string>()
  /** Replay: the client's replies so far, and waits for ones still to come. */
  readonly #replies = new ClientReplies()
  /** Replay: this run's ids of the requests replayed so far, by their recorded id (key). */
  readonly #sentAs = new Map<string, { id: unknown }>()
  readonly #inputClosed = deferred()
  /** Messages still being carried out (each one's lifecycle). */
  readonly #inflight = new Set<Promise<void>>()
  /**
   * The server's output and the messages forwarded to it, in the order they happened (see the module comment);
   * held by a tee holding the server back (its Open) or an answer waiting for its commit (its target).
   */
  readonly #inbox: ServerInbox
  #exited = false
  /** The client closed its end. */
  #closed = false
  readonly #ended = deferred()

  constructor(options: ConversationOptions) {
    this.#o = options
    this.#inbox = new ServerInbox(() => this.#server, options.log)
    this.#capture = {
      session: options.session,
      pace: DEFAULT_PACE,
      maxBodyBytes: parseMaxBodyBytes(options.maxBodyBytes),
      drainAfterAbortMs: options.drainAfterAbortMs ?? DEFAULT_DRAIN_AFTER_ABORT_MS,
    }
    this.#host = {
      client: options.client,
      log: options.log,
      serverRequest: (key, method) => this.#serverRequests.set(key, method),
      reply: (key) => this.#replies.wait(key),
      inputClosed: this.#inputClosed.promise,
      maxLineBytes: this.#capture.maxBodyBytes,
      sentAs: (key, id) => this.#sentAs.set(key, { id }),
      clientId: (key) => this.#sentAs.get(key),
      exit: (code, signal) => {
        if (this.#exited) return
        this.#exited = true
        this.#o.client.exit(code, signal)
        this.#end()
      },
    }
  }

  /** Resolves once the conversation is over (the server exited, or the client closed and every transcript ended). */
  get done(): Promise<void> {
    return this.#ended.promise
  }

  /** The longest message, one line (bytes): the reader of each direction takes this limit. */
  get maxLineBytes(): number {
    return this.#capture.maxBodyBytes
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
    const target = new MessageTarget(this.#host, { kind: 'launch' })
    return this.#enqueue(async () => {
      let starting: Promise<void> | undefined
      // Straight, not through the inbox: no server runs yet, so nothing it wrote can come before.
      await this.#carry(captured, target, (events) => {
        starting = this.#start(events, target)
      })
      await starting
    })
  }

  /** One line the client wrote (a JSON-RPC message). */
  fromClient(text: string): void {
    const m = readClientMessage(text, this.#o.server, this.#serverRequests)
    if (!m) {
      this.#o.log(`ignored a client line that is not a JSON-RPC message: ${text.slice(0, 200)}`)
      return
    }
    // A cancellation gives its request up at once (it would otherwise queue behind it): a fault's wait on it
    // ends, and an answer still to come is recorded as the client abort it is.
    if (m.kind === 'notification' && m.method === 'notifications/cancelled') {
      this.#waiting.get(idKey((m.params as { requestId?: unknown } | undefined)?.requestId))?.giveUp()
    }
    if (m.kind === 'reply') this.#replies.arrived(idKey(m.id))
    const target = new MessageTarget(this.#host, m)
    if (m.kind === 'request') {
      const key = idKey(m.id)
      this.#waiting.set(key, target)
      target.onSettled(() => {
        if (this.#waiting.get(key) === target) this.#waiting.delete(key)
      })
    }
    void this.#enqueue(() => this.#carry(m.captured, target, (events, d) => this.#inbox.receive(() => this.#forward(m, target, events, d))))
  }

  /**
   * The client wrote a line over the limit: it is refused as a body over the limit is (not sent, not recorded,
   * counted by strict replay), with TR_LINE_TOO_LONG as the answer when its id can be read.
   */
  clientTooLong(line: LongLine): void {
    const err = lineTooLong(MCP_WIRES.client, line, this.maxLineBytes)
    this.#o.session.refuse({ method: 'POST', url: mcpStdioUrl(this.#o.server, { kind: 'message', method: '(line too long)' }) }, err)
    const id = longLineId(line, 'request')
    new MessageTarget(this.#host, id === undefined ? { kind: 'notification' } : { kind: 'request', id }).failWith(err)
  }

  /** The client closed its end (stdin EOF, transport close): the server's input closes; answers still come. Idempotent. */
  clientClosed(): void {
    if (this.#closed) return
    this.#inputClosed.resolve()
    // No reply can come any more: a replayed transcript waiting for one plays on.
    this.#replies.close()
    this.#closed = true
    void this.#enqueue(async () => {
      const server = this.#server
      if (server && !this.#exited) {
        this.#inbox.receive(() => {
          if (this.#exited) return
          this.#append(this.#latest, eventLine({ kind: 'stdin-closed' }))
          server.closeInput()
        })
        return
      }
      // Replay: the transcripts play out (one may hold the recorded exit), then the conversation ends.
      await Promise.allSettled([...this.#inflight])
      if (!this.#server) this.#end()
    })
  }

  /**
   * The client went away (its end broke, it signalled the wrapper, the app closed its transport): the requests
   * it still waited on are given up, and recorded as the client abort they were, as for HTTP.
   */
  clientGone(): void {
    for (const target of [...this.#waiting.values()]) target.giveUp()
  }

  /** A line the live server wrote on stdout. */
  serverLine(text: string): void {
    this.#inbox.receive(() => this.#line(text))
  }

  /**
   * The live server wrote a line over the limit: dropped, and recorded as a `too-long` event where it came;
   * when it answered a request the client waits on, that request gets TR_LINE_TOO_LONG (live and in replay).
   */
  serverTooLong(line: LongLine): void {
    this.#inbox.receive(() => {
      const id = longLineId(line, 'answer')
      const key = id === undefined ? undefined : idKey(id)
      const open = key === undefined ? undefined : this.#pending.get(key)
      const event = eventLine({ kind: 'too-long', bytes: line.bytes, limit: this.maxLineBytes, ...(open ? { id: id as string | number } : {}) })
      if (open && key !== undefined) this.#answer(open, key, event)
      else this.#put(this.#latest, event)
    })
  }

  /** Text the live server wrote on stderr. */
  serverStderr(text: string): void {
    this.#inbox.receive(() => this.#put(this.#latest, eventLine({ kind: 'stderr', text })))
  }

  /** The live server exited: recorded in the latest transcript; unanswered requests fail with MCP_SERVER_EXITED. */
  serverExit(code: number | null, signal: string | null): void {
    this.#inbox.receive(() => this.#exit(code, signal))
  }

  /**
   * One message through the capture lifecycle; resolves once its decision is being carried out (the next
   * message is decided after it), which `forward` does for a forward.
   */
  #carry(captured: CapturedRequest, target: MessageTarget, forward: (events: LiveEvents, decision: Forward) => void): Promise<void> {
    return new Promise<void>((resolve) => {
      let decision: Decision | undefined
      const options: CaptureOptions = {
        ...this.#capture,
        onDecision: (d) => {
          decision = d
          target.decided(d)
          resolve()
        },
      }
      const exchange: CapturedExchange = {
        method: captured.method,
        url: captured.url,
        headers: captured.headers,
        readBody: (max, tooLarge) => {
          if (captured.body && captured.body.byteLength > max) throw tooLarge()
          return { bytes: captured.body }
        },
        client: target,
        forward: (_body, events) => forward(events, decision as Forward),
      }
      const carried = captureRequest(options, exchange, this.#o.session.arrival())
      if (!carried) {
        resolve()
        return
      }
      this.#inflight.add(carried)
      void carried.then(() => {
        this.#inflight.delete(carried)
        resolve()
      })
    })
  }

  /** The launch is forwarded: its transcript opens, and the server starts. */
  async #start(events: LiveEvents, target: MessageTarget): Promise<void> {
    const open = this.#open(events, target, false)
    this.#latest = open
    try {
      this.#server = await this.#o.start()
    } catch (err) {
      // Recorded for replay; this run's caller reports the error itself.
      target.skip(1)
      this.#append(open, eventLine({ kind: 'stderr', text: `${(err as Error).message}\n` }))
      this.serverExit(null, null)
      throw err
    }
  }

  /** A forwarded client message goes to the server, and its transcript becomes the latest. */
  #forward(m: ClientMessage, target: MessageTarget, events: LiveEvents, decision: Forward): void {
    const server = this.#server
    if (!server || this.#exited) {
      const why = this.#exited ? 'the server has exited' : 'the server was not started (its launch was replayed)'
      const refusal = new ToolReplayError(
        ErrorCodes.REPLAY_MISS,
        `Failed to forward MCP "${m.method}" to server "${this.#o.server}": ${why}. Record the whole conversation again (mode "record").`,
      )
      events.error(refusal, { code: MCP_SERVER_EXITED, message: `Not forwarded: ${why}.` })
      return
    }
    // The previous latest message's transcript ends here unless it still waits for its answer.
    const previous = this.#latest
    if (previous && !(previous.requestKey !== undefined && this.#pending.get(previous.requestKey) === previous)) this.#finish(previous)
    if (m.kind === 'reply') this.#markReplied(idKey(m.id))
    const open = this.#open(events, target, decision.client !== undefined)
    this.#latest = open
    if (m.kind === 'request') {
      open.requestKey = idKey(m.id)
      this.#pending.set(open.requestKey, open)
    }
    if (decision.fault?.kind === 'server_crash') server.kill()
    else server.write(m.text)
  }

  /** Opens a transcript on `events` (the message's live tee): the synthetic head, then what waited for it. */
  #open(events: LiveEvents, target: MessageTarget, relayed: boolean): Open {
    const open: Open = { events, target, serverRequests: new Set(), relayed, closed: false }
    this.#opens.add(open)
    events.control({ pause: () => this.#inbox.hold(open), resume: () => this.#inbox.release(open), abort: () => this.#drop(open) })
    events.started()
    events.sent()
    events.head({ status: 200, statusText: 'OK', headers: [['content-type', MCP_TRANSCRIPT_TYPE]] })
    target.onSettled(() => this.#inbox.release(target))
    const limbo = this.#limbo
    if (limbo.length > 0) {
      this.#limbo = []
      // The client got them when they came: here they are only recorded.
      target.skip(limbo.length)
      for (const text of limbo) events.data(encoder.encode(`${text}\n`))
    }
    return open
  }

  /** A line the server wrote on stdout: an answer goes to its request's transcript, anything else to the latest. */
  #line(text: string): void {
    const line = readTranscriptLine(text)
    if (line.kind === 'event') {
      this.#put(this.#latest, eventLine({ kind: 'stdout', text }))
      return
    }
    const m = line.message
    if (isJsonRpcResponse(m)) {
      const key = idKey(m.id)
      const open = this.#pending.get(key)
      if (open) {
        this.#answer(open, key, text)
        return
      }
    }
    if (typeof m.method === 'string' && m.id !== undefined) {
      this.#serverRequests.set(idKey(m.id), m.method)
      this.#latest?.serverRequests.add(idKey(m.id))
    }
    this.#put(this.#latest, text)
  }

  #answer(open: Open, key: string, text: string): void {
    this.#pending.delete(key)
    if (!open.relayed) open.target.answered()
    // The transcript stays open while it is the latest message's (what the server does next goes there); a
    // fault's answer ends it now, since the fault's playback waits for it.
    if (open === this.#latest && !open.relayed) {
      this.#append(open, text)
      return
    }
    // The answer completes the exchange: the tee hands it over once the exchange is committed.
    this.#append(open, text, true)
    if (open === this.#latest) this.#latest = undefined
    this.#finish(open)
    // Whatever the server wrote next waits until that answer went out, so the client reads them in order.
    if (!open.relayed && !open.target.settled) this.#inbox.hold(open.target)
  }

  /**
   * A line for `open`'s transcript that the client sees as it comes: the tee passes it on; when no tee the client
   * follows carries it (none open, or a fault's), it goes to the client here.
   */
  #put(open: Open | undefined, text: string): void {
    const carried = open !== undefined && !open.closed && !open.relayed
    this.#append(open, text)
    if (!carried) void liveLine(this.#o.client, text)
  }

  /** Records a line in `open`'s transcript (the next one's when it is over). `final`: it completes the exchange. */
  #append(open: Open | undefined, text: string, final = false): void {
    if (!open || open.closed) {
      this.#limbo.push(text)
      return
    }
    open.events.data(encoder.encode(`${text}\n`), final)
  }

  #exit(code: number | null, signal: string | null): void {
    if (this.#exited) return
    this.#exited = true
    this.#append(this.#latest, eventLine({ kind: 'exit', code, signal }))
    const how = signal ? `signal ${signal}` : `code ${code}`
    const message = `The MCP server exited (${how}) before it answered.`
    for (const open of this.#pending.values()) {
      this.#close(open)
      open.events.error(new Error(message), { code: MCP_SERVER_EXITED, message })
    }
    this.#pending.clear()
    for (const open of [...this.#opens]) this.#finish(open)
    this.#o.client.exit(code, signal)
    this.#end()
  }

  /** The transcript ends (its exchange is recorded as a response). */
  #finish(open: Open): void {
    if (open.closed) return
    this.#close(open)
    open.events.end([])
  }

  /** No more lines go to `open` (whatever its tee still holds the server back for is over). */
  #close(open: Open): void {
    open.closed = true
    this.#opens.delete(open)
    this.#inbox.release(open)
  }

  /** The tee ended the exchange itself (its client gave up, the drain is over): later lines go elsewhere. */
  #drop(open: Open): void {
    if (open.closed) return
    this.#close(open)
    if (open.requestKey !== undefined && this.#pending.get(open.requestKey) === open) this.#pending.delete(open.requestKey)
  }

  #end(): void {
    void Promise.allSettled([...this.#inflight]).then(() => this.#ended.resolve())
  }

  #enqueue(step: () => Promise<void>): Promise<void> {
    const run = this.#queue.then(step)
    this.#queue = run.catch((err: unknown) => this.#o.log(`MCP conversation: ${(err as Error)?.message ?? String(err)}`))
    return run
  }

  /** Marks the client's reply to server request `key` in every open transcript that holds that request. */
  #markReplied(key: string): void {
    const id = JSON.parse(key) as string | number
    for (const open of this.#opens) if (open.serverRequests.has(key)) this.#append(open, eventLine({ kind: 'replied', id }))
  }
}
