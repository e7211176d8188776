import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import { ErrorCodes } from '../trace/index.ts'
import { endAndDrop } from './connection-slots.ts'
import { connectRaw, type UpstreamOptions } from './upstream.ts'

/**
 * Passes an Upgrade request (WebSocket) through to the upstream byte for byte. Not recorded: the trace
 * model holds request/response exchanges, not message streams. Strict replay refuses upgrades instead
 * (see proxy-server.ts), so replay still never opens a connection.
 */
export async function passUpgradeThrough(
  req: IncomingMessage,
  client: Duplex,
  head: Buffer,
  target: URL,
  options: UpstreamOptions,
  closeGraceMs: number,
): Promise<void> {
  const secure = target.protocol === 'https:' || target.protocol === 'wss:'
  const port = Number(target.port) || (secure ? 443 : 80)
  let upstream: Duplex
  try {
    upstream = await connectRaw(options, target.hostname, port, secure)
  } catch (err) {
    const message = `Upstream failed: ${(err as Error).message}`
    endAndDrop(
      client,
      `HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\nx-tool-replay-error: ${ErrorCodes.UPSTREAM_FAILED}\r\ncontent-length: ${Buffer.byteLength(message)}\r\nconnection: close\r\n\r\n${message}`,
      closeGraceMs,
    )
    return
  }
  const lines = [`${req.method} ${target.pathname}${target.search} HTTP/1.1`]
  const raw = req.rawHeaders
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string
    if (/^proxy-/i.test(name)) continue
    lines.push(`${name}: ${raw[i + 1]}`)
  }
  upstream.write(`${lines.join('\r\n')}\r\n\r\n`)
  if (head.byteLength > 0) upstream.write(head)
  const destroyBoth = () => {
    upstream.destroy()
    client.destroy()
  }
  upstream.on('error', destroyBoth).on('close', destroyBoth)
  client.on('error', destroyBoth).on('close', destroyBoth)
  upstream.pipe(client)
  client.pipe(upstream)
}
