/**
 * Sends recorded requests live again, for `tr-proxy drift`: one at a time, in the order given, through the
 * proxy's own upstream agent (`--resolve`, `--upstream-ca`, `--insecure-upstream` mean what they mean for
 * `record`) and through a record-mode engine session, so the live answers are redacted exactly as `record`
 * redacts before anything is kept. The session records into an in-memory store: nothing reaches disk here;
 * the caller decides what to write (`drift --update`).
 */
import { type ClientTarget, captureRequest, DEFAULT_PACE, forwardThroughDispatcher } from '../capture/index.ts'
import { type CapturedRequest, openSession, type RedactionOptions } from '../engine/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { ErrorCodes, type Exchange, type ResponseHead, ToolReplayError, type Trace } from '../trace/index.ts'
import { flatten, stripHopByHop } from './headers.ts'
import { createUpstreamAgent, type UpstreamOptions } from './upstream.ts'

/** Options of `resendLive`. */
export interface LiveResendOptions {
  /** Name of the in-memory trace the live answers are recorded as. */
  trace: string
  upstream?: UpstreamOptions
  redaction?: RedactionOptions
  /** Labels of that trace. */
  labels?: Record<string, string>
  /** Called before each request is sent, with its index in `requests`. */
  onSend?: (index: number) => void
  /** The request actually sent for index `i` (drift's fresh MCP session ids), decided when its turn comes. */
  prepare?: (index: number, request: CapturedRequest) => CapturedRequest
  /** The live response head of request `index`, as it came (before redaction). */
  onHead?: (index: number, head: ResponseHead) => void
}

/** What came back: the live trace (redacted, in memory) and, per request index, its live exchange or why there is none. */
export interface LiveResendResult {
  trace: Trace
  answers: Array<{ exchange: Exchange } | { error: ToolReplayError }>
}

/** How long a re-sent request waits for its response head (ms), unless the caller's upstream options say otherwise. */
export const RESEND_HEADERS_TIMEOUT_MS = 30_000
/** How long it waits between two pieces of the response body (ms). */
export const RESEND_BODY_TIMEOUT_MS = 30_000

/** Re-sends `requests` live, one after the other, and returns the redacted live answers. */
export async function resendLive(requests: readonly CapturedRequest[], options: LiveResendOptions): Promise<LiveResendResult> {
  const store = createMemoryStore()
  const agent = createUpstreamAgent(
    { headersTimeoutMs: RESEND_HEADERS_TIMEOUT_MS, bodyTimeoutMs: RESEND_BODY_TIMEOUT_MS, ...options.upstream },
    // Every re-send goes out live: undici is needed now.
    await import('undici'),
  )
  const failures = new Map<number, ToolReplayError>()
  try {
    const session = await openSession({
      mode: 'record',
      trace: options.trace,
      store,
      ...(options.redaction ? { redaction: options.redaction } : {}),
      ...(options.labels ? { labels: options.labels } : {}),
    })
    const capture = { session, pace: DEFAULT_PACE, maxBodyBytes: Number.POSITIVE_INFINITY, drainAfterAbortMs: 0 }
    for (const [i, recorded] of requests.entries()) {
      options.onSend?.(i)
      const request = options.prepare ? options.prepare(i, recorded) : recorded
      // One request through the capture lifecycle, as any path's; nobody waits for the answer but the recording.
      // Each takes the next seq, refused or not: seq i is request i.
      const body = request.body
      await captureRequest(
        {
          ...capture,
          onDecision: (decision) => {
            if (decision.kind === 'fail') failures.set(i, decision.error)
          },
        },
        {
          method: request.method,
          url: request.url,
          headers: [...request.headers],
          readBody: () => ({ bytes: body }),
          client: options.onHead ? { ...NO_CLIENT, head: (head: ResponseHead) => options.onHead?.(i, head) } : NO_CLIENT,
          forward: (bytes, events) => {
            const url = new URL(request.url)
            forwardThroughDispatcher(
              agent,
              {
                origin: url.origin,
                path: `${url.pathname}${url.search}`,
                method: request.method,
                headers: flatten(stripHopByHop(request.headers)),
                body: bytes === null ? null : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
                idempotent: false,
              },
              events,
            )
          },
        },
        session.arrival(),
      )
    }
    await session.close()
    const trace = await store.readTrace(options.trace)
    const bySeq = new Map(trace.exchanges.map((x) => [x.seq, x]))
    const answers = requests.map((_, i) => {
      const failure = failures.get(i)
      const exchange = bySeq.get(i)
      if (exchange) return { exchange }
      return { error: failure ?? new ToolReplayError(ErrorCodes.INTERNAL, `The live answer to request #${i} was not recorded. This is a bug in Tool Replay.`) }
    })
    return { trace, answers }
  } finally {
    await agent.close()
    await store.close()
  }
}

/** The client of a re-sent request: nobody reads the answer, the recording keeps it. */
const NO_CLIENT: ClientTarget = {
  gone: false,
  onGone() {},
  head() {},
  chunk: () => undefined,
  separate: () => Promise.resolve(),
  end() {},
  fail() {},
  failLive() {},
  failWith() {},
}
