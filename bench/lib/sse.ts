/**
 * The stream workload of issue 16 item 3: SSE streams of 50 events, 2 ms apart when live, read by the app
 * with `for await` over the response body (fetch's body reader), where every read is counted.
 */
import http from 'node:http'
import https from 'node:https'
import type { AddressInfo } from 'node:net'
import type { TraceStore } from 'tool-replay'

export const STREAMS = Number(process.env.BENCH_STREAMS ?? 100)
export const EVENTS = 50
export const GAP_MS = 2
/** Streams read at once. */
export const CONCURRENCY = 10

/** The n-th event of the stream at `path`, as the upstream writes it. */
export const sseEvent = (path: string, n: number): string => `data: {"n":${n},"path":"${path}","text":"event ${n} of ${EVENTS}"}\n\n`

/** The length of the whole stream at `url`. */
export const streamBytes = (url: string): number => {
  const path = new URL(url).pathname
  let n = 0
  for (let i = 0; i < EVENTS; i++) n += Buffer.byteLength(sseEvent(path, i))
  return n
}

/** `?gap=N` sets the gap in ms between events (default GAP_MS); `gap=0` writes them back to back, in one turn. */
function sseHandler(req: http.IncomingMessage, res: http.ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
  const url = new URL(req.url ?? '/', 'http://sse.test')
  const gap = Number(url.searchParams.get('gap') ?? GAP_MS)
  let i = 0
  if (gap === 0) {
    while (i < EVENTS) res.write(sseEvent(url.pathname, i++))
    res.end()
    return
  }
  const next = () => {
    res.write(sseEvent(url.pathname, i))
    if (++i < EVENTS) setTimeout(next, gap)
    else res.end()
  }
  next()
}

/** A live SSE upstream on 127.0.0.1 (HTTPS when given a certificate). */
export async function startSseServer(tls?: { cert: string; key: string }): Promise<{ port: number; close(): void }> {
  const server = tls ? https.createServer(tls, sseHandler) : http.createServer(sseHandler)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as AddressInfo).port,
    close() {
      server.closeAllConnections()
      server.close()
    },
  }
}

/** What the app read of one stream. */
export interface StreamRead {
  reads: number
  bytes: number
}

/** Reads a body to its end, counting reads. */
export async function readCounted(body: AsyncIterable<Uint8Array> | null): Promise<StreamRead> {
  let reads = 0
  let bytes = 0
  if (body) {
    for await (const chunk of body) {
      reads++
      bytes += chunk.byteLength
    }
  }
  return { reads, bytes }
}

/** Runs `fn` for 0..n-1, CONCURRENCY at a time, in order of start. */
export async function inBatches<T>(n: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(n)
  for (let i = 0; i < n; i += CONCURRENCY) {
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, n - i) }, async (_, k) => (out[i + k] = await fn(i + k))))
  }
  return out
}

/** The number of chunks recorded for each exchange's response, by URL. */
export async function recordedChunks(store: TraceStore, trace: string): Promise<Map<string, number>> {
  const out = new Map<string, number>()
  for (const x of (await store.readTrace(trace)).exchanges) {
    if (x.outcome.kind !== 'response') throw new Error(`bench: ${x.request.url} failed while recording`)
    out.set(x.request.url, x.outcome.response.body.chunks.length)
  }
  return out
}

/** How many streams were read in exactly their recorded chunks, and the range of recorded chunk counts. */
export function exactReads(
  urls: readonly string[],
  reads: readonly StreamRead[],
  recorded: Map<string, number>,
): { exact: number; min: number; max: number; meanReads: number } {
  let exact = 0
  const counts = urls.map((u) => recorded.get(u) ?? Number.NaN)
  reads.forEach((r, i) => {
    if (r.reads === counts[i]) exact++
  })
  return { exact, min: Math.min(...counts), max: Math.max(...counts), meanReads: reads.reduce((n, r) => n + r.reads, 0) / reads.length }
}
