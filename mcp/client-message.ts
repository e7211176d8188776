/**
 * A line the MCP client wrote, read as the exchange it becomes (trace/mcp-wire.ts): its kind, the URL that names
 * its method (and tool), the headers that keep its id and progress token, and its params as the body, the
 * progress token written as PROGRESS_TOKEN so requests match by method and params, never by id.
 */
import type { CapturedRequest } from '../engine/index.ts'
import { type HeaderPairs, MCP_ID_HEADER, MCP_MESSAGE_HEADER, MCP_PROGRESS_TOKEN_HEADER, mcpStdioUrl, PROGRESS_TOKEN } from '../trace/index.ts'
import { idKey, type MessageInfo } from './client-target.ts'

/** A client message, read. */
export interface ClientMessage extends MessageInfo {
  kind: 'request' | 'notification' | 'reply'
  text: string
  method: string
  params?: unknown
  captured: CapturedRequest
}

const encoder = new TextEncoder()

/**
 * Reads one client line of server `server`; undefined when it is not a JSON-RPC message. `serverRequests` (id key →
 * method) names what a reply answers.
 */
export function readClientMessage(text: string, server: string, serverRequests: ReadonlyMap<string, string>): ClientMessage | undefined {
  let v: unknown
  try {
    v = JSON.parse(text)
  } catch {
    return undefined
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined
  const o = v as Record<string, unknown>
  if (typeof o.method === 'string') {
    const kind = o.id === undefined ? 'notification' : 'request'
    const tool = o.method === 'tools/call' ? (o.params as { name?: unknown } | undefined)?.name : undefined
    const headers: HeaderPairs = [[MCP_MESSAGE_HEADER, kind]]
    if (kind === 'request') headers.push([MCP_ID_HEADER, idKey(o.id)])
    let params = o.params
    const token = (params as { _meta?: { progressToken?: unknown } } | undefined)?._meta?.progressToken
    if (token !== undefined) {
      headers.push([MCP_PROGRESS_TOKEN_HEADER, idKey(token)])
      const p = params as { _meta: Record<string, unknown> }
      params = { ...p, _meta: { ...p._meta, progressToken: PROGRESS_TOKEN } }
    }
    const url = mcpStdioUrl(server, { kind: 'message', method: o.method, ...(typeof tool === 'string' ? { tool } : {}) })
    const m: ClientMessage = { kind, text, method: o.method, params: o.params, captured: captured(url, headers, params) }
    if (kind === 'request') m.id = o.id
    if (token !== undefined) m.progressToken = token
    return m
  }
  if (o.id === undefined || (o.result === undefined && o.error === undefined)) return undefined
  const method = serverRequests.get(idKey(o.id)) ?? 'unknown'
  const url = mcpStdioUrl(server, { kind: 'reply', method })
  const body = o.error !== undefined ? { error: o.error } : { result: o.result }
  return { kind: 'reply', text, id: o.id, method, captured: captured(url, [[MCP_MESSAGE_HEADER, 'reply']], body) }
}

function captured(url: string, headers: HeaderPairs, body: unknown): CapturedRequest {
  if (body === undefined) return { method: 'POST', url, headers, body: null }
  return { method: 'POST', url, headers: [['content-type', 'application/json'], ...headers], body: encoder.encode(JSON.stringify(body)) }
}
