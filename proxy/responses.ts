import type { ServerResponse } from 'node:http'
import { ERROR_HEADER, REFUSAL_STATUS } from '../capture/index.ts'
import { type ErrorCode, ErrorCodes } from '../trace/index.ts'

/** Status of the proxy's own refusals (strict replay miss, overrun, closed session): the engine's, see capture/refusal.ts. */
export const REFUSED_STATUS = REFUSAL_STATUS

/** Status when the upstream itself failed (connect refused, reset, TLS): the usual gateway error. */
export const UPSTREAM_FAILED_STATUS = 502

/** The header naming the Tool Replay error code on every response the proxy makes itself. */
export { ERROR_HEADER }

/** Answers with one of the proxy's own error responses, or drops the connection if a head already went out. */
export function sendProxyError(res: ServerResponse, status: number, code: ErrorCode | string, message: string, extra: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.socket?.destroy()
    return
  }
  const body = Buffer.from(`${message}\n`)
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': String(body.byteLength),
    [ERROR_HEADER]: code,
    ...extra,
  })
  res.end(body)
}

/** The response for an upstream failure, identical when recorded live and when replayed. */
export function sendUpstreamError(res: ServerResponse, code: string, phase: string, message: string): void {
  sendProxyError(
    res,
    UPSTREAM_FAILED_STATUS,
    ErrorCodes.UPSTREAM_FAILED,
    `Upstream failed: ${code} during ${phase}: ${message}. Check the upstream is reachable (and --upstream-ca / --resolve if it is a test server).`,
    { 'x-tool-replay-upstream-error': code },
  )
}

/** A whole error response as raw bytes, for sockets that have no ServerResponse (CONNECT, bad upgrades); refusals: refusal.ts. */
export function rawErrorResponse(status: number, code: string, message: string): string {
  const body = `${message}\n`
  const reason = STATUS_REASONS[status] ?? 'Error'
  return `HTTP/1.1 ${status} ${reason}\r\ncontent-type: text/plain; charset=utf-8\r\n${ERROR_HEADER}: ${code}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
}

const STATUS_REASONS: Record<number, string> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  503: 'Service Unavailable',
}
