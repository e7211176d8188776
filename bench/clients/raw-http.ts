/**
 * The lightest HTTP/1.1 load a bench can put on a server: GETs on `connections` keep-alive sockets, each
 * written again as soon as the answer before it is whole. An answer is read as far as it must be to know where
 * it ends (status line, headers, then Content-Length bytes) and counts when its status is 200 and its body has
 * `bodyBytes` bytes; anything else (another status, no Content-Length, a closed socket) is an error. It takes
 * about half autocannon's CPU per request (20-23 against 32-44 us, 30,000 requests to a bare node:http server,
 * 2026-12-08), so the server measured, not the generator, sets the pace (the proxy-get suite's load-generator
 * rows say which did).
 */
import { connect, type Socket } from 'node:net'

export interface RawJob {
  kind: 'raw'
  url: string
  /** The request target, verbatim: origin-form (`/kb`) or absolute-form (`http://bench.test/kb`). */
  path: string
  host?: string
  amount: number
  connections: number
  bodyBytes: number
}

export interface RawResult {
  total: number
  errors: number
  ms: number
}

const HEAD_END = Buffer.from('\r\n\r\n')
const LENGTH = /\r\ncontent-length: *(\d+)\r\n/i

/** Runs `job`; resolves once every request is answered or failed (a socket that fails fails its requests). */
export function rawLoad(job: RawJob): Promise<RawResult> {
  const { hostname, port } = new URL(job.url)
  const request = Buffer.from(`GET ${job.path} HTTP/1.1\r\nhost: ${job.host ?? `${hostname}:${port}`}\r\n\r\n`, 'latin1')
  let started = 0
  let total = 0
  let errors = 0
  let open = 0
  const t0 = performance.now()
  return new Promise((resolve) => {
    const ended = () => {
      if (--open === 0) resolve({ total, errors, ms: performance.now() - t0 })
    }
    const next = (socket: Socket): void => {
      if (started >= job.amount) {
        socket.end()
        return
      }
      started++
      socket.write(request)
    }
    for (let i = 0; i < Math.min(job.connections, job.amount); i++) {
      open++
      const socket = connect(Number(port), hostname)
      socket.setNoDelay(true)
      let pending: Buffer | undefined
      // The body bytes still to skip of the answer being read, or -1 while its head is not whole.
      let rest = -1
      socket.on('connect', () => next(socket))
      socket.on('data', (chunk: Buffer): void => {
        let data = pending ? Buffer.concat([pending, chunk]) : chunk
        pending = undefined
        while (data.length > 0) {
          if (rest < 0) {
            const end = data.indexOf(HEAD_END)
            if (end < 0) {
              pending = data
              return
            }
            const head = data.toString('latin1', 0, end + 2)
            const length = LENGTH.exec(head)
            if (!head.startsWith('HTTP/1.1 200 ') || !length || Number(length[1]) !== job.bodyBytes) {
              errors++
              socket.destroy()
              return
            }
            rest = Number(length[1])
            data = data.subarray(end + 4)
          }
          const take = Math.min(rest, data.length)
          rest -= take
          data = data.subarray(take)
          if (rest > 0) return
          rest = -1
          total++
          next(socket)
        }
      })
      socket.on('error', () => {})
      socket.on('close', () => {
        // Requests written on this socket and never answered are lost.
        if (rest !== -1 || pending) errors++
        ended()
      })
    }
  })
}
