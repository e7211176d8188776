/**
 * Carries out a fault rule's WebSocket fault on a live session, the same for every path that relays or taps one
 * (capture/websocket-session.ts): the server's bytes are read frame by frame and passed on to the app re-framed,
 * less the dropped messages, later from the delayed message on, or ending with a close after the closing message.
 * The engine decided the fault (Session.handleWebSocket puts it on the recorder) and derives from the upstream's
 * frames what the app got (trace/websocket-fault-patch.ts liveWebSocketView); this module only acts on bytes.
 *
 * @note Frames are re-encoded unmasked, as a server sends them; permessage-deflate is negotiated off while recording,
 * so no frame carries RSV bits. A stream the parser cannot read is passed on as it is from the frame it could not
 * read (bytes of it that came in earlier reads included), unfaulted, though behind the frames a ws_delay holds.
 */
import { closePayload, type WebSocketFaultPlan } from '../trace/index.ts'
import { encodeFrame, FrameParser, OPCODE } from './websocket-frames.ts'

/** Where a faulted server stream goes: the app's side of the session. */
export interface FaultedStreamSink {
  /** Passes bytes on to the app; false when its side asks to wait. */
  deliver(bytes: Buffer): boolean
  /** `ws_close` sent its close: the upstream's later frames are swallowed, and the path bounds the wait for the end. */
  closed(): void
}

/** The server's side of a faulted session. */
export interface FaultedServerStream {
  /** Takes the upstream's bytes; false when the app's side asks to wait. */
  push(chunk: Buffer): boolean
  /** Resolves once every delayed frame went out (at once when none waits). */
  drained(): Promise<void>
  /** Drops what still waits (the session is gone). */
  stop(): void
}

/** Applies `plan` to the upstream's frames as they arrive; every wait is a timer that `stop` clears. */
export function faultServerStream(plan: WebSocketFaultPlan, maxPayload: number, sink: FaultedStreamSink): FaultedServerStream {
  const parser = new FrameParser(maxPayload)
  const timers = new Set<NodeJS.Timeout>()
  let idle: Array<() => void> = []
  let broken = false
  let closed = false
  /** The server's data messages begun so far, and the one the current frame belongs to. */
  let count = 0
  let current = 0
  const tail = unsentTail(parser)
  /** Raw bytes of a stream the parser cannot read: behind the frames a ws_delay holds, else at once. */
  const passRaw = (bytes: Buffer): boolean => {
    if (plan.kind === 'ws_delay' && count >= plan.from) {
      later(bytes, plan.ms)
      return true
    }
    return sink.deliver(bytes)
  }
  const settle = () => {
    if (timers.size > 0) return
    for (const r of idle) r()
    idle = []
  }
  const later = (bytes: Buffer, ms: number) => {
    const t = setTimeout(() => {
      timers.delete(t)
      sink.deliver(bytes)
      settle()
    }, ms)
    timers.add(t)
  }
  const frame = (opcode: number, fin: boolean, payload: Uint8Array): boolean => {
    const data = opcode === OPCODE.text || opcode === OPCODE.binary
    if (data) current = ++count
    const ofMessage = data || opcode === OPCODE.continuation
    if (plan.kind === 'ws_drop' && ofMessage && plan.messages.includes(current)) return true
    const bytes = encodeFrame(opcode, payload, fin)
    if (plan.kind === 'ws_delay' && count >= plan.from) {
      later(bytes, plan.ms)
      return true
    }
    const ok = sink.deliver(bytes)
    if (plan.kind === 'ws_close' && ofMessage && fin && current === plan.after) {
      sink.deliver(encodeFrame(OPCODE.close, closePayload(plan.code, plan.reason)))
      closed = true
      sink.closed()
    }
    return ok
  }
  return {
    push(chunk) {
      if (closed) return true
      if (broken) return passRaw(chunk)
      let frames: ReturnType<FrameParser['push']>
      try {
        frames = parser.push(chunk)
      } catch {
        // From the frame begun before this chunk (the frames this push completed were not passed on either).
        broken = true
        return passRaw(tail.with(chunk))
      }
      tail.keep(chunk)
      let ok = true
      for (const f of frames) {
        if (closed) break
        ok = frame(f.opcode, f.fin, f.payload) && ok
      }
      return ok
    },
    drained: () => (timers.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => idle.push(resolve))),
    stop() {
      for (const t of timers) clearTimeout(t)
      timers.clear()
      settle()
    },
  }
}

/** The bytes pushed into `parser` that it still holds (a frame begun, not yet passed on): what a break must still pass on. */
function unsentTail(parser: FrameParser): { keep(chunk: Buffer): void; with(chunk: Buffer): Buffer } {
  const tail: Buffer[] = []
  let size = 0
  return {
    keep(chunk) {
      tail.push(chunk)
      size += chunk.byteLength
      // Whole chunks the parser passed on leave in one splice (a shift each is quadratic in a long tail).
      let passed = 0
      while (passed < tail.length && size - (tail[passed] as Buffer).byteLength >= parser.buffered) size -= (tail[passed++] as Buffer).byteLength
      tail.splice(0, passed)
      if (size > parser.buffered) {
        tail[0] = (tail[0] as Buffer).subarray(size - parser.buffered)
        size = parser.buffered
      }
    },
    with: (chunk) => Buffer.concat([...tail, chunk]),
  }
}
