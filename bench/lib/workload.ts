/**
 * The in-process workload of issue 16 item 3: 2,000 sequential fetch calls, 50% GET of a 1 KB JSON body, 40%
 * POST of a distinct ~1 KB JSON body, 10% GET of 256 KB; deterministic, so every side replays the same thing.
 * Also its upstream (node:http on 127.0.0.1) and the loop that drives it through any fetch.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'

/** One call of the workload and what the upstream answers to it. */
export interface Call {
  method: 'GET' | 'POST'
  path: string
  body?: string
  response: string | Buffer
  contentType: string
}

const small = (i: number) => JSON.stringify({ id: i, kind: 'small', pad: 'x'.repeat(1000 - 40 - String(i).length) })
const big = Buffer.alloc(256 * 1024, 'abcdefghijklmnopqrstuvwxyz0123456789')

/** The first `n` calls of the workload. */
export function workload(n: number): Call[] {
  const calls: Call[] = []
  for (let i = 0; i < n; i++) {
    const r = i % 10
    if (r < 5) calls.push({ method: 'GET', path: `/small/${i}`, response: small(i), contentType: 'application/json' })
    else if (r < 9) {
      const body = JSON.stringify({ op: 'create', seq: i, payload: 'p'.repeat(980 - String(i).length) })
      calls.push({ method: 'POST', path: `/echo/${i}`, body, response: `{"ok":true,"len":${body.length},"seq":${i}}`, contentType: 'application/json' })
    } else calls.push({ method: 'GET', path: `/big/${i}`, response: big, contentType: 'application/octet-stream' })
  }
  return calls
}

/** The upstream: answers each call's path with its response (404 otherwise). */
export async function startWorkloadServer(calls: readonly Call[]): Promise<{ url: string; close(): void }> {
  const byPath = new Map(calls.map((c) => [c.path, c]))
  const server = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      const call = byPath.get(req.url ?? '/')
      if (!call) {
        res.writeHead(404)
        res.end()
        return
      }
      res.writeHead(200, { 'content-type': call.contentType })
      res.end(call.response)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close() {
      server.closeAllConnections()
      server.close()
    },
  }
}

/** A fetch as the app calls it (the built-in one, undici's with a dispatcher bound, or a patched global). */
export type FetchLike = (
  url: string,
  init?: { method?: string; body?: string; headers?: Record<string, string> },
) => Promise<{
  status: number
  arrayBuffer(): Promise<ArrayBuffer>
}>

/** Runs every call in order through `fetch`, reading each body whole and checking status and length; returns ms. */
export async function drive(base: string, calls: readonly Call[], fetch: FetchLike): Promise<number> {
  const t0 = performance.now()
  for (const c of calls) {
    const res = await fetch(
      `${base}${c.path}`,
      c.body === undefined ? undefined : { method: 'POST', body: c.body, headers: { 'content-type': 'application/json' } },
    )
    const bytes = await res.arrayBuffer()
    const expected = typeof c.response === 'string' ? Buffer.byteLength(c.response) : c.response.byteLength
    if (res.status !== 200 || bytes.byteLength !== expected) throw new Error(`bench: ${c.method} ${c.path} gave ${res.status} with ${bytes.byteLength} bytes`)
  }
  return performance.now() - t0
}
