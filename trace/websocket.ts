/**
 * WebSocket sessions in a trace (RFC 6455): a session is one exchange whose request is the upgrade, whose
 * outcome is the 101 response, and whose `websocket` field holds every message both ways (exchange.ts).
 * Pure helpers here: close payloads, the bodies a session references, and the key replay matches a client
 * message by (its content, volatile fields left out by rule, as MCP messages are matched).
 */
import { sha256 } from './digest.ts'
import type { BodyRef, Exchange, WebSocketMessage, WebSocketOpcode } from './exchange.ts'
import { canonicalJson, isExactNumber, tryParseJson } from './json-codec.ts'

/** The status a WebSocket upgrade is answered with (RFC 6455 4.2.2). */
export const SWITCHING_PROTOCOLS = 101

/**
 * JSON keys (at any depth) left out when a client text message is matched against the recording: ids and
 * clocks a client mints per run (OpenAI Realtime's `event_id`, JSON-RPC's `id`, timestamps).
 */
export const WEBSOCKET_VOLATILE_KEYS: readonly string[] = ['event_id', 'id', 'timestamp', 'created_at', 'ts']

/** Close codes an endpoint may send (RFC 6455 7.4: 1000-1014 less the reserved ones, and 3000-4999). */
export function isSendableCloseCode(code: number): boolean {
  if (!Number.isInteger(code)) return false
  if (code >= 3000 && code <= 4999) return true
  return code >= 1000 && code <= 1014 && code !== 1004 && code !== 1005 && code !== 1006
}

/** A close payload's code and reason (UTF-8), or undefined for an empty one. */
export function readClosePayload(bytes: Uint8Array): { code: number; reason: string } | undefined {
  if (bytes.byteLength < 2) return undefined
  const code = (bytes[0] as number) * 256 + (bytes[1] as number)
  return { code, reason: Buffer.from(bytes.buffer, bytes.byteOffset + 2, bytes.byteLength - 2).toString('utf8') }
}

/** The payload of a close frame with `code` and `reason` (the reason cut to fit 125 bytes). */
export function closePayload(code: number, reason: string): Uint8Array {
  let text = Buffer.from(reason, 'utf8')
  if (text.byteLength > 123)
    text = Buffer.from(
      text
        .subarray(0, 120)
        .toString('utf8')
        .replace(/\uFFFD+$/, ''),
      'utf8',
    )
  const out = Buffer.alloc(2 + text.byteLength)
  out.writeUInt16BE(code, 0)
  text.copy(out, 2)
  return out
}

/** The bodies a WebSocket session references (its messages' payloads), with where each is used. */
export function websocketBodyRefs(x: Exchange): Array<[BodyRef, string]> {
  const out: Array<[BodyRef, string]> = []
  const messages = x.websocket?.messages
  if (!messages) return out
  for (let i = 0; i < messages.length; i++) out.push([(messages[i] as WebSocketMessage).body, `exchange #${x.seq} websocket message #${i}`])
  return out
}

/**
 * The key a client message is matched by: a JSON text message as canonical JSON without the volatile keys;
 * any other message as its opcode and the digest of its bytes (binary payloads match byte for byte).
 */
export function websocketMatchKey(opcode: WebSocketOpcode, bytes: Uint8Array, volatile: readonly string[] = WEBSOCKET_VOLATILE_KEYS): string {
  if (opcode === 'text') {
    const parsed = tryParseJson(bytes)
    if (parsed !== undefined && typeof parsed.value === 'object' && parsed.value !== null) {
      return `json:${canonicalJson(withoutKeys(parsed.value, new Set(volatile), 0))}`
    }
  }
  return `${opcode}:${sha256(bytes)}`
}

/** A JSON value without the given keys at any depth (bounded: nesting past 64 levels is kept as it is). */
function withoutKeys(value: unknown, keys: ReadonlySet<string>, depth: number): unknown {
  if (depth > 64 || value === null || typeof value !== 'object' || isExactNumber(value)) return value
  if (Array.isArray(value)) return value.map((v) => withoutKeys(v, keys, depth + 1))
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value)) if (!keys.has(k)) out[k] = withoutKeys(v, keys, depth + 1)
  return out
}
