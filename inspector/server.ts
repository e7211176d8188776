/**
 * The inspector's HTTP server: the page (static, built at build time, no CDN) and the JSON API under /api/
 * that the page is a thin client of. Binds 127.0.0.1 by default; every request passes the guard (token, Host;
 * Origin and header token on POST, see guard.ts). Errors are the tool's typed errors:
 * `{ ok: false, error: { code, message, details } }` with an HTTP status that fits the code.
 */
import { randomBytes } from 'node:crypto'
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { FaultsConfig } from '../faults/index.ts'
import type { TraceStore } from '../store/index.ts'
import { ErrorCodes, isToolReplayError, ToolReplayError } from '../trace/index.ts'
import { compareRuns, type EmitRequest, emitRunCase, type ForkRequest, faultEvidence, forkRun } from './actions.ts'
import { type AnswerRequest, answerMiss } from './answer-miss.ts'
import { loadAssets } from './assets.ts'
import { type ApprovedCommand, approveCommand } from './command-gate.ts'
import { exchangeView } from './exchange-view.ts'
import { checkRequest, policyFor, TOKEN_COOKIE, TOKEN_HEADER } from './guard.ts'
import { type LabRequest, LabRuns } from './lab-runs.ts'
import { type RerunEvent, Reruns } from './rerun.ts'
import { FILTERS, type Filter, RunIndexes, search } from './run-index.ts'
import { summarize } from './run-summary.ts'
import { listRuns, runHead, runsAgainst, StatsCache, TIMELINE_PAGE, timelinePage, timelineRows } from './run-view.ts'

const { createServer } = process.getBuiltinModule('node:http') // not `import`: see trace/patch.ts

/** Options of `startInspector`. */
export interface InspectorOptions {
  store: TraceStore
  /** The store's directory (reruns open it from their own process). */
  storeDir: string
  /** Default 127.0.0.1. Anything else exposes the store to the network. */
  host?: string
  /** Default 0: any free port. */
  port?: number
  /** The token the page must present; default 24 random bytes. */
  token?: string
  /** Where "promote to test" writes cases. */
  casesDir: string
  /** A faults file whose contracts and effects are checked on faulted runs. */
  contracts?: FaultsConfig
  /** How often the store is polled for live updates, ms. Default 250. */
  livePollMs?: number
}

/** A running inspector. */
export interface Inspector {
  /** The URL to open, token included. */
  url: string
  origin: string
  token: string
  port: number
  close(): Promise<void>
}

/** Largest JSON request body the API reads. */
const MAX_REQUEST_BYTES = 1024 * 1024

type Handler = (req: IncomingMessage, res: ServerResponse, params: string[], query: URLSearchParams) => Promise<unknown>

/**
 * Starts the inspector on a loopback port.
 * @example
 * const inspector = await startInspector({ store, storeDir, casesDir: 'test/cases' })
 * console.log(inspector.url) // http://127.0.0.1:43121/?token=...
 */
export async function startInspector(o: InspectorOptions): Promise<Inspector> {
  const assets = await loadAssets()
  const token = o.token ?? randomBytes(24).toString('base64url')
  const host = o.host ?? '127.0.0.1'
  const stats = new StatsCache(o.store, o.contracts)
  const reruns = new Reruns(o.store, o.storeDir)
  const lab = new LabRuns()
  const live = new LiveRuns(o.store, o.livePollMs ?? 250)
  const routes = apiRoutes(o, stats, new RunIndexes(), { reruns, lab, live })
  const context: ActionContext = { options: o, reruns, lab }

  const server: Server = createServer((req, res) => {
    void handle(req, res).catch((err) => sendError(res, err))
  })
  let policy = policyFor(token, host, 0)
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://inspector.invalid')
    checkRequest(
      {
        method: req.method ?? 'GET',
        host: req.headers.host,
        origin: req.headers.origin,
        queryToken: url.searchParams.get('token'),
        headerToken: header(req, TOKEN_HEADER),
        cookie: req.headers.cookie,
      },
      policy,
    )
    if (!url.pathname.startsWith('/api/')) return sendAsset(res, url.pathname, assets, token)
    const action = req.method === 'POST' ? POST_ROUTES.find((r) => r.path === url.pathname) : undefined
    if (action) return sendJson(res, 200, { ...(await runAction(action, context, await readJson<unknown>(req))), ok: true })
    for (const [method, re, handler] of routes) {
      const m = re.exec(url.pathname)
      if (!m) continue
      if (req.method !== method) continue
      const result = await handler(
        req,
        res,
        m.slice(1).map((s) => decodeURIComponent(s)),
        url.searchParams,
      )
      if (result !== HANDLED) sendJson(res, 200, { ...(result as object), ok: true })
      return
    }
    throw new ToolReplayError(ErrorCodes.USAGE, `No API ${req.method} ${url.pathname}. The inspector's API is listed in docs/inspector.md.`, {
      details: { status: 404 },
    })
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        new ToolReplayError(
          ErrorCodes.INSPECT_START_FAILED,
          `Cannot start the inspector on ${host}:${o.port ?? 0}: ${err.code ?? err.message}. Pick another --port (0 = any free port).`,
          { cause: err },
        ),
      ),
    )
    server.listen(o.port ?? 0, host, () => resolve())
  })
  const port = (server.address() as AddressInfo).port
  policy = policyFor(token, host, port)
  const hostPart = host.includes(':') ? `[${host}]` : host
  const origin = `http://${hostPart}:${port}`
  live.start()
  return {
    url: `${origin}/?token=${token}`,
    origin,
    token,
    port,
    async close() {
      live.stop()
      reruns.close()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** The API's reads (GET): method, path pattern, handler. Each handler calls the library code the matching CLI command calls. */
function apiRoutes(
  o: InspectorOptions,
  stats: StatsCache,
  indexes: RunIndexes,
  { reruns, lab, live }: { reruns: Reruns; lab: LabRuns; live: LiveRuns },
): Array<[string, RegExp, Handler]> {
  const selector = (q: URLSearchParams) => (q.get('partial') === '1' ? { partial: true } : {})
  return [
    ['GET', /^\/api\/runs$/, async () => ({ runs: await listRuns(o.store, stats) })],
    [
      'GET',
      /^\/api\/runs\/([^/]+)$/,
      async (_q, _r, [name], q) => {
        const reader = await o.store.openTrace(name as string, selector(q))
        // The store's listing tells a recording whose process is alive from one whose process died.
        const listed = reader.info.status === 'complete' ? undefined : (await o.store.listTraces()).find((t) => t.id === reader.info.id)
        return { run: runHead(reader, listed?.status ?? 'complete', stats), runsAgainst: await runsAgainst(o.store, reader.info.name) }
      },
    ],
    ['GET', /^\/api\/runs\/([^/]+)\/stats$/, async (_q, _r, [name], q) => ({ stats: await stats.of(await o.store.openTrace(name as string, selector(q))) })],
    [
      'GET',
      /^\/api\/runs\/([^/]+)\/timeline$/,
      async (_q, _r, [name], q) => {
        const reader = await o.store.openTrace(name as string, selector(q))
        const seqs = q.get('seqs')
        if (seqs !== null) return { count: reader.info.count, rows: await timelineRows(reader, seqList(seqs)) }
        const from = intParam(q, 'from', 0)
        return { count: reader.info.count, from, rows: await timelinePage(reader, from, intParam(q, 'limit', TIMELINE_PAGE)) }
      },
    ],
    [
      'GET',
      /^\/api\/runs\/([^/]+)\/search$/,
      async (_q, _r, [name], q) => {
        const index = await indexes.of(await o.store.openTrace(name as string, selector(q)))
        return search(index, q.get('q') ?? '', filterList(q.get('filter')))
      },
    ],
    [
      'GET',
      /^\/api\/runs\/([^/]+)\/summary$/,
      async (_q, _r, [name], q) => {
        const index = await indexes.of(await o.store.openTrace(name as string, selector(q)))
        const nesting = index.rows.flatMap((r) => (r.parent ? [[r.seq, r.parent.parent, r.parent.call] as const] : []))
        return { summary: summarize(index), nesting }
      },
    ],
    [
      'GET',
      /^\/api\/runs\/([^/]+)\/exchanges\/(\d+)$/,
      async (_q, _r, [name, seq], q) => ({ exchange: await exchangeView(await o.store.openTrace(name as string, selector(q)), Number(seq)) }),
    ],
    ['GET', /^\/api\/runs\/([^/]+)\/faults$/, async (_q, _r, [name]) => faultEvidence(o.store, name as string, o.contracts)],
    ['GET', /^\/api\/diff$/, async (_q, _r, _p, q) => compareRuns(o.store, need(q, 'a'), need(q, 'b'), viewParam(q))],
    [
      'GET',
      /^\/api\/lab\/(\d+)\/([a-z]+)\.trace\.json$/,
      async (_q, res, [id, policy]) => {
        const f = lab.traceFile(id as string, policy as string)
        res.writeHead(200, { 'content-type': 'application/json', 'content-disposition': `attachment; filename="${f.name}"` })
        res.end(f.text)
        return HANDLED
      },
    ],
    ['GET', /^\/api\/rerun\/([0-9a-f]+)\/events$/, async (req, res, [id]) => rerunEvents(reruns, id as string, req, res)],
    ['GET', /^\/api\/events$/, async (req, res) => live.subscribe(req, res)],
  ]
}

/** What a POST route runs: nothing (it writes the store), the lab's bundled scenarios, or a trace's recorded command. */
export type RouteRuns = 'nothing' | 'bundled-scenario' | 'recorded-command'

/** What the actions need of the inspector. */
interface ActionContext {
  options: InspectorOptions
  reruns: Reruns
  lab: LabRuns
}

type Body = Record<string, unknown>

/** A POST route: what it runs says how the router treats it (command-gate.ts for a recorded command). */
type PostRoute =
  | { path: string; runs: 'nothing' | 'bundled-scenario'; handle: (c: ActionContext, body: Body) => Promise<object> }
  | {
      path: string
      runs: 'recorded-command'
      /** The trace whose recorded command the route runs: the router approves it before `handle`. */
      traceOf: (body: Body) => string
      handle: (c: ActionContext, body: Body, approved: ApprovedCommand) => Promise<object>
    }

/**
 * The API's actions. A route that runs a recorded command gets it only through the router's call to
 * approveCommand (the one confirmation rule): a new route that runs one must say so here, and
 * e2e/inspector-commands.test.ts pins what each route runs.
 */
const POST_ROUTES: readonly PostRoute[] = [
  { path: '/api/fork', runs: 'nothing', handle: (c, body) => forkRun(c.options.store, body as unknown as ForkRequest) },
  { path: '/api/answer', runs: 'nothing', handle: (c, body) => answerMiss(c.options.store, body as unknown as AnswerRequest) },
  {
    path: '/api/emit',
    runs: 'recorded-command',
    traceOf: (body) => String(body.trace),
    handle: (c, body, approved) => emitRunCase(c.options.store, body as unknown as EmitRequest, c.options.casesDir, approved),
  },
  {
    path: '/api/rerun',
    runs: 'recorded-command',
    traceOf: (body) => String(body.trace),
    handle: async (c, body, approved) => {
      const r = await c.reruns.start(approved, body.tail === 'live' ? 'live' : 'strict')
      return { id: r.id, trace: r.trace, recordAs: r.recordAs, tail: r.tail, commandLine: r.commandLine, cwd: r.cwd }
    },
  },
  { path: '/api/lab', runs: 'bundled-scenario', handle: (c, body) => c.lab.run(body as unknown as LabRequest) },
]

/** Each POST route and what it runs (for the tests that hold every route to the confirmation rule). */
export const API_POST_ROUTES: ReadonlyArray<{ path: string; runs: RouteRuns }> = POST_ROUTES.map((r) => ({ path: r.path, runs: r.runs }))

async function runAction(route: PostRoute, c: ActionContext, body: unknown): Promise<object> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `POST ${route.path} takes a JSON object.`, { details: { status: 400 } })
  }
  const b = body as Body
  if (route.runs !== 'recorded-command') return route.handle(c, b)
  const approved = await approveCommand(c.options.store, route.traceOf(b), b.confirm)
  return route.handle(c, b, approved)
}

const HANDLED = Symbol('handled')

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name]
  return Array.isArray(v) ? v[0] : v
}

function intParam(q: URLSearchParams, name: string, fallback: number): number {
  const v = q.get(name)
  if (v === null) return fallback
  const n = Number(v)
  if (!Number.isSafeInteger(n) || n < 0) throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Invalid ${name}=${v}: give a whole number >= 0.`)
  return n
}

/** `seqs=1,5,9`: at most a timeline page of exchange numbers. */
function seqList(v: string): number[] {
  const seqs = v === '' ? [] : v.split(',').map(Number)
  if (seqs.length > TIMELINE_PAGE || !seqs.every((n) => Number.isSafeInteger(n) && n >= 0))
    throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Invalid seqs=${v.slice(0, 80)}: give at most ${TIMELINE_PAGE} exchange numbers, comma-separated.`)
  return seqs
}

/** `filter=model,errors`: the page's filters. */
function filterList(v: string | null): Filter[] {
  const list = (v ?? '').split(',').filter((f) => f !== '')
  const unknown = list.filter((f) => !(FILTERS as readonly string[]).includes(f))
  if (unknown.length > 0) throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Unknown filter ${unknown.join(', ')}: use ${FILTERS.join(', ')}.`)
  return list as Filter[]
}

function need(q: URLSearchParams, name: string): string {
  const v = q.get(name)
  if (!v) throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `The request needs ?${name}=TRACE.`)
  return v
}

function viewParam(q: URLSearchParams): 'llm' | 'http' | undefined {
  const v = q.get('view')
  return v === 'llm' || v === 'http' ? v : undefined
}

async function readJson<T>(req: IncomingMessage): Promise<T> {
  if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) {
    throw new ToolReplayError(ErrorCodes.INVALID_OPTION, 'The inspector API takes JSON: send Content-Type: application/json.', { details: { status: 415 } })
  }
  const parts: Buffer[] = []
  let size = 0
  for await (const chunk of req) {
    size += (chunk as Buffer).byteLength
    if (size > MAX_REQUEST_BYTES)
      throw new ToolReplayError(ErrorCodes.REQUEST_TOO_LARGE, `Request body over ${MAX_REQUEST_BYTES} bytes.`, { details: { status: 413 } })
    parts.push(chunk as Buffer)
  }
  try {
    return JSON.parse(Buffer.concat(parts).toString('utf8')) as T
  } catch (err) {
    throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `The request body is not JSON: ${(err as Error).message}.`, { details: { status: 400 } })
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) return void res.end()
  const text = JSON.stringify(body, (_k, v) => (typeof v === 'bigint' ? v.toString() : v))
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' })
  res.end(text)
}

/** HTTP status for an error code: refusals keep theirs (details.status), missing things 404, bad input 400, conflicts 409. */
function statusOf(err: ToolReplayError): number {
  const given = (err.details as { status?: unknown } | undefined)?.status
  if (typeof given === 'number') return given
  if (err.code === ErrorCodes.TRACE_NOT_FOUND || err.code === ErrorCodes.STORE_NOT_FOUND) return 404
  if (err.code === ErrorCodes.TRACE_EXISTS || err.code === ErrorCodes.CASE_EXISTS) return 409
  if (err.code === ErrorCodes.STORE_CORRUPT || err.code === ErrorCodes.STORE_IO || err.code === ErrorCodes.INTERNAL) return 500
  if (err.code === ErrorCodes.STORE_LOCKED || err.code === ErrorCodes.STORE_CLOSED) return 503
  return 400
}

function sendError(res: ServerResponse, err: unknown): void {
  if (isToolReplayError(err)) {
    sendJson(res, statusOf(err), { ok: false, error: { code: err.code, message: err.message, details: err.details } })
    return
  }
  sendJson(res, 500, {
    ok: false,
    error: { code: ErrorCodes.INTERNAL, message: `Unexpected error: ${(err as Error)?.stack ?? String(err)}. This is a bug in Tool Replay.` },
  })
}

const SECURITY_HEADERS = {
  'content-security-policy': "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-store',
}

function sendAsset(res: ServerResponse, pathname: string, assets: Map<string, { type: string; bytes: Buffer }>, token: string): void {
  const name = pathname === '/' ? 'index.html' : pathname.slice(1)
  const asset = assets.get(name)
  if (!asset) throw new ToolReplayError(ErrorCodes.USAGE, `No page file ${pathname}.`, { details: { status: 404 } })
  // The page's own requests carry the token in a header; the cookie lets the browser load the scripts and event streams.
  const cookie = `${TOKEN_COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=/`
  res.writeHead(200, { 'content-type': asset.type, 'set-cookie': cookie, ...SECURITY_HEADERS })
  res.end(asset.bytes)
}

function sse(res: ServerResponse): (event: string, data: unknown) => void {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive' })
  res.write(': connected\n\n')
  return (event, data) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)
}

async function rerunEvents(reruns: Reruns, id: string, req: IncomingMessage, res: ServerResponse): Promise<typeof HANDLED> {
  const run = reruns.get(id)
  if (!run) throw new ToolReplayError(ErrorCodes.TRACE_NOT_FOUND, `No rerun ${id} in this inspector (it keeps the last 20).`, { details: { status: 404 } })
  const send = sse(res)
  send('start', { commandLine: run.commandLine, cwd: run.cwd, recordAs: run.recordAs, trace: run.trace })
  for (const o of run.output) send('output', o)
  if (run.exitCode !== undefined) {
    send('end', { exitCode: run.exitCode, recordAs: run.recordAs })
    res.end()
    return HANDLED
  }
  const listener = (e: RerunEvent) => {
    send(e.type, e)
    if (e.type === 'end') res.end()
  }
  run.listeners.add(listener)
  req.once('close', () => run.listeners.delete(listener))
  return HANDLED
}

/** Store changes as server-sent events: the runs' names, statuses and exchange counts whenever they change. */
class LiveRuns {
  readonly #store: TraceStore
  readonly #every: number
  readonly #clients = new Set<(event: string, data: unknown) => void>()
  #timer: NodeJS.Timeout | undefined
  #last = ''
  #busy = false

  constructor(store: TraceStore, every: number) {
    this.#store = store
    this.#every = every
  }

  start(): void {
    this.#timer = setInterval(() => void this.#poll(), this.#every)
    this.#timer.unref()
  }

  stop(): void {
    clearInterval(this.#timer)
  }

  async subscribe(req: IncomingMessage, res: ServerResponse): Promise<typeof HANDLED> {
    const send = sse(res)
    this.#clients.add(send)
    req.once('close', () => this.#clients.delete(send))
    send('runs', await this.#snapshot())
    return HANDLED
  }

  async #snapshot() {
    return (await this.#store.listTraces()).map((t) => ({ name: t.name, id: t.id, status: t.status, exchanges: t.exchanges }))
  }

  async #poll(): Promise<void> {
    if (this.#busy || this.#clients.size === 0) return
    this.#busy = true
    try {
      const runs = await this.#snapshot()
      const text = JSON.stringify(runs)
      if (text === this.#last) return
      this.#last = text
      for (const send of this.#clients) send('runs', runs)
    } catch {
      // The store went away (closing): the next poll tries again, the page keeps what it has.
    } finally {
      this.#busy = false
    }
  }
}
