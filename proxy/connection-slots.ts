/**
 * Connection slots on the proxy port. At most `maxConnections` client connections are open at once, and a
 * connection keeps its slot only while it does its part: sending a request, or reading the answer.
 * A slow client (slowloris) is one that holds a slot without doing either:
 * - a connection the proxy answers with an error (408 when its head or body is late, 400, 503) is ended and
 *   then destroyed after `closeGraceMs`, whether or not the client reads the answer or keeps sending. (An
 *   `end()` alone leaves the socket half-open for as long as the client keeps writing: it kept its slot.)
 * - at the cap, a new connection takes the slot of the one that has held it longest without a request in
 *   progress (no whole head yet, an idle keep-alive connection), with an answer its client has not read, or with
 *   a request body trickling in below `minBodyBytesPerSecond` (its average since the head), once that one has
 *   held it for EVICTABLE_AFTER_MS; only when none qualifies is the new connection refused (503 TR_PROXY_BUSY).
 *   A slow body is the head dripper's twin: a whole head makes the request "in progress", and Node's request
 *   timeout (300 s) is far too long to wait for the slot.
 * - a client that leaves an answer unread for `clientReadTimeoutMs` (bytes wait for it, none leave) is dropped.
 * - inside a CONNECT tunnel the head and request timeouts are enforced here: Node checks them only for
 *   connections of a server that listens, and the tunnel's HTTP server is handed its sockets.
 * A request in progress whose client sends its body and reads (its answer moving), a WebSocket passed through
 * and a tunnel's request are never evicted. Node's own head and request timeouts (408) stay the first line.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { ErrorCodes } from '../trace/index.ts'
import { resetConnection } from './connection-reset.ts'
import type { ProxyStats } from './exchange-handler.ts'
import { rawErrorResponse } from './responses.ts'

/** A connection must have held its slot this long (without a request in progress) before a newcomer may take it. */
export const EVICTABLE_AFTER_MS = 1000

/** What the slots enforce. */
export interface SlotLimits {
  maxConnections: number
  /** After an error answer, how long the client has to read it before the connection is destroyed. */
  closeGraceMs: number
  /** How long an answer may wait unread (no byte leaving) before the connection is dropped. */
  clientReadTimeoutMs: number
  /** A request's head must arrive within this (also the longest an evictable connection must have waited). */
  headersTimeoutMs: number
  /** ... and its whole request within this. */
  requestTimeoutMs: number
  /** At the cap, a request body arriving slower than this (bytes a second, on average since its head) gives its slot up. */
  minBodyBytesPerSecond: number
}

/** One client connection and what it is doing. */
interface Slot {
  raw: Socket
  /** The socket HTTP is spoken on: the raw one, or a tunnel's TLS socket. */
  http: Duplex
  /** Requests whose answers are not finished. */
  active: number
  requests: number
  /** A WebSocket (or other upgrade) passed through: long-lived by design. */
  upgraded: boolean
  /** A CONNECT tunnel: its head and request timeouts are this file's to enforce. */
  tunnel: boolean
  /**
   * The request in progress, when its head arrived (`req.complete` says whether its body has too), and the bytes
   * read on its connection by then (what came since is its body).
   */
  request: { since: number; req: IncomingMessage; read: number } | undefined
  /** When it last began to wait for a request (accepted, or its last answer finished). */
  idleSince: number
  /** Since when bytes wait for the client without any leaving, and how many had left then. */
  stalled: { since: number; sent: number } | undefined
  /** Its slot was given back early (evicted or dropped); closing it later frees nothing more. */
  released: boolean
}

/**
 * Ends a connection the proxy answered itself (an error, a refusal) and destroys it after `graceMs`, whether or
 * not the client reads or keeps sending.
 */
export function endAndDrop(socket: Duplex, answer: string | Uint8Array | undefined, graceMs: number): void {
  socket.on('error', () => socket.destroy())
  if (socket.destroyed) return
  if (answer === undefined || !socket.writable) socket.end()
  else socket.end(answer)
  const timer = setTimeout(() => socket.destroy(), graceMs)
  timer.unref()
  socket.once('close', () => clearTimeout(timer))
}

/** Admits, tracks, evicts and drops client connections; see the file header. */
export class ConnectionSlots {
  readonly #limits: SlotLimits
  readonly #stats: ProxyStats
  readonly #slots = new Set<Slot>()
  /** Every socket a slot is spoken on (raw and TLS) to its slot. */
  readonly #bySocket = new WeakMap<Duplex, Slot>()
  #open = 0
  readonly #sweep: NodeJS.Timeout

  constructor(limits: SlotLimits, stats: ProxyStats) {
    this.#limits = limits
    this.#stats = stats
    // Node checks its own timeouts on an interval too; unread answers are checked as often.
    const every = Math.max(10, Math.min(1000, Math.floor(Math.min(limits.headersTimeoutMs, limits.clientReadTimeoutMs) / 4)))
    this.#sweep = setInterval(() => {
      this.#dropUnread()
      this.#timeOutTunnels()
    }, every)
    this.#sweep.unref()
  }

  /** A new connection: true when it has a slot (a stale holder may be evicted for it); else it was refused with a 503. */
  admit(socket: Socket): boolean {
    if (this.#open >= this.#limits.maxConnections && !this.#evictOne()) {
      this.#stats.badRequests++
      const message = `Tool Replay proxy has ${this.#limits.maxConnections} connections open, its limit, and none can be given up (each is busy with a request, or opened less than ${EVICTABLE_AFTER_MS} ms ago); retry later or raise --max-connections.`
      endAndDrop(socket, rawErrorResponse(503, ErrorCodes.PROXY_BUSY, message), this.#limits.closeGraceMs)
      return false
    }
    const slot: Slot = {
      raw: socket,
      http: socket,
      active: 0,
      requests: 0,
      upgraded: false,
      tunnel: false,
      request: undefined,
      idleSince: Date.now(),
      stalled: undefined,
      released: false,
    }
    this.#open++
    this.#slots.add(slot)
    this.#bySocket.set(socket, slot)
    socket.once('close', () => this.#release(slot))
    return true
  }

  /** The connection became a CONNECT tunnel. */
  tunneled(socket: Duplex): void {
    const slot = this.#bySocket.get(socket)
    if (slot) slot.tunnel = true
  }

  /**
   * The connection speaks HTTP/2: like an upgraded one it has its own framing, so it is never answered with
   * HTTP/1.1 bytes (a 408, a 503) nor evicted as idle between its streams; the HTTP/2 session's own limits apply.
   */
  http2(socket: Duplex): void {
    const slot = this.#bySocket.get(socket)
    if (slot) slot.upgraded = true
  }

  /** HTTP on this connection now runs on `to` (a tunnel's TLS socket wrapping `from`). */
  layer(from: Duplex, to: Duplex): void {
    const slot = this.#bySocket.get(from)
    if (!slot) return
    slot.http = to
    this.#bySocket.set(to, slot)
  }

  /** Watches both listeners: requests, their answers and upgrades mark a connection busy; their errors drop it. */
  watch(server: Server): void {
    server.on('request', (req: IncomingMessage, res: ServerResponse) => this.#requestStarted(req, res))
    server.on('upgrade', (req: IncomingMessage) => {
      const slot = this.#bySocket.get(req.socket)
      if (slot) slot.upgraded = true
    })
    server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => this.#answerClientError(err, socket))
  }

  /** Stops the sweep (the proxy is closing). */
  close(): void {
    clearInterval(this.#sweep)
  }

  #requestStarted(req: IncomingMessage, res: ServerResponse): void {
    const slot = this.#bySocket.get(req.socket)
    if (!slot) return
    slot.active++
    slot.requests++
    const request = { since: Date.now(), req, read: bytesRead(req.socket) }
    slot.request = request
    res.once('close', () => {
      slot.active--
      if (slot.request === request) slot.request = undefined
      if (slot.active === 0) slot.idleSince = Date.now()
    })
  }

  /** What Node's HTTP parser rejects: a timeout 408, garbage 400 (then dropped after the grace), a reset closes. */
  #answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
    // Taken by the HTTP/2 server (h2c: the parser stopped at the HTTP/2 preface): not an HTTP/1.1 error.
    if (this.#bySocket.get(socket)?.upgraded) return
    this.#stats.badRequests++
    if (!socket.writable || err.code === 'ECONNRESET') {
      socket.destroy()
      return
    }
    const answer =
      err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? rawErrorResponse(408, ErrorCodes.PROXY_BAD_REQUEST, 'The request head or body did not arrive in time.')
        : err.code === 'HPE_PAUSED_H2_UPGRADE'
          ? rawErrorResponse(400, ErrorCodes.PROXY_BAD_REQUEST, 'HTTP/2 with prior knowledge (h2c) is served only when the proxy is started with --h2c.')
          : rawErrorResponse(400, ErrorCodes.PROXY_BAD_REQUEST, `Malformed HTTP request (${err.code ?? err.message}). Send HTTP/1.1 to the proxy.`)
    endAndDrop(socket, answer, this.#limits.closeGraceMs)
  }

  /**
   * Frees the slot held longest by a connection with no request in progress, an unread answer, or a body
   * trickling in too slowly; false if none may go.
   */
  #evictOne(): boolean {
    const now = Date.now()
    const minAge = Math.min(EVICTABLE_AFTER_MS, this.#limits.headersTimeoutMs)
    let victim: Slot | undefined
    let oldest = Number.POSITIVE_INFINITY
    for (const slot of this.#slots) {
      if (slot.released || slot.upgraded) continue
      const since = slot.stalled?.since ?? (slot.active === 0 ? slot.idleSince : this.#slowBodySince(slot, now, minAge))
      if (since === undefined || now - since < minAge || since >= oldest) continue
      victim = slot
      oldest = since
    }
    if (!victim) return false
    this.#stats.badRequests++
    this.#release(victim)
    if (victim.stalled) {
      // It reads nothing: an answer would never arrive, and a close would wait behind its unread bytes.
      resetConnection(victim.http)
      return true
    }
    const max = this.#limits.maxConnections
    const request = victim.active > 0 ? victim.request : undefined
    if (request) {
      const rate = Math.round(((bytesRead(request.req.socket) - request.read) * 1000) / Math.max(1, now - request.since))
      const message = `Tool Replay proxy is at its limit of ${max} connections and this request's body came at ${rate} bytes/s for ${now - request.since} ms, below the minimum of ${this.#limits.minBodyBytesPerSecond}: it was closed to serve another. Send the body faster, or raise --max-connections.`
      endAndDrop(victim.http, rawErrorResponse(503, ErrorCodes.PROXY_BUSY, message), this.#limits.closeGraceMs)
      return true
    }
    // A connection that never sent a whole request is told why; an idle keep-alive one just closes, as servers do.
    const fresh = victim.requests === 0 && victim.http === victim.raw
    const message = `Tool Replay proxy is at its limit of ${max} connections and this one sent no whole request for ${now - oldest} ms: it was closed to serve another. Send requests promptly, or raise --max-connections.`
    endAndDrop(victim.http, fresh ? rawErrorResponse(503, ErrorCodes.PROXY_BUSY, message) : undefined, this.#limits.closeGraceMs)
    return true
  }

  /**
   * When a connection's request body counts as trickling: its head's time, if the body is still incomplete and
   * has come slower than minBodyBytesPerSecond since (averaged over at least `minAge`); else undefined.
   */
  #slowBodySince(slot: Slot, now: number, minAge: number): number | undefined {
    const request = slot.request
    if (!request || request.req.complete || slot.active !== 1) return undefined
    const elapsed = now - request.since
    if (elapsed < minAge) return undefined
    const rate = ((bytesRead(request.req.socket) - request.read) * 1000) / elapsed
    return rate < this.#limits.minBodyBytesPerSecond ? request.since : undefined
  }

  /** Drops connections whose client has left an answer unread for clientReadTimeoutMs. */
  #dropUnread(): void {
    const now = Date.now()
    for (const slot of this.#slots) {
      const waiting = slot.http.writableLength + (slot.http === slot.raw ? 0 : slot.raw.writableLength)
      if (waiting === 0) {
        slot.stalled = undefined
        continue
      }
      const sent = (slot.http as Socket).bytesWritten - slot.http.writableLength
      if (slot.stalled === undefined || slot.stalled.sent !== sent) slot.stalled = { since: now, sent }
      else if (now - slot.stalled.since >= this.#limits.clientReadTimeoutMs) {
        this.#stats.badRequests++
        this.#release(slot)
        // A reset, not a close: a close would keep the kernel sending its unread bytes for minutes.
        resetConnection(slot.http)
      }
    }
  }

  /** In a tunnel, a head later than headersTimeoutMs, or a request later than requestTimeoutMs, gets 408 and goes. */
  #timeOutTunnels(): void {
    const now = Date.now()
    for (const slot of this.#slots) {
      if (!slot.tunnel || slot.upgraded) continue
      const late =
        slot.active === 0
          ? now - slot.idleSince >= this.#limits.headersTimeoutMs
          : slot.request !== undefined && !slot.request.req.complete && now - slot.request.since >= this.#limits.requestTimeoutMs
      if (!late) continue
      this.#stats.badRequests++
      this.#release(slot)
      endAndDrop(slot.http, rawErrorResponse(408, ErrorCodes.PROXY_BAD_REQUEST, 'The request head or body did not arrive in time.'), this.#limits.closeGraceMs)
    }
  }

  #release(slot: Slot): void {
    if (slot.released) return
    slot.released = true
    this.#slots.delete(slot)
    this.#open--
  }
}

/** Bytes read on a connection so far (a tunnel's TLS socket counts what it decrypted). */
function bytesRead(socket: Socket | Duplex): number {
  return (socket as Socket).bytesRead ?? 0
}
