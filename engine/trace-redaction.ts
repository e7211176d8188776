/**
 * A whole trace redacted as a recording would have stored it. What reaches the store from outside a capture
 * path — a trace file import, a HAR import, a fork's output — passes the same Redactor the capture paths use:
 * URL (query parameters, password), headers, trailers, and the configured JSON body paths of every body
 * (requests, responses, partial responses, what a faulted upstream really sent), compressed ones decoded.
 * Bodies no longer referenced (the unredacted originals) are dropped from the trace's body map, so they are
 * never written.
 */
import {
  type BodyRef,
  bodyBytes,
  bodyFromChunks,
  ErrorCodes,
  type Exchange,
  type HeaderPairs,
  headerValue,
  type Outcome,
  type RecordedResponse,
  ToolReplayError,
  type Trace,
  type WebSocketSession,
} from '../trace/index.ts'
import { redactBody } from './body-redaction.ts'
import type { Redactor } from './redaction.ts'
import { DEFAULT_MAX_BODY_BYTES } from './transport-rules.ts'
import { redactTextMessage } from './websocket-recorder.ts'

/** A redacted copy of a trace and how many of its exchanges redaction changed. */
export interface RedactedTrace {
  trace: Trace
  /** Exchanges with at least one value redacted. */
  changed: number
}

/**
 * Redacts every exchange of `trace` (it is not modified). A body that would decode past `maxBodyBytes` cannot
 * be redacted: TR_BODY_NOT_REDACTED names the exchange, and nothing should be stored.
 */
export function redactTrace(trace: Trace, redactor: Redactor, maxBodyBytes = DEFAULT_MAX_BODY_BYTES): RedactedTrace {
  const bodies = new Map<string, Uint8Array>()
  let changed = 0
  const exchanges = trace.exchanges.map((x) => {
    const out = new ExchangeRedaction(trace, redactor, maxBodyBytes, bodies).exchange(x)
    if (out !== x) changed++
    return out
  })
  return { trace: { meta: trace.meta, exchanges, bodies }, changed }
}

class ExchangeRedaction {
  readonly #trace: Trace
  readonly #redactor: Redactor
  readonly #maxBytes: number
  /** The new trace's bodies: only those the redacted exchanges reference. */
  readonly #bodies: Map<string, Uint8Array>
  #seq = 0
  #changed = false

  constructor(trace: Trace, redactor: Redactor, maxBytes: number, bodies: Map<string, Uint8Array>) {
    this.#trace = trace
    this.#redactor = redactor
    this.#maxBytes = maxBytes
    this.#bodies = bodies
  }

  /** The exchange redacted, or `x` itself when nothing in it needed redaction. */
  exchange(x: Exchange): Exchange {
    this.#seq = x.seq
    const url = this.#redactor.url(x.request.url)
    if (url !== x.request.url) this.#changed = true
    const requestHeaders = this.#headers(x.request.headers)
    const request = x.request.body
      ? { ...x.request, url, ...this.#body(x.request.body, requestHeaders, 'request') }
      : { ...x.request, url, headers: requestHeaders }
    const outcome = this.#outcome(x.outcome, 'response')
    const upstream = x.fault?.upstream ? this.#outcome(x.fault.upstream, 'upstream response') : undefined
    const websocket = x.websocket ? this.#websocket(x.websocket) : undefined
    if (!this.#changed) return x
    return { ...x, request, outcome, ...(websocket ? { websocket } : {}), ...(x.fault ? { fault: { ...x.fault, upstream: upstream ?? null } } : {}) }
  }

  /** A WebSocket session's messages: text ones through body redaction as the recorder does; every payload kept. */
  #websocket(ws: WebSocketSession): WebSocketSession {
    const messages = ws.messages.map((m) => {
      const bytes = bodyBytes(this.#trace, m.body)
      const redacted = m.opcode === 'text' ? redactTextMessage(this.#redactor, bytes) : bytes
      if (redacted === bytes) {
        this.#bodies.set(m.body.digest, bytes)
        return m
      }
      this.#changed = true
      const body = bodyFromChunks([{ bytes: redacted, atMs: m.body.chunks.at(-1)?.atMs ?? m.atMs }])
      this.#bodies.set(body.ref.digest, body.bytes)
      return { ...m, body: body.ref }
    })
    return { ...ws, messages }
  }

  #outcome(o: Outcome, use: string): Outcome {
    if (o.kind === 'response') return { kind: 'response', response: this.#response(o.response, use) }
    return o.error.partial ? { kind: 'error', error: { ...o.error, partial: this.#response(o.error.partial, `partial ${use}`) } } : o
  }

  #response(r: RecordedResponse, use: string): RecordedResponse {
    const trailers = this.#headers(r.trailers)
    return { ...r, trailers, ...this.#body(r.body, this.#headers(r.headers), use) }
  }

  #headers(pairs: HeaderPairs): HeaderPairs {
    const out = this.#redactor.headers(pairs)
    if (out !== pairs) this.#changed = true
    return out
  }

  /** A body and the headers that describe it, redacted; the body's bytes are kept for the new trace. */
  #body(ref: BodyRef, headers: HeaderPairs, use: string): { body: BodyRef; headers: HeaderPairs } {
    const bytes = bodyBytes(this.#trace, ref)
    const r = redactBody(this.#redactor, bytes, headers, this.#maxBytes)
    if (r === 'too-large') {
      throw new ToolReplayError(
        ErrorCodes.BODY_NOT_REDACTED,
        `Failed to redact trace "${this.#trace.meta.name}": the ${use} body of exchange #${this.#seq} decodes (content-encoding ${headerValue(headers, 'content-encoding')}) to more than ${this.#maxBytes} bytes, so its JSON body paths cannot be read whole; nothing was stored. Re-record that exchange, or remove its body from the file first.`,
        { details: { trace: this.#trace.meta.name, seq: this.#seq, body: use, maxBodyBytes: this.#maxBytes } },
      )
    }
    if (r === 'unchanged') {
      this.#bodies.set(ref.digest, bytes)
      return { body: ref, headers }
    }
    this.#changed = true
    // A redacted body no longer has its wire chunking (or encoding): one chunk, at the time the last one came.
    const redacted = bodyFromChunks([{ bytes: r.bytes, atMs: ref.chunks.at(-1)?.atMs ?? 0 }])
    this.#bodies.set(redacted.ref.digest, redacted.bytes)
    return { body: redacted.ref, headers: r.headers }
  }
}
