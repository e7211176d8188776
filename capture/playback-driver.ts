/**
 * Plays a recorded outcome to a capture path, deciding once, for every path, what goes out when: the head,
 * each recorded chunk (kept apart as its own read unless the pace is `none`), the end or the recorded
 * failure. A capture path only says how to hand each part over (`PlaybackTarget`).
 */
import { setTimeout as sleep } from 'node:timers/promises'
import type { Playback, PlaybackChunk } from '../engine/index.ts'
import { CLIENT_ABORT_CODE, type HeaderPairs, type RecordedError, type ResponseHead } from '../trace/index.ts'
import { keepsChunksApart, type Pace, releaseAtMs } from './pacing.ts'

/** A live response head as its transport received it, for a path that can hand it on without re-encoding. */
export interface WireHead {
  /** Raw header fields, name and value alternating, as undici hands them to handlers. */
  raw: Buffer[]
  /** The same fields parsed (lowercase names, repeats as arrays), when the transport parsed them already. */
  parsed?: unknown
  /** The head ended the response (an HTTP/2 HEADERS frame with END_STREAM): nothing follows it but the end. */
  final?: boolean
}

/** How one capture path hands the parts of a response to its client. */
export interface PlaybackTarget {
  /** True once the client is gone (aborted, socket closed): playback stops quietly. */
  readonly gone: boolean
  /**
   * The response head; `wire` when it comes live from a transport that kept its raw fields. `chunks`: how many
   * chunks follow, when a played body of more than one is at hand (a path may answer such a body differently).
   */
  head(head: ResponseHead, wire?: WireHead, chunks?: number): void
  /** Hands one chunk over; returns a promise when the client asked to wait (back-pressure). */
  chunk(bytes: Uint8Array): void | Promise<void>
  /**
   * Keeps the chunk just handed over apart from the next, so the client reads it on its own. `gapMs`: how long
   * after it the next one was recorded; a path that waits a gap of its own waits at most this long, so a replay
   * is never slower than its recording (the proxy, MCP over a pipe). Undefined when the client reads chunks
   * apart whenever they come (nothing to wait for).
   */
  separate(gapMs: number): Promise<void> | undefined
  end(trailers: HeaderPairs): void
  /**
   * A recorded failure: before any head (`afterHead` false), or after the head and partial body. `injected`:
   * a fault made it, so the client's own connection fails (not the upstream's, which a proxy reports as 502).
   */
  fail(error: RecordedError, afterHead: boolean, injected: boolean): void
  /** Calls `fn` once when the client gives up (a capture path's client; see `holdsOpen`). */
  onGone?(fn: () => void): void
}

/**
 * True when a recorded outcome ends with the client leaving a response that was still open (its head came, the
 * server had not ended it): a stream the app closed, such as an MCP client's background GET stream. Replayed as
 * recorded, it stays open after its recorded chunks until the client leaves again; failing it would be a
 * server failure the recording never saw (and the MCP SDK reconnects a failed stream, a request never recorded).
 */
export function holdsOpen(playback: Playback): boolean {
  return playback.kind === 'error' && playback.head !== undefined && playback.injected !== true && playback.error.code === CLIENT_ABORT_CODE
}

/**
 * Plays `playback` into `target` at `pace`. Returns undefined when everything went out synchronously (a
 * response of at most one chunk, no waits), else a promise that settles when playback is over.
 */
export function drivePlayback(playback: Playback, pace: Pace, target: PlaybackTarget): Promise<void> | undefined {
  if (pace.kind !== 'recorded' && playback.kind === 'response' && Array.isArray(playback.chunks) && playback.chunks.length <= 1) {
    // The common case (a plain JSON answer): no promise, no timer.
    target.head(playback.head)
    const first = playback.chunks[0]
    const waiting = first ? target.chunk(first.bytes) : undefined
    if (waiting === undefined) {
      target.end(playback.trailers)
      return undefined
    }
    return waiting.then(() => {
      if (!target.gone) target.end(playback.trailers)
    })
  }
  return drive(playback, pace, target)
}

async function drive(playback: Playback, pace: Pace, target: PlaybackTarget): Promise<void> {
  const t0 = performance.now()
  // Undefined when there is nothing to wait for: then no await happens and delivery stays in this tick.
  const until = (atMs: number): Promise<unknown> | undefined => {
    const ms = releaseAtMs(pace, atMs) - (performance.now() - t0)
    return ms >= 1 ? sleep(ms) : undefined
  }
  const head = playback.head
  const toHead = until(playback.headersMs)
  if (toHead) await toHead
  if (target.gone) return
  if (!head) {
    const failed = playback as Extract<Playback, { kind: 'error' }>
    target.fail(failed.error, false, failed.injected === true)
    return
  }
  const chunks = playback.chunks
  target.head(head, undefined, Array.isArray(chunks) && chunks.length > 1 ? chunks.length : undefined)
  const delivery = new Delivery(target, keepsChunksApart(pace), until)
  if (Array.isArray(chunks)) {
    for (let i = 0; i < chunks.length; i++) {
      // The first chunk needs no wait unless paced: it goes in this tick, as the socket would hand it over.
      let went = delivery.chunk(chunks[i] as PlaybackChunk, i === 0)
      if (went !== true && went !== false) went = await went
      if (!went) return
    }
  } else {
    let first = true
    try {
      for await (const chunk of chunks) {
        if (!(await delivery.chunk(chunk, first))) return
        first = false
      }
    } catch (err) {
      // A body that could not be read (a damaged store): the client gets what was verified, then a failure.
      // A body still arriving (a faulted forward) fails the same way when its source breaks off.
      const e = err as { code?: unknown; message?: string; injected?: unknown }
      target.fail(
        { code: typeof e.code === 'string' ? e.code : 'TR_INTERNAL', message: e.message ?? String(err), phase: 'response-body' },
        true,
        e.injected === true,
      )
      return
    }
  }
  if (playback.kind === 'response') target.end(playback.trailers)
  else if (holdsOpen(playback) && target.onGone) {
    const onGone = target.onGone.bind(target)
    // No timer: the client's own close or abort ends it, as it did when recorded.
    if (!target.gone) await new Promise<void>((resolve) => onGone(resolve))
  } else target.fail(playback.error, true, playback.injected === true)
}

/**
 * Hands chunks over after the waits each needs: its separation from the one before (never before the first),
 * its release time when paced, the client's back-pressure. A promise only when something had to be waited for,
 * so a chunk that can go at once goes in this tick.
 */
class Delivery {
  readonly #target: PlaybackTarget
  readonly #apart: boolean
  readonly #until: (atMs: number) => Promise<unknown> | undefined
  #previousAtMs = 0

  constructor(target: PlaybackTarget, apart: boolean, until: (atMs: number) => Promise<unknown> | undefined) {
    this.#target = target
    this.#apart = apart
    this.#until = until
  }

  /** True once the chunk went, false when the client went away. */
  chunk(chunk: PlaybackChunk, first: boolean): boolean | Promise<boolean> {
    const target = this.#target
    if (this.#apart && !first) {
      const separated = target.separate(Math.max(0, chunk.atMs - this.#previousAtMs))
      if (separated) return separated.then(() => !target.gone && this.#release(chunk))
      if (target.gone) return false
    }
    return this.#release(chunk)
  }

  #release(chunk: PlaybackChunk): boolean | Promise<boolean> {
    this.#previousAtMs = chunk.atMs
    const toChunk = this.#until(chunk.atMs)
    if (toChunk) return toChunk.then(() => !this.#target.gone && this.#hand(chunk))
    return !this.#target.gone && this.#hand(chunk)
  }

  #hand(chunk: PlaybackChunk): boolean | Promise<boolean> {
    const target = this.#target
    const waiting = target.chunk(chunk.bytes)
    return waiting ? waiting.then(() => !target.gone) : !target.gone
  }
}
