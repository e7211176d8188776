/**
 * WebSocket upgrades on the proxy (forward, CONNECT + TLS, reverse, and so sealed runs): a live upgrade is sent
 * to the upstream and, once it switched protocols, relayed byte for byte while capture/websocket-session.ts
 * reads its frames into the recorder; a replayed one is answered here (the 101 with an accept computed for this
 * client's key) and played. An upstream that does not switch is relayed and recorded as an HTTP exchange.
 *
 * @note permessage-deflate is negotiated off: while recording, the client's Sec-WebSocket-Extensions offer is
 * not passed to the upstream, so every recorded payload is plain (and a replayed session never compresses).
 */
import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Pace } from '../capture/index.ts'
import { playWebSocket, relayWebSocket, switchedHeaders } from '../capture/index.ts'
import { type Playback, type Session, WebSocketConversation, type WebSocketPlayback, type WebSocketRecorder } from '../engine/index.ts'
import { ErrorCodes, type HeaderPairs, headerValue, type ResponseHead } from '../trace/index.ts'
import { endAndDrop } from './connection-slots.ts'
import { connectRaw, type UpstreamOptions } from './upstream.ts'

/** Longest upstream response head read before a 101 or another answer (bytes), and how long it may take. */
const MAX_HEAD_BYTES = 64 * 1024
const HEAD_TIMEOUT_MS = 30_000

/** What relaying or playing an upgrade needs from the proxy. */
export interface WebSocketContext {
  upstream: UpstreamOptions
  closeGraceMs: number
  pace: Pace
  maxBodyBytes: number
}

/** Sends the upgrade upstream; relays (and records) a switched session, or relays and records the upstream's other answer. */
export async function relayUpgrade(
  req: IncomingMessage,
  client: Duplex,
  head: Buffer,
  target: URL,
  ctx: WebSocketContext,
  recorder: WebSocketRecorder,
): Promise<void> {
  const secure = target.protocol === 'https:' || target.protocol === 'wss:'
  const port = Number(target.port) || (secure ? 443 : 80)
  let upstream: Duplex
  try {
    upstream = await connectRaw(ctx.upstream, target.hostname, port, secure)
  } catch (err) {
    void recorder.http().fail({ code: (err as { code?: string }).code ?? 'ECONNREFUSED', message: (err as Error).message }, 'connect')
    const message = `Upstream failed: ${(err as Error).message}`
    endAndDrop(
      client,
      `HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\nx-tool-replay-error: ${ErrorCodes.UPSTREAM_FAILED}\r\ncontent-length: ${Buffer.byteLength(message)}\r\nconnection: close\r\n\r\n${message}`,
      ctx.closeGraceMs,
    )
    return
  }
  const lines = [`${req.method} ${target.pathname}${target.search} HTTP/1.1`]
  const raw = req.rawHeaders
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string
    if (/^proxy-/i.test(name)) continue
    if (recorder.recording && /^sec-websocket-extensions$/i.test(name)) continue
    lines.push(`${name}: ${raw[i + 1]}`)
  }
  upstream.write(`${lines.join('\r\n')}\r\n\r\n`)
  if (head.byteLength > 0) upstream.write(head)
  let answer: { head: ResponseHead; raw: Buffer; rest: Buffer }
  try {
    answer = await readResponseHead(upstream)
  } catch (err) {
    upstream.destroy()
    client.destroy()
    void recorder.http().fail({ code: (err as { code?: string }).code ?? 'ECONNRESET', message: (err as Error).message }, 'response-headers')
    return
  }
  client.write(answer.raw)
  if (answer.head.status === 101) {
    recorder.opened(answer.head)
    if (answer.rest.byteLength > 0) upstream.unshift(answer.rest)
    await relayWebSocket(client, upstream, recorder, ctx.maxBodyBytes)
    return
  }
  await relayRefusedUpgrade(client, upstream, answer, recorder)
}

/** The upstream answered the upgrade with a plain response: the client gets it byte for byte, the trace an exchange. */
function relayRefusedUpgrade(client: Duplex, upstream: Duplex, answer: { head: ResponseHead; rest: Buffer }, recorder: WebSocketRecorder): Promise<void> {
  const http = recorder.http()
  http.responseStart(answer.head)
  const length = Number(headerValue(answer.head.headers, 'content-length') ?? Number.NaN)
  let received = 0
  return new Promise((resolve) => {
    let ended = false
    const end = (error?: Error) => {
      if (ended) return
      ended = true
      upstream.destroy()
      client.end()
      const done = error ? http.fail({ code: (error as { code?: string }).code ?? 'ECONNRESET', message: error.message }, 'response-body') : http.responseEnd()
      void done.finally(resolve)
    }
    const take = (chunk: Buffer) => {
      const part = Number.isFinite(length) ? chunk.subarray(0, Math.max(0, length - received)) : chunk
      received += part.byteLength
      if (part.byteLength > 0) {
        void http.responseData(part)
        client.write(part)
      }
      if (Number.isFinite(length) && received >= length) end()
    }
    if (answer.rest.byteLength > 0) take(answer.rest)
    if (ended) return
    upstream.on('data', take)
    upstream.on('end', () => end())
    upstream.on('error', (err: Error) => end(err))
    client.on('close', () => end())
  })
}

/** Reads an HTTP/1.1 response head (bounded in size and time); `rest` is what followed it. */
function readResponseHead(socket: Duplex): Promise<{ head: ResponseHead; raw: Buffer; rest: Buffer }> {
  return new Promise((resolve, reject) => {
    let seen = Buffer.alloc(0)
    const timer = setTimeout(
      () => fail(Object.assign(new Error(`The upstream sent no response head within ${HEAD_TIMEOUT_MS} ms.`), { code: 'ETIMEDOUT' })),
      HEAD_TIMEOUT_MS,
    )
    const fail = (err: Error) => {
      cleanup()
      reject(err)
    }
    const onData = (chunk: Buffer) => {
      // Bounded: at most MAX_HEAD_BYTES are ever joined.
      seen = Buffer.concat([seen, chunk])
      const at = seen.indexOf('\r\n\r\n')
      if (at < 0) {
        if (seen.byteLength > MAX_HEAD_BYTES)
          fail(Object.assign(new Error(`The upstream's response head is over ${MAX_HEAD_BYTES} bytes.`), { code: 'UND_ERR_HEADERS_OVERFLOW' }))
        return
      }
      cleanup()
      socket.pause()
      const text = seen.subarray(0, at).toString('latin1')
      const [status, ...fields] = text.split('\r\n')
      const m = /^HTTP\/1\.[01] (\d{3}) ?(.*)$/.exec(status ?? '')
      if (!m)
        return reject(
          Object.assign(new Error(`The upstream answered with ${JSON.stringify((status ?? '').slice(0, 60))}, not an HTTP/1.1 status line.`), {
            code: 'UND_ERR_SOCKET',
          }),
        )
      const headers: HeaderPairs = []
      for (const line of fields) {
        const colon = line.indexOf(':')
        if (colon > 0) headers.push([line.slice(0, colon).trim(), line.slice(colon + 1).trim()])
      }
      resolve({ head: { status: Number(m[1]), statusText: m[2] ?? '', headers }, raw: seen.subarray(0, at + 4), rest: seen.subarray(at + 4) })
    }
    const onEnd = () => fail(Object.assign(new Error('The upstream closed the connection before answering the upgrade.'), { code: 'UND_ERR_SOCKET' }))
    const cleanup = () => {
      clearTimeout(timer)
      socket.off('data', onData).off('error', fail).off('end', onEnd)
    }
    socket.on('data', onData).on('error', fail).on('end', onEnd)
  })
}

/**
 * Answers a replayed upgrade: the recorded 101 (with an accept for this client's key) and the recorded session
 * played, or the recorded refusal (an upstream that had not switched) as raw HTTP/1.1.
 */
export async function playUpgrade(
  req: IncomingMessage,
  client: Duplex,
  decision: { playback: Playback; websocket?: WebSocketPlayback },
  ctx: WebSocketContext,
  session: Session,
  label: string,
): Promise<void> {
  const ws = decision.websocket
  if (!ws) return writeRecordedAnswer(client, decision.playback, ctx.closeGraceMs)
  const key = req.headers['sec-websocket-key']
  const fields = switchedHeaders(ws.head, typeof key === 'string' ? key : '')
  const lines = [`HTTP/1.1 101 ${ws.head.statusText || 'Switching Protocols'}`, ...fields.map(([k, v]) => `${k}: ${v}`)]
  client.write(`${lines.join('\r\n')}\r\n\r\n`)
  const conversation = new WebSocketConversation(ws, label, session.trace)
  await playWebSocket(client, conversation, {
    pace: ctx.pace,
    maxPayload: ctx.maxBodyBytes,
    onMiss: (error) => session.refuse({ method: req.method ?? 'GET', url: label.replace(/^GET /, '') }, error),
  })
}

/** A recorded non-101 answer to an upgrade, as raw HTTP/1.1 bytes; the connection closes after it. */
async function writeRecordedAnswer(client: Duplex, playback: Playback, closeGraceMs: number): Promise<void> {
  const head = playback.kind === 'response' ? playback.head : playback.head
  if (!head) {
    client.destroy()
    return
  }
  const parts: Buffer[] = []
  for await (const c of playback.chunks) parts.push(Buffer.from(c.bytes))
  const body = Buffer.concat(parts)
  const fields = head.headers.filter(([k]) => !/^(connection|transfer-encoding|content-length)$/i.test(k))
  const text = [
    `HTTP/1.1 ${head.status} ${head.statusText}`,
    ...fields.map(([k, v]) => `${k}: ${v}`),
    `content-length: ${body.byteLength}`,
    'connection: close',
    '',
    '',
  ].join('\r\n')
  endAndDrop(client, Buffer.concat([Buffer.from(text, 'latin1'), body]), closeGraceMs)
}
