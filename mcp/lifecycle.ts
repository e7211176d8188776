/**
 * The life of one MCP client message as an exchange: its place in the session's arrival order, the engine's
 * decision, and the decision's parts in the form the MCP conversation carries out (a replayed transcript, a
 * recorder for a forwarded message, or a refusal).
 *
 * TO BE REPLACED by the shared `capture/` layer (issue 16) once it lands on main: it owns a request's life
 * (arrival ticket, body limit, abort race, replay / refusal / forward, the live tee) for every capture path.
 * This file is the MCP path's copy of exactly those steps, kept small and in one place so it can be ported:
 * the protocol (framing, id mapping, notification order) stays in conversation.ts and never comes here.
 */
import type { CapturedRequest, Decision, ExchangeRecorder, Mode, Playback, PlaybackChunk, RemoteSession, Session } from '../engine/index.ts'
import type { Exchange, FaultKind, RecordedError } from '../trace/index.ts'

/** What the MCP path needs of a session: its mode and trace, and a decision per message in arrival order. */
export interface SessionPort {
  readonly mode: Mode
  readonly trace: string
  /** Takes an arrival ticket now and decides on its turn (the engine's `Session.handle`). */
  decide(captured: CapturedRequest): Promise<Decision>
}

/** A port on a session in this process. */
export function localPort(session: Session): SessionPort {
  return {
    mode: session.mode,
    trace: session.trace,
    decide: async (captured) => {
      const ticket = session.arrival()
      return ticket.turn(() => session.handle(captured))
    },
  }
}

/** A port on a session another process owns (found with `findSharedSession`). */
export function remotePort(remote: RemoteSession): SessionPort {
  return { mode: remote.mode, trace: remote.trace, decide: (captured) => remote.handle(captured) }
}

/** A transcript line to play: its text and when it came, in ms after the message. */
export interface PlayedLine {
  text: string
  atMs: number
  /** The recorded chunk the line ended in: lines of different chunks reached the client in different reads. */
  chunk: number
}

/** A recorded (or made-up) answer, read whole: its transcript lines and, for a recorded failure, the error. */
export interface PlayedAnswer {
  lines: PlayedLine[]
  error?: RecordedError
  /** A fault made this failure (the app's own "connection" fails). */
  injected: boolean
}

/** What the conversation does with one client message. */
export type MessageDecision =
  | { kind: 'replay'; exchange: Exchange; answer: Promise<PlayedAnswer>; fault?: FaultKind }
  | { kind: 'forward'; recorder: ExchangeRecorder; client?: Promise<PlayedAnswer>; fault?: FaultKind }
  | { kind: 'fail'; code: string; message: string }

/** Asks the session about one client message and turns the decision into MessageDecision. */
export async function decideMessage(port: SessionPort, captured: CapturedRequest): Promise<MessageDecision> {
  let decision: Decision
  try {
    decision = await port.decide(captured)
  } catch (err) {
    const e = err as { code?: string; message?: string }
    return { kind: 'fail', code: e.code ?? 'TR_INTERNAL', message: e.message ?? String(err) }
  }
  if (decision.kind === 'fail') return { kind: 'fail', code: decision.error.code, message: decision.error.message }
  const fault = decision.fault?.kind
  if (decision.kind === 'replay') return { kind: 'replay', exchange: decision.exchange, answer: readPlayback(decision.playback), ...(fault ? { fault } : {}) }
  return {
    kind: 'forward',
    recorder: decision.recorder,
    ...(decision.client ? { client: decision.client.then(readPlayback) } : {}),
    ...(fault ? { fault } : {}),
  }
}

/** Reads a playback whole (an MCP transcript is small) and splits it into lines, each timed by the chunk that ended it. */
export async function readPlayback(p: Playback): Promise<PlayedAnswer> {
  const chunks: PlaybackChunk[] = []
  if (Array.isArray(p.chunks)) chunks.push(...p.chunks)
  else for await (const c of p.chunks) chunks.push(c)
  const lines: PlayedLine[] = []
  let pending = ''
  const decoder = new TextDecoder()
  for (const [chunk, c] of chunks.entries()) {
    pending += decoder.decode(c.bytes, { stream: true })
    let nl = pending.indexOf('\n')
    while (nl >= 0) {
      const text = pending.slice(0, nl).replace(/\r$/, '')
      if (text !== '') lines.push({ text, atMs: c.atMs, chunk })
      pending = pending.slice(nl + 1)
      nl = pending.indexOf('\n')
    }
  }
  pending += decoder.decode()
  if (pending.trim() !== '') lines.push({ text: pending, atMs: chunks.at(-1)?.atMs ?? 0, chunk: chunks.length - 1 })
  if (p.kind === 'response') return { lines, injected: false }
  return { lines, error: p.error, injected: p.injected === true }
}
