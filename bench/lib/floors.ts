/**
 * Floors: what the least implementation of a requirement costs on a suite's workload, measured beside ours in the
 * same rounds, so a target can be read against what is possible at all. Each floor is a bare undici Dispatcher
 * that does only what the requirement itself demands and nothing a product needs besides (no session, matching,
 * occurrence, validation, redaction or store); neither is a peer a user would pick.
 * - `ChunkFloor`: chunk-exact replay through fetch. It hands the app's handler each chunk it was given, from
 *   memory, one macrotask apart where the runtime needs it: on Node 22 and 24 fetch's body stream merges chunks
 *   handed over together (its Readable's read() gives the reader all it holds), and the dispatcher API has no
 *   signal that the app has read, so a macrotask is the least that keeps reads apart; Node 26's read() gives one
 *   chunk at a time, and there the floor hands every chunk over at once.
 * - `answerFetchFloor`: chunk-exact replay on the global fetch answered at the fetch level (as ours does there):
 *   each call goes through Node's fetch with a dispatcher that answers the head and an empty body, and the app
 *   gets a Response over a byte stream that hands it one chunk per read, from memory. No session, matching or
 *   Response subclass; what a fetch-level answer that keeps fetch's byte stream costs at the least.
 * - `RecordFloor`: recording in-process. It forwards through an undici Agent and keeps what a recording needs
 *   of each exchange: a copy of the request body and of every response chunk as it passes, the SHA-256 of each
 *   whole body, the response body joined at its end; then it drops them (a store's write is not included).
 */
import { createHash, type Hash } from 'node:crypto'
import { type Agent, Dispatcher } from 'undici'
// The replay's own probe (internal, through the folder's door): the floor separates chunks exactly where ours does.
import { readableKeepsChunksApart } from '../../interceptor/index.ts'

type Handler = Dispatcher.DispatchHandler
type Controller = Dispatcher.DispatchController

/** A response the chunk floor plays: status, headers and the chunks as they were written. */
export interface FloorResponse {
  statusCode: number
  headers: Record<string, string>
  chunks: Buffer[]
}

/** A controller for a played response: the floor honours an abort and nothing else (the bench never pauses). */
class PlayController implements Controller {
  aborted = false
  paused = false
  reason: Error | null = null
  rawHeaders = null
  rawTrailers = null
  pause(): void {}
  resume(): void {}
  abort(reason?: Error): void {
    this.aborted = true
    this.reason = reason ?? null
  }
}

/** Chunk-exact replay from memory: chunks a macrotask apart where the runtime needs it (see the file comment). */
export class ChunkFloor extends Dispatcher {
  readonly #answer: (path: string) => FloorResponse
  readonly #keptApart = readableKeepsChunksApart()

  constructor(answer: (path: string) => FloorResponse) {
    super()
    this.#answer = answer
  }

  override dispatch(opts: Dispatcher.DispatchOptions, handler: Handler): boolean {
    const res = this.#answer(opts.path)
    const controller = new PlayController()
    handler.onRequestStart?.(controller, {})
    let i = 0
    const next = (): void => {
      if (controller.aborted) return void handler.onResponseError?.(controller, controller.reason ?? new Error('aborted'))
      if (this.#keptApart) while (i < res.chunks.length) handler.onResponseData?.(controller, res.chunks[i++] as Buffer)
      else if (i < res.chunks.length) handler.onResponseData?.(controller, res.chunks[i++] as Buffer)
      if (i < res.chunks.length) setImmediate(next)
      else handler.onResponseEnd?.(controller, {})
    }
    queueMicrotask(() => {
      handler.onResponseStart?.(controller, res.statusCode, res.headers, 'OK')
      setImmediate(next)
    })
    return true
  }
}

/** The handler Node's fetch gives a dispatcher: the legacy callbacks (Node 22, 24) or the controller API (Node 26). */
type AnyHandler = Partial<Handler> & {
  onConnect?(abort: () => void): void
  onHeaders?(status: number, raw: Buffer[], resume: () => void, text: string): unknown
  onComplete?(trailers: Buffer[]): void
}

/** A dispatcher answering every request with a 200 event-stream head and an empty body, in either handler API. */
class HeadOnly {
  get isMockActive(): boolean {
    return true
  }

  dispatch(_opts: Dispatcher.DispatchOptions, handler: AnyHandler): boolean {
    queueMicrotask(() => {
      if (handler.onResponseStart) {
        const controller = new PlayController()
        handler.onRequestStart?.(controller, {})
        handler.onResponseStart(controller, 200, { 'content-type': 'text/event-stream' }, 'OK')
        handler.onResponseEnd?.(controller, {})
        return
      }
      handler.onConnect?.(() => {})
      handler.onHeaders?.(200, [Buffer.from('content-type'), Buffer.from('text/event-stream')], () => {}, 'OK')
      handler.onComplete?.([])
    })
    return true
  }
}

/**
 * Makes the global fetch answer at the fetch level from memory (see the file comment) until the returned
 * function runs.
 */
export function answerFetchFloor(answer: (path: string) => FloorResponse): () => void {
  const original = globalThis.fetch
  const dispatcher = new HeadOnly()
  globalThis.fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const res = await original(input, { ...init, dispatcher } as RequestInit)
    const chunks = answer(new URL(res.url).pathname).chunks
    let i = 0
    const body = new ReadableStream(
      {
        type: 'bytes',
        pull(controller) {
          const chunk = chunks[i++]
          if (chunk) controller.enqueue(new Uint8Array(chunk))
          else {
            controller.close()
            controller.byobRequest?.respond(0)
          }
        },
      },
      { highWaterMark: 0 },
    )
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers })
  }
  return () => {
    globalThis.fetch = original
  }
}

/** Copies and hashes a request body as the client sends it (a string, bytes, or an async iterable of bytes). */
function teeRequestBody(body: unknown, hash: Hash, copies: Buffer[]): unknown {
  if (body === undefined || body === null) return body
  if (typeof body === 'string' || body instanceof Uint8Array) {
    const bytes = Buffer.from(body as string)
    hash.update(bytes)
    copies.push(bytes)
    return body
  }
  const source = body as AsyncIterable<Uint8Array>
  return (async function* () {
    for await (const chunk of source) {
      hash.update(chunk)
      copies.push(Buffer.from(chunk))
      yield chunk
    }
  })()
}

/** Recording's least work in-process (see the file comment). `recorded` counts the exchanges it kept. */
export class RecordFloor extends Dispatcher {
  readonly #upstream: Agent
  recorded = 0

  constructor(upstream: Agent) {
    super()
    this.#upstream = upstream
  }

  override dispatch(opts: Dispatcher.DispatchOptions, handler: Handler): boolean {
    const requestHash = createHash('sha256')
    const requestCopies: Buffer[] = []
    const body = teeRequestBody(opts.body, requestHash, requestCopies)
    const responseHash = createHash('sha256')
    const chunks: Buffer[] = []
    const done = (): void => {
      // What a store would be handed: both digests and both bodies whole.
      requestHash.digest('hex')
      responseHash.digest('hex')
      Buffer.concat(requestCopies)
      Buffer.concat(chunks)
      this.recorded++
    }
    const tee: Handler = {
      onRequestStart: (c, context) => handler.onRequestStart?.(c, context),
      onRequestUpgrade: (c, status, headers, socket) => handler.onRequestUpgrade?.(c, status, headers, socket),
      onResponseStart: (c, status, headers, text) => handler.onResponseStart?.(c, status, headers, text),
      onResponseData: (c, chunk) => {
        chunks.push(Buffer.from(chunk))
        responseHash.update(chunk)
        handler.onResponseData?.(c, chunk)
      },
      onResponseEnd: (c, trailers) => {
        done()
        handler.onResponseEnd?.(c, trailers)
      },
      onResponseError: (c, err) => handler.onResponseError?.(c, err),
    }
    return this.#upstream.dispatch({ ...opts, body: body as Dispatcher.DispatchOptions['body'] }, tee)
  }
}
