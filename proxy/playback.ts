import type { ServerResponse } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Playback } from '../engine/index.ts'
import type { HeaderPairs } from '../trace/index.ts'
import { hasHeader, stripHopByHop } from './headers.ts'
import { sendUpstreamError } from './responses.ts'

/**
 * How replay paces a response: 'none' sends the head and every chunk at once (chunk boundaries kept);
 * 'recorded' waits the recorded time to the head and between chunks (for streaming UIs and timeouts).
 */
export type Pace = 'none' | 'recorded'

/**
 * Plays a recorded response, or a recorded failure, back to the client. Returns a promise only when
 * there is something to wait for (pacing, back-pressure, a dying connection); an unpaced response of
 * one chunk is written in the caller's tick.
 */
export function writePlayback(res: ServerResponse, playback: Playback, pace: Pace): Promise<void> | undefined {
  if (pace === 'none' && playback.kind === 'response' && playback.trailers.length === 0 && playback.chunks.length <= 1) {
    // Fast path: head and body in one write, as a plain server would send them.
    res.writeHead(playback.head.status, playback.head.statusText || undefined, stripHopByHop(playback.head.headers))
    res.end(playback.chunks[0]?.bytes)
    return undefined
  }
  return writeSlowly(res, playback, pace)
}

async function writeSlowly(res: ServerResponse, playback: Playback, pace: Pace): Promise<void> {
  if (pace === 'recorded' && playback.headersMs > 0) await sleep(playback.headersMs)
  if (playback.kind === 'error' && !playback.head) {
    // Failed before any response head: the client gets what the proxy sent while recording.
    sendUpstreamError(res, playback.error.code, playback.error.phase, playback.error.message)
    return
  }
  const head = playback.kind === 'response' ? playback.head : (playback.head as NonNullable<typeof playback.head>)
  res.writeHead(head.status, head.statusText || undefined, stripHopByHop(head.headers))
  let last = 0
  for (const chunk of playback.chunks) {
    if (pace === 'recorded' && chunk.atMs > last) await sleep(chunk.atMs - last)
    last = Math.max(last, chunk.atMs)
    if (res.destroyed) return
    if (!res.write(chunk.bytes)) await waitDrain(res)
  }
  if (playback.kind === 'error') {
    // Recorded failure after the head: the partial body, then the connection dies as it did.
    await new Promise<void>((resolve) => res.write('', () => resolve()))
    res.socket?.destroy()
    return
  }
  if (playback.trailers.length > 0 && !hasHeader(head.headers, 'content-length')) res.addTrailers(trailersObject(playback.trailers))
  res.end()
}

/**
 * A recorded head as `writeHead` takes it: node:http accepts [name, value] pairs as they are, so the only
 * work is dropping hop-by-hop fields (none, usually, and then no copy). Not cached: strict replay plays
 * each recorded exchange once, so a per-head cache only missed and grew.
 */
function waitDrain(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done)
      res.off('close', done)
      resolve()
    }
    res.on('drain', done)
    res.on('close', done)
  })
}

/** Trailers as the flat array `addTrailers` takes. */
export function trailersObject(trailers: HeaderPairs): Array<[string, string]> {
  return trailers.map(([k, v]) => [k, v])
}
