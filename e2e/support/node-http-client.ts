/** A node:http(s) client for e2e tests: one request, and everything the app would observe about it. */
import http from 'node:http'
import https from 'node:https'
import { type InstallOptions, install } from 'tool-replay/interceptor'
import type { TraceStore } from 'tool-replay/store'

/** What the app saw: status, headers, the body and how many reads it took, or the error and where it came. */
export interface NodeHttpResult {
  status?: number
  statusText?: string
  /** Raw header list as the app gets it (`res.rawHeaders`). */
  rawHeaders?: string[]
  /** Body bytes received (latin1, so binary bodies compare exactly). */
  body: string
  /** Reads the app made: `'data'` events, iterations of `for await`, or `read()` calls that returned data. */
  reads: number
  /** The first error: on the request (`req.on('error')`) or the response (`res.on('error')`). */
  error?: { on: 'request' | 'response'; code?: string; message: string; syscall?: string }
}

export interface NodeHttpCallOptions extends https.RequestOptions {
  body?: string | Buffer
  /**
   * How the app reads: `'data'` events (flowing, the default), `for await` over the response, or `read()` on
   * each `'readable'` (which takes everything buffered at once).
   */
  read?: 'data' | 'iterate' | 'readable'
}

/** Makes one request with `http.request`/`https.request` and reports what the app observed. */
export function nodeHttpCall(url: string, options: NodeHttpCallOptions = {}): Promise<NodeHttpResult> {
  const { body, read = 'data', ...requestOptions } = options
  const client = url.startsWith('https:') ? https : http
  return new Promise((resolve) => {
    const result: NodeHttpResult = { body: '', reads: 0 }
    let settled = false
    const settle = () => {
      if (settled) return
      settled = true
      // Both req and res may report: let the second land first so the first one stays recorded.
      setImmediate(() => resolve(result))
    }
    const noteError = (on: 'request' | 'response') => (err: Error & { code?: string; syscall?: string }) => {
      result.error ??= { on, message: err.message, ...(err.code ? { code: err.code } : {}), ...(err.syscall ? { syscall: err.syscall } : {}) }
      settle()
    }
    const req = client.request(url, requestOptions, (res) => {
      result.status = res.statusCode
      result.statusText = res.statusMessage
      result.rawHeaders = res.rawHeaders
      res.on('error', noteError('response'))
      if (read === 'iterate') {
        void (async () => {
          try {
            for await (const chunk of res) {
              result.reads++
              result.body += Buffer.from(chunk as Buffer).toString('latin1')
            }
          } catch (err) {
            noteError('response')(err as Error)
          }
          settle()
        })()
        return
      }
      if (read === 'readable') {
        res.on('readable', () => {
          for (let chunk = res.read() as Buffer | null; chunk !== null; chunk = res.read() as Buffer | null) {
            result.reads++
            result.body += chunk.toString('latin1')
          }
        })
      } else {
        res.on('data', (chunk: Buffer) => {
          result.reads++
          result.body += chunk.toString('latin1')
        })
      }
      res.on('end', settle)
      res.on('close', settle)
    })
    req.on('error', noteError('request'))
    req.end(body)
  })
}

/** Runs `scenario` with Tool Replay installed (fetch and node:http) in `mode` on `trace`, then uninstalls. */
export async function inSession<T>(
  store: TraceStore,
  mode: InstallOptions['mode'],
  trace: string,
  scenario: () => Promise<T>,
  extra: Partial<InstallOptions> = {},
) {
  const tr = await install({ mode, trace, store, ...extra })
  try {
    const result = await scenario()
    return { result, summary: tr.summary(), assertDone: () => tr.assertDone() }
  } finally {
    await tr.close()
  }
}

/** The body of a GET made with `http.get`, as an app's loop reads it; rejects with the first error. */
export async function nodeGetBytes(url: string): Promise<Buffer> {
  const r = await nodeHttpCall(url)
  if (r.error) throw Object.assign(new Error(`${r.error.on}: ${r.error.message}`), { code: r.error.code })
  return Buffer.from(r.body, 'latin1')
}
