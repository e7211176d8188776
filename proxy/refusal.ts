/**
 * Carries out an engine refusal on the proxy path: the client gets the engine's refusal response (403,
 * `x-should-retry: false`, provider-shaped JSON; see capture/refusal.ts), the same one the interceptor
 * plays into fetch.
 */
import type { ServerResponse } from 'node:http'
import { refusalResponse } from '../capture/index.ts'
import type { ToolReplayError } from '../trace/index.ts'

/** Answers a refused request, or drops the connection if a response head already went out. */
export function sendRefusal(res: ServerResponse, error: ToolReplayError): void {
  if (res.headersSent) {
    res.socket?.destroy()
    return
  }
  const r = refusalResponse(error)
  res.writeHead(r.status, r.statusText, r.headers as Array<[string, string]>)
  res.end(r.body)
}

/** The refusal as raw HTTP/1.1 bytes, for a socket taken over by an upgrade; the connection closes after it. */
export function refusalBytes(error: ToolReplayError): Buffer {
  const r = refusalResponse(error)
  const head = [`HTTP/1.1 ${r.status} ${r.statusText}`, ...r.headers.map(([k, v]) => `${k}: ${v}`), 'connection: close', '', ''].join('\r\n')
  return Buffer.concat([Buffer.from(head, 'latin1'), r.body])
}
