/**
 * The mixed proxy load of issue 33: N requests over 50 keep-alive connections, answers log-uniform 100 B to
 * 256 KiB (JSON, text, binary; 30% chunked), 30% POSTs with 10 B to 64 KiB bodies, 10% repeats of an earlier
 * request. Deterministic (a seeded generator), so every side sends and expects the same bytes. Also its upstream.
 */
import { createHash } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'

/** One request of the load and the answer it gets (from `payload(size, seed, type)`). */
export interface MixedCall {
  method: 'GET' | 'POST'
  path: string
  body?: Buffer
  size: number
  type: string
  chunked: boolean
  seed: number
}

/** mulberry32: a small seeded generator, so the load is the same in every process. */
function seeded(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const logUniform = (r: () => number, lo: number, hi: number) => Math.floor(Math.exp(Math.log(lo) + r() * (Math.log(hi) - Math.log(lo))))
const TYPES = ['application/json', 'text/plain; charset=utf-8', 'application/octet-stream']

/** The first `n` requests of the load. */
export function mixedLoad(n: number): MixedCall[] {
  const r = seeded(42)
  const calls: MixedCall[] = []
  for (let i = 0; i < n; i++) {
    if (i > 10 && r() < 0.1) {
      calls.push(calls[Math.floor(r() * calls.length)] as MixedCall)
      continue
    }
    const post = r() < 0.3
    const size = logUniform(r, 100, 256 * 1024)
    const type = TYPES[Math.floor(r() * TYPES.length)] as string
    const call: MixedCall = { method: post ? 'POST' : 'GET', path: `/r/${i}?size=${size}`, size, type, chunked: r() < 0.3, seed: i }
    if (post) call.body = payload(logUniform(r, 10, 64 * 1024), i + 1_000_000, 'application/json')
    calls.push(call)
  }
  return calls
}

const SOURCE_BYTES = 1 << 19
let sources: [text: Buffer, binary: Buffer] | undefined

/** `size` bytes of `type` for request `seed`: a slice of one of two fixed blocks (JSON wrapped as an object). */
export function payload(size: number, seed: number, type: string): Buffer {
  if (!sources) {
    const r = seeded(7)
    const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789 '
    const text = Buffer.alloc(SOURCE_BYTES)
    const binary = Buffer.alloc(SOURCE_BYTES)
    for (let i = 0; i < SOURCE_BYTES; i++) {
      text[i] = alphabet.charCodeAt(Math.floor(r() * alphabet.length))
      binary[i] = Math.floor(r() * 256)
    }
    sources = [text, binary]
  }
  const from = (seed * 7919) % (SOURCE_BYTES - size)
  const b = Buffer.from(sources[type === 'application/octet-stream' ? 1 : 0].subarray(from, from + size))
  if (type === 'application/json' && size >= 8) {
    b.write('{"a":"', 0)
    b.write('"}', size - 2)
  }
  return b
}

export const sha256 = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex')

/** The upstream: answers each request from its path and the `x-type` / `x-chunked` headers the client sends. */
export async function startMixedServer(): Promise<{ url: string; connections: () => number; close(): void }> {
  let connections = 0
  const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    req.resume()
    req.on('end', () => {
      const u = new URL(req.url ?? '/', 'http://upstream')
      const body = payload(Number(u.searchParams.get('size')), Number(u.pathname.split('/')[2]), String(req.headers['x-type']))
      if (req.headers['x-chunked'] === '1') {
        res.writeHead(200, { 'content-type': String(req.headers['x-type']) })
        res.write(body.subarray(0, body.length >> 1))
        res.end(body.subarray(body.length >> 1))
      } else {
        res.writeHead(200, { 'content-type': String(req.headers['x-type']), 'content-length': body.length })
        res.end(body)
      }
    })
  })
  server.on('connection', () => connections++)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections: () => connections,
    close() {
      server.closeAllConnections()
      server.close()
    },
  }
}
