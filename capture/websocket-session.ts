/**
 * A WebSocket session's life after its upgrade, the same for every path: relaying a live session byte for byte
 * while its frames are read into the recorder (the proxy), tapping a socket an in-process client owns (the
 * interceptor: undici's WebSocket, node:http upgrades), and playing a recorded one to the client (all of them).
 *
 * @note Not carried by capture/lifecycle.ts: the lifecycle is one request and one response body flowing one way
 * (its LiveTee and playback driver), while a session is a conversation both ways whose answers depend on what
 * the client sends next. The decision still comes from the engine (Session.handleWebSocket); matching and
 * strictness are engine/websocket-replay.ts's.
 */
import type { Duplex } from 'node:stream'
import { MISS_CLOSE_CODE, type PlayedMessage, type Scheduled, type WebSocketConversation, type WebSocketRecorder } from '../engine/index.ts'
import { closePayload, readClosePayload, type ToolReplayError } from '../trace/index.ts'
import { type Pace, releaseAtMs } from './pacing.ts'
import { faultServerStream } from './websocket-fault-relay.ts'
import { encodeFrame, FrameParser, OPCODE, opcodeName, WEBSOCKET_PROTOCOL_CODE } from './websocket-frames.ts'

/** How long a closing session waits for the other side's close before its socket is destroyed. */
export const CLOSE_WAIT_MS = 2000

/**
 * Relays an open session (the 101 already passed on to the client) byte for byte, each direction also read
 * frame by frame into `recorder`. A stream the parser cannot read stops the recording (its end says why), never
 * the relay. Resolves when both sockets are closed and the recording is handed over.
 */
export function relayWebSocket(client: Duplex, upstream: Duplex, recorder: WebSocketRecorder, maxPayload: number): Promise<void> {
  const tap = frameTap(recorder, maxPayload)
  const fromClient = tap.client
  const fromServer = tap.server
  return new Promise((resolve) => {
    let failure: Error | undefined
    let done = false
    let closeWait: NodeJS.Timeout | undefined
    const toClient = (bytes: Buffer) => !client.destroyed && client.write(bytes)
    // A fault rule's fault (the engine put it on the recorder): the app gets the server's frames as it says.
    const faulted =
      recorder.fault &&
      faultServerStream(recorder.fault, maxPayload, {
        deliver: toClient,
        closed: () => (closeWait = setTimeout(() => finish(), CLOSE_WAIT_MS)),
      })
    const finish = () => {
      if (done) return
      done = true
      clearTimeout(closeWait)
      upstream.destroy()
      // Frames a ws_delay holds back still reach a client that is there to get them.
      const held = faulted && !client.destroyed ? faulted.drained() : Promise.resolve()
      void held
        .then(() => {
          faulted?.stop()
          client.destroy()
          return tap.end(failure)
        })
        .finally(resolve)
    }
    upstream.on('data', (chunk: Buffer) => {
      fromServer(chunk)
      if (!(faulted ? faulted.push(chunk) : client.write(chunk))) upstream.pause()
    })
    client.on('drain', () => upstream.resume())
    client.on('data', (chunk: Buffer) => {
      fromClient(chunk)
      if (!upstream.write(chunk)) client.pause()
    })
    upstream.on('drain', () => client.resume())
    const failed = (err: Error) => {
      failure ??= err
      finish()
    }
    upstream
      .on('error', failed)
      .on('close', finish)
      .on('end', () => void (faulted?.drained() ?? Promise.resolve()).then(() => client.end()))
    client
      .on('error', failed)
      .on('close', finish)
      .on('end', () => upstream.end())
    // Either may have been paused while its head was read.
    upstream.resume()
    client.resume()
  })
}

/** Reads both directions of a session frame by frame into `recorder`; `end` writes it, saying how it ended. */
function frameTap(
  recorder: WebSocketRecorder,
  maxPayload: number,
): { client(chunk: Buffer): void; server(chunk: Buffer): void; end(failure?: Error): Promise<void> } {
  let broken: { code: string; message: string } | undefined
  let closeSeen = false
  const reader = (from: 'client' | 'server') => {
    const parser = new FrameParser(maxPayload)
    return (chunk: Buffer) => {
      if (!recorder.recording || broken) return
      try {
        for (const f of parser.push(chunk)) {
          const name = f.opcode === OPCODE.continuation ? 'continuation' : opcodeName(f.opcode)
          if (name === undefined)
            throw Object.assign(new Error(`Cannot read the WebSocket stream: reserved opcode ${f.opcode}.`), { code: WEBSOCKET_PROTOCOL_CODE })
          if (name === 'close') closeSeen = true
          recorder.frame(from, name, f.fin, f.payload)
        }
      } catch (err) {
        broken = { code: (err as { code?: string }).code ?? WEBSOCKET_PROTOCOL_CODE, message: (err as Error).message }
      }
    }
  }
  return {
    client: reader('client'),
    server: reader('server'),
    end: (failure) =>
      recorder.end(
        broken ??
          (closeSeen
            ? undefined
            : {
                code: (failure as { code?: string } | undefined)?.code ?? 'ECONNRESET',
                message: failure?.message ?? 'The connection closed without a close handshake.',
              }),
      ),
  }
}

/**
 * Taps a socket an in-process client owns (the interceptor's live upgrades): what arrives and what the client
 * writes are read into `recorder`, the bytes themselves untouched; the recording ends when the socket closes.
 */
export function tapWebSocket(socket: Duplex, recorder: WebSocketRecorder, maxPayload: number): void {
  if (!recorder.recording) return
  const tap = frameTap(recorder, maxPayload)
  let failure: Error | undefined
  let closeWait: NodeJS.Timeout | undefined
  // Read as they are emitted, without a 'data' listener of our own: one would start the flow before the client
  // attached its reader (undici's WebSocket does so a few turns after the upgrade) and its first bytes would be lost.
  const emit = socket.emit.bind(socket) as (event: string | symbol, ...args: unknown[]) => boolean
  // A fault rule's fault: the client is handed the server's frames as it says (a ws_close's wait for the end is bounded).
  const faulted =
    recorder.fault &&
    faultServerStream(recorder.fault, maxPayload, {
      deliver: (bytes) => !socket.destroyed && emit('data', bytes),
      closed: () => (closeWait = setTimeout(() => socket.destroy(), CLOSE_WAIT_MS)),
    })
  socket.emit = ((event: string | symbol, ...args: unknown[]) => {
    if (event === 'data') {
      tap.server(args[0] as Buffer)
      if (faulted) return faulted.push(args[0] as Buffer)
    }
    return emit(event, ...args)
  }) as Duplex['emit']
  const write = socket.write.bind(socket) as (...args: unknown[]) => boolean
  socket.write = ((chunk: unknown, ...rest: unknown[]) => {
    if (typeof chunk === 'string' || chunk instanceof Uint8Array) tap.client(Buffer.from(chunk as string))
    return write(chunk, ...rest)
  }) as Duplex['write']
  socket.once('error', (err: Error) => (failure ??= err))
  socket.once('close', () => {
    clearTimeout(closeWait)
    faulted?.stop()
    void tap.end(failure)
  })
}

/** What playing a recorded session needs. */
export interface WebSocketPlayOptions {
  pace: Pace
  /** Largest client frame read (the session's body limit). */
  maxPayload: number
  /** A client message the recording cannot answer: the path counts it (Session.refuse) before the close goes out. */
  onMiss(error: ToolReplayError): void
  /** Bytes the client wrote before the session was handed here (held by the path), read first. */
  written?: readonly Uint8Array[]
}

/** The session's timers: every one is cleared when the socket closes, so none outlives it. */
function boundedTimers() {
  const timers = new Set<NodeJS.Timeout>()
  const after = (ms: number, fn: () => void): void => {
    const t = setTimeout(() => {
      timers.delete(t)
      fn()
    }, ms)
    timers.add(t)
  }
  return {
    after,
    /** Resolves after `ms` (at once when it is not positive), unless the session closes first. */
    wait: (ms: number) => new Promise<void>((resolve) => (ms <= 0 ? resolve() : after(ms, resolve))),
    clear: () => {
      for (const t of timers) clearTimeout(t)
      timers.clear()
    },
  }
}

/** A played message's frames: its recorded fragments, the first with its opcode, the others continuations. */
function messageFrames(m: PlayedMessage): Buffer[] {
  const first = OPCODE[m.opcode]
  return m.frames.map((f, i) => encodeFrame(i === 0 ? first : OPCODE.continuation, f, i === m.frames.length - 1))
}

/** The client closes (`payload`): answered as the recording answered it, else with its own code (RFC 6455 5.5.1). */
function closeAnswer(conversation: WebSocketConversation, payload: Uint8Array): Uint8Array {
  const code = readClosePayload(payload)?.code
  return conversation.closeAnswer ?? (code !== undefined && code !== 1005 ? closePayload(code, '') : new Uint8Array())
}

/** What a client's frames come to, as playWebSocket reads them. */
interface ClientFrames {
  ping(payload: Uint8Array): void
  /** A whole message (fragments joined), or the client's close. */
  message(opcode: 'text' | 'binary' | 'close', bytes: Uint8Array): void
  /** Frames that break the protocol (1002) or a message over the limit (1009): the session closes with `code`. */
  refuse(code: number, reason: string): void
}

/** Reads a client's frames chunk by chunk: pings, whole messages (fragments joined up to `maxPayload`), closes. */
function clientReader(maxPayload: number, on: ClientFrames): (chunk: Buffer) => void {
  const parser = new FrameParser(maxPayload)
  let fragments: { opcode: 'text' | 'binary'; parts: Buffer[]; size: number } | undefined
  return (chunk) => {
    let frames: ReturnType<FrameParser['push']>
    try {
      frames = parser.push(chunk)
    } catch {
      on.refuse(1002, 'protocol error')
      return
    }
    for (const f of frames) {
      // What RFC 6455 (5.4, 5.5) makes a protocol error, a server closes with 1002: a fragmented or long control
      // frame, a new message inside a fragmented one, a continuation of none, a reserved opcode.
      const control = f.opcode >= 0x8
      const broken = control
        ? !f.fin || f.payload.byteLength > 125 || (f.opcode !== OPCODE.ping && f.opcode !== OPCODE.pong && f.opcode !== OPCODE.close)
        : f.opcode === OPCODE.continuation
          ? fragments === undefined
          : fragments !== undefined || (f.opcode !== OPCODE.text && f.opcode !== OPCODE.binary)
      if (broken) {
        on.refuse(1002, 'protocol error')
        return
      }
      if (f.opcode === OPCODE.ping) on.ping(f.payload)
      else if (f.opcode === OPCODE.close) on.message('close', f.payload)
      else if (f.opcode === OPCODE.text || f.opcode === OPCODE.binary) {
        if (f.fin) on.message(f.opcode === OPCODE.text ? 'text' : 'binary', f.payload)
        else fragments = { opcode: f.opcode === OPCODE.text ? 'text' : 'binary', parts: [Buffer.from(f.payload)], size: f.payload.byteLength }
      } else if (f.opcode === OPCODE.continuation && fragments) {
        fragments.parts.push(Buffer.from(f.payload))
        fragments.size += f.payload.byteLength
        if (fragments.size > maxPayload) {
          on.refuse(1009, 'message too big')
          return
        }
        if (f.fin) {
          const m = fragments
          fragments = undefined
          on.message(m.opcode, Buffer.concat(m.parts))
        }
      }
    }
  }
}

/**
 * Plays a recorded session to a client whose 101 was already written: unprompted server messages at their
 * offsets from the open, answers when their client message arrives, pings answered with pongs, a close answered
 * with a close. A miss closes the session with MISS_CLOSE_CODE and a reason naming TR_REPLAY_MISS. Every wait is
 * bounded: the close handshake waits CLOSE_WAIT_MS at most.
 */
export function playWebSocket(socket: Duplex, conversation: WebSocketConversation, options: WebSocketPlayOptions): Promise<void> {
  const timers = boundedTimers()
  let queue: Promise<void> = Promise.resolve()
  let closing = false
  const done = new Promise<void>((resolve) =>
    socket.on('close', () => {
      timers.clear()
      resolve()
    }),
  )
  const write = (bytes: Buffer) => {
    if (!socket.destroyed && socket.writable) socket.write(bytes)
  }
  let clientClosed = false
  /** Both close frames crossed: the server side ends the connection (RFC 6455 7.1.1). */
  const closed = (): void => void socket.end(() => socket.destroy())
  const close = (payload: Uint8Array) => {
    if (closing) return
    closing = true
    write(encodeFrame(OPCODE.close, payload))
    if (clientClosed) {
      closed()
      return
    }
    // The client's close should follow; a client that never sends it does not hold the socket.
    timers.after(CLOSE_WAIT_MS, () => socket.destroy())
  }
  const send = (m: PlayedMessage) => {
    if (closing) return
    if (m.opcode === 'close') {
      close(m.frames[0] ?? new Uint8Array())
      return
    }
    for (const frame of messageFrames(m)) write(frame)
  }
  /** Sends `list` in order after what is queued, each at its offset from now (pace permitting). */
  const schedule = (list: Scheduled[], last: boolean) => {
    const from = performance.now()
    for (const s of list) {
      queue = queue.then(async () => {
        await timers.wait(from + releaseAtMs(options.pace, s.afterMs) - performance.now())
        send(s.message)
      })
    }
    // The recording ended without a close handshake after its last answer: so does the replay.
    if (last && conversation.end) queue = queue.then(() => void (closing || socket.destroy()))
  }
  const fromClient = (opcode: 'text' | 'binary' | 'close', bytes: Uint8Array) => {
    if (opcode === 'close') {
      clientClosed = true
      if (closing) {
        closed()
        return
      }
      close(closeAnswer(conversation, bytes))
      return
    }
    const turn = conversation.client(opcode, bytes)
    if (turn.kind === 'miss') {
      options.onMiss(turn.error)
      close(closePayload(MISS_CLOSE_CODE, `TR_REPLAY_MISS: message #${conversation.received} matches nothing recorded`))
      return
    }
    schedule(turn.messages, conversation.finished)
  }
  const read = clientReader(options.maxPayload, {
    ping: (payload) => write(encodeFrame(OPCODE.pong, payload)),
    message: fromClient,
    refuse: (code, reason) => close(closePayload(code, reason)),
  })
  socket.on('data', read)
  socket.on('error', () => socket.destroy())
  socket.on('end', () => (closing ? socket.destroy() : close(new Uint8Array())))
  socket.resume()
  schedule(conversation.opening(), conversation.finished)
  for (const bytes of options.written ?? []) read(Buffer.from(bytes))
  return done
}
